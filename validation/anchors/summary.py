"""From the runs of one row to what the report says: the figures (medians
over the runs no other task disturbed), opcost/anchor, each side's CV
across runs and the F-test of the two spreads, the verdict, the markdown
table, and over all rows the geometric mean of the CV ratios."""

from __future__ import annotations

import shlex
import statistics
from pathlib import Path

from validation.anchors.catalogue import RATIO_BAND, Anchor, Row
from validation.harness.distributions import NOT_MEASURABLE, measurable, ratio

# opcost's spread is larger only when the one-sided F-test says so at this p.
F_TEST_P = 0.05


def cv(xs: list[float]) -> float | None:
    """Coefficient of variation (sample stdev / mean); None for < 2 values."""
    if len(xs) < 2:
        return None
    mean = statistics.fmean(xs)
    return statistics.stdev(xs) / mean if mean else None


def cv_larger_p(opcost: list[float], anchor: list[float]) -> float | None:
    """One-sided F-test that opcost's run-to-run spread is larger than the
    anchor's: P(F(n_o-1, n_a-1) >= var(log opcost) / var(log anchor)) under
    equal spread (logs: the variance of a log is the squared CV, whatever the
    scale). Small p: opcost really is less repeatable; large p: the two CVs
    are closer than this many runs can tell apart (from 5 runs a CV is known
    to about +-35%, so CVs 2.5x apart are still p ~ 0.05). None below 2 runs
    a side or with a zero spread."""
    import math

    if len(opcost) < 2 or len(anchor) < 2 or min(opcost + anchor) <= 0:
        return None
    vo = statistics.variance([math.log(x) for x in opcost])
    va = statistics.variance([math.log(x) for x in anchor])
    if vo == 0 or va == 0:
        return None
    from scipy.stats import f  # lazy: the parsers and --help need no scipy

    return float(f.sf(vo / va, len(opcost) - 1, len(anchor) - 1))


def band_text(band: tuple[float | None, float | None]) -> str:
    lo, hi = band
    return f"{lo:g}-{hi:g}" if lo is not None and hi is not None else (f"<= {hi:g}" if hi is not None else f">= {lo:g}")


def verdict(ratio: float, cv_p: float | None, band: tuple[float | None, float | None] | None = RATIO_BAND,
            ) -> tuple[bool, list[str]]:
    """PASS when the ratio lies in the row's band (None: definitions differ,
    the ratio is shown, not judged) and opcost's spread is not larger than
    the anchor's: the one-sided F-test (cv_larger_p) fails it only at p <
    F_TEST_P; a larger CV that runs this few cannot tell apart passes."""
    why = []
    if band is not None:
        lo, hi = band
        if (lo is not None and not ratio >= lo) or (hi is not None and not ratio <= hi):
            why.append(f"ratio {ratio:.3f} outside {band_text(band)}")
    if cv_p is not None and cv_p < F_TEST_P:
        why.append(f"opcost's spread is larger (F-test p={cv_p:.3f} < {F_TEST_P:g})")
    return (not why), why


def cv_ratio_geomean(rows: list[dict]) -> tuple[float | None, int]:
    """The geometric mean of opcost CV / anchor CV over the rows that have
    both (> 0), and how many: below 1, opcost is the more repeatable overall."""
    import math

    rs = [r["opcost_cv"] / r["anchor_cv"] for r in rows
          if r.get("opcost_cv") and r.get("anchor_cv")]
    if not rs:
        return None, 0
    return math.exp(statistics.fmean(math.log(x) for x in rs)), len(rs)


def geomean_line(rows: list[dict]) -> str:
    g, n = cv_ratio_geomean(rows)
    if g is None:
        return "geometric mean of the CV ratios (opcost/anchor): no row has both CVs"
    return (f"geometric mean of the CV ratios (opcost/anchor) over {n} rows: {g:.2f}: "
            + ("PASS (<= 1)" if g <= 1 else "FAIL (> 1)"))


def shown_command(anchor: Anchor, cpu: int) -> str:
    head = 2 if Path(anchor.argv[0]).name == "setarch" else 0     # setarch -R TOOL ...: TOOL by name too
    argv = [*(Path(a).name if i in (0, head) else a for i, a in enumerate(anchor.argv[:head + 1])),
            *anchor.argv[head + 1:]]
    return shlex.join(["taskset", "-c", str(cpu), *argv])


def fmt_ns(x: float) -> str:
    if abs(x) >= 10_000:
        return f"{x / 1000:,.2f} us"
    if abs(x) >= 1_000:
        return f"{x / 1000:.3f} us"
    return f"{x:.1f} ns"


