"""Where in an ordered series of labels (commits, kernels, parameter values)
did the cost change: pure functions over per-process medians, like
abtest.py, whose statistics confirm every step found here.

Input: the labels in series order, each with the per-process medians (ns per
op, > 0) of its processes. Method (docs/statistics.md, "Series"):

1. work on log per-process medians in series order (a step is a ratio);
2. the noise: the pooled within-label spread of the log-medians (robust:
   from the median absolute difference of every pair of processes of one
   label, pooled over the labels);
3. candidates: ruptures' PELT with the "l2" cost (change in mean) and the
   penalty PENALTY_FACTOR x sigma^2 x log(n): a BIC-type penalty in the
   units of the cost, set from the measured noise, so a split must explain
   more than noise would; a candidate lands on a label boundary (segments
   are at least one label long, breakpoints snapped to the nearest
   boundary);
4. each candidate is compared, with abtest.compare_arms, between the
   segments on its two sides (bounded by its neighbouring candidates):
   steps smaller than delta are dropped, the p-values are Holm-adjusted
   over the candidates and the verdict is compare's (slower/faster
   confirm it); the weakest unconfirmed candidate is removed and the rest
   re-tested on the merged segments, until every one left is confirmed.

No I/O, no printing.
"""

from __future__ import annotations

import math

from .stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from . import abtest

import numpy as np  # noqa: E402

MIN_LABELS = 3
# pen = PENALTY_FACTOR * sigma^2 * log(n). 2 log n is the BIC of one more
# mean; 3 keeps the candidates few enough on flat series that the
# confirmation's Holm adjustment does not have to carry them all
# (validation/series/run.py --simulate measures both).
PENALTY_FACTOR = 3.0
# A floor on the noise: identical medians (replayed or synthetic data) would
# make the penalty 0 and every boundary a candidate.
MIN_SIGMA = 1e-4
CONFIRMING = ("slower", "faster")


def _groups(labels: list) -> list[np.ndarray]:
    out = []
    for i, xs in enumerate(labels):
        a = np.asarray(xs, dtype=float).ravel()
        if a.size == 0:
            raise ValueError(f"label {i} has no process medians")
        if not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ValueError(f"label {i}: per-process medians must be finite and > 0")
        out.append(a)
    return out


def noise(groups: list[np.ndarray]) -> dict:
    """The per-process spread of log-medians within a label, pooled over the
    labels ("sigma", in log units: about the CV), with how it was estimated.
    Labels of one process carry no within-label information; when no label
    has two, the spread of successive label medians stands in (it includes
    any real step, so it is conservative: larger)."""
    logs = [np.log(g) for g in groups]
    # Every pair of processes of one label: x_i - x_j ~ N(0, 2 sigma^2), so
    # sigma = 1.4826 * median|x_i - x_j| / sqrt(2). Pairs rather than
    # residuals from the label's mean: one wild process among three would
    # pull the mean and every residual of its label with it.
    res = np.concatenate([np.abs(lg[:, None] - lg[None, :])[np.triu_indices(lg.size, 1)] / math.sqrt(2)
                          for lg in logs if lg.size > 1] or [np.empty(0)])
    if res.size >= 2:
        sigma = float(abtest.MAD_SCALE * np.median(np.abs(res)))
        how = f"within-label spread pooled over {sum(lg.size > 1 for lg in logs)} label(s)"
    else:
        meds = np.array([np.median(lg) for lg in logs])
        d = np.diff(meds)
        sigma = float(abtest.MAD_SCALE * np.median(np.abs(d)) / math.sqrt(2)) if d.size else 0.0
        how = "successive label medians (no label has 2 processes)"
    return {"sigma": max(sigma, MIN_SIGMA), "sigma_measured": sigma, "method": how}


