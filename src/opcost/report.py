"""Terminal rendering of results: plain aligned text on stdout, no colour
codes when piped, so it can be read at a glance and diffed."""

from __future__ import annotations

import math


def fmt_ns(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.3f} ms"
    if abs(x) >= 1e3:
        return f"{x / 1e3:.3f} us"
    return f"{x:.1f} ns"


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _ci(s: dict) -> str:
    ci = s.get("ci95_ns")
    if not ci:
        return "-"
    return f"[{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]"


def result_key(r: dict) -> str:
    """`bench:k=v,...` for a result document (the stored form has no key)."""
    if r.get("key"):
        return r["key"]
    params = {k: v for k, v in (r.get("params") or {}).items() if k != "arch"}
    return r["bench"] + (":" + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")


def _cpus(r: dict) -> str:
    cpus = (r.get("summary") or {}).get("cpus")
    return "|".join(cpus) if cpus else str((r.get("params") or {}).get("cpu", "-"))


def _table(rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_results(results: list[dict]) -> str:
    """One line per result (opcost.result/1 `results[]` entries); then
    counters, flags, unsupported and failed variants under their own headings."""
    head = ["benchmark", "op", "median", "95% CI", "min", "p90", "CV", "cycles", "user/op", "sys/op", "cpus", "n"]
    rows = [head]
    notes, counters = [], []
    for r in results:
        s = r.get("summary") or {}
        name = result_key(r)
        status, reason = r.get("status"), r.get("reason")
        if status in ("unsupported", "failed") and not s.get("n_processes"):
            notes.append(f"  {name}: {status}: {reason}")
            continue
        if not s.get("n_processes"):
            notes.append(f"  {name}: not measured (interrupted)")
            continue
        user = s.get("user_ns_per_op")
        sys_ = s.get("sys_ns_per_op")
        if "helper_user_ns_per_op" in s:
            user_s = f"{fmt_ns(user)}+{fmt_ns(s['helper_user_ns_per_op'])}"
            sys_s = f"{fmt_ns(sys_)}+{fmt_ns(s.get('helper_sys_ns_per_op'))}"
        else:
            user_s, sys_s = fmt_ns(user), fmt_ns(sys_)
        cyc = s.get("median_cycles")
        rows.append([name, r.get("op", ""), fmt_ns(s["median_ns"]), _ci(s), fmt_ns(s["min_ns"]), fmt_ns(s["p90_ns"]),
                     fmt_pct(s.get("cv")), "-" if cyc is None else f"{cyc:.0f}", user_s, sys_s, _cpus(r),
                     str(s["n_processes"])])
        for f in s.get("flags", []):
            notes.append(f"  {name}: {f['flag']}: {f['detail']}")
        if status == "failed":
            notes.append(f"  {name}: failed after {s['n_processes']} process(es): {reason}")
        reasons = s.get("counter_reasons", {})
        for cname, val in (s.get("counters") or {}).items():
            shown = f"{val:.4g}/op" if isinstance(val, (int, float)) else str(val)
            if cname in reasons:
                shown += f" ({reasons[cname]})"
            counters.append(f"  {name}: {cname} = {shown}")
    out = []
    if len(rows) > 1:
        out.append(_table(rows, right={2, 4, 5, 6, 7, 8, 9, 11}))
        out.append("median, CI, min, p90 and CV over per-process medians; cycles at the TSC rate; "
                   "user/sys per op from getrusage (measuring side+helper).")
    if counters:
        out.append("counters (per op, median over processes):\n" + "\n".join(counters))
    if notes:
        out.append("notes:\n" + "\n".join(notes))
    return "\n\n".join(out)
