"""The SQL store's moving of runs between stores: `opcost import` and
`opcost store copy` store whole run documents as they are."""

from __future__ import annotations

import hashlib
import uuid as _uuid
from typing import Any, Sequence

from .. import labels as _labels
from ..errors import StoreError
from ..model import Run
from ..safetext import printable
from . import rows
from .owner import owner_alive
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
    completed: dict[int, int] = {}      # the last import_runs: run id -> processes added in place

    def import_runs(self, docs: Sequence[dict[str, Any]]) -> list[tuple[int, bool]]:
        """Store `opcost.result/1` documents (checked by the caller) as they are:
        env, labels, argv, times, status, kind, results, processes and their
        samples. All or nothing, in one transaction. A document whose identity
        (its uuid; without one, a hash of its content, which becomes its uuid)
        the store holds is not stored again. A run keeps its run_id when this
        store has never given that id, else it gets the next one. A run the
        store holds with a strict subset of the document's processes (a run
        the store lost mid-run, its rescue file) is completed in place,
        keeping its id: the missing processes added, its results' and its
        own status as the document has them; a document that disagrees on
        anything else is refused (StoreError naming the difference). Returns
        (run id, stored now) per document, in their order; `completed` then
        maps each run completed in place to the processes it gained."""
        out: list[tuple[int, bool]] = []
        added: dict[int, int] = {}
        with self._transaction("importing runs", exclusive=True) as db:
            for doc in docs:
                ident = identity(doc)
                row = self._run(db, "SELECT id FROM runs WHERE uuid = ?", (ident,)).fetchone()
                if row:
                    n = self._complete(db, int(row[0]), doc)
                    if n is not None:
                        added[int(row[0])] = n
                    out.append((int(row[0]), n is not None))
                    continue
                out.append((self._import_one(db, doc, ident), True))
        self.completed = added
        return out

    def _import_one(self, db: Any, doc: dict[str, Any], ident: str) -> int:
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
                self._put_process(db, rid, proc)
        return run_id


    def _put_process(self, db: Any, result_id: int, proc: Any) -> None:
        pid = self._insert_id(
            db, "INSERT INTO processes (result_id, idx, header, trailer, meta) VALUES (?, ?, ?, ?, ?)",
            (result_id, proc.index, rows.encode(proc.header),
             None if proc.trailer is None else rows.encode(proc.trailer),
             rows.encode(proc.meta) if proc.meta else None))
        batch = [(1, s) for s in proc.warmup] + [(0, s) for s in proc.samples]
        db.cursor().executemany(
            self._sql("INSERT INTO samples (process_id, idx, warmup, iters, ns_per_op, tsc_per_op, data) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)"),
            [(pid, i, w, s.get("iters"), s.get("ns_per_op"), s.get("tsc_per_op"), rows.encode(s))
             for i, (w, s) in enumerate(batch)])

    def _complete(self, db: Any, run_id: int, doc: dict[str, Any]) -> int | None:
        """Run `run_id`, stored, is the document's run (same identity): add the
        processes it lacks, in this transaction. Returns how many were added
        (None: nothing to do, the store holds all of it)."""

        run = Run.from_json(doc)
        label, kind, status, owner = self._run(
            db, "SELECT label, kind, status, " + self._column("runs.owner", "owner") + " FROM runs WHERE id = ?",
            (run_id,)).fetchone()
        results = self._run(db, "SELECT id, bench, params, op FROM results WHERE run_id = ? ORDER BY position",
                            (run_id,)).fetchall()
        held: dict[int, dict[int, tuple[Any, int]]] = {}
        for rid, idx, header, n in self._run(
                db, "SELECT p.result_id, p.idx, p.header, (SELECT count(*) FROM samples s WHERE s.process_id = p.id)"
                " FROM processes p JOIN results r ON r.id = p.result_id WHERE r.run_id = ?", (run_id,)).fetchall():
            held.setdefault(rid, {})[idx] = (header, n)
        _same(run_id, "its label", label, run.label)
        _same(run_id, "its kind", kind or "run", (run.stored or {}).get("kind") or "run")
        _same(run_id, "its number of results", len(results), len(run.results))
        missing = []
        for pos, ((rid, bench, params, op), res) in enumerate(zip(results, run.results)):
            _same(run_id, f"results[{pos}].bench", bench, res.bench)
            _same(run_id, f"results[{pos}].params", rows.decode(params), res.params)
            _same(run_id, f"results[{pos}].op", op, res.op)
            mine = {p.index: p for p in res.processes}
            for idx, (header, n) in sorted(held.get(rid, {}).items()):
                proc = mine.get(idx)
                _same(run_id, f"results[{pos}] process {idx}", "stored", "stored" if proc else "missing")
                assert proc is not None
                _same(run_id, f"results[{pos}] process {idx}'s header and samples", (rows.decode(header), n),
                      (proc.header, len(proc.samples) + len(proc.warmup)))
            missing += [(rid, res, mine[i]) for i in sorted(set(mine) - set(held.get(rid, {})))]
        if not missing:
            if status == "interrupted" and run.status != status:    # a snapshot of a run that has ended since
                self._settle(db, run_id, results, run)
                return 0
            return None
        if status == "running" and owner_alive(rows.decode(owner)):
            raise StoreError(f"run {run_id} is still being measured: import this file once it has ended "
                             "(nothing was imported)")
        for rid, res, proc in missing:
            self._put_process(db, rid, proc)
        self._settle(db, run_id, results, run)
        return len(missing)

    def _settle(self, db: Any, run_id: int, results: list, run: Any) -> None:
        """The statuses and summaries of a completed run, as its document has them."""
        for (rid, *_), res in zip(results, run.results):
            self._run(db, "UPDATE results SET status = ?, reason = ?, summary = ? WHERE id = ?",
                      (res.status, res.reason, None if res.summary is None else rows.encode(res.summary), rid))
        self._run(db, "UPDATE runs SET status = ?, finished = ?, owner = NULL WHERE id = ?",
                  (run.status, (run.stored or {}).get("finished") or _now(), run_id))


def _same(run_id: int, what: str, there: Any, here: Any) -> None:
    if there != here:
        said = printable(f"{there}")[:60], printable(f"{here}")[:60]
        raise StoreError(f"run {run_id} in the store has this file's identity (uuid) but not its content: "
                         f"{what} is '{said[0]}' there, '{said[1]}' in the file; nothing was imported "
                         "(a file edited since it was written?)")
