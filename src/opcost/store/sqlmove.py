"""The SQL store's moving of runs between stores: `opcost import` and
`opcost store copy` store whole run documents as they are."""

from __future__ import annotations

import hashlib
import uuid as _uuid
from typing import Any, Sequence

from .. import labels as _labels
from ..errors import StoreError
from ..safetext import printable
from . import rows
from .recover import plan_or_recovered
from .sql import MAX_INT, RESULT_STATUSES, RUN_STATUSES, SqlConnection, _now

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


class RunMoving(SqlConnection):

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

