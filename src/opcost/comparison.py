"""Builds `opcost.comparison/1` documents from pairs of results (measured
interleaved by `ab`, or loaded from the store by `compare`): the statistics
come from compare.py, this module only pairs, labels and tabulates."""

from __future__ import annotations

from . import __version__, compare
from .export.json_comparison import SCHEMA

# (column, summary key) of the measuring side's CPU time in the savings table
_CPU_PARTS = (("user", "user_ns_per_op"), ("system", "sys_ns_per_op"))


def savings(sa: dict, sb: dict, switches: int) -> dict:
    """Seed 000's table: per operation, for A, B, the difference A-B and the
    improvement (A-B)/A, of user, system, user+system and elapsed time, ns and
    cycles; per switch for switching benchmarks; and the whole system (both
    sides) where a helper takes part."""
    def row(s: dict) -> dict:
        r = {name: s.get(key) for name, key in _CPU_PARTS}
        r["user+system"] = None if None in (r["user"], r["system"]) else r["user"] + r["system"]
        r["elapsed"] = s.get("median_ns")
        r["cycles"] = s.get("median_cycles")
        if "helper_user_ns_per_op" in s:
            r["whole system"] = s.get("cpu_ns_per_op")
        if switches:
            r["elapsed per switch"] = r["elapsed"] / switches if r["elapsed"] is not None else None
            r["cycles per switch"] = r["cycles"] / switches if r["cycles"] is not None else None
        return r

    a, b = row(sa), row(sb)
    diff = {k: (a[k] - b[k]) if a.get(k) is not None and b.get(k) is not None else None for k in a}
    pct = {k: (diff[k] / a[k]) if diff[k] is not None and a[k] else None for k in a}
    return {"A": a, "B": b, "difference": diff, "improvement": pct}


def entry(res_a: dict, res_b: dict, *, delta: float, key: str, switches: int = 0) -> dict:
    """One benchmark's comparison from two result documents (opcost.result/1
    `results[]` entries); `key` names the row. Verdicts come later, from
    `finish` (Holm across the report)."""
    sa, sb = res_a.get("summary") or {}, res_b.get("summary") or {}
    e = {"bench": res_a["bench"], "key": key, "op": res_a.get("op", ""),
         "a": {"params": res_a.get("params"), "summary": sa}, "b": {"params": res_b.get("params"), "summary": sb}}
    ma, mb = sa.get("process_medians_ns") or [], sb.get("process_medians_ns") or []
    if len(ma) < 2 or len(mb) < 2:
        why = [f"{arm}: {r.get('status')}" + (f" ({r['reason']})" if r.get("reason") else "")
               for arm, r, m in (("A", res_a, ma), ("B", res_b, mb)) if len(m) < 2]
        e.update(verdict=None, status="not compared: fewer than 2 processes in " + "; ".join(why))
        return e
    e.update(compare.compare_arms(ma, mb, delta=delta))
    e["flags"] = compare.arm_flags(sa, sb)
    e["savings"] = savings(sa, sb, switches)
    return e


def finish(entries: list[dict]) -> tuple[list[dict], dict]:
    """Holm across the compared benchmarks, verdicts, and the report summary."""
    idx = [i for i, e in enumerate(entries) if "ratio" in e]
    decided = compare.decide([entries[i] for i in idx]) if idx else []
    out = list(entries)
    for i, d in zip(idx, decided):
        out[i] = d
    return out, compare.summary(decided)


def document(*, kind: str, interleaved: bool, entries: list[dict], summary: dict, delta: float,
             a: dict, b: dict, aa: bool, **env) -> dict:
    return {"schema": SCHEMA, "opcost_version": __version__, "kind": kind, "interleaved": interleaved,
            "aa": aa, "a": a, "b": b, "delta_requested": delta, **env, "comparisons": entries,
            "summary": summary}
