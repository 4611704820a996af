"""The SQL store's core: the dialect a backend fills in, opening and
migrating, and the plumbing every statement goes through (placeholders,
transactions, waiting for another program's lock, errors as one line).

store/base.py's `SqlStore` is this core with its writing (store/sqlwrite.py),
reading and moving (store/sqlread.py, store/sqlmove.py) parts.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import time
from types import ModuleType
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Sequence, TypeVar, Union

from .. import interrupts
from ..errors import StoreError, StoreLocked, UsageError
from .owner import owner_here

RUN_STATUSES = ("running", "complete", "interrupted", "failed", "abandoned")
FINAL_RUN_STATUSES = RUN_STATUSES[1:]
# "abandoned" is what a reader sees of a run left "running" by an opcost that is
# gone (killed -9, machine rebooted); `opcost history clean` stores it.
RESULT_STATUSES = ("pending", "ok", "unsupported", "failed")

# How long a write waits for a store locked by another program before opcost
# gives up on the store for the rest of the run (OPCOST_STORE_WAIT, seconds).
DEFAULT_LOCK_WAIT_S = 60.0
# A write that waits for the lock says so once it has waited this long (or
# half its budget, if less): several opcost writing at once wait for each
# other's commits, a few milliseconds each, and that is nothing to report.
NOTICE_AFTER_S = 10.0

MAX_INT = 2**63 - 1   # the largest integer (an id, a LIMIT) an SQL database holds

OnWait = Callable[[str], None]
# A migration step: an SQL script, or a function of the connection.
Step = Union[str, Callable[[Any], None]]


def lock_wait_s() -> float:
    """OPCOST_STORE_WAIT seconds (default 60); anything but a number >= 0 is
    refused (before anything is measured: the store is opened first)."""
    raw = os.environ.get("OPCOST_STORE_WAIT", "")
    if raw == "":
        return DEFAULT_LOCK_WAIT_S
    try:
        v = float(raw)
    except ValueError:
        v = -1.0
    if not 0 <= v < float("inf"):
        raise UsageError(f"OPCOST_STORE_WAIT={raw}: give how many seconds a write waits for a store locked "
                         f"by another program, a number >= 0 (default {DEFAULT_LOCK_WAIT_S:g})")
    return v



def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")



_S = TypeVar("_S", bound="SqlConnection")


class SqlDialect:
    """What a backend gives: the class attributes and the methods below."""

    scheme: ClassVar[str]                       # the URL scheme, as in BACKENDS
    url_help: ClassVar[str]                     # what follows "scheme://", for messages
    driver: ClassVar[ModuleType]                # the DB-API module: its Error and paramstyle
    begin_sql: ClassVar[str] = "BEGIN"          # starts a write transaction, taking the write lock
    no_limit: ClassVar[int | None] = None       # the LIMIT that means "all rows"
    migrations: ClassVar[Sequence[tuple[int, Step]]]   # the schema module's MIGRATIONS
    added_in: ClassVar[Mapping[str, int]] = {}  # "table.column" -> the version that added it
    whole_url: ClassVar[bool] = False           # constructed with the whole URL, not the rest after "scheme://"

    def _connect(self) -> Any:
        """Dialect: a new connection in autocommit mode (read-only if self.readonly)."""
        raise NotImplementedError

    def _configure(self, db: Any) -> None:
        """Dialect: settings of each new connection."""

    def _start_writing(self, db: Any) -> None:
        """Dialect: settings for writing, after the first write transaction of
        the connection committed (nothing is changed in a store only read, or
        one that cannot be written); may fail (busy), the store works without."""

    def _schema_version(self, db: Any) -> int:
        """Dialect: the schema version of the store (0: nothing there yet)."""
        raise NotImplementedError

    def _check_ours(self, db: Any, version: int) -> None:
        """Dialect: raise StoreError if the database belongs to another program."""

    def _set_schema_version(self, db: Any, version: int) -> None:
        """Dialect: record `version`, inside the migration step's transaction."""
        raise NotImplementedError

    def _run_script(self, db: Any, script: str) -> None:
        """Dialect: run a migration script, inside its transaction."""
        raise NotImplementedError

    def _insert_id(self, db: Any, sql: str, args: Sequence[Any]) -> int:
        """Dialect: run an INSERT, return the id of the new row."""
        raise NotImplementedError

    def _id_floor(self, db: Any) -> int:
        """Dialect: the highest run id this store has ever given (an imported
        run keeps its id only above it, so an id never comes back)."""
        cur = db.cursor()
        cur.execute("SELECT coalesce(max(id), 0) FROM runs")
        return int(cur.fetchone()[0])

    def _begin(self, db: Any, exclusive: bool) -> None:
        """Dialect: start a write transaction, waiting (one slice) for the write
        lock; exclusive: no other writer at the same time (migrations, imports).
        Left with no transaction open when it fails."""
        db.cursor().execute(self.begin_sql)

    def _explicit_id(self, db: Any, run_id: int) -> None:
        """Dialect: a run was inserted with this id given (an import): ids given
        later must be above it."""

    def _check_identity(self, doing: str) -> None:
        """Dialect: raise StoreGone if the store this connection writes is no
        longer the one at self.path (removed or replaced while in use), so
        that nothing is committed into a file no one will read again."""

    @contextlib.contextmanager
    def _bulk_load(self, alone: bool = False) -> Iterator[None]:
        """Dialect: settings for one large write transaction (an import of
        10^6 samples), put back after it; none by default. alone: the
        transaction may keep the store to itself (readers wait for it) if
        that writes it faster (an import of a file over
        docschema.STREAM_FROM)."""
        yield

    def _notice_after(self) -> float:
        """Seconds a write waits before saying so (SqlStore: base.NOTICE_AFTER_S)."""
        return NOTICE_AFTER_S

    def _owner(self) -> dict[str, Any]:
        """Who creates a run (SqlStore: base.owner_here, this process)."""
        return owner_here()

    def _describe(self, e: Exception) -> str:
        """Dialect: a driver error as one line of text for a message."""
        return str(e)

    def _classify(self, e: Exception) -> tuple[str, str] | None:
        """Dialect: a driver error as (what is wrong with the store, what to do),
        the hint may name {path}; None when another program holds the lock (the
        write waits and tries again)."""
        raise NotImplementedError


