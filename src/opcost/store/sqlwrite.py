"""The SQL store's writing: a run as it is measured (create_run,
begin_run, add_result, add_process, set_result, finish_run), and the runs
`history clean` and `history delete` change."""

from __future__ import annotations

import os
import uuid as _uuid
from typing import Any, Mapping, Sequence

from .. import labels as _labels
from ..labels import MISSED_LABEL, RESCUE_LABEL
from ..errors import StoreError, UsageError
from ..redact import redact_argv
from . import rows
from .owner import owner_alive, shown_status
from .sql import FINAL_RUN_STATUSES, RESULT_STATUSES, SqlConnection, _now

_ADD_RESULT = ("INSERT INTO results (run_id, position, bench, params, op, unit, status, key) "
               "VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)")


class RunWriting(SqlConnection):

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
                 rows.encode(self._owner()), ident, rows.encode(plan)))
            self._put_labels(db, run_id, names)
            ids = [self._insert_id(db, _ADD_RESULT, self._result_row(run_id, **r)) for r in results]
        return run_id, ids

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

    def record_missed(self, run_id: int, missing: int, rescue: str | None) -> None:
        """A run the store lost mid-run (its opcost got the store back at the
        end): how many processes the store misses and the file that has them
        (None: no file: standard output), as the run's labels MISSED_LABEL
        and RESCUE_LABEL; `history` and `show` say them, and the import of
        that file that completes the run removes them."""
        names = {MISSED_LABEL: str(missing)} | ({RESCUE_LABEL: rescue} if rescue else {})
        with self._transaction("recording what the store missed") as db:
            self._run(db, f"DELETE FROM run_labels WHERE run_id = ? AND key IN ('{MISSED_LABEL}', '{RESCUE_LABEL}')",
                      (run_id,))
            self._put_labels(db, run_id, names)

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