def candidates(groups: list[np.ndarray], sigma: float, factor: float = PENALTY_FACTOR) -> dict:
    """Candidate change points of the log-medians: label indices where a new
    segment begins (1 .. len(groups)-1), from ruptures' PELT ("l2")."""
    import ruptures

    counts = np.array([g.size for g in groups])
    y = np.log(np.concatenate(groups)).reshape(-1, 1)
    n = y.shape[0]
    pen = factor * sigma * sigma * math.log(max(n, 2))
    smallest = int(counts.min())
    # Equal labels: breakpoints only at label boundaries (ruptures' jump).
    # Unequal: every point, snapped to the nearest boundary below.
    equal = bool(np.all(counts == smallest))
    algo = ruptures.Pelt(model="l2", min_size=max(1, smallest), jump=smallest if equal else 1).fit(y)
    bkps = [b for b in algo.predict(pen=pen) if b < n]
    bounds = np.cumsum(counts)[:-1]            # point index where label i+1 starts
    found = sorted({int(np.argmin(np.abs(bounds - b))) + 1 for b in bkps})
    return {"indices": found, "penalty": pen, "points": int(n), "method": "ruptures PELT, l2 cost on log-medians"}


def _segments(groups: list[np.ndarray], cps: list[int]) -> list[tuple[int, int]]:
    edges = [0, *cps, len(groups)]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def _pool(groups: list[np.ndarray], lo: int, hi: int) -> np.ndarray:
    return np.concatenate(groups[lo:hi])


# While candidates are being decided, the bootstrap runs short: a verdict
# that confirms (slower/faster) rests on the p-value and the ratio, never on
# the CI. The CIs reported are drawn again at the end with the full count,
# capped at BOOTSTRAP_BUDGET values per arm (10,000 resamples up to 200
# processes a segment, never under 2,000).
DECIDING_RESAMPLES = 200
BOOTSTRAP_BUDGET = 2_000_000
MIN_RESAMPLES = 2000


