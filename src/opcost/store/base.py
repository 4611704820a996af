"""The store interface, and the SQL store that every database backend is.

`Store` is what the callers use: the recorder writes a run as it is measured
(create_run, add_result, add_process after every probe process, set_result,
finish_run); `history`, `show` and `compare` read (list_runs, resolve,
load_run); `history clean` marks abandoned runs.

`SqlStore` implements it once over a DB-API 2 connection, in parts by
responsibility: store/sql.py (every statement written with `?` placeholders,
turned into the driver's style; transactions, waiting for another program's
lock, migrations), store/sqlwrite.py (a run as it is measured, the owner
rules), store/sqlread.py (listing, run references), store/sqlmove.py (import,
a large file as it is read, and copy), and loading a run here. Rows become documents in store/rows.py. A
backend subclasses it with its dialect: the class attributes and the methods
of store/sql.py's SqlDialect, and its schema module's MIGRATIONS and ADDED_IN
(store/sqlite.py and store/sqlite_schema.py).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Protocol, Sequence

from ..summaries import fill_summaries, resummarized
from .sql import (DEFAULT_LOCK_WAIT_S, FINAL_RUN_STATUSES, MAX_INT, NOTICE_AFTER_S, RESULT_STATUSES,  # noqa: F401
                  RUN_STATUSES, OnWait, SqlConnection, Step, lock_wait_s)
from . import rows
from .recover import recover_plan
from .owner import owner_here
from .sqlmove import RunImporting, identity  # noqa: F401
from .sqlread import RunReading
from .sqlwrite import RunWriting


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

    def record_missed(self, run_id: int, missing: int, rescue: str | None) -> None: ...

    def list_runs(self, limit: int | None = None) -> list[dict[str, Any]]: ...

    def find_runs(self, where: dict[str, str] | None = None, key: str | None = None,
                  bench: str | None = None) -> list[dict[str, Any]]: ...

    def delete_runs(self, run_ids: Sequence[int]) -> list[int]: ...

    def import_runs(self, docs: Sequence[dict[str, Any]]) -> list[tuple[int, bool]]: ...

    def import_files(self, files: Sequence[Iterable[Any]]) -> list[tuple[list[tuple[int, bool]], dict[int, int]]]: ...

    def resolve(self, ref: str) -> int: ...

    def load_run(self, ref: str | int, *, sample_data: bool = True, summaries: bool = False,
                 table_only: bool = False) -> dict[str, Any]: ...

    def clean_abandoned(self) -> list[int]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...


class SqlStore(RunWriting, RunReading, RunImporting):
    """A `Store` over one DB-API 2 connection that runs in autocommit mode:
    single statements commit on their own, multi-statement writes (a process
    and its samples, a migration step) go through `_transaction`."""

    # Read here at call time, so that a test may set them on this module.
    def _notice_after(self) -> float:
        return NOTICE_AFTER_S

    def _owner(self) -> dict[str, Any]:
        return owner_here()

    def load_run(self, ref: str | int, *, sample_data: bool = True, summaries: bool = False,
                 table_only: bool = False) -> dict[str, Any]:
        """The run as an `opcost.result/1` document (store/rows.py): results in
        position order, processes in idx order, samples split into measured
        and warm-up; its plan as stored (a store never migrated to schema 5:
        recovered from its argv). sample_data=False: each sample is only its plain columns
        (iters, ns_per_op, tsc_per_op), its JSON left unread: what a report
        over many runs needs, several times faster (benchmarks/report_scale.py).
        summaries=True: for reading (show, report, compare), a run that never
        got its summaries (killed, abandoned) gets them from its processes
        (summaries.fill_summaries); moving runs (export, copy) leaves them as stored.
        table_only=True: a plain run (kind "run") comes without its samples
        (every process's lists empty; summaries implied): all its results
        table needs. A result whose summary is stored and current reads no
        sample; one without (a run killed before its end) gets it computed
        from its processes read one at a time, each one's batches dropped once
        summarized (_digested: `show` of a run of 10^6 samples: issue 38)."""
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
            table_only = table_only and run[3] in (None, "run")
            samples = [] if table_only else self._run(
                db, f"SELECT s.process_id, s.warmup, {data} FROM samples s"
                " JOIN processes p ON p.id = s.process_id"
                " JOIN results r ON r.id = p.result_id WHERE r.run_id = ?"
                " ORDER BY s.process_id, s.idx", (run_id,)).fetchall()
            fresh = self._digested(db, self._behind(db, run_id), processes) if table_only else {}
        doc = rows.run_document(run_id, run, results, processes,
                                samples if sample_data else rows.plain_samples(samples), names,
                                recover_plan)
        if summaries and samples:
            fill_summaries(doc)
        for (rid, *_), r in zip(results, doc["results"]):
            if rid in fresh:
                r["summary"] = fresh[rid]
        return doc

    def _behind(self, db: Any, run_id: int) -> dict[int, Any]:
        """{result id: its stored summary (JSON text or None)} of the run's
        results whose summary is not the one fill_summaries would keep:
        missing, or of fewer processes than have measured samples."""
        return {rid: summary for rid, summary, n in self._run(
                db, "SELECT r.id, r.summary, (SELECT count(*) FROM processes p WHERE p.result_id = r.id AND EXISTS "
                "(SELECT 1 FROM samples s WHERE s.process_id = p.id AND s.warmup = 0)) FROM results r "
                "WHERE r.run_id = ?", (run_id,)).fetchall()
                if n and (summary is None or (rows.decode(summary) or {}).get("n_processes") != n)}

    def _digested(self, db: Any, behind: dict[int, Any], processes: Sequence[Sequence[Any]]) -> dict[int, dict]:
        """{result id: summary} of the results `behind` (_behind), as
        fill_summaries computes it, from their processes read one at a time
        (one query each, on every backend): each process goes into the
        result's stats.Digest and its measured batches are dropped, so the
        run is never held whole (a run of 10^6 samples: issue 38)."""
        if not behind:
            return {}
        from ..stats import Digest   # numpy: only when a run lacks its summaries

        digests = {rid: Digest() for rid in behind}
        for pid, result_id, *rest in processes:
            if result_id in digests:
                proc = rows.process(rest)
                proc.samples = rows.decode_samples(d for d, in self._run(
                    db, "SELECT data FROM samples WHERE process_id = ? AND warmup = 0 ORDER BY idx", (pid,)))
                digests[result_id].add(proc.to_json())
        return {rid: resummarized(rows.decode(behind[rid]), d) for rid, d in digests.items()}