def fmt_cv(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def summarise(row: Row, res: dict, runs: list[dict], cpu: int) -> dict:
    out = {"operation": row.name, "unit": row.unit, "opcost_spec": res["spec"], "status": res["status"],
           "minus_spec": res.get("minus_spec"), "minus_div": res.get("minus_div", 1), "differs": row.differs, "band": row.band, "tool": row.tool,
           "why": res["why"], "dropped_params": res["dropped_params"],
           "anchor_tool": res["anchor"].tool if res["anchor"] else None,
           "anchor_command": shown_command(res["anchor"], cpu) if res["anchor"] else None,
           "anchor_desc": row.anchor_desc, "sized_like_anchor": res.get("sized"),
           "placed_like_anchor": res.get("placed"), "runs": runs}
    if res["status"] != "ok":
        return out
    errors = [r["error"] for r in runs if "error" in r]
    ok = [r for r in runs if "error" not in r]
    if errors:
        out["status"] = "error"
        out["why"] = errors[0]
    if not ok:
        return out
    # Figures, ratio and CVs from the runs no other task disturbed (kept
    # after --retries), when at least two are left; else from all of them.
    clean = [r for r in ok if not r.get("disturbed")]
    used = clean if len(clean) >= 2 else ok
    o = [r["opcost_ns"] for r in used]
    a = [r["anchor_ns"] for r in used]
    if not measurable(*o, *a):   # `A - B` netting below zero, or an anchor's 0: no ratio, no log
        out.update({"status": "not measurable", "why": NOT_MEASURABLE, "n_runs": len(ok), "n_used": len(used),
                    "opcost_ns": statistics.median(o), "anchor_ns": statistics.median(a),
                    "runs_not_measurable": sum(not measurable(x, y) for x, y in zip(o, a)),
                    "reruns": sum(r.get("reruns", 0) for r in ok),
                    "disturbed_kept": sum(bool(r.get("disturbed")) for r in ok)})
        return out
    ratios = [r["ratio"] for r in used]
    out.update({
        "n_runs": len(ok), "n_used": len(used), "opcost_ns": statistics.median(o), "anchor_ns": statistics.median(a),
        "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "opcost_cv": cv(o), "anchor_cv": cv(a),
        "reruns": sum(r.get("reruns", 0) for r in ok), "disturbed_kept": sum(bool(r.get("disturbed")) for r in ok),
    })
    out["cv_larger_p"] = cv_larger_p(o, a)
    out["pass"], out["fail_reasons"] = verdict(out["ratio"], out["cv_larger_p"], row.band)
    return out


def opcost_name(r: dict) -> str:
    div = r.get("minus_div") or 1
    return f"`{r['opcost_spec']}`" + (f" - `{r['minus_spec']}`" + (f" / {div}" if div != 1 else "")
                                      if r.get("minus_spec") else "")


def verdict_text(r: dict) -> str:
    res = "PASS" if r["pass"] else "FAIL (" + "; ".join(r["fail_reasons"]) + ")"
    if r.get("band") is None:
        res += ", ratio not judged"
    elif r["band"] != RATIO_BAND:
        res += f", ratio {band_text(r['band'])}"
    if r["status"] == "error":
        res += f" ({r['n_runs']} runs; error: {r['why'].splitlines()[0]})"
    return res


def markdown(rows: list[dict]) -> str:
    lines = ["| operation | anchor (command) | opcost | anchor | opcost/anchor | CV opcost | CV anchor | F-test p "
             "| reruns | definitions | |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cmd = (f"{r['anchor_tool']}: `{r['anchor_command']}`" if r.get("anchor_command")
               else r.get("anchor_desc") or "-")
        defs = (r.get("differs") or "same").replace("|", "\\|")
        if "ratio" in r:
            unit = f"/{r['unit']}"
            p = "-" if r.get("cv_larger_p") is None else f"{r['cv_larger_p']:.2f}"
            reruns = f"{r.get('reruns', 0)}" + (
                f" ({r['disturbed_kept']} kept, " + ("left out" if r["n_used"] < r["n_runs"] else "used") + ")"
                if r.get("disturbed_kept") else "")
            lines.append(f"| {opcost_name(r)} | {cmd} | {fmt_ns(r['opcost_ns'])}{unit} | "
                         f"{fmt_ns(r['anchor_ns'])}{unit} | {r['ratio']:.3f} ({r['ratio_min']:.3f}-"
                         f"{r['ratio_max']:.3f}) | {fmt_cv(r['opcost_cv'])} | {fmt_cv(r['anchor_cv'])} | {p} | "
                         f"{reruns} | {defs} | {verdict_text(r)} |")
        elif r["status"] == "not measurable":
            unit = f"/{r['unit']}"
            lines.append(f"| {opcost_name(r)} | {cmd} | {fmt_ns(r['opcost_ns'])}{unit} | "
                         f"{fmt_ns(r['anchor_ns'])}{unit} | - | - | - | - | {r.get('reruns', 0)} | {defs} | "
                         f"{r['why']} ({r['runs_not_measurable']} of {r['n_used']} runs) |")
        else:
            why = (r["why"] or r["status"]).splitlines()[0].replace("|", "\\|")
            lines.append(f"| {opcost_name(r)} | {cmd} | - | - | - | - | - | - | - | {defs} | {why} |")
    return "\n".join(lines)


def unavailable(rows: list[dict]) -> list[str]:
    """One line per anchor that could not run, and why (the report's end)."""
    return [f"- {r['operation']}: {r['why'].splitlines()[0]}" for r in rows
            if r["status"] not in ("ok", "error", "not measurable") and r.get("why")]


def attempt(first: str, got: dict[str, dict], disturbed: bool) -> dict:
    """What --json keeps of one attempt at a pair (interleave.Record)."""
    o, a = got["opcost"], got["anchor"]
    return {
        "first": first, "opcost_ns": o["ns_per_op"], "anchor_ns": a["ns_per_op"],
        "ratio": ratio(o["ns_per_op"], a["ns_per_op"]), "opcost_wall_s": o["wall_s"],
        "anchor_wall_s": a["wall_s"], "opcost_cpu_share": o.get("cpu_share"),
        "anchor_cpu_share": a.get("cpu_share"), "disturbed": disturbed,
        "opcost_cv_processes": o.get("cv_processes"),
        "anchor_detail": {k: v for k, v in a.items() if k not in ("ns_per_op", "wall_s", "cpu_share")},
    }