def _resamples(n: int, full: int) -> int:
    return max(min(full, MIN_RESAMPLES), min(full, BOOTSTRAP_BUDGET // max(n, 1)))


def _test(groups: list[np.ndarray], j: int, left: tuple[int, int], right: tuple[int, int], *, delta: float,
          resamples: int, seed: int) -> dict:
    a, b = _pool(groups, *left), _pool(groups, *right)
    c = abtest.compare_arms(a, b, delta=delta, resamples=min(resamples, _resamples(max(a.size, b.size), resamples)),
                             seed=seed)
    return dict(c, index=j, left=list(left), right=list(right))


def confirm(groups: list[np.ndarray], found: list[int], *, delta: float = abtest.DELTA,
            alpha: float = abtest.ALPHA, resamples: int = BOOTSTRAP_RESAMPLES,
            seed: int = BOOTSTRAP_SEED) -> tuple[list[dict], list[dict]]:
    """Each candidate tested between the segments on its two sides: returns
    (confirmed, rejected), each a list of abtest.decide() entries with
    "index" (the label where the new level begins), "left" and "right"
    ([first, end) labels of the segments) and, for a rejected one, "why".
    Steps below `delta` go first (smallest first), then the unconfirmed one
    with the largest adjusted p, each time re-testing the rest on the merged
    segments."""
    cps = list(found)
    rejected: list[dict] = []
    quick = min(resamples, DECIDING_RESAMPLES)
    while True:
        if not cps:
            decided: list[dict] = []
            break
        segs = _segments(groups, cps)
        tests = [_test(groups, j, segs[k], segs[k + 1], delta=delta, resamples=quick, seed=seed)
                 for k, j in enumerate(cps)]
        small = [t for t in tests if abs(math.log(t["ratio"])) < math.log1p(delta)]
        if small:
            worst = min(small, key=lambda t: abs(math.log(t["ratio"])))
            rejected.append(dict(worst, why=f"step below delta ({delta:.1%})"))
            cps.remove(worst["index"])
            continue
        decided = abtest.decide(tests, alpha=alpha)
        bad = [t for t in decided if t["verdict"] not in CONFIRMING]
        if not bad:
            break
        worst = max(bad, key=lambda t: (t["p_adjusted"], -abs(math.log(t["ratio"]))))
        rejected.append(dict(worst, why=f"not confirmed: {worst['verdict']} between its segments"))
        cps.remove(worst["index"])

    def full(t: dict) -> dict:
        again = _test(groups, t["index"], tuple(t["left"]), tuple(t["right"]), delta=delta, resamples=resamples,
                      seed=seed)
        out = dict(t, ci95_ratio=again["ci95_ratio"])
        if "p_adjusted" in t:
            out["verdict"] = abtest.verdict(t["ratio"], out["ci95_ratio"], t["p_adjusted"], t["delta"], alpha)
        return out

    return [full(t) for t in decided], [full(t) for t in rejected]


def _boot_medians(g: np.ndarray, rng, resamples: int) -> np.ndarray:
    return np.median(g[rng.integers(0, g.size, size=(resamples, g.size))], axis=1)


def labels_table(groups: list[np.ndarray], resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> list[dict]:
    """Per label: processes, median with 95% bootstrap CI, and the change
    (ratio - 1, with the CI of the ratio) against the previous label and
    against the first. abtest.ratio_ci's method (percentile bootstrap of
    the ratio of medians, each label resampled independently), with each
    label's bootstrap medians drawn once and used for its own CI and both
    its ratios: 100 labels cost 100 bootstraps, not 300."""
    rng = np.random.default_rng(seed)
    lo_q, hi_q = 2.5, 97.5
    boots = [_boot_medians(g, rng, resamples) if g.size > 1 else None for g in groups]
    out = []
    for i, g in enumerate(groups):
        med = float(np.median(g))
        b = boots[i]
        row: dict = {"n_processes": int(g.size), "median_ns": med,
                     "ci95_ns": None if b is None else [float(x) for x in np.percentile(b, [lo_q, hi_q])]}
        for name, ref in (("vs_previous", i - 1), ("vs_first", 0)):
            if i == 0:
                row[name] = None
                continue
            r = med / float(np.median(groups[ref]))
            ci = None
            if b is not None and boots[ref] is not None:
                ci = [float(x) - 1 for x in np.percentile(b / boots[ref], [lo_q, hi_q])]
            row[name] = {"change": r - 1, "ci95_change": ci}
        out.append(row)
    return out


def analyse(labels: list, *, delta: float = abtest.DELTA, alpha: float = abtest.ALPHA,
            factor: float = PENALTY_FACTOR, resamples: int = BOOTSTRAP_RESAMPLES,
            seed: int = BOOTSTRAP_SEED, table: bool = True) -> dict:
    """The whole analysis of one series: {"labels" (labels_table, unless
    table=False), "noise", "candidates", "change_points" (confirmed, in
    series order), "rejected", "delta", "alpha"}. Each change point also
    carries "neighbours": compare_arms between the two labels either side
    of it (the label before and the label where the new level begins)."""
    groups = _groups(labels)
    if len(groups) < MIN_LABELS:
        raise ValueError(f"a series needs at least {MIN_LABELS} labels, not {len(groups)}")
    nz = noise(groups)
    cand = candidates(groups, nz["sigma"], factor)
    kept, rejected = confirm(groups, cand["indices"], delta=delta, alpha=alpha, resamples=resamples, seed=seed)
    kept = sorted(kept, key=lambda t: t["index"])
    for t in kept:
        j = t["index"]
        a, b = groups[j - 1], groups[j]
        t["neighbours"] = (abtest.decide([abtest.compare_arms(a, b, delta=delta, resamples=resamples, seed=seed)],
                                          alpha=alpha)[0] if a.size > 1 and b.size > 1 else None)
    return {"labels": labels_table(groups, resamples, seed) if table else None, "noise": nz,
            "candidates": cand, "change_points": kept,
            "rejected": sorted(rejected, key=lambda t: t["index"]), "delta": float(delta), "alpha": float(alpha)}
