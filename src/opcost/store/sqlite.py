"""The SQLite result store: one file, versioned schema (store/sqlite_schema.py),
every process committed as soon as it is measured. JSON columns hold what the
probe and the runner produced, unchanged, so a stored run can always be turned
back into the exact `opcost.result/1` document.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import pathlib
import sqlite3
import time
import urllib.parse
from typing import Any, Callable, Iterator

from .. import interrupts
from ..errors import StoreError, StoreLocked, UnknownRun
from ..text import printable
from . import rows
from .owner import owner_here, shown_status
from .sqlite_schema import APPLICATION_ID, LATEST_VERSION, MIGRATIONS

RUN_STATUSES = ("running", "complete", "interrupted", "failed", "abandoned")
FINAL_RUN_STATUSES = RUN_STATUSES[1:]
# "abandoned" is what a reader sees of a run left "running" by an opcost that is
# gone (killed -9, machine rebooted); `opcost history clean` stores it.

# How long a write waits for a store locked by another program before opcost
# gives up on the store for the rest of the run (OPCOST_STORE_WAIT, seconds).
DEFAULT_LOCK_WAIT_S = 60.0
_BUSY_SLICE_S = 0.5   # SQLite's own busy wait per try; between tries we say so and check for Ctrl-C
RESULT_STATUSES = ("pending", "ok", "unsupported", "failed")

_SQLITE_MAGIC = b"SQLite format 3\x00"
_HINT = "--store PATH must be a writable SQLite file, or use --no-store"
_DAMAGED_HINT = ("move it aside (mv {path} {path}.damaged) and `opcost run` starts a new store, "
                 "or pass --store another file, or use --no-store")
_SQLITE_MAX_INT = 2**63 - 1

# SQLite's primary result codes (sqlite3.Error.sqlite_errorcode & 0xff) that
# say what is wrong with the file itself, with what to tell the user. The
# message text is no guide: "database disk image is malformed" is a damaged
# file, not a full disk.
_CODES = {
    8: ("is read-only", _HINT),                                    # SQLITE_READONLY
    10: ("cannot be read or written (I/O error)", _HINT),          # SQLITE_IOERR
    11: ("is not a valid opcost store (the file is damaged)", _DAMAGED_HINT),  # SQLITE_CORRUPT
    13: ("cannot be written: the disk is full", "free disk space, or use --no-store"),  # SQLITE_FULL
    14: ("cannot be opened", _HINT),                                # SQLITE_CANTOPEN
    26: ("is not a valid opcost store (not an SQLite database)", _DAMAGED_HINT),  # SQLITE_NOTADB
}



def _split_sql(script: str) -> list[str]:
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            statements.append(buf.strip())
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf.strip()[:60]!r}")
    return statements


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def lock_wait_s() -> float:
    try:
        v = float(os.environ.get("OPCOST_STORE_WAIT", DEFAULT_LOCK_WAIT_S))
    except ValueError:
        return DEFAULT_LOCK_WAIT_S
    return v if v >= 0 else DEFAULT_LOCK_WAIT_S


class SqliteStore:
    """A result store in one SQLite file. Opening creates the parent directory and
    the file if needed and brings the schema up to date, so that an unusable
    store is reported before anything is measured."""

    scheme = "sqlite"
    url_help = "a plain path, sqlite:///abs/path or sqlite://rel/path"

    def __init__(self, path: str | os.PathLike[str], on_wait: Callable[[str], None] | None = None, *,
                 readonly: bool = False, missing_ok: bool = False):
        """readonly: for reading only (history, show, compare): opened with
        SQLite's mode=ro, never created, migrated or written, so that a store
        on a read-only mount, or of an older schema, can be read as it is. A
        missing file is then an empty store if `missing_ok`, else an error.
        on_wait(message) is told once when a write waits for another program's lock."""
        self.on_wait = on_wait
        self.lock_wait = lock_wait_s()   # seconds a write waits for another program's lock
        raw = os.fspath(path)
        if not raw:
            raise StoreError(f"empty store path: {_HINT}")
        self.memory = raw == ":memory:"
        self.path = pathlib.Path(raw) if self.memory else pathlib.Path(raw).expanduser()
        self.readonly = readonly
        self.version = 0                # schema version of the file (LATEST_VERSION once migrated)
        self._conn: sqlite3.Connection | None = None
        self._empty = False             # read-only, and there is nothing to read
        if not self.memory:
            self._prepare_file()
        if readonly and (self.memory or not self.path.exists()):
            if not (missing_ok or self.memory):
                raise StoreError(f"store {self.path} does not exist: give the --store that `opcost run` "
                                 "stored into (`opcost history` without --store reads the default one)")
            self._empty = True
            return
        with self._guard(None):
            # isolation_level=None: the sqlite3 module starts no transactions of its
            # own; single statements autocommit, multi-statement writes use
            # _transaction(). The default rollback journal is kept (not WAL): WAL
            # needs a writable directory even to read, and we have one writer.
            if readonly:
                uri = "file:" + urllib.parse.quote(str(self.path.absolute())) + "?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=_BUSY_SLICE_S)
            else:
                self._conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=_BUSY_SLICE_S)
        try:
            with self._guard(None):
                self._conn.execute("PRAGMA foreign_keys = ON")
            self._retry("opening", self._migrate)
        except BaseException:
            self.close()
            raise

    # --- opening ----------------------------------------------------------------

    def _prepare_file(self) -> None:
        try:
            self._prepare_file_unguarded()
        except OSError as e:  # e.g. EACCES from stat() on an ancestor directory
            raise StoreError(f"cannot access store {self.path} ({e.strerror or e}): "
                             f"{_HINT}") from None

    def _prepare_file_unguarded(self) -> None:
        p = self.path
        if p.is_dir():
            raise StoreError(f"store {p} is a directory: --store PATH must be an SQLite file "
                             f"(e.g. {p / 'opcost.db'}), or use --no-store")
        if not self.readonly:
            self._make_parent()
        # Check the magic ourselves: SQLite's own complaint comes only at the first
        # query and its wording varies between versions.
        try:
            with open(p, "rb") as f:
                head = f.read(len(_SQLITE_MAGIC))
        except (FileNotFoundError, NotADirectoryError):
            return  # created by connect(), or (read-only) an empty store
        except OSError as e:
            raise StoreError(f"cannot read store {p} ({e.strerror or e}): {_HINT}") from None
        if head and head != _SQLITE_MAGIC:
            raise StoreError(f"store {p} is not an SQLite database: {_HINT}")

    def _make_parent(self) -> None:
        p = self.path
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise StoreError(f"cannot create directory {p.parent} for store {p}: a file is in "
                             f"the way; {_HINT}") from None
        except OSError as e:
            raise StoreError(f"cannot create directory {p.parent} for store {p} "
                             f"({e.strerror or e}): {_HINT}") from None

    def _pragma(self, name: str) -> int:
        return int(self._db.execute(f"PRAGMA {name}").fetchone()[0])

    def _migrate(self) -> None:
        with self._guard("reading the schema version"):
            version = self._pragma("user_version")
            app_id = self._pragma("application_id")
            n_tables = self._db.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        foreign = (app_id not in (0, APPLICATION_ID)
                   or (app_id == 0 and (version > 0 or n_tables > 0)))
        if foreign:
            raise StoreError(f"store {self.path} is an SQLite database but not an opcost store: "
                             f"pass --store a new file or an opcost store, or use --no-store")
        if version > LATEST_VERSION:
            raise StoreError(f"store {self.path} has schema version {version}, this opcost knows "
                             f"up to {LATEST_VERSION}: upgrade opcost")
        self.version = version
        if self.readonly:
            # Read as it is: the queries below know every version's columns.
            self._empty = version == 0
            return
        for target, step in MIGRATIONS:
            if target <= version:
                continue
            with self._transaction(f"migrating to schema version {target}") as db:
                # Re-read under the write lock: another opcost may have migrated
                # between our first read and now.
                if self._pragma("user_version") >= target:
                    continue
                if callable(step):
                    step(db)
                else:
                    for statement in _split_sql(step):
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {int(target)}")
            self.version = target

    # --- plumbing ---------------------------------------------------------------

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"store {self.path} is closed")
        return self._conn

    @contextlib.contextmanager
    def _guard(self, doing: str | None) -> Iterator[None]:
        """Turn any sqlite3 error into one StoreError line: what, where, what to do."""
        try:
            yield
        except sqlite3.Error as e:
            msg = str(e)
            low = msg.lower()
            code = getattr(e, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in _CODES:
                what, hint = _CODES[code & 0xFF]
            elif "not a database" in low or "malformed" in low:
                what, hint = _CODES[11]
            elif "readonly" in low or "read-only" in low:
                what, hint = "is read-only", _HINT
            elif "unable to open" in low:
                what, hint = "cannot be opened", _HINT
            elif "locked" in low or "busy" in low:
                during = f" while {doing}" if doing else ""
                raise StoreLocked(f"store {self.path} is locked by another program{during}: "
                                  "retry when it has finished, or use another --store") from None
            elif "full" in low:
                what, hint = _CODES[13]
            else:
                what, hint = "failed", _HINT
            during = f" while {doing}" if doing else ""
            raise StoreError(f"store {self.path} {what}{during} ({msg}): {hint.format(path=self.path)}") from None

    @contextlib.contextmanager
    def _transaction(self, doing: str) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; rolled back on any exception, Ctrl-C included,
        so an interrupted write leaves nothing half-stored and the connection usable
        for finish_run(..., 'interrupted')."""
        db = self._db

        def begin() -> None:
            with self._guard(doing):
                db.execute("BEGIN IMMEDIATE")
        def commit() -> None:
            with self._guard(doing):
                db.execute("COMMIT")

        self._retry(doing, begin)
        try:
            with self._guard(doing):
                yield db
            self._retry(doing, commit)   # a reader may hold the file a little longer
        except BaseException:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    def _execute(self, doing: str, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        def once() -> sqlite3.Cursor:
            with self._guard(doing):
                return self._db.execute(sql, args)
        return self._retry(doing, once)

    def _retry(self, doing: str, fn: Callable[[], Any]) -> Any:
        """Run fn, waiting while another program holds the store's lock: say so
        once, keep trying up to OPCOST_STORE_WAIT seconds, stop early when a
        signal is pending (the run is being stopped), then raise StoreLocked."""
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
                if not said and self.on_wait:
                    self.on_wait(f"store {self.path} is locked by another program; waiting up to "
                                 f"{budget:g} s while {doing} (OPCOST_STORE_WAIT)")
                    said = True

    # --- writing ----------------------------------------------------------------

    def create_run(self, *, label: str | None, env: dict, argv: list[str],
                   opcost_version: str, kind: str = "run") -> int:
        cur = self._execute(
            "creating a run",
            "INSERT INTO runs (created, label, kind, status, opcost_version, argv, env, owner) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?, ?)",
            (_now(), label, kind, opcost_version, rows.encode(list(argv)), rows.encode(env),
             rows.encode(owner_here())))
        return int(cur.lastrowid)

    def add_result(self, run_id: int, *, position: int, bench: str, params: dict,
                   op: str, unit: str, key: str | None = None) -> int:
        cur = self._execute(
            "adding a result",
            "INSERT INTO results (run_id, position, bench, params, op, unit, status, key) "
            "VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
            (run_id, position, bench, rows.encode(params), op, unit, key))
        return int(cur.lastrowid)

    def add_process(self, result_id: int, *, idx: int, header: dict, samples: list[dict],
                    trailer: dict | None, meta: dict | None = None) -> int:
        """Store one probe process with all its samples, committed before returning."""
        # Encode before BEGIN: a sample that is not JSON fails without a transaction.
        sample_rows = [(i, 1 if s.get("warmup") else 0, s.get("iters"), s.get("ns_per_op"),
                        s.get("tsc_per_op"), rows.encode(s)) for i, s in enumerate(samples)]
        header_json = rows.encode(header)
        trailer_json = None if trailer is None else rows.encode(trailer)
        meta_json = None if meta is None else rows.encode(meta)
        with self._transaction("adding a process") as db:
            cur = db.execute(
                "INSERT INTO processes (result_id, idx, header, trailer, meta) VALUES (?, ?, ?, ?, ?)",
                (result_id, idx, header_json, trailer_json, meta_json))
            process_id = int(cur.lastrowid)
            db.executemany(
                "INSERT INTO samples (process_id, idx, warmup, iters, ns_per_op, tsc_per_op, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(process_id, *row) for row in sample_rows])
        return process_id

    def set_result(self, result_id: int, *, status: str, reason: str | None = None,
                   summary: dict | None = None) -> None:
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

    # --- reading ----------------------------------------------------------------

    def list_runs(self, limit: int | None = None) -> list[dict]:
        """Runs newest first (by id: creation order, immune to clock changes)."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, not {limit}")
        lim = -1 if limit is None else min(int(limit), _SQLITE_MAX_INT)  # LIMIT -1: no limit
        if self._empty:
            return []
        with self._guard("listing runs"):
            runs = self._db.execute(
                "SELECT r.id, r.created, r.finished, r.label, r.kind, r.status, r.opcost_version,"
                " (SELECT count(*) FROM results x WHERE x.run_id = r.id), " + self._owner_column("r") +
                " FROM runs r ORDER BY r.id DESC LIMIT ?", (lim,)).fetchall()
            # Distinct bench names per run, in the order they first appear in the run.
            bench_rows = self._db.execute(
                "SELECT run_id, bench, min(position) AS first FROM results"
                " WHERE run_id IN (SELECT id FROM runs ORDER BY id DESC LIMIT ?)"
                " GROUP BY run_id, bench ORDER BY run_id, first", (lim,)).fetchall()
        return rows.run_entries(runs, bench_rows)

    def _owner_column(self, alias: str) -> str:
        """`alias.owner`, or NULL in a store from before schema version 3."""
        cols = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
        return f"{alias}.owner" if "owner" in cols else "NULL"

    def clean_abandoned(self) -> list[int]:
        """Store "abandoned" for every run left "running" by an opcost that is
        gone (its processes stay). Returns their ids."""
        with self._guard("listing running runs"):
            running = self._db.execute("SELECT id, " + self._owner_column("runs") +
                                       " FROM runs WHERE status = 'running'").fetchall()
        gone = [rid for rid, owner in running if shown_status("running", rows.decode(owner)) == "abandoned"]
        for rid in gone:
            self._execute("marking a run abandoned",
                          "UPDATE runs SET status = 'abandoned', finished = ? WHERE id = ? AND status = 'running'",
                          (_now(), rid))
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
                if "id" in kinds and text.isascii() and text.isdigit() and int(text) <= _SQLITE_MAX_INT:
                    row = self._db.execute("SELECT id FROM runs WHERE id = ?", (int(text),)).fetchone()
                    if row:
                        return int(row[0])
                if "label" in kinds and text:
                    row = self._db.execute("SELECT id FROM runs WHERE label = ? ORDER BY id DESC"
                                           " LIMIT 1", (text,)).fetchone()
                    if row:
                        return int(row[0])
        what = {"id": "id", "label": "label"}.get(kinds[0]) if len(kinds) == 1 else "id or label"
        raise UnknownRun(f"no stored run with {what} '{printable(text if len(kinds) == 1 else ref)}'; "
                         "`opcost history` lists them (id:N or label:TEXT says which a reference is)")

    def load_run(self, ref: str | int) -> dict:
        """The run as an `opcost.result/1` document (plus store fields: run_id,
        created, finished, label, kind, status, argv). Results are in position
        order, processes in idx order; each process splits its samples into
        measured ("samples") and "warmup", each as the sample dicts given."""
        run_id = self.resolve(str(ref))
        # Version 1 stores (read without migrating) have no key and meta columns.
        key, meta = ("key", "p.meta") if self.version >= 2 else ("NULL", "NULL")
        with self._guard("loading a run"):
            db = self._db
            run = db.execute(
                "SELECT created, finished, label, kind, status, opcost_version, argv, env, " +
                self._owner_column("runs") + " FROM runs WHERE id = ?", (run_id,)).fetchone()
            results = db.execute(
                f"SELECT id, bench, params, op, unit, status, reason, summary, {key} FROM results"
                " WHERE run_id = ? ORDER BY position", (run_id,)).fetchall()
            processes = db.execute(
                f"SELECT p.id, p.result_id, p.idx, p.header, p.trailer, {meta} FROM processes p"
                " JOIN results r ON r.id = p.result_id WHERE r.run_id = ?"
                " ORDER BY p.result_id, p.idx", (run_id,)).fetchall()
            samples = db.execute(
                "SELECT s.process_id, s.warmup, s.data FROM samples s"
                " JOIN processes p ON p.id = s.process_id"
                " JOIN results r ON r.id = p.result_id WHERE r.run_id = ?"
                " ORDER BY s.process_id, s.idx", (run_id,)).fetchall()

        return rows.run_document(run_id, run, results, processes, samples)

    # --- lifetime ---------------------------------------------------------------

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    def __enter__(self) -> "SqliteStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"