class SqlConnection(SqlDialect):
    """One DB-API 2 connection that runs in autocommit mode: single
    statements commit on their own, multi-statement writes (a process and its
    samples, a migration step) go through `_transaction`."""

    # --- opening --------------------------------------------------------------------

    def __init__(self, path: os.PathLike[str] | str, on_wait: OnWait | None = None, *,
                 readonly: bool = False):
        """readonly: for reading only (history, show, compare): never created,
        migrated or written, so that a store of an older schema is read as it is."""
        self.on_wait = on_wait
        self.lock_wait = lock_wait_s()
        self.path = path
        self.readonly = readonly
        self.version = 0                # schema version of the store (the latest once migrated)
        self._conn: Any = None
        self._writing = False           # _start_writing done on this connection
        self._empty = False             # read-only, and there is nothing to read

    def _open(self) -> None:
        """Connect, then bring the schema up to date (read-only: only read its
        version); closed again if that fails."""
        with self._guard(None):
            self._conn = self._connect()
        try:
            with self._guard(None):
                self._configure(self._conn)
            self._retry("opening", self._migrate)
        except BaseException:
            self.close()
            raise

    @property
    def latest_version(self) -> int:
        return self.migrations[-1][0]

    def _migrate(self) -> None:
        with self._guard("reading the schema version"):
            version = self._schema_version(self._db)
            self._check_ours(self._db, version)
        if version > self.latest_version:
            raise StoreError(f"store {self.path} has schema version {version}, this opcost knows "
                             f"up to {self.latest_version}: upgrade opcost")
        self.version = version
        if self.readonly:
            # Read as it is: the queries below know every version's columns.
            self._empty = version == 0
            return
        for target, step in self.migrations:
            if target <= version:
                continue
            with self._transaction(f"migrating to schema version {target}", exclusive=True) as db:
                # Re-read under the write lock: another opcost may have migrated
                # between our first read and now.
                if self._schema_version(db) >= target:
                    continue
                if callable(step):
                    step(db)
                else:
                    self._run_script(db, step)
                self._set_schema_version(db, target)
            self.version = target

    # --- plumbing -------------------------------------------------------------------

    @property
    def _db(self) -> Any:
        if self._conn is None:
            raise StoreError(f"store {self.path} is closed")
        return self._conn

    def _sql(self, sql: str) -> str:
        """Statements here use `?`; a format-style driver (%s) gets its own."""
        return sql if self.driver.paramstyle == "qmark" else sql.replace("?", "%s")

    def _run(self, db: Any, sql: str, args: Sequence[Any] = ()) -> Any:
        cur = db.cursor()
        cur.execute(self._sql(sql), args)
        return cur

    @contextlib.contextmanager
    def _guard(self, doing: str | None) -> Iterator[None]:
        """Turn any driver error into one StoreError line: what, where, what to do."""
        try:
            yield
        except self.driver.Error as e:
            problem = self._classify(e)
            during = f" while {doing}" if doing else ""
            if problem is None:
                raise StoreLocked(f"store {self.path} is locked by another program{during}: "
                                  "retry when it has finished, or use another --store") from None
            what, hint = problem
            raise StoreError(f"store {self.path} {what}{during} ({self._describe(e)}): "
                             f"{hint.format(path=self.path)}") from None

    @contextlib.contextmanager
    def _transaction(self, doing: str, exclusive: bool = False) -> Iterator[Any]:
        """BEGIN ... COMMIT; rolled back on any exception, Ctrl-C included, so an
        interrupted write leaves nothing half-stored and the connection usable
        for finish_run(..., 'interrupted')."""
        db = self._db

        def begin() -> None:
            with self._guard(doing):
                self._begin(db, exclusive)

        def commit() -> None:
            self._check_identity(doing)
            with self._guard(doing):
                self._run(db, "COMMIT")

        self._retry(doing, begin)
        try:
            with self._guard(doing):
                yield db
            self._retry(doing, commit)   # a reader may hold the store a little longer
        except BaseException:
            with contextlib.suppress(self.driver.Error):
                db.rollback()
            raise
        if not self._writing:
            # After the first write that worked: a store that cannot be
            # written (damaged, read-only) is left exactly as it was.
            self._writing = True
            with contextlib.suppress(self.driver.Error):
                self._start_writing(db)

    def _execute(self, doing: str, sql: str, args: Sequence[Any] = ()) -> Any:
        """One write statement in its own transaction; waits for another
        program's lock. Its own BEGIN (IMMEDIATE in SQLite) takes the write
        lock first, waiting for it: an autocommit statement that reads, then
        writes, finds a store that another writer changed meanwhile busy at
        once (a WAL snapshot cannot be upgraded) instead of waiting."""
        with self._transaction(doing) as db:
            return self._run(db, sql, args)

    def _insert(self, doing: str, sql: str, args: Sequence[Any]) -> int:
        with self._transaction(doing) as db:
            return self._insert_id(db, sql, args)

    def _insert_samples(self, db: Any, rows: Iterable[tuple], plain: bool) -> None:
        """Dialect: sample rows (process_id, idx, warmup, iters, ns_per_op,
        tsc_per_op, data) into `samples`; plain: iters an integer or None,
        the figures numbers or None (docschema.plain_samples)."""
        db.cursor().executemany(self._sql("INSERT INTO samples (process_id, idx, warmup, iters, ns_per_op, "
                                          "tsc_per_op, data) VALUES (?, ?, ?, ?, ?, ?, ?)"), rows)

    def _retry(self, doing: str, fn: Callable[[], Any]) -> Any:
        """Run fn, waiting while another program holds the store's lock: say so
        once, keep trying up to OPCOST_STORE_WAIT seconds, stop early when a
        signal is pending (the run is being stopped), then raise StoreLocked.
        How long one try waits is the dialect's (its connection's timeout)."""
        budget = self.lock_wait
        t0 = time.monotonic()
        said = False
        while True:
            try:
                return fn()
            except StoreLocked:
                waited = time.monotonic() - t0
                if waited >= budget or interrupts.pending():
                    raise
                if not said and self.on_wait and waited >= min(self._notice_after(), budget / 2):
                    self.on_wait(f"store {self.path} is locked by another program; waiting up to "
                                 f"{budget:g} s while {doing} (OPCOST_STORE_WAIT)")
                    said = True

    def _put_labels(self, db: Any, run_id: int, names: Mapping[str, str]) -> None:
        if names:
            db.cursor().executemany(self._sql("INSERT INTO run_labels (run_id, key, value) VALUES (?, ?, ?)"),
                                    [(run_id, k, v) for k, v in names.items()])

    def _column(self, column: str, expr: str) -> str:
        """expr, or NULL in a store whose schema predates `column` (read as it is)."""
        return expr if self.version >= self.added_in.get(column, 0) else "NULL"

    # --- lifetime -------------------------------------------------------------------

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"
