"""Runs as the replicates: comparisons across stored runs made at different
times (`compare` over stored runs, a `series` of stored labels), where a
run-to-run offset (another boot, another hour, another neighbour) moves
every process of a run together. Pooling the processes of two runs counts
them as independent and turns a 1% offset into a verdict; here each run is
reduced to one figure and the runs are the sample (docs/statistics.md,
"Stored runs: the run is the unit").

- a run's figure: the median of its per-process medians, on logs;
- two sides of 2+ runs each: Welch's t on the runs' log figures (the
  ratio is the geometric mean of B's run figures over A's, its CI the
  Welch interval, exponentiated);
- fewer than 2 runs on a side: no run-to-run spread on that side, so no
  test: the caller gives the ratio and the CIs within the runs, and no
  verdict. (One run against 3, with Student's pooled t, was tried and
  dropped: on bimodal processes it called 10% of A/A comparisons.)

Chosen by simulation (validation/compare/stored_runs.py). Pure functions,
no I/O.
"""

from __future__ import annotations

import math

from .stats import median
from . import abtest

import numpy as np  # noqa: E402
from scipy import stats as sps  # noqa: E402

UNIT = "run"
TEST_WELCH = "Welch t on the runs' log figures (median of each run's process medians)"
UNREPLICATED = ("one run a side: its CI is within the two runs and a run-to-run offset (another boot or hour) "
                "is not in it, so no verdict; measure 2-3 runs a side (opcost compare A1,A2,A3 B1,B2,B3) "
                "or both interleaved (opcost ab)")


def unreplicated(k_a: int, k_b: int) -> str:
    """Why runs k_a against k_b get no verdict (replicated() is False), and what to do."""
    if k_a == 1 and k_b == 1:
        return UNREPLICATED
    return (f"{k_a} run(s) against {k_b}: too few runs to estimate the run-to-run spread (2 a side is the least), "
            "so no verdict; the CI is within the runs; add runs, or measure both interleaved (opcost ab)")


def run_figure(process_medians) -> float:
    """One run's figure: the median of its per-process medians (ns per op)."""
    xs = [float(x) for x in process_medians]
    if not xs or any(not (math.isfinite(x) and x > 0) for x in xs):
        raise ValueError("a run's per-process medians must be finite and > 0, and at least one")
    return float(median(xs))


def replicated(k_a: int, k_b: int) -> bool:
    """Whether runs k_a against k_b carry a run-to-run spread to test with:
    2+ runs on both sides."""
    return k_a >= 2 and k_b >= 2


def welch(la: np.ndarray, lb: np.ndarray, conf: float = 0.95) -> dict:
    """Welch's t: the difference of means of B and A (logs), its t interval
    at `conf` and two-sided p, with the Welch-Satterthwaite degrees of freedom."""
    ka, kb = la.size, lb.size
    if ka < 2 or kb < 2:
        raise ValueError("Welch's t needs 2 or more values a side")
    d = float(lb.mean() - la.mean())
    va, vb = float(la.var(ddof=1)), float(lb.var(ddof=1))
    se2 = va / ka + vb / kb
    den = (va / ka) ** 2 / (ka - 1) + (vb / kb) ** 2 / (kb - 1)
    df = se2 * se2 / den if den > 0 else float(ka + kb - 2)
    se = math.sqrt(se2)
    tq = float(sps.t.ppf(0.5 + conf / 2, df))
    p = (1.0 if d == 0 else 0.0) if se == 0 else float(2 * sps.t.sf(abs(d) / se, df))
    return {"diff": d, "se": se, "df": float(df), "ci": [d - tq * se, d + tq * se], "p": p, "test": TEST_WELCH,
            "sd": math.sqrt(((ka - 1) * va + (kb - 1) * vb) / (ka + kb - 2))}


def compare_runs(runs_a: list, runs_b: list, *, delta: float = abtest.DELTA) -> dict:
    """Two sides of runs, each run its per-process medians: the run-level
    comparison, with the keys of abtest.compare_arms where they mean the
    same (n_a/n_b are runs here; "unit": "run"). ValueError when the runs
    carry no run-to-run spread (replicated() is False)."""
    fa = np.array([run_figure(r) for r in runs_a])
    fb = np.array([run_figure(r) for r in runs_b])
    if not replicated(fa.size, fb.size):
        raise ValueError(f"{fa.size} run(s) against {fb.size}: no run-to-run spread to test with")
    la, lb = np.log(fa), np.log(fb)
    w = welch(la, lb)
    ratio = math.exp(w["diff"])
    return {"unit": UNIT, "n_a": int(fa.size), "n_b": int(fb.size),
            "n_processes_a": sum(len(r) for r in runs_a), "n_processes_b": sum(len(r) for r in runs_b),
            "run_medians_a": [float(x) for x in fa], "run_medians_b": [float(x) for x in fb],
            "median_a": float(math.exp(la.mean())), "median_b": float(math.exp(lb.mean())),
            "ratio": ratio, "ci95_ratio": [math.exp(w["ci"][0]), math.exp(w["ci"][1])], "change": ratio - 1,
            "p_value": w["p"], "test": w["test"], "df": w["df"], "run_sd": w["sd"],
            "delta": float(delta), "delta_requested": float(delta)}


def runs_needed(c: dict, alpha: float = abtest.ALPHA) -> int:
    """Runs per side that would likely decide an inconclusive run-level
    comparison: the normal sizing on the measured run-to-run SD for the
    cheaper of the two targets (the observed change real, or the CI inside
    +/- delta), never under 3."""
    target = max(abs(c["change"]), c["delta"] - abs(c["change"]))
    sd = c.get("run_sd") or 0.0
    z = float(sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(0.8))
    return max(3, math.ceil(2 * (z * sd / max(target, 1e-9)) ** 2))


def decide(comparisons: list[dict], alpha: float = abtest.ALPHA) -> list[dict]:
    """Verdicts of run-level comparisons: Holm across them (adds
    "p_adjusted"), abtest.verdict with the fixed delta; an inconclusive one
    gets "runs_needed"."""
    padj = abtest.holm([c["p_value"] for c in comparisons])
    out = []
    for c, pa in zip(comparisons, padj):
        c = dict(c, p_adjusted=pa)
        c["verdict"] = abtest.verdict(c["ratio"], c["ci95_ratio"], pa, c["delta"], alpha)
        if c["verdict"] == "inconclusive":
            c["runs_needed"] = runs_needed(c, alpha)
        out.append(c)
    return out
