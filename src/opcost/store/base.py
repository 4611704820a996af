"""The store interface, and the SQL store that every database backend is.

`Store` is what the callers use: the recorder writes a run as it is measured
(create_run, add_result, add_process after every probe process, set_result,
finish_run); `history`, `show` and `compare` read (list_runs, resolve,
load_run); `history clean` marks abandoned runs.

`SqlStore` implements it once over a DB-API 2 connection: every statement
(written with `?` placeholders, turned into the driver's style), run
references, transactions, waiting for another program's lock, migrations and
the owner rules. Rows become documents in store/rows.py. A backend subclasses
it with its dialect: the class attributes and the methods marked "dialect"
below, and its schema module's MIGRATIONS and ADDED_IN (store/sqlite.py and
store/sqlite_schema.py).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import os
import time
import uuid as _uuid
from types import ModuleType
from typing import Any, Callable, ClassVar, Iterator, Mapping, Protocol, Sequence, TypeVar, Union

from .. import interrupts
from .. import labels as _labels
from ..errors import StoreError, StoreLocked, UnknownRun, UsageError
from ..redact import redact_argv
from ..safetext import printable
from . import rows
from .owner import owner_alive, owner_here, shown_status

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


_ADD_RESULT = ("INSERT INTO results (run_id, position, bench, params, op, unit, status, key) "
               "VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)")


class Store(Protocol):
    """What the recorder (record.py) and the readers (commands.py: history,
    show, compare) use, exactly as they call it."""

    lock_wait: float                # seconds a write waits for another program's lock
    on_wait: OnWait | None          # told once when a write has to wait for it

    @property
    def path(self) -> os.PathLike[str] | str:
        """Where the store is, as messages name it (a rescue file goes beside it)."""

    def create_run(self, *, label: str | None = None, env: dict[str, Any], argv: list[str],
                   opcost_version: str, kind: str = "run", labels: dict[str, str] | None = None,
                   uuid: str | None = None, plan: dict[str, Any] | None = None) -> int: ...

    def add_result(self, run_id: int, *, position: int, bench: str, params: dict[str, Any],
                   op: str, unit: str, key: str | None = None) -> int: ...

    def begin_run(self, *, results: Sequence[Mapping[str, Any]], label: str | None = None, env: dict[str, Any],
                  argv: list[str], opcost_version: str, kind: str = "run", labels: dict[str, str] | None = None,
                  uuid: str | None = None, plan: dict[str, Any] | None = None) -> tuple[int, list[int]]: ...

    def add_process(self, result_id: int, *, idx: int, header: dict[str, Any], samples: list[dict[str, Any]],
                    trailer: dict[str, Any] | None, meta: dict[str, Any] | None = None) -> int: ...

    def set_result(self, result_id: int, *, status: str, reason: str | None = None,
                   summary: dict[str, Any] | None = None) -> None: ...

    def finish_run(self, run_id: int, status: str) -> None: ...

    def list_runs(self, limit: int | None = None) -> list[dict[str, Any]]: ...

    def find_runs(self, where: dict[str, str] | None = None, key: str | None = None,
                  bench: str | None = None) -> list[dict[str, Any]]: ...

    def delete_runs(self, run_ids: Sequence[int]) -> list[int]: ...

    def import_runs(self, docs: Sequence[dict[str, Any]]) -> list[tuple[int, bool]]: ...

    def resolve(self, ref: str) -> int: ...

    def load_run(self, ref: str | int, *, sample_data: bool = True, summaries: bool = False) -> dict[str, Any]: ...

    def clean_abandoned(self) -> list[int]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...


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


def identity(doc: dict[str, Any]) -> str:
    """A run document's identity across stores: its uuid, or for a document
    without one (an `opcost run --json` file of an older opcost) a uuid made
    from a hash of its content (run_id aside, which is the store's)."""
    given = doc.get("uuid")
    if isinstance(given, str) and given:
        return given
    content = {k: v for k, v in doc.items() if k not in ("run_id", "uuid")}
    digest = hashlib.sha256(rows.encode(content).encode()).digest()
    return str(_uuid.UUID(bytes=digest[:16]))


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_S = TypeVar("_S", bound="SqlStore")


class SqlStore:
    """A `Store` over one DB-API 2 connection that runs in autocommit mode:
    single statements commit on their own, multi-statement writes (a process
    and its samples, a migration step) go through `_transaction`."""

    # --- the dialect ----------------------------------------------------------------
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
        return int(self._run(db, "SELECT coalesce(max(id), 0) FROM runs").fetchone()[0])

    def _begin(self, db: Any, exclusive: bool) -> None:
        """Dialect: start a write transaction, waiting (one slice) for the write
        lock; exclusive: no other writer at the same time (migrations, imports).
        Left with no transaction open when it fails."""
        self._run(db, self.begin_sql)

    def _explicit_id(self, db: Any, run_id: int) -> None:
        """Dialect: a run was inserted with this id given (an import): ids given
        later must be above it."""

    def _check_identity(self, doing: str) -> None:
        """Dialect: raise StoreGone if the store this connection writes is no
        longer the one at self.path (removed or replaced while in use), so
        that nothing is committed into a file no one will read again."""

    def _describe(self, e: Exception) -> str:
        """Dialect: a driver error as one line of text for a message."""
        return str(e)

    def _classify(self, e: Exception) -> tuple[str, str] | None:
        """Dialect: a driver error as (what is wrong with the store, what to do),
        the hint may name {path}; None when another program holds the lock (the
        write waits and tries again)."""
        raise NotImplementedError

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
                if not said and self.on_wait and waited >= min(NOTICE_AFTER_S, budget / 2):
                    self.on_wait(f"store {self.path} is locked by another program; waiting up to "
                                 f"{budget:g} s while {doing} (OPCOST_STORE_WAIT)")
                    said = True

    def _column(self, column: str, expr: str) -> str:
        """expr, or NULL in a store whose schema predates `column` (read as it is)."""
        return expr if self.version >= self.added_in.get(column, 0) else "NULL"

    # --- writing --------------------------------------------------------------------

    def create_run(self, *, label: str | None = None, env: dict[str, Any], argv: list[str],
                   opcost_version: str, kind: str = "run", labels: dict[str, str] | None = None,
                   uuid: str | None = None, plan: dict[str, Any] | None = None) -> int:
        """A new run, "running", owned by this process. labels: key -> value
        (labels.py's rules); `label` is the name label (name=...). uuid: the
        run's identity across stores (a new uuid4 if not given). plan: what
        was asked (model.Plan.to_dict; None: a run without one)."""
        run_id, _ = self.begin_run(results=(), label=label, env=env, argv=argv, opcost_version=opcost_version,
                                   kind=kind, labels=labels, uuid=uuid, plan=plan)
        return run_id

    def begin_run(self, *, results: Sequence[Mapping[str, Any]], label: str | None = None, env: dict[str, Any],
                  argv: list[str], opcost_version: str, kind: str = "run", labels: dict[str, str] | None = None,
                  uuid: str | None = None, plan: dict[str, Any] | None = None) -> tuple[int, list[int]]:
        """create_run and an add_result per entry of `results` (its keyword
        arguments: position, bench, params, op, unit, key), in ONE
        transaction: a store that fails on the way (a full disk, a lock held
        too long) keeps nothing of the run, rather than a run with no
        results that `history` would later show abandoned. Returns the run's
        id and its results' ids, in order."""
        names = _labels.merged(label, labels)
        for k in names:                 # values as given: an old store's name may hold anything
            _labels.check_key(k)
        ident = uuid or str(_uuid.uuid4())
        with self._transaction("creating a run") as db:
            run_id = self._insert_id(
                db, "INSERT INTO runs (created, label, kind, status, opcost_version, argv, env, owner, uuid, plan) "
                "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (_now(), names.get(_labels.NAME), kind, opcost_version, rows.encode(redact_argv(list(argv))),
                 rows.encode(env),
                 rows.encode(owner_here()), ident, rows.encode(plan)))
            self._put_labels(db, run_id, names)
            ids = [self._insert_id(db, _ADD_RESULT, self._result_row(run_id, **r)) for r in results]
        return run_id, ids

    def _put_labels(self, db: Any, run_id: int, names: Mapping[str, str]) -> None:
        if names:
            db.cursor().executemany(self._sql("INSERT INTO run_labels (run_id, key, value) VALUES (?, ?, ?)"),
                                    [(run_id, k, v) for k, v in names.items()])

    def add_result(self, run_id: int, *, position: int, bench: str, params: dict[str, Any],
                   op: str, unit: str, key: str | None = None) -> int:
        return self._insert("adding a result", _ADD_RESULT,
                            self._result_row(run_id, position=position, bench=bench, params=params, op=op,
                                             unit=unit, key=key))

    @staticmethod
    def _result_row(run_id: int, *, position: int, bench: str, params: dict[str, Any], op: str, unit: str,
                    key: str | None = None) -> tuple:
        return (run_id, position, bench, rows.encode(params), op, unit, key)

    def add_process(self, result_id: int, *, idx: int, header: dict[str, Any], samples: list[dict[str, Any]],
                    trailer: dict[str, Any] | None, meta: dict[str, Any] | None = None) -> int:
        """Store one probe process with all its samples, committed before returning."""
        # Encode before BEGIN: a sample that is not JSON fails without a transaction.
        sample_rows = [(i, 1 if s.get("warmup") else 0, s.get("iters"), s.get("ns_per_op"),
                        s.get("tsc_per_op"), rows.encode(s)) for i, s in enumerate(samples)]
        header_json = rows.encode(header)
        trailer_json = None if trailer is None else rows.encode(trailer)
        meta_json = None if meta is None else rows.encode(meta)
        with self._transaction("adding a process") as db:
            process_id = self._insert_id(
                db, "INSERT INTO processes (result_id, idx, header, trailer, meta) VALUES (?, ?, ?, ?, ?)",
                (result_id, idx, header_json, trailer_json, meta_json))
            db.cursor().executemany(
                self._sql("INSERT INTO samples (process_id, idx, warmup, iters, ns_per_op, tsc_per_op, data) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?)"),
                [(process_id, *row) for row in sample_rows])
        return process_id

    def set_result(self, result_id: int, *, status: str, reason: str | None = None,
                   summary: dict[str, Any] | None = None) -> None:
        if status not in RESULT_STATUSES:
            raise ValueError(f"result status {status!r} not one of {RESULT_STATUSES}")
        cur = self._execute(
            "updating a result",
            "UPDATE results SET status = ?, reason = ?, summary = ? WHERE id = ?",
            (status, reason, None if summary is None else rows.encode(summary), result_id))
        if cur.rowcount != 1:
            raise StoreError(f"store {self.path} holds no result with id {result_id}")

    def finish_run(self, run_id: int, status: str) -> None:
        if status not in FINAL_RUN_STATUSES:
            raise ValueError(f"final run status {status!r} not one of {FINAL_RUN_STATUSES}")
        cur = self._execute(
            "finishing a run",
            "UPDATE runs SET status = ?, finished = ? WHERE id = ?",
            (status, _now(), run_id))
        if cur.rowcount != 1:
            raise StoreError(f"store {self.path} holds no run with id {run_id}")

    def clean_abandoned(self) -> list[int]:
        """Store "abandoned" for every run left "running" by an opcost that is
        gone (its processes stay). Returns their ids."""
        with self._guard("listing running runs"):
            running = self._run(self._db, "SELECT id, " + self._column("runs.owner", "owner") +
                                " FROM runs WHERE status = 'running'").fetchall()
        gone = [rid for rid, owner in running if shown_status("running", rows.decode(owner)) == "abandoned"]
        for rid in gone:
            self._execute("marking a run abandoned",
                          "UPDATE runs SET status = 'abandoned', finished = ? WHERE id = ? AND status = 'running'",
                          (_now(), rid))
        return gone

    # --- reading --------------------------------------------------------------------

    def list_runs(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Runs newest first (by id: creation order, immune to clock changes)."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, not {limit}")
        lim = self.no_limit if limit is None else min(int(limit), MAX_INT)
        return self._entries("1 = 1", [], lim)

    def find_runs(self, where: dict[str, str] | None = None, key: str | None = None,
                  bench: str | None = None) -> list[dict[str, Any]]:
        """The runs (list_runs entries, newest first) that have every label of
        `where` (key = value, all of them), a label with key `key`, and a
        result of benchmark `bench` (its name, e.g. signal.catch)."""
        conds: list[str] = []
        args: list[Any] = []
        for k, v in (where or {}).items():
            conds.append(self._has_label(k, value=True))
            args += [k, v] if self.version >= 4 else ([v] if k == _labels.NAME else [])
        if key is not None:
            conds.append(self._has_label(key, value=False))
            args += [key] if self.version >= 4 else []
        if bench is not None:
            conds.append("EXISTS (SELECT 1 FROM results x WHERE x.run_id = r.id AND x.bench = ?)")
            args.append(bench)
        return self._entries(" AND ".join(conds) or "1 = 1", args, self.no_limit)

    def _has_label(self, key: str, value: bool) -> str:
        """The condition "run r has label key (= ?)"; a store older than
        version 4 (read as it is) has only the name label, in runs.label."""
        if self.version >= 4:
            return ("EXISTS (SELECT 1 FROM run_labels l WHERE l.run_id = r.id AND l.key = ?"
                    + (" AND l.value = ?)" if value else ")"))
        if key != _labels.NAME:
            return "1 = 0"
        return "r.label = ?" if value else "r.label IS NOT NULL"

    def _entries(self, cond: str, args: list[Any], lim: int | None) -> list[dict[str, Any]]:
        if self._empty:
            return []
        chosen = f"SELECT r.id FROM runs r WHERE {cond} ORDER BY r.id DESC LIMIT ?"
        with self._guard("listing runs"):
            runs = self._run(
                self._db,
                "SELECT r.id, r.created, r.finished, r.label, r.kind, r.status, r.opcost_version,"
                " (SELECT count(*) FROM results x WHERE x.run_id = r.id), " + self._column("runs.owner", "r.owner") +
                ", " + self._column("runs.uuid", "r.uuid") +
                f" FROM runs r WHERE {cond} ORDER BY r.id DESC LIMIT ?", (*args, lim)).fetchall()
            # Distinct bench names per run, in the order they first appear in the run.
            benches = self._run(
                self._db,
                "SELECT run_id, bench, min(position) AS first FROM results"
                f" WHERE run_id IN ({chosen})"
                " GROUP BY run_id, bench ORDER BY run_id, first", (*args, lim)).fetchall()
            if self.version >= 4:
                labels = self._run(self._db, f"SELECT run_id, key, value FROM run_labels WHERE run_id IN ({chosen})"
                                   " ORDER BY run_id, key", (*args, lim)).fetchall()
            else:
                labels = [(rid, _labels.NAME, label) for rid, _, _, label, *_ in runs if label is not None]
        return rows.run_entries(runs, benches, labels)

    def delete_runs(self, run_ids: Sequence[int]) -> list[int]:
        """Delete these runs with everything they measured, in one transaction;
        returns the ids that were there."""
        ids = sorted({int(i) for i in run_ids})
        gone: list[int] = []
        with self._transaction("deleting runs") as db:
            # Under the write lock: a run still being measured (its opcost
            # alive on this host) would lose everything it measured and then
            # fail; nothing is deleted. (Our own runs are ours to delete.)
            owner = self._column("runs.owner", "owner")
            for rid in ids:
                row = self._run(db, "SELECT status, " + owner + " FROM runs WHERE id = ?", (rid,)).fetchone()
                who = rows.decode(row[1]) if row is not None else None
                if (row is not None and row[0] == "running" and who is not None and owner_alive(who)
                        and who.get("pid") != os.getpid()):
                    raise UsageError(f"run {rid} is still being measured (opcost pid {who['pid']} on this host): "
                                     "delete it once that opcost has ended (or stop it first); nothing was deleted")
            for rid in ids:
                if self._run(db, "DELETE FROM runs WHERE id = ?", (rid,)).rowcount == 1:
                    gone.append(rid)
        return gone

    def resolve(self, ref: str) -> int:
        """A run reference: `id:N` (the run with that id), `label:TEXT` (the
        most recent run with that label), or bare: all digits is tried as an
        id first, then as a label; anything else is a label."""
        text = str(ref)  # as given: `show 'base\n'` is not `show base`
        how, colon, rest = text.partition(":")
        kinds = (how,) if colon and how in ("id", "label") else ("id", "label")
        if kinds != ("id", "label"):
            text = rest
        if kinds == ("id",) and not (text.isascii() and text.isdigit()):
            raise UnknownRun(f"run reference '{printable(ref)}': an id is a number (id:12); `opcost history` "
                             "lists them, and label:TEXT names a run by its label")
        if not self._empty:
            with self._guard("looking up a run"):
                if "id" in kinds and text.isascii() and text.isdigit() and int(text) <= MAX_INT:
                    row = self._run(self._db, "SELECT id FROM runs WHERE id = ?", (int(text),)).fetchone()
                    if row:
                        return int(row[0])
                if "label" in kinds and text:
                    row = self._run(self._db, "SELECT id FROM runs WHERE label = ? ORDER BY id DESC"
                                    " LIMIT 1", (text,)).fetchone()
                    if row:
                        return int(row[0])
        what = {"id": "id", "label": "label"}.get(kinds[0]) if len(kinds) == 1 else "id or label"
        raise UnknownRun(f"no stored run with {what} '{printable(text if len(kinds) == 1 else ref)}'; "
                         "`opcost history` lists them (id:N or label:TEXT says which a reference is)")

    def load_run(self, ref: str | int, *, sample_data: bool = True, summaries: bool = False) -> dict[str, Any]:
        """The run as an `opcost.result/1` document (store/rows.py): results in
        position order, processes in idx order, samples split into measured
        and warm-up; its plan as stored (a store never migrated to schema 5:
        recovered from its argv). sample_data=False: each sample is only its plain columns
        (iters, ns_per_op, tsc_per_op), its JSON left unread: what a report
        over many runs needs, several times faster (benchmarks/report_scale.py).
        summaries=True: for reading (show, report, compare), a run that never
        got its summaries (killed, abandoned) gets them from its processes
        (summaries.fill_summaries); moving runs (export, copy) leaves them as stored."""
        run_id = self.resolve(str(ref))
        key = self._column("results.key", "key")
        meta = self._column("processes.meta", "p.meta")
        owner = self._column("runs.owner", "owner")
        ident = self._column("runs.uuid", "uuid")
        plan = self._column("runs.plan", "plan")
        with self._guard("loading a run"):
            db = self._db
            run = self._run(
                db, "SELECT created, finished, label, kind, status, opcost_version, argv, env, " + owner +
                ", " + ident + ", " + plan + " FROM runs WHERE id = ?", (run_id,)).fetchone()
            names = (self._run(db, "SELECT key, value FROM run_labels WHERE run_id = ? ORDER BY key",
                               (run_id,)).fetchall() if self.version >= 4 else [])
            results = self._run(
                db, f"SELECT id, bench, params, op, unit, status, reason, summary, {key} FROM results"
                " WHERE run_id = ? ORDER BY position", (run_id,)).fetchall()
            processes = self._run(
                db, f"SELECT p.id, p.result_id, p.idx, p.header, p.trailer, {meta} FROM processes p"
                " JOIN results r ON r.id = p.result_id WHERE r.run_id = ?"
                " ORDER BY p.result_id, p.idx", (run_id,)).fetchall()
            data = "s.data" if sample_data else "s.iters, s.ns_per_op, s.tsc_per_op"
            samples = self._run(
                db, f"SELECT s.process_id, s.warmup, {data} FROM samples s"
                " JOIN processes p ON p.id = s.process_id"
                " JOIN results r ON r.id = p.result_id WHERE r.run_id = ?"
                " ORDER BY s.process_id, s.idx", (run_id,)).fetchall()
        doc = rows.run_document(run_id, run, results, processes,
                                samples if sample_data else rows.plain_samples(samples), names)
        if summaries:
            from ..summaries import fill_summaries

            fill_summaries(doc)
        return doc

    # --- moving runs between stores -------------------------------------------------

    def import_runs(self, docs: Sequence[dict[str, Any]]) -> list[tuple[int, bool]]:
        """Store `opcost.result/1` documents (checked by the caller) as they are:
        env, labels, argv, times, status, kind, results, processes and their
        samples. All or nothing, in one transaction. A document whose identity
        (its uuid; without one, a hash of its content, which becomes its uuid)
        the store holds is not stored again. A run keeps its run_id when this
        store has never given that id, else it gets the next one. Returns
        (run id, stored now) per document, in their order."""
        out: list[tuple[int, bool]] = []
        with self._transaction("importing runs", exclusive=True) as db:
            for doc in docs:
                ident = identity(doc)
                row = self._run(db, "SELECT id FROM runs WHERE uuid = ?", (ident,)).fetchone()
                if row:
                    out.append((int(row[0]), False))
                    continue
                out.append((self._import_one(db, doc, ident), True))
        return out

    def _import_one(self, db: Any, doc: dict[str, Any], ident: str) -> int:
        from ..model import Run

        run = Run.from_json(doc)
        for k in run.labels:
            _labels.check_key(k)
        if run.status not in RUN_STATUSES:
            raise StoreError(f"run status '{printable(run.status)}' is not one of {', '.join(RUN_STATUSES)}")
        stored = run.stored or {}
        from .recover import plan_or_recovered

        cols = ["created", "finished", "label", "kind", "status", "opcost_version", "argv", "env", "owner", "uuid",
                "plan"]
        vals: list[Any] = [stored.get("created") or _now(), stored.get("finished"), run.label,
                           stored.get("kind") or "run", run.status, run.opcost_version, rows.encode(list(run.argv)),
                           rows.encode(run.env), None, ident, rows.encode(plan_or_recovered(doc))]
        if isinstance(run.run_id, int) and 0 < run.run_id <= MAX_INT and run.run_id > self._id_floor(db):
            cols.insert(0, "id")
            vals.insert(0, run.run_id)
        run_id = self._insert_id(db, f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                 vals)
        if cols[0] == "id":
            self._explicit_id(db, run_id)
        self._put_labels(db, run_id, run.labels)
        for pos, res in enumerate(run.results):
            if res.status not in RESULT_STATUSES:
                raise StoreError(f"result status '{printable(res.status)}' is not one of "
                                 f"{', '.join(RESULT_STATUSES)}")
            summary = res.summary
            if summary is not None and res.parallel is not None and "parallel" not in summary:
                summary = {**summary, "parallel": res.parallel}
            rid = self._insert_id(
                db, "INSERT INTO results (run_id, position, bench, params, op, unit, status, reason, summary, key) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, pos, res.bench, rows.encode(res.params), res.op, res.unit, res.status, res.reason,
                 None if summary is None else rows.encode(summary), res.key))
            for proc in res.processes:
                pid = self._insert_id(
                    db, "INSERT INTO processes (result_id, idx, header, trailer, meta) VALUES (?, ?, ?, ?, ?)",
                    (rid, proc.index, rows.encode(proc.header),
                     None if proc.trailer is None else rows.encode(proc.trailer),
                     rows.encode(proc.meta) if proc.meta else None))
                batch = [(1, s) for s in proc.warmup] + [(0, s) for s in proc.samples]
                db.cursor().executemany(
                    self._sql("INSERT INTO samples (process_id, idx, warmup, iters, ns_per_op, tsc_per_op, data) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?)"),
                    [(pid, i, w, s.get("iters"), s.get("ns_per_op"), s.get("tsc_per_op"), rows.encode(s))
                     for i, (w, s) in enumerate(batch)])
        return run_id

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
