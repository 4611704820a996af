"""The SQLite dialect: one file, opened read-write (created and migrated) or
read-only (SQLite's mode=ro, read as it is). What is SQLite's own is here: the
file checks before connecting, the connection and its PRAGMAs, the schema
version in `PRAGMA user_version` and our stamp in `application_id`, and
SQLite's result codes turned into what to tell the user. Every statement,
transaction and lock wait is store/base.py's; the schema is
store/sqlite_schema.py's.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sqlite3
import urllib.parse
from types import ModuleType
from typing import Any, ClassVar, Iterator, Sequence

from ..errors import StoreError, StoreGone
from . import sqlite_file
from .base import OnWait, SqlStore
from .sqlite_schema import ADDED_IN, APPLICATION_ID, LATEST_VERSION, MIGRATIONS, statements

__all__ = ["APPLICATION_ID", "LATEST_VERSION", "MIGRATIONS", "SqliteStore"]

_BUSY_SLICE_S = 0.05  # SQLite's own busy wait per try (it polls every 1-10 ms then); between tries we
                      # say so and check for Ctrl-C. Short, so that a waiting writer polls often
                      # and is not starved by writers taking the lock back to back.

_HINT = sqlite_file.HINT
_DAMAGED_HINT = ("move it aside (mv {path} {path}.damaged) and `opcost run` starts a new store, "
                 "or pass --store another file, or use --no-store")

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


class SqliteStore(SqlStore):
    """A result store in one SQLite file. Opening creates the parent directory and
    the file if needed and brings the schema up to date, so that an unusable
    store is reported before anything is measured."""

    scheme = "sqlite"
    url_help = "a plain path, sqlite:///abs/path or sqlite://rel/path"
    driver: ClassVar[ModuleType] = sqlite3
    # IMMEDIATE: take the write lock at BEGIN, so a locked store is waited for there.
    begin_sql = "BEGIN IMMEDIATE"
    no_limit = -1
    migrations = MIGRATIONS
    added_in = ADDED_IN
    path: pathlib.Path

    def __init__(self, path: str | os.PathLike[str], on_wait: OnWait | None = None, *,
                 readonly: bool = False, missing_ok: bool = False):
        """readonly: opened with SQLite's mode=ro, so that a store on a read-only
        mount can be read too. A missing file is then an empty store if
        `missing_ok`, else an error. on_wait(message) is told once when a write
        waits for another program's lock."""
        raw = os.fspath(path)
        super().__init__(raw, on_wait, readonly=readonly)
        if not raw:
            raise StoreError(f"empty store path: {_HINT}")
        self.memory = raw == ":memory:"
        self.path = pathlib.Path(raw) if self.memory else pathlib.Path(raw).expanduser()
        self._ident: tuple[int, int] | None = None   # (device, inode) of the file opened
        if not self.memory:
            sqlite_file.prepare(self.path, self.readonly)
        if readonly and (self.memory or not self.path.exists()):
            if not (missing_ok or self.memory):
                raise StoreError(f"store {self.path} does not exist: give the --store that `opcost run` "
                                 "stored into (`opcost history` without --store reads the default one)")
            self._empty = True
            return
        absent = [] if self.memory or readonly else [f for f in sqlite_file.files(self.path) if not os.path.lexists(f)]
        try:
            self._open()
        except StoreError:
            # A store that could not be created (a full disk, an I/O error
            # while making its schema) leaves nothing behind that it made: no
            # empty or half-made .db, no -wal, -shm or -journal. Not after a
            # lock wait (StoreLocked: another opcost is making it) nor for a
            # store that was there before (its -wal or -journal may be what
            # makes it whole): then only an empty -journal of ours goes.
            sqlite_file.remove_made(self.path, absent)
            raise
        if not self.memory:
            self._ident = sqlite_file.ident(self.path)

    # --- the dialect --------------------------------------------------------------------

    def _check_identity(self, doing: str) -> None:
        # The connection keeps writing into the file it opened even after that
        # file is unlinked (rm, or its directory removed or replaced): every
        # commit would "work" and be lost. Checked before each commit.
        if self._ident is None:
            return
        now = sqlite_file.ident(self.path)
        if now != self._ident:
            what = "was removed" if now is None else "was replaced by another file"
            raise StoreGone(f"store {self.path} {what} while opcost was using it (while {doing}): "
                            "nothing more goes into it")

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: the sqlite3 module starts no transactions of its
        # own; single statements autocommit, multi-statement writes use
        # _transaction(). A writer turns the store to WAL (_configure): several
        # opcost may write at once, and readers never block them.
        if self.readonly:
            uri = "file:" + urllib.parse.quote(str(self.path.absolute())) + "?mode=ro"
            if sqlite_file.wal_unwritable(self.path):
                # A WAL store where its -shm cannot be made (a read-only mount):
                # read the file as it is (its last writer checkpointed on close).
                uri += "&immutable=1"
            return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=_BUSY_SLICE_S)
        return sqlite3.connect(str(self.path), isolation_level=None, timeout=_BUSY_SLICE_S)

    def _configure(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA foreign_keys = ON")

    def _start_writing(self, db: sqlite3.Connection) -> None:
        if not self.readonly and not self.memory:
            # WAL while anyone writes: writers append, readers read a snapshot,
            # so concurrent `opcost run`s into one store wait for each other
            # only for the few milliseconds of a commit. Short transactions
            # (one per process measured) and the busy wait do the rest. The
            # last writer to close turns the file back (close()).
            db.execute("PRAGMA journal_mode = WAL")

    @contextlib.contextmanager
    def _bulk_load(self, alone: bool = False) -> Iterator[None]:
        # An import's one transaction may write 10^6 samples (issue 38): in
        # WAL mode (a store being written), synchronous NORMAL (its commit not fsynced: the next
        # checkpoint is, at close) and a 64 MiB page cache (not 2: fewer
        # spills mid-transaction); 6 s -> 4 s for 10^6 rows in one run at
        # load 3.6. A crash or power loss still leaves the store consistent
        # (the import whole or not at all); a power loss before that
        # checkpoint may undo it. Put back after the transaction.
        #
        # alone (a file over docschema.STREAM_FROM): the rollback journal
        # instead of WAL when no other connection has the store open. WAL
        # writes every page twice (into the -wal file, then the checkpoint
        # copies it into the store): 433 MiB of new pages cost 4.4-5.7 s of
        # inserts, commit and checkpoint in WAL, 2.4-3.3 s with the
        # rollback journal (synchronous FULL: its commit is fsynced), whose
        # journal holds only the few pages the import changes (new pages
        # are not journaled). The price: other opcost commands wait for the
        # import (the store is locked, not readable, until its commit), as
        # they wait for any writer's lock. WAL again after it.
        db = self._db
        was = {p: int(db.execute(f"PRAGMA {p}").fetchone()[0]) for p in ("cache_size", "synchronous")}
        db.execute("PRAGMA cache_size = -65536")
        wal = db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rollback = False
        if wal and alone and not self.memory:
            busy = int(db.execute("PRAGMA busy_timeout").fetchone()[0])
            with contextlib.suppress(sqlite3.Error):     # busy: another connection has it; stay in WAL
                db.execute("PRAGMA busy_timeout = 0")
                rollback = db.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
            db.execute(f"PRAGMA busy_timeout = {busy}")
        if wal and not rollback:     # a rollback journal keeps FULL
            db.execute("PRAGMA synchronous = NORMAL")
        try:
            yield
        finally:
            with contextlib.suppress(sqlite3.Error):
                for p, v in was.items():
                    db.execute(f"PRAGMA {p} = {v}")
                if rollback:
                    self._start_writing(db)

    def close(self) -> None:
        # Back to the rollback journal when no one else has the store open, so
        # that a store at rest is one file: a read-only reader (history, show)
        # of a WAL file would leave -wal and -shm files beside it, and could
        # not read it at all where it may not create them. With others still
        # connected this fails (busy, at once) and the last one does it.
        conn = self._conn
        if conn is not None and self._writing and not self.memory:
            try:
                if conn.in_transaction:
                    conn.rollback()
                conn.execute("PRAGMA busy_timeout = 0")
                conn.execute("PRAGMA journal_mode = DELETE")
            except sqlite3.Error:
                pass
        super().close()

    def _schema_version(self, db: sqlite3.Connection) -> int:
        return int(db.execute("PRAGMA user_version").fetchone()[0])

    def _check_ours(self, db: sqlite3.Connection, version: int) -> None:
        app_id = int(db.execute("PRAGMA application_id").fetchone()[0])
        n_tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        foreign = (app_id not in (0, APPLICATION_ID)
                   or (app_id == 0 and (version > 0 or n_tables > 0)))
        if foreign:
            raise StoreError(f"store {self.path} is an SQLite database but not an opcost store: "
                             f"pass --store a new file or an opcost store, or use --no-store")

    def _set_schema_version(self, db: sqlite3.Connection, version: int) -> None:
        db.execute(f"PRAGMA user_version = {int(version)}")

    def _run_script(self, db: sqlite3.Connection, script: str) -> None:
        # Statement by statement: executescript() would commit behind our back.
        for statement in statements(script):
            db.execute(statement)

    def _insert_id(self, db: sqlite3.Connection, sql: str, args: Sequence[Any]) -> int:
        # lastrowid rather than RETURNING, which SQLite before 3.35 lacks.
        return int(self._run(db, sql, args).lastrowid)

    def _id_floor(self, db: sqlite3.Connection) -> int:
        # AUTOINCREMENT remembers the highest id ever given, deleted runs' too.
        return int(db.execute("SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'runs'), 0),"
                              " coalesce((SELECT max(id) FROM runs), 0))").fetchone()[0])

    def _classify(self, e: Exception) -> tuple[str, str] | None:
        low = str(e).lower()
        code = getattr(e, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == 10 and sqlite_file.disk_full(self.path):
            return _CODES[13]   # a full disk seen as an I/O error (the -shm could not grow)
        if code is not None and code & 0xFF in _CODES:
            return _CODES[code & 0xFF]
        if "not a database" in low or "malformed" in low:
            return _CODES[11]
        if "readonly" in low or "read-only" in low:
            return "is read-only", _HINT
        if "unable to open" in low:
            return "cannot be opened", _HINT
        if "locked" in low or "busy" in low:
            return None
        if "full" in low:
            return _CODES[13]
        return "failed", _HINT

