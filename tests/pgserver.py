"""A real PostgreSQL server for the store tests, from Debian's `postgresql`
package (test.sh installs it): initdb and postgres under /usr/lib/postgresql/*/bin,
run as the `postgres` user through `runuser` when the tests run as root
(initdb refuses root), data and socket in a fresh directory under /tmp that
user owns, fsync off, listening on 127.0.0.1 only, on a free port picked here.
An admin connects through the socket (trust); the tests' role `opcost_test`
logs in over TCP with a password (scram-sha-256), read from a password file
(PGPASSFILE, the documented way) or given in a URL. Stopped, and its
directory removed, at the end, failure or not.

The `postgres_server` fixture (session-scoped, imported by conftest.py)
skips when no server can be started, unless OPCOST_REQUIRE_POSTGRES=1
(test.sh sets it): then it fails."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

ROLE = "opcost_test"


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, bindir: Path, durable: bool = False):
        """durable: fsync and synchronous commits on, as a real server keeps them
        (for benchmarks/store_concurrency.py); the tests run without."""
        self.bindir = bindir
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="opcost-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.port = 0
        # The role's password: random, and easy to find in a dump (test_store_postgresql greps for it).
        self.password = "pw-" + secrets.token_hex(12)
        self.passfile = self.root / "pgpass"
        self.started = False
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")       # KeyError: no such user (the package makes it)
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        os.chmod(self.root, 0o755)
        self.sock.mkdir()
        if self.as_user:
            os.chown(self.sock, user.pw_uid, user.pw_gid)

    def _do(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([*self.as_user, *argv], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, cwd=self.root)

    def start(self) -> None:
        cp = self._do(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth-local=trust",
                      "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
        if cp.returncode:
            raise RuntimeError(f"initdb failed: {cp.stderr.strip()[-500:]}")
        hba = self.data / "pg_hba.conf"
        text = "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
        hba.write_text(text)                     # root may; the server reads it as its own
        st = self.data.stat()
        os.chown(hba, st.st_uid, st.st_gid)
        last = ""
        for _ in range(5):                       # the port may be taken between picking and binding
            self.port = _free_port()
            opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.sock} -c max_connections=100 "
                    "-c log_connections=on")
            if not self.durable:
                opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            cp = self._do(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", opts,
                          "-w", "-t", "60", "start")
            if cp.returncode == 0:
                self.started = True
                self._opts = opts
                break
            last = cp.stderr.strip() + self._log_tail()
        else:
            raise RuntimeError(f"postgres did not start: {last[-800:]}")
        self.admin(f"CREATE ROLE {ROLE} LOGIN CREATEDB PASSWORD '{self.password}'")
        self.passfile.write_text(f"127.0.0.1:{self.port}:*:{ROLE}:{self.password}\n")
        os.chmod(self.passfile, 0o600)

    def _log_tail(self) -> str:
        try:
            return self.log.read_text()[-500:]
        except OSError:
            return ""

    def admin(self, sql: str, db: str = "postgres") -> str:
        cp = self._do(str(self.bindir / "psql"), "-h", str(self.sock), "-p", str(self.port), "-U", "postgres",
                      "-d", db, "-v", "ON_ERROR_STOP=1", "-qAtc", sql)
        if cp.returncode:
            raise RuntimeError(f"psql {sql!r}: {cp.stderr.strip()}")
        return cp.stdout

    def new_database(self, prefix: str = "t") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.admin(f'CREATE DATABASE "{name}" OWNER {ROLE}')
        return name

    def url(self, db: str, password: bool = False) -> str:
        """The URL of database `db` as the test role; the password in it only if asked
        (else from PGPASSFILE)."""
        cred = f"{ROLE}:{self.password}" if password else ROLE
        return f"postgresql://{cred}@127.0.0.1:{self.port}/{db}"

    def dump(self, db: str) -> str:
        """Every row of every table of `db`, as text."""
        tables = self.admin("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1", db).split()
        return "\n".join(self.admin(f'SELECT t::text FROM "{t}" t', db) for t in tables)

    def crash(self) -> None:
        """The postmaster and its backends gone at once, as a crash leaves them
        (an immediate shutdown: no checkpoint; recovery at the next start)."""
        self._do(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)

    def restart(self) -> None:
        """Start again after crash(), on the same port (recovering first)."""
        cp = self._do(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", self._opts,
                      "-w", "-t", "60", "start")
        if cp.returncode:
            raise RuntimeError(f"postgres did not restart: {cp.stderr.strip()[-500:]}{self._log_tail()}")

    def stop(self) -> None:
        if self.started:
            self._do(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)


def _required() -> bool:
    return os.environ.get("OPCOST_REQUIRE_POSTGRES", "") not in ("", "0")


def _unavailable(why: str):
    if _required():
        pytest.fail(f"PostgreSQL server needed (OPCOST_REQUIRE_POSTGRES=1) but {why}")
    pytest.skip(f"no PostgreSQL server here: {why}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """A running server with the role opcost_test, its password in a password
    file that PGPASSFILE names for the whole session (subprocesses too)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install '.[postgresql]')")
    bindir = _bindir()
    if bindir is None:
        _unavailable("no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)")
    try:
        server = Server(bindir)
    except (KeyError, OSError) as e:
        _unavailable(f"cannot prepare a directory for the postgres user ({e})")
    try:
        server.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        server.stop()
        _unavailable(str(e))
    old = os.environ.get("PGPASSFILE")
    os.environ["PGPASSFILE"] = str(server.passfile)
    try:
        yield server
    finally:
        if old is None:
            os.environ.pop("PGPASSFILE", None)
        else:
            os.environ["PGPASSFILE"] = old
        server.stop()
