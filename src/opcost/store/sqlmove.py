"""The SQL store's moving of runs between stores: `opcost import` and
`opcost store copy` store whole run documents as they are; a large file is
stored as it is read, one process at a time (RunImporting)."""

from __future__ import annotations

import hashlib
import uuid as _uuid
from itertools import chain, count, repeat
from typing import Any, Iterable, Sequence

from .. import labels as _labels
from ..errors import StoreError
from ..model import Process, Result, Run
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
    """Storing run documents as they are, and completing a stored run in
    place (RunImporting below: the import that uses them)."""

    def _import_one(self, db: Any, doc: dict[str, Any], ident: str) -> int:
        run = Run.from_json(doc)
        run_id = self._insert_run(db, run, doc, ident)
        for pos, res in enumerate(run.results):
            rid = self._insert_result(db, run_id, pos, res)
            for proc in res.processes:
                self._put_process(db, rid, proc)
        return run_id

    def _run_values(self, run: Any, doc: dict[str, Any], ident: str) -> tuple[list[str], list[Any]]:
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
        return cols, vals

    def _insert_run(self, db: Any, run: Any, doc: dict[str, Any], ident: str) -> int:
        cols, vals = self._run_values(run, doc, ident)
        if isinstance(run.run_id, int) and 0 < run.run_id <= MAX_INT and run.run_id > self._id_floor(db):
            cols.insert(0, "id")
            vals.insert(0, run.run_id)
        run_id = self._insert_id(db, f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                 vals)
        if cols[0] == "id":
            self._explicit_id(db, run_id)
        self._put_labels(db, run_id, run.labels)
        return run_id

    _RESULT_COLS = ("run_id", "position", "bench", "params", "op", "unit", "status", "reason", "summary", "key")

    def _result_values(self, run_id: int, pos: int, res: Any) -> tuple[Any, ...]:
        if res.status not in RESULT_STATUSES:
            raise StoreError(f"result status '{printable(res.status)}' is not one of {', '.join(RESULT_STATUSES)}")
        summary = res.summary
        if summary is not None and res.parallel is not None and "parallel" not in summary:
            summary = {**summary, "parallel": res.parallel}
        return (run_id, pos, res.bench, rows.encode(res.params), res.op, res.unit, res.status, res.reason,
                None if summary is None else rows.encode(summary), res.key)

    def _insert_result(self, db: Any, run_id: int, pos: int, res: Any) -> int:
        return self._insert_id(db, f"INSERT INTO results ({', '.join(self._RESULT_COLS)}) VALUES "
                               f"({', '.join('?' * len(self._RESULT_COLS))})", self._result_values(run_id, pos, res))

    def _put_process(self, db: Any, result_id: int, proc: Any, plain: Any = False) -> None:
        """One process and its samples; plain: every sample only numbers
        (docschema.plain_samples), so their JSON is encoded in one call; or
        a tuple, the columns of its sample rows made already (a streamed
        file's worker: transfer._prepare) for a proc without samples."""
        pid = self._insert_id(
            db, "INSERT INTO processes (result_id, idx, header, trailer, meta) VALUES (?, ?, ?, ?, ?)",
            (result_id, proc.index, rows.encode(proc.header),
             None if proc.trailer is None else rows.encode(proc.trailer),
             rows.encode(proc.meta) if proc.meta else None))
        warmup, iters, ns, tsc, data = (plain if isinstance(plain, tuple) else
                                        rows.sample_columns(proc.warmup, proc.samples, plain))
        self._insert_samples(db, zip(repeat(pid), count(), chain(repeat(1, warmup), repeat(0, len(data) - warmup)),
                                     iters, ns, tsc, data), bool(plain))

    def _held(self, db: Any, run_id: int) -> tuple[tuple, list, dict[int, dict[int, tuple[Any, int]]]]:
        """Run `run_id` as stored: (label, kind, status, owner), its results
        (id, bench, params, op) and its processes' (header, number of samples)
        by result id and idx."""
        row = self._run(
            db, "SELECT label, kind, status, " + self._column("runs.owner", "owner") + " FROM runs WHERE id = ?",
            (run_id,)).fetchone()
        results = self._run(db, "SELECT id, bench, params, op FROM results WHERE run_id = ? ORDER BY position",
                            (run_id,)).fetchall()
        held: dict[int, dict[int, tuple[Any, int]]] = {}
        for rid, idx, header, n in self._run(
                db, "SELECT p.result_id, p.idx, p.header, (SELECT count(*) FROM samples s WHERE s.process_id = p.id)"
                " FROM processes p JOIN results r ON r.id = p.result_id WHERE r.run_id = ?", (run_id,)).fetchall():
            held.setdefault(rid, {})[idx] = (header, n)
        return tuple(row), results, held

    def _same_samples(self, db: Any, run_id: int, pos: int, rid: int, idx: int, warmup: list, samples: list) -> None:
        """A process the store holds has the file's warmup and samples, value
        for value (a tampered figure is refused, as a tampered header is)."""
        there: list[list[dict]] = [[], []]
        for w, data in self._run(db, "SELECT s.warmup, s.data FROM samples s JOIN processes p ON p.id = s.process_id"
                                 " WHERE p.result_id = ? AND p.idx = ? ORDER BY s.idx", (rid, idx)).fetchall():
            there[0 if w else 1].append(rows.decode(data))
        for name, held, mine in (("warmup", there[0], warmup), ("sample", there[1], samples)):
            for i, (a, b) in enumerate(zip(held, mine)):
                if a != b:
                    key = next((k for k in sorted(set(a) | set(b), key=str) if a.get(k) != b.get(k)), "?")
                    _same(run_id, f"results[{pos}] process {idx}'s {name} {i} {key}", a.get(key), b.get(key))

    def _same_runs(self, run_id: int, stored: tuple, results: list, run: Any) -> None:
        label, kind = stored[:2]
        _same(run_id, "its label", label, run.label)
        _same(run_id, "its kind", kind or "run", (run.stored or {}).get("kind") or "run")
        _same(run_id, "its number of results", len(results), len(run.results))
        for pos, ((rid, bench, params, op), res) in enumerate(zip(results, run.results)):
            _same(run_id, f"results[{pos}].bench", bench, res.bench)
            _same(run_id, f"results[{pos}].params", rows.decode(params), res.params)
            _same(run_id, f"results[{pos}].op", op, res.op)

    def _complete(self, db: Any, run_id: int, doc: dict[str, Any]) -> int | None:
        """Run `run_id`, stored, is the document's run (same identity): add the
        processes it lacks, in this transaction. Returns how many were added
        (None: nothing to do, the store holds all of it)."""
        run = Run.from_json(doc)
        stored, results, held = self._held(db, run_id)
        self._same_runs(run_id, stored, results, run)
        missing = []
        for pos, ((rid, *_), res) in enumerate(zip(results, run.results)):
            mine = {p.index: p for p in res.processes}
            for idx, (header, n) in sorted(held.get(rid, {}).items()):
                proc = mine.get(idx)
                _same(run_id, f"results[{pos}] process {idx}", "stored", "stored" if proc else "missing")
                assert proc is not None
                _same(run_id, f"results[{pos}] process {idx}'s header and samples", (rows.decode(header), n),
                      (proc.header, len(proc.samples) + len(proc.warmup)))
                self._same_samples(db, run_id, pos, rid, idx, proc.warmup, proc.samples)
            missing += [(rid, res, mine[i]) for i in sorted(set(mine) - set(held.get(rid, {})))]
        if not missing:
            return self._settle_unchanged(db, run_id, stored[2], results, run)
        self._not_running(run_id, stored)
        for rid, res, proc in missing:
            self._put_process(db, rid, proc)
        self._settle(db, run_id, results, run)
        return len(missing)

    def _settle_unchanged(self, db: Any, run_id: int, status: str, results: list, run: Any) -> int | None:
        if status == "interrupted" and run.status != status:    # a snapshot of a run that has ended since
            self._settle(db, run_id, results, run)
            return 0
        return None

    def _not_running(self, run_id: int, stored: tuple) -> None:
        if stored[2] == "running" and owner_alive(rows.decode(stored[3])):
            raise StoreError(f"run {run_id} is still being measured: import this file once it has ended "
                             "(nothing was imported)")

    def _settle(self, db: Any, run_id: int, results: list, run: Any) -> None:
        """The statuses and summaries of a completed run, as its document has them."""
        for (rid, *_), res in zip(results, run.results):
            self._run(db, "UPDATE results SET status = ?, reason = ?, summary = ? WHERE id = ?",
                      (res.status, res.reason, None if res.summary is None else rows.encode(res.summary), rid))
        self._run(db, "UPDATE runs SET status = ?, finished = ?, owner = NULL WHERE id = ?",
                  (run.status, (run.stored or {}).get("finished") or _now(), run_id))
        self._run(db, "DELETE FROM run_labels WHERE run_id = ? AND key IN (?, ?)",     # it misses nothing now
                  (run_id, _labels.MISSED_LABEL, _labels.RESCUE_LABEL))


