"""Two sides' per-process medians compared as distributions, not as one
median each: on a machine whose processes land on levels (a process is fast
or slow for its whole life: where its code, stack and kernel stack fell), one
median per side can agree while one side never reaches the other's fast
level, or differ only because the two sides drew a different mix of levels.

What compare() reports, for opcost (a) against the hand-written reference (b):
  * each side's process medians, sorted, and the levels they fall on (a new
    level starts where two neighbours differ by more than LEVEL_GAP);
  * the ratio a/b at matched quantiles (10, 50, 90%: type-7 interpolation),
    each with a 95% percentile-bootstrap interval (each side resampled
    alone, BOOTSTRAP draws, seeded);
  * the Hodges-Lehmann shift of log(a) against log(b) as a ratio, with its
    Moses interval (distribution-free, normal approximation of the
    Mann-Whitney critical value): the typical a/b over every pair of
    processes, which a different mix of levels moves less than the medians;
  * two two-sample tests: Mann-Whitney U (location) and Anderson-Darling
    k-sample (any difference of the distributions; scipy caps its p-value
    to 0.001-0.25);
  * slower_at: the quantiles whose whole interval lies above the band's top:
    opcost slower there beyond noise. Empty: no slower at any quantile
    within noise.
A figure <= 0 (a net figure whose subtracted overhead is larger than the
operation: a cold-cache xsave on some hosts) has no log and no ratio: such a
comparison is NOT_MEASURABLE, said in its row, and the rest is reported.
Pure functions of the two lists and a seed."""

from __future__ import annotations

import math
import random
import statistics
import warnings

QUANTILES = (0.1, 0.5, 0.9)
LEVEL_GAP = 0.05      # neighbouring process medians more than 5% apart are on different levels
BOOTSTRAP = 4000
Z95 = 1.959963984540054
NOT_MEASURABLE = "not measurable here (overhead larger than the operation)"


def measurable(*xs: float) -> bool:
    """Whether every figure has a log and can be divided by: finite and > 0."""
    return all(math.isfinite(x) and x > 0 for x in xs)


def ratio(a: float, b: float) -> float | None:
    """a / b, or None when either is not measurable (<= 0)."""
    return a / b if measurable(a, b) else None


def quantile(xs: list[float], q: float) -> float:
    """Type-7 (linear interpolation between order statistics) quantile."""
    s = sorted(xs)
    h = (len(s) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (h - lo) * (s[hi] - s[lo])


def levels(xs: list[float], gap: float = LEVEL_GAP) -> list[dict]:
    """The levels the sorted values fall on: runs of neighbours less than
    `gap` (relative) apart; each with its count, share, median, min and max."""
    s = sorted(xs)
    if not s:
        return []
    runs: list[list[float]] = [[s[0]]]
    for x in s[1:]:
        if x > runs[-1][-1] * (1 + gap):
            runs.append([x])
        else:
            runs[-1].append(x)
    return [{"n": len(r), "share": len(r) / len(s), "median": statistics.median(r), "min": r[0], "max": r[-1]}
            for r in runs]


def quantile_ratio_ci(a: list[float], b: list[float], q: float, rng: random.Random,
                      draws: int = BOOTSTRAP) -> tuple[float, float]:
    """95% percentile-bootstrap interval of quantile(a, q) / quantile(b, q)."""
    rs = sorted(quantile(rng.choices(a, k=len(a)), q) / quantile(rng.choices(b, k=len(b)), q)
                for _ in range(draws))
    return rs[int(0.025 * (draws - 1))], rs[int(math.ceil(0.975 * (draws - 1)))]


def hodges_lehmann(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """exp(Hodges-Lehmann shift of log a against log b) and its 95% Moses
    interval: (ratio, lo, hi)."""
    d = sorted(math.log(x) - math.log(y) for x in a for y in b)
    n, m = len(a), len(b)
    est = statistics.median(d)
    # Moses: the C-th smallest and largest pairwise differences, C from the
    # Mann-Whitney U distribution's normal approximation
    c = int(math.floor(n * m / 2 - Z95 * math.sqrt(n * m * (n + m + 1) / 12)))
    c = max(c, 1)
    lo, hi = d[c - 1], d[len(d) - c]
    return math.exp(est), math.exp(lo), math.exp(hi)


def tests(a: list[float], b: list[float]) -> dict:
    """Mann-Whitney U (two-sided) and Anderson-Darling k-sample p-values."""
    from scipy import stats   # scipy is an opcost dependency; imported when used

    out = {"p_mannwhitney": float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # "p-value capped/floored": said in the docstring
        try:
            out["p_anderson"] = float(stats.anderson_ksamp([a, b]).pvalue)
        except ValueError:   # every value the same
            out["p_anderson"] = 1.0
    return out


def compare(a: list[float], b: list[float], hi: float, seed: int) -> dict:
    """a (opcost) against b (reference) as distributions; hi: the band's top,
    above which a quantile whose whole interval lies is 'slower'."""
    if not measurable(*a, *b):
        return {"opcost_sorted_ns": sorted(a), "ref_sorted_ns": sorted(b), "opcost_levels": levels(a),
                "ref_levels": levels(b), "not_measurable": NOT_MEASURABLE, "slower_at": []}
    rng = random.Random(seed)
    qs = []
    for q in QUANTILES:
        qa, qb = quantile(a, q), quantile(b, q)
        lo_ci, hi_ci = quantile_ratio_ci(a, b, q, rng)
        qs.append({"q": q, "opcost_ns": qa, "ref_ns": qb, "ratio": qa / qb, "ci95": [lo_ci, hi_ci]})
    hl, hl_lo, hl_hi = hodges_lehmann(a, b)
    return {
        "opcost_sorted_ns": sorted(a), "ref_sorted_ns": sorted(b),
        "opcost_levels": levels(a), "ref_levels": levels(b),
        "quantiles": qs, "hl_ratio": hl, "hl_ci95": [hl_lo, hl_hi], **tests(a, b),
        "slower_at": [x["q"] for x in qs if x["ci95"][0] > hi],
    }


def fmt_levels(lv: list[dict], unit: float = 1.0) -> str:
    """'7@156 3@180 2@220': processes at each level's median."""
    return " ".join(f"{x['n']}@{x['median'] / unit:.4g}" for x in lv)
