"""The PostgreSQL store (issue 16) beyond the contract every backend keeps
(test_store_contract.py runs that against PostgreSQL too): 8 writers of 100
runs at once lose nothing, a store of a newer schema is refused and left
untouched, the password of a DSN is absent from every output, stored row,
export and log, credentials the documented ways (PGPASSFILE, service file),
`store copy` between SQLite and PostgreSQL both ways, and a missing psycopg
is one line naming the extra. The server: tests/pgserver.py."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, cli_argv, cli_env
from test_store_concurrent import _writers, check_8_writers_of_100

from opcost.errors import StoreError
from opcost.redact import redact, redact_argv, scrub
from opcost.store import open_store

FAST = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "-p", "2", "--no-progress"]


@pytest.fixture
def pg(postgres_server):
    return postgres_server


@pytest.fixture
def cli(tmp_path, probe_bin):
    """cli(*args, env=...) -> CompletedProcess; every call remembered in cli.calls."""
    calls: list[subprocess.CompletedProcess] = []

    def run(*args, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        cp = subprocess.run(cli_argv(*args), env=cli_env(tmp_path, **(env or {})), cwd=tmp_path,
                            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        calls.append(cp)
        return cp
    run.calls = calls  # type: ignore[attr-defined]
    return run


def ok(cp: subprocess.CompletedProcess) -> str:
    assert cp.returncode == 0, f"{cp.args}\n{cp.stdout}\n{cp.stderr}"
    return cp.stdout


# --- redaction, without a server ------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("postgresql://u:s3cr@h/db", "postgresql://u:***@h/db"),
    ("postgres://u:s3cr@h:5432,h2:5433/db?sslmode=require", "postgres://u:***@h:5432,h2:5433/db?sslmode=require"),
    ("--store=postgresql://u:s3cr@h/db", "--store=postgresql://u:***@h/db"),
    ("postgresql://u@h/db?password=s3cr&sslmode=require", "postgresql://u@h/db?password=***&sslmode=require"),
    ("postgresql://h/db", "postgresql://h/db"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("POSTGRESQL://u:s3cr@h/db", "POSTGRESQL://u:***@h/db"),
    ("host=h password='s3 cr' dbname=x", "host=h password=*** dbname=x"),
    ('failed for "postgresql://u:s3cr@[::1/db"', 'failed for "postgresql://u:***@[::1/db"'),
    ("/home/u/opcost.db", "/home/u/opcost.db"),
    ("postgresql://u:pa@ss@h/db", "postgresql://u:***@h/db"),             # an unencoded @: all of it
    ("postgresql://u:pa?x@h/db", "postgresql://u:***@h/db"),
    ("opcost: postgresql://u:s3cr@h failed", "opcost: postgresql://u:***@h failed"),
])
def test_redact(text, want):
    assert redact(text) == want


def test_redact_argv_and_scrub():
    argv = ["run", "x", "--store", "postgresql://u:pw1234@h/db", "store", "copy", "a.db", "postgres://v:pw5678@h/d"]
    assert "pw1234" not in " ".join(redact_argv(argv)) and "pw5678" not in " ".join(redact_argv(argv))
    assert scrub('auth failed for "pw1234"', ["pw1234"]) == 'auth failed for "***"'


def test_without_psycopg_one_line_names_the_extra(tmp_path):
    fake = tmp_path / "nopsycopg"
    (fake / "psycopg").mkdir(parents=True)
    (fake / "psycopg" / "__init__.py").write_text("raise ImportError('no psycopg here')\n")
    env = cli_env(tmp_path, PYTHONPATH=f"{fake}{os.pathsep}{ROOT / 'src'}")
    cp = subprocess.run(cli_argv("history", "--store", "postgresql://u:pw9999@127.0.0.1:1/db"), env=env,
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 2 and cp.stdout == ""
    assert cp.stderr.count("\n") == 1 and "opcost[postgresql]" in cp.stderr and "pw9999" not in cp.stderr


# --- against the server -----------------------------------------------------------------

def test_8_writers_of_100_runs_each_lose_nothing(pg):
    import psycopg

    url = pg.url(pg.new_database("conc"))
    open_store(url).close()                          # created before the writers race
    check_8_writers_of_100(url, 900)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM processes").fetchone()[0] == 1600
        assert conn.execute("SELECT count(*) FROM samples").fetchone()[0] == 1600 * 20


def test_a_store_of_a_newer_schema_is_refused_and_left_untouched(pg, cli, tmp_path):
    with open_store(str(tmp_path / "y.db")) as lite:
        lite.create_run(label="y", env={}, argv=[], opcost_version="0.1.0")
    db = pg.new_database("newer")
    url = pg.url(db)
    with open_store(url) as store:
        store.create_run(label="kept", env={}, argv=[], opcost_version="0.1.0")
    pg.admin("UPDATE opcost_schema SET version = 99", db)
    before = pg.dump(db)
    for readonly in (False, True):
        with pytest.raises(StoreError, match="schema version 99, this opcost knows up to 5: upgrade opcost"):
            open_store(url, readonly=readonly)
    for args in (["history"], ["run", "syscall.null", *FAST], ["store", "copy", url, "x.db"],
                 ["store", "copy", "y.db", url]):
        cp = cli(*args, "--store", url) if args[0] != "store" else cli(*args)
        assert cp.returncode == 2 and cp.stderr.count("\n") == 1 and "schema version 99" in cp.stderr, cp.stderr
    assert pg.dump(db) == before
    assert pg.admin("SELECT version FROM opcost_schema", db).strip() == "99"


def test_another_programs_tables_are_left_alone(pg):
    db = pg.new_database("foreign")
    pg.admin("CREATE TABLE runs (id int); INSERT INTO runs VALUES (7)", db)
    pg.admin(f"ALTER TABLE runs OWNER TO {pg_role()}", db)
    with pytest.raises(StoreError, match="another program's tables"):
        open_store(pg.url(db))
    assert pg.admin("SELECT to_regclass('opcost_schema') IS NULL, (SELECT count(*) FROM runs)", db).strip() == "t|1"


def pg_role() -> str:
    from pgserver import ROLE
    return ROLE


def test_credentials_from_a_service_file(pg, cli, tmp_path):
    db = pg.new_database("svc")
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[opc]\nhost=127.0.0.1\nport={pg.port}\nuser={pg_role()}\ndbname={db}\n")
    # the password from PGPASSFILE (set by the fixture), the rest from the service file
    ok(cli("run", "syscall.null", *FAST, "--label", "svc", "--store", "postgresql://?service=opc",
           env={"PGSERVICEFILE": str(services)}))
    out = ok(cli("history", "--store", f"postgresql:///{db}?service=opc", env={"PGSERVICEFILE": str(services)}))
    assert "svc" in out
    # without the password file: refused, one line, saying where a password goes
    cp = cli("history", "--store", "postgresql://?service=opc",
             env={"PGSERVICEFILE": str(services), "PGPASSFILE": str(tmp_path / "none")})
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1
    assert "refused the login" in cp.stderr and "PGPASSFILE" in cp.stderr


def test_store_copy_between_sqlite_and_postgresql(pg, cli, tmp_path):
    url = pg.url(pg.new_database("copy"))
    lite = tmp_path / "a.db"
    ok(cli("run", "syscall.null", *FAST, "--label", "one", "--label", "commit=abc", "--store", str(lite)))
    ok(cli("run", "syscall.null", *FAST, "--label", "two", "--store", str(lite)))
    out = ok(cli("store", "copy", str(lite), url))
    assert out.startswith("copied 2 run(s) into postgresql://") and "(1, 2)" in out
    assert "already" in ok(cli("store", "copy", str(lite), url)) and "copied 0 run(s)" in cli.calls[-1].stdout
    with open_store(str(lite), readonly=True) as a, open_store(url, readonly=True) as b:
        assert [a.load_run(r) for r in (1, 2)] == [b.load_run(r) for r in (1, 2)]   # lossless
        assert [r["id"] for r in b.find_runs(where={"commit": "abc"})] == [1]
    back = tmp_path / "back.db"
    assert ok(cli("store", "copy", url, f"sqlite://{back}", "two")).startswith("copied 1 run(s)")
    with open_store(str(back), readonly=True) as c, open_store(url, readonly=True) as b:
        [entry] = c.list_runs()
        assert c.load_run(entry["id"]) == {**b.load_run("two"), "run_id": entry["id"]}
    cp = cli("store", "copy", url, str(back), "nosuch")
    assert cp.returncode == 2 and "no stored run" in cp.stderr


def _strings(path: Path) -> str:
    """Everything in a file or every row of an SQLite store, as text."""
    raw = path.read_bytes()
    if raw.startswith(b"SQLite format 3\x00"):
        conn = sqlite3.connect(path)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return "\n".join(repr(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))
        finally:
            conn.close()
    return raw.decode("utf-8", "replace")


def test_the_password_of_a_dsn_is_never_shown_nor_kept(pg, cli, tmp_path):
    db = pg.new_database("secret")
    secret = pg.password
    url = pg.url(db, password=True)
    assert secret in url
    nopass = {"PGPASSFILE": str(tmp_path / "none")}          # the password comes only from the URL
    ok(cli("run", "syscall.null", *FAST, "--label", "base", "--store", url, "--json", "run.json",
           "--export", "csv:run.csv", env=nopass))
    ok(cli("run", "syscall.null", *FAST, "--label", "other", f"--store={url}", env=nopass))
    ok(cli("ab", "syscall.null", "--a", "", "--b", "", *FAST, "--store", url, "--json", "ab.json", env=nopass))
    ok(cli("history", "--store", url, env=nopass))
    ok(cli("history", "--store", url, "--json", env=nopass))
    ok(cli("show", "base", "--store", url, env=nopass))
    ok(cli("show", "base", "--store", url, "--json", "show.json", env=nopass))
    ok(cli("compare", "base", "other", "--store", url, env=nopass))
    ok(cli("export", "base", "other", "--store", url, "-o", "export.jsonl", env=nopass))
    ok(cli("report", "base", "--store", url, "--format", "markdown", "-o", "report.md", env=nopass))
    ok(cli("report", "base", "--store", url, "--format", "json", env=nopass))
    ok(cli("store", "copy", url, str(tmp_path / "copy.db"), env=nopass))
    ok(cli("store", "copy", str(tmp_path / "copy.db"), url, env=nopass))
    with open_store(url) as store:
        argv = store.load_run("base")["argv"]
        assert "--store" in argv and f"postgresql://{pg_role()}:***@127.0.0.1:{pg.port}/{db}" in argv
        assert secret not in repr(store) and secret not in str(store.path)
    # failing connections: wrong password, a port nobody listens on, a URL libpq cannot read
    wrong = url.replace(secret, secret[::-1])
    unreachable = f"postgresql://{pg_role()}:{secret}@127.0.0.1:1/{db}"
    unreadable = f"postgresql://{pg_role()}:{secret}@127.0.0.1:{pg.port}/{db}?nosuch=1"
    for bad, what in ((wrong, "refused the login"), (unreachable, "cannot be reached"),
                      (unreadable, "not a PostgreSQL URL")):
        for args in (["history", "--store", bad], ["run", "syscall.null", *FAST, "--store", bad],
                     ["show", "base", "--store", bad], ["store", "copy", bad, "z.db"],
                     ["store", "copy", str(tmp_path / "copy.db"), bad]):
            cp = cli(*args, env=nopass)
            assert cp.returncode == 2 and what in cp.stderr and cp.stderr.count("\n") == 1, cp.stderr
    cp = cli("history", "--store", url + "\n", env=nopass)                  # echoed in a usage error
    assert cp.returncode == 2 and "control character" in cp.stderr

    seen = {f"output of {redact(' '.join(map(str, c.args[2:])))}": c.stdout + c.stderr for c in cli.calls}
    seen["postgresql rows"] = pg.dump(db)
    for p in tmp_path.rglob("*"):
        if p.is_file() and p.name != "pgpass":
            seen[str(p)] = _strings(p)
    seen["server log"] = pg.log.read_text(errors="replace")
    assert len(seen) > 6 and "opcost.result/1" in seen[str(tmp_path / "export.jsonl")]
    assert any(a.endswith(f":***@127.0.0.1:{pg.port}/{db}") for a in json.loads((tmp_path / "run.json").read_text())["argv"])
    leaked = [where for where, text in seen.items() if secret in text or secret[::-1] in text]
    assert leaked == [], [seen[w][max(0, seen[w].find(secret) - 300):seen[w].find(secret) + 50] for w in leaked]


def test_kill_9_in_the_middle_of_writes_leaves_every_finished_run_whole(pg):
    import signal
    import time

    import psycopg

    url = pg.url(pg.new_database("kill"))
    open_store(url).close()
    procs = _writers(url, 3, 1000, 4)                 # type: ignore[arg-type]
    deadline = time.monotonic() + 60
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:           # until they have stored a few runs each
            time.sleep(0.1)
            if conn.execute("SELECT count(*) FROM runs WHERE status = 'complete'").fetchone()[0] >= 15:
                break
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)           # mid-write: they write without pause
        for p in procs:
            p.communicate(timeout=60)
            assert p.returncode == -signal.SIGKILL
        for _ in range(100):                         # the server ends their sessions (and transactions)
            n = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'opcost'").fetchone()[0]
            if n == 0:
                break
            time.sleep(0.1)
        assert n == 0
    with open_store(url) as store:                   # opens, and takes new runs
        store.create_run(label="after", env={}, argv=[], opcost_version="0.1.0")
        runs = store.list_runs()
        assert sum(r["status"] == "complete" for r in runs) >= 15
        for r in runs:
            if r["status"] == "complete":            # a finished run is whole
                doc = store.load_run(r["id"])
                assert [len(p["samples"]) for p in doc["results"][0]["processes"]] == [20] * 4


def _lock_after_first_processes(url: str, proc: subprocess.Popen, before: int = 1):
    """Another program's connection holding the store's write lock (the
    advisory lock) once the new run has stored 2 processes."""
    import time

    import psycopg

    from opcost.store.postgresql import PostgresStore
    conn = psycopg.connect(url, autocommit=True)
    deadline = time.monotonic() + 60
    while (conn.execute("SELECT count(*) FROM processes").fetchone()[0] < before + 2
           and time.monotonic() < deadline and proc.poll() is None):
        time.sleep(0.01)
    conn.execute("SELECT pg_advisory_lock(%s)", (PostgresStore.LOCK_KEY,))
    return conn


def _start(tmp_path, url, *args, wait: float) -> subprocess.Popen:
    return subprocess.Popen(cli_argv("run", "syscall.null", *FAST, "--store", url, *args), cwd=tmp_path,
                            env=cli_env(tmp_path, OPCOST_STORE_WAIT=str(wait)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_lock_held_to_the_end_the_run_goes_on_into_json(pg, cli, tmp_path):
    url = pg.url(pg.new_database("lock"))
    ok(cli("run", "syscall.null", *FAST, "-p", "1", "--store", url))
    out = tmp_path / "out.json"
    proc = _start(tmp_path, url, "-p", "40", "--json", str(out), wait=1)
    conn = _lock_after_first_processes(url, proc)
    _, err = proc.communicate(timeout=120)
    conn.close()
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "locked by another program; waiting up to 1 s" in err
    assert "the store missed" in err and str(out) in err
    doc = json.loads(out.read_text())
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 40
    stored = json.loads(ok(cli("show", str(doc["run_id"]), "--json", "-", "--store", url)))
    assert 2 <= len(stored["results"][0]["processes"]) < 40 and stored["status"] == "abandoned"


def test_lock_released_while_waiting_loses_nothing(pg, cli, tmp_path):
    import time

    url = pg.url(pg.new_database("lock"))
    ok(cli("run", "syscall.null", *FAST, "-p", "1", "--store", url))
    proc = _start(tmp_path, url, "-p", "30", "--label", "patient", wait=6)
    conn = _lock_after_first_processes(url, proc)
    time.sleep(4)
    conn.close()                                     # the lock goes with its session
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "locked by another program; waiting" in err
    doc = json.loads(ok(cli("show", "patient", "--json", "-", "--store", url)))
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 30


def test_a_server_whose_default_is_serializable_loses_nothing(pg):
    """Writers' transactions are READ COMMITTED whatever the database's
    default: a serialization failure would end a write that opcost does not
    try again."""
    db = pg.new_database("serial")
    pg.admin(f"ALTER DATABASE {db} SET default_transaction_isolation = 'serializable'")
    url = pg.url(db)
    open_store(url).close()
    procs = _writers(url, 4, 25, 2)                  # type: ignore[arg-type]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [e for _, e in outs]
    with open_store(url, readonly=True) as store:
        assert sum(r["status"] == "complete" for r in store.list_runs()) == 100


def test_real_runs_at_once_into_one_store(pg, tmp_path, probe_bin):
    url = pg.url(pg.new_database("real"))
    procs = [subprocess.Popen(cli_argv("run", "syscall.null", *FAST, "-p", "3", "--label", f"writer={i}",
                                       "--store", url), cwd=tmp_path, env=cli_env(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "locked" not in err.lower(), err
    with open_store(url, readonly=True) as store:
        runs = store.list_runs()
        assert sorted(r["labels"]["writer"] for r in runs) == ["0", "1", "2", "3"]
        for r in runs:
            doc = store.load_run(r["id"])
            assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 3


def test_store_locked_from_the_start_is_exit_1_not_2(pg, cli):
    import psycopg

    from opcost.store.postgresql import PostgresStore
    url = pg.url(pg.new_database("lock"))
    ok(cli("run", "syscall.null", *FAST, "-p", "1", "--store", url))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (PostgresStore.LOCK_KEY,))
        cp = cli("run", "syscall.null", *FAST, "-p", "2", "--store", url, env={"OPCOST_STORE_WAIT": "1"})
    assert cp.returncode == 1, cp.stderr
    assert "locked by another program" in cp.stderr and "Traceback" not in cp.stderr


OPEN = "import sys; from opcost.store import open_store; open_store(sys.argv[1]).close()"


def test_many_opcost_creating_one_new_store_at_once(pg):
    """6 programs open the same new database at once, 10 times over: every one
    ends well (one creates the schema, the others see it). Before the catalog
    was read with the statement's snapshot, 28 of 90 such opens (15 x 6) failed
    here with "already exists" or took the new store for another program's."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    failed = []
    for _ in range(10):
        url = pg.url(pg.new_database("race"))
        procs = [subprocess.Popen([sys.executable, "-c", OPEN, url], env=env, stderr=subprocess.PIPE, text=True)
                 for _ in range(6)]
        failed += [err.strip() for p in procs for _, err in [p.communicate(timeout=120)] if p.returncode]
    assert failed == []
    with open_store(url, readonly=True) as store:
        assert store.version == store.latest_version