class RunImporting(RunMoving):
    """`opcost import`: whole documents (`import_runs`), and several files in
    one transaction, a large one stored as it is read (`import_files`:
    transfer.StreamedRun)."""

    completed: dict[int, int] = {}      # the last import_runs: run id -> processes added in place

    def import_runs(self, docs: Sequence[Any]) -> list[tuple[int, bool]]:
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
        maps each run completed in place to the processes it gained.

        A document may also be a streamed run (transfer.StreamedRun: `uuid`,
        `head`, `processes()`, then `skeleton`), stored as it is read."""
        with self._bulk_load(), self._transaction("importing runs", exclusive=True) as db:
            out, self.completed = self._import_docs(db, docs)
        return out

    def import_files(self, files: Sequence[Iterable[Any]]) -> list[tuple[list[tuple[int, bool]], dict[int, int]]]:
        """import_runs of several files' documents (or streamed runs) in one
        transaction: a bad file anywhere stores nothing. Per file: what
        import_runs returns, and its `completed`. The import of files over
        docschema.STREAM_FROM: the store may be kept from readers while it is
        written (_bulk_load's `alone`)."""
        with self._bulk_load(alone=True), self._transaction("importing runs", exclusive=True) as db:
            return [self._import_docs(db, docs) for docs in files]

    def _import_docs(self, db: Any, docs: Iterable[Any]) -> tuple[list[tuple[int, bool]], dict[int, int]]:
        out: list[tuple[int, bool]] = []
        added: dict[int, int] = {}
        for doc in docs:
            streamed = not isinstance(doc, dict)
            ident = doc.uuid if streamed else identity(doc)
            row = self._run(db, "SELECT id FROM runs WHERE uuid = ?", (ident,)).fetchone()
            if row:
                n = (self._complete_streamed if streamed else self._complete)(db, int(row[0]), doc)
                if n is not None:
                    added[int(row[0])] = n
                out.append((int(row[0]), n is not None))
                continue
            out.append(((self._import_streamed if streamed else self._import_one)(db, doc, ident), True))
        return out, added

    def _import_streamed(self, db: Any, sd: Any, ident: str) -> int:
        """A streamed run: the run's row from its head, each result's row when
        its first process comes (its fields filled in at the end), each
        process as it is read."""
        head = {**sd.head, "results": []}
        run_id = self._insert_run(db, Run.from_json(head), head, ident)
        rids: dict[int, int] = {}
        for pos, proc, plain in sd.processes(prepared=True):
            if pos not in rids:
                rids[pos] = self._insert_result(db, run_id, pos, Result("", None, {}))
            self._put_process(db, rids[pos], Process.from_json(proc), plain)
        doc = sd.skeleton
        run = Run.from_json(doc)
        cols, vals = self._run_values(run, doc, ident)
        self._run(db, f"UPDATE runs SET {', '.join(c + ' = ?' for c in cols)} WHERE id = ?", (*vals, run_id))
        self._run(db, "DELETE FROM run_labels WHERE run_id = ?", (run_id,))
        self._put_labels(db, run_id, run.labels)
        for pos, res in enumerate(run.results):
            if pos in rids:
                self._run(db, f"UPDATE results SET {', '.join(c + ' = ?' for c in self._RESULT_COLS)} WHERE id = ?",
                          (*self._result_values(run_id, pos, res), rids[pos]))
            else:
                self._insert_result(db, run_id, pos, res)
        return run_id

    def _complete_streamed(self, db: Any, run_id: int, sd: Any) -> int | None:
        """_complete of a streamed run: each process compared with the stored
        one or added as it is read; the rest compared at the end."""
        stored, results, held = self._held(db, run_id)
        seen: set[tuple[int, int]] = set()
        added = 0
        for pos, proc, plain in sd.processes():
            _same(run_id, "its number of results", len(results), max(len(results), pos + 1))
            rid, idx = results[pos][0], proc["index"]
            seen.add((rid, idx))
            have = held.get(rid, {}).get(idx)
            if have is not None:
                _same(run_id, f"results[{pos}] process {idx}'s header and samples", (rows.decode(have[0]), have[1]),
                      (proc.get("header"), len(proc.get("samples") or []) + len(proc.get("warmup") or [])))
                self._same_samples(db, run_id, pos, rid, idx, proc.get("warmup") or [], proc.get("samples") or [])
                continue
            if not added:
                self._not_running(run_id, stored)
            self._put_process(db, rid, Process.from_json(proc), plain)
            added += 1
        run = Run.from_json(sd.skeleton)
        self._same_runs(run_id, stored, results, run)
        for pos, (rid, *_) in enumerate(results):
            for idx in sorted(held.get(rid, {})):
                _same(run_id, f"results[{pos}] process {idx}", "stored", "stored" if (rid, idx) in seen else "missing")
        if not added:
            return self._settle_unchanged(db, run_id, stored[2], results, run)
        self._settle(db, run_id, results, run)
        return added


def _same(run_id: int, what: str, there: Any, here: Any) -> None:
    if there != here:
        said = printable(f"{there}")[:60], printable(f"{here}")[:60]
        raise StoreError(f"run {run_id} in the store has this file's identity (uuid) but not its content: "
                         f"{what} is '{said[0]}' there, '{said[1]}' in the file; nothing was imported "
                         "(a file edited since it was written?)")
