"""The PostgreSQL dialect (psycopg 3, the optional extra `opcost[postgresql]`,
imported only when such a store is opened): a store shared by a team, or by
the machines of a fleet. What is PostgreSQL's own is here: the URL (libpq's,
read by psycopg's conninfo functions), the connection and its settings, the
write lock, the schema version in the table opcost_schema, and PostgreSQL's
SQLSTATEs turned into what to tell the user. Every statement, transaction and
lock wait is store/base.py's; the schema is store/postgresql_schema.py's.

Credentials: libpq's own ways, ~/.pgpass or PGPASSFILE, a service file
(postgresql:///db?service=NAME, PGSERVICEFILE), PGPASSWORD. A password in the
URL works, but it is never shown nor kept: the store's `path` (what messages,
`repr` and rescue hints name) is the URL with the password masked
(postgresql://user:***@host/db), and a driver's message is scrubbed of it.

The write lock: every write transaction takes a transaction-level advisory
lock on LOCK_KEY, shared, so writers run side by side (row locks do the
rest); a migration or an import takes it exclusively (an import may give a
run an id of its own, and must not race the id sequence). The lock is waited
for in slices (SET LOCAL lock_timeout), each slice a StoreLocked that
base._retry retries, as SQLite's busy wait.
"""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Any, ClassVar, Iterable, Sequence

from ..errors import StoreError
from ..redact import redact, scrub
from .base import OnWait, SqlStore
from .postgresql_schema import ADDED_IN, MIGRATIONS, STAMP, TABLES

__all__ = ["PostgresStore"]

EXTRA = "opcost[postgresql]"
_SLICE_MS = 50            # one try for the write lock; between tries base._retry checks for Ctrl-C
_MAX_TIMEOUT_MS = 2**31 - 1
_HINT = "give a database that user may write, or another --store, or use --no-store"
_LOGIN_HINT = ("give the password the documented way: ~/.pgpass or PGPASSFILE, or a service file "
               "(postgresql:///DB?service=NAME with PGSERVICEFILE)")
_REACH_HINT = "check the host, the port and that the server runs, or give another --store, or use --no-store"
_LOST_HINT = ("start the server again (its log says why it went: a crash, a shutdown, an administrator); what "
              "a run measured since goes to its --json or rescue file, which `opcost import` puts back in place")
_LOST_WORDS = ("server closed the connection", "connection is lost", "connection is closed", "connection was closed",
               "terminating connection", "consuming input failed", "connection to server", "ssl syscall error")


def driver() -> ModuleType:
    """psycopg, or one StoreError naming the extra that brings it."""
    try:
        import psycopg   # the optional extra `postgresql`: only when such a store is opened
        import psycopg.conninfo  # noqa: F401
    except ImportError:
        raise StoreError(f"PostgreSQL stores need psycopg 3: pip install '{EXTRA}' "
                         "(or pip install 'psycopg[binary]')") from None
    return psycopg


