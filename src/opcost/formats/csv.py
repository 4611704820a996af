"""`csv`: one row per variant (a result document) or per compared benchmark
(a comparison), for spreadsheets and scripts. Times in ns; empty cells for
what a row does not have (an unsupported variant has no median). Fractions
say so in their column's name (`cv_fraction`, `delta_fraction`: 0.02 is 2%,
the text's percentages divided by 100); `flags` lists what makes a figure
less trustworthy (contended, unstable, bimodal, outliers, ...), separated by
`;`, each a comparison's prefixed by its arm (`A:unstable;B:contended`).

Issue 26 renamed `cv` to `cv_fraction` and `delta` to `delta_fraction` (same
values, same positions) and appended `flags`; readers by column name must
use the new names (docs/commands/report.md). Issue 39 appended what a row
ran on in a vm (`ran_on`; a comparison's `ran_on_a`, `ran_on_b`: the
guests' describe lines, `; `-separated; empty outside a vm)."""

from __future__ import annotations

import csv
import io

from ..guests import describe, guests_in
from ..model import Comparison, Summary

NAME = "csv"
KINDS = ("result", "comparison")
TABLE_ONLY = True   # a plain run: one row per variant, from its summary (no sample read)

RESULT_COLUMNS = ("bench", "key", "params", "op", "status", "reason", "n_processes", "median_ns", "ci95_low_ns",
                  "ci95_high_ns", "min_ns", "p90_ns", "cv_fraction", "median_cycles", "user_ns_per_op", "sys_ns_per_op",
                  "flags", "ran_on")
COMPARISON_COLUMNS = ("bench", "key", "op", "median_a_ns", "median_b_ns", "ratio", "ci95_low", "ci95_high",
                      "p_value", "p_adjusted", "delta_fraction", "verdict", "status", "flags", "ran_on_a", "ran_on_b")


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)   # every digit: a CSV is read by programs
    return str(v)


def _flags(flags, arm: bool = False) -> str:
    """Flag names, each once, in order, `;`-separated (arm: `A:name`)."""
    names = [(f"{f.get('arm')}:" if arm and f.get("arm") else "") + str(f.get("flag"))
             for f in flags or [] if isinstance(f, dict) and f.get("flag")]
    return ";".join(dict.fromkeys(names))


def _ran_on(guests: list[dict]) -> str:
    """What a row ran on in a vm (guests.describe), each guest once; empty outside one."""
    return "; ".join(dict.fromkeys(describe(g) for g in guests))


def _result_rows(doc: dict):
    for r in doc["results"]:
        s = Summary.of(r)
        ci = s.get("ci95_ns") or [None, None]
        params = ";".join(f"{k}={v}" for k, v in (r.get("params") or {}).items())
        yield [r["bench"], r.get("key", r["bench"]), params, r.get("op"), r.get("status"), r.get("reason"),
               s.get("n_processes", 0), s.get("median_ns"), ci[0], ci[1], s.get("min_ns"), s.get("p90_ns"),
               s.get("cv"), s.get("median_cycles"), s.get("user_ns_per_op"), s.get("sys_ns_per_op"),
               _flags(s.get("flags")), _ran_on(guests_in(r))]


def _comparison_rows(doc: dict):
    for e in Comparison.from_json(doc).comparisons:
        ci = e.ci95_ratio or [None, None]
        g: dict = e.raw["guests"] if isinstance(e.raw.get("guests"), dict) else {}
        yield [e.bench, e.key, e.op, e.median_a, e.median_b, e.ratio, ci[0], ci[1],
               e.p_value, e.p_adjusted, e.delta, e.verdict, e.status, _flags(e.flags, arm=True),
               *(_ran_on([x for x in [g.get(side), *(g.get(f"{side}_runs") or [])] if isinstance(x, dict)])
                 for side in ("a", "b"))]


def serialize(doc: dict) -> bytes:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    if "comparisons" in doc:
        w.writerow(COMPARISON_COLUMNS)
        rows = _comparison_rows(doc)
    else:
        w.writerow(RESULT_COLUMNS)
        rows = _result_rows(doc)
    for row in rows:
        w.writerow([_cell(v) for v in row])
    return out.getvalue().encode()
