"""The SQL store's reading: the list of runs (history), the runs that
match labels or a benchmark, and run references."""

from __future__ import annotations

from typing import Any

from .. import labels as _labels
from ..errors import UnknownRun
from ..safetext import printable
from . import rows
from .sql import MAX_INT, SqlConnection


class RunReading(SqlConnection):

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