class PostgresStore(SqlStore):
    """A result store in a PostgreSQL database (its current schema: the first
    of search_path, e.g. ?options=-csearch_path%3Dopcost). Opening creates the
    tables there if the schema has none of them yet, and refuses one with
    another program's tables of the same names."""

    scheme = "postgresql"
    url_help = ("postgresql://[USER@]HOST[:PORT]/DBNAME or postgresql:///DBNAME?service=NAME, "
                "the password from ~/.pgpass, PGPASSFILE or the service file")
    whole_url = True
    driver: ClassVar[ModuleType]
    begin_sql = "BEGIN"
    no_limit = None
    migrations = MIGRATIONS
    added_in = ADDED_IN
    LOCK_KEY: ClassVar[int] = 0x6F70636F      # "opco", the advisory lock that is the store's write lock

    def __init__(self, path: str | os.PathLike[str], on_wait: OnWait | None = None, *,
                 readonly: bool = False):
        url = os.fspath(path)
        super().__init__(redact(url), on_wait, readonly=readonly)
        psycopg = driver()
        PostgresStore.driver = psycopg
        try:
            params = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error as e:
            raise StoreError(f"--store {self.path} is not a PostgreSQL URL libpq can read "
                             f"({scrub(_first_line(e), [])}); give postgresql://[USER@]HOST[:PORT]/DBNAME"
                             ) from None
        self._secrets = [str(params["password"])] if params.get("password") else []
        self._url = url
        self._params = params
        self._open()

    # --- the dialect --------------------------------------------------------------------

    def _connect(self) -> Any:
        extra: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in self._params and not os.environ.get("PGCONNECT_TIMEOUT"):
            extra["connect_timeout"] = 10        # an address that never answers is not waited for forever
        if "application_name" not in self._params and not os.environ.get("PGAPPNAME"):
            extra["application_name"] = "opcost"
        return self.driver.connect(self._url, **extra)

    def _budget_ms(self) -> int:
        return max(1, min(_MAX_TIMEOUT_MS, int(self.lock_wait * 1000)))

    def _configure(self, db: Any) -> None:
        # A statement that waits for another program's table lock (a VACUUM
        # FULL, an admin's LOCK TABLE) waits as long as a write may wait.
        db.execute(f"SET lock_timeout = {self._budget_ms()}")
        if self.readonly:
            db.execute("SET default_transaction_read_only = on")

    def _begin(self, db: Any, exclusive: bool) -> None:
        # One round trip (no parameters: the simple query protocol takes several
        # statements); a write is a few statements, so this is most of its cost.
        # READ COMMITTED whatever the server's default: writers never touch
        # each other's rows, so no serialization failure can end a transaction
        # (and a failed COMMIT would not be one to try again).
        lock = "pg_advisory_xact_lock" + ("" if exclusive else "_shared")
        try:
            db.execute(f"BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = {_SLICE_MS}; "
                       f"SELECT {lock}({int(self.LOCK_KEY)}); SET LOCAL lock_timeout = {self._budget_ms()}")
        except self.driver.Error:
            with contextlib.suppress(self.driver.Error):
                db.rollback()
            raise

    @staticmethod
    def _tables_here(db: Any, names: Sequence[str]) -> set[str]:
        """Which of these tables exist in the store's schema (the current
        one), read from the catalog with the statement's own snapshot. Not
        to_regclass(): it looks names up in the session's catalog cache,
        which keeps "no such table" from before a wait for the write lock
        (an advisory lock takes in no catalog invalidations), so a second
        opcost creating a new store at once would not see the first one's
        tables and fail with "already exists"."""
        rows = db.execute("SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                          "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relname = ANY(%s)",
                          (list(names),)).fetchall()
        return {r[0] for r in rows}

    def _schema_version(self, db: Any) -> int:
        if not self._tables_here(db, ["opcost_schema"]):
            return 0
        row = db.execute("SELECT max(version) FROM opcost_schema").fetchone()
        return int(row[0] or 0)

    def _check_ours(self, db: Any, version: int) -> None:
        # At version 0 the tables may have appeared since the version was read:
        # another opcost creating the same new store at this moment. Its
        # opcost_schema (made in the same transaction as the tables) says so.
        present = {"opcost_schema"} if version > 0 else self._tables_here(db, ["opcost_schema", *TABLES])
        if "opcost_schema" in present:
            stamps = {r[0] for r in db.execute("SELECT application FROM opcost_schema").fetchall()}
            foreign = stamps != {STAMP}
        else:
            foreign = bool(present)
        if foreign:
            raise StoreError(f"store {self.path} is a PostgreSQL database whose schema holds another program's "
                             "tables (runs, results...): give an empty database or schema "
                             "(?options=-csearch_path%3DNAME), or an opcost store")

    def _set_schema_version(self, db: Any, version: int) -> None:
        self._run(db, "UPDATE opcost_schema SET version = ?", (int(version),))

    def _run_script(self, db: Any, script: str) -> None:
        db.execute(script)            # no parameters: one round trip, every statement in the transaction

    def _insert_id(self, db: Any, sql: str, args: Sequence[Any]) -> int:
        return int(self._run(db, sql + " RETURNING id", args).fetchone()[0])

    def _id_floor(self, db: Any) -> int:
        # The identity sequence remembers the highest id ever given, deleted runs' too.
        return int(self._run(
            db, "SELECT greatest(coalesce(pg_sequence_last_value(pg_get_serial_sequence('runs', 'id')::regclass),"
            " 0), coalesce((SELECT max(id) FROM runs), 0))").fetchone()[0])

    def _insert_samples(self, db: Any, rows: Iterable[tuple], plain: bool) -> None:
        # COPY: an import's 10^6 samples in a fraction of executemany's
        # time. Only plain rows (iters an integer: COPY's text would not cast
        # 1e4, which the schema allows, to BIGINT as an INSERT does).
        if not plain:
            return super()._insert_samples(db, rows, plain)
        with db.cursor().copy("COPY samples (process_id, idx, warmup, iters, ns_per_op, tsc_per_op, data) "
                              "FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    def _explicit_id(self, db: Any, run_id: int) -> None:
        # Under the exclusive lock, above the floor: the sequence moves up to it.
        self._run(db, "SELECT setval(pg_get_serial_sequence('runs', 'id'), ?)", (run_id,))

    def _describe(self, e: Exception) -> str:
        return scrub(_first_line(e), self._secrets)

    def _classify(self, e: Exception) -> tuple[str, str] | None:
        state = getattr(e, "sqlstate", None) or ""
        if state in ("55P03", "40001", "40P01"):   # lock_not_available, serialization, deadlock: try again
            return None
        if state == "25006":
            return "is read-only", _HINT
        if state.startswith("28"):
            return "refused the login (wrong user or password?)", _LOGIN_HINT
        if state == "3D000":
            return "names a database that does not exist", "create it (createdb NAME), or give another --store"
        if state == "3F000":
            return "has no schema to create its tables in", "create the schema of search_path, or give another --store"
        if state == "42501":
            return "cannot be written (permission denied)", _HINT
        if state == "53100":
            return "cannot be written: the server's disk is full", "free disk space there, or use --no-store"
        low = str(e).lower()
        if state.startswith("57P") or (self._conn is not None and not state and any(w in low for w in _LOST_WORDS)):
            # the server shut down or crashed under an open connection (admin_shutdown, crash_shutdown...)
            return "lost its connection to the server (it shut down or crashed)", _LOST_HINT
        if not state and ("password" in low or "authentication" in low):     # at connect: no SQLSTATE
            return "refused the login (wrong user or password?)", _LOGIN_HINT
        if not state and "does not exist" in low and "database" in low:
            return "names a database that does not exist", "create it (createdb NAME), or give another --store"
        if not state and any(k in low for k in ("invalid", "bad value", "not found", "unknown")):
            return ("cannot be opened with these settings",
                    "check the URL's parameters (libpq's: host, port, dbname, user, service, sslmode...)")
        if state.startswith("08") or (not state and isinstance(e, self.driver.OperationalError)):
            return "cannot be reached", _REACH_HINT
        return "failed", _HINT


def _first_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__
