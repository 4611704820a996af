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
from . import abtest, replicates

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
    labels ("sigma", in log units: about the CV), with how it was estimated:
    the larger of a robust estimate (pairs of processes) and the pooled
    standard deviation, so that processes landing on two levels (bimodal)
    count. Labels of one process carry no within-label information; when no
    label has two, the spread of successive label medians stands in (it
    includes any real step, so it is conservative: larger)."""
    logs = [np.log(g) for g in groups]
    # Every pair of processes of one label: x_i - x_j ~ N(0, 2 sigma^2), so
    # sigma = 1.4826 * median|x_i - x_j| / sqrt(2). Pairs rather than
    # residuals from the label's mean: one wild process among three would
    # drag its label's mean and every residual with it. But on bimodal
    # processes (70/30 on two levels) most pairs are of one level and the
    # pairs read the within-level spread only (0.9% for a true 10.4%): a
    # trimmed SD sees both levels (trimmed_sd: a level holds far more than
    # the 10% it leaves out, a wild process far less), and sigma is the
    # larger of the two.
    res = np.concatenate([np.abs(lg[:, None] - lg[None, :])[np.triu_indices(lg.size, 1)] / math.sqrt(2)
                          for lg in logs if lg.size > 1] or [np.empty(0)])
    if res.size >= 2:
        robust = float(abtest.MAD_SCALE * np.median(np.abs(res)))
        multi = [lg for lg in logs if lg.size > 1]
        sd = trimmed_sd(multi)
        sigma = max(robust, sd)
        how = (f"within-label spread pooled over {len(multi)} label(s), the larger of the robust "
               f"({robust * 100:.2f}%) and the trimmed standard deviation ({sd * 100:.2f}%)")
    else:
        meds = np.array([np.median(lg) for lg in logs])
        d = np.diff(meds)
        sigma = float(abtest.MAD_SCALE * np.median(np.abs(d)) / math.sqrt(2)) if d.size else 0.0
        how = "successive label medians (no label has 2 processes)"
    return {"sigma": max(sigma, MIN_SIGMA), "sigma_measured": sigma, "method": how}


# trimmed_sd leaves out this share of the largest residuals, and divides by
# the SD of a standard normal cut at the same two-sided quantile (0.789 for
# 10%: E[Z^2 | |Z| < 1.645] = 1 - 2 q phi(q) / 0.9).
TRIM = 0.10
_Q = 1.6448536269514722   # the standard normal's 0.95 quantile
_TRIM_CONSISTENCY = math.sqrt(1 - 2 * _Q * math.exp(-_Q * _Q / 2) / math.sqrt(2 * math.pi) / (1 - TRIM))


def trimmed_sd(logs: list[np.ndarray]) -> float:
    """The pooled within-label SD of log-medians with the TRIM share of the
    largest residuals (from each label's mean, pooled) left out, consistent
    for normal noise: it sees two levels that each hold a real share of the
    processes, and not one wild process among many."""
    res = np.concatenate([(lg - lg.mean()) * math.sqrt(lg.size / (lg.size - 1)) for lg in logs if lg.size > 1])
    keep = np.sort(np.abs(res))[:max(1, int(math.ceil(res.size * (1 - TRIM))))]
    return float(math.sqrt(np.mean(keep ** 2)) / _TRIM_CONSISTENCY)


def run_noise(runs: list[np.ndarray]) -> dict:
    """The run-to-run spread of the runs' log figures (a series of stored
    runs): pooled within labels that have 2+ runs (their SD), else from
    successive labels' figures (robust: the MAD of successive differences,
    which a real step moves little)."""
    logs = [np.log(r) for r in runs]
    multi = [lg for lg in logs if lg.size > 1]
    if multi:
        dof = sum(lg.size - 1 for lg in multi)
        sigma = math.sqrt(sum(float(np.sum((lg - lg.mean()) ** 2)) for lg in multi) / dof)
        how = f"run-to-run spread within {len(multi)} label(s) of 2+ runs (SD of the runs' log figures)"
    else:
        d = np.diff(np.array([float(lg[0]) for lg in logs]))
        sigma = float(abtest.MAD_SCALE * np.median(np.abs(d)) / math.sqrt(2)) if d.size else 0.0
        how = "run-to-run spread from successive labels' run figures (one run a label; robust)"
    return {"sigma": max(sigma, MIN_SIGMA), "sigma_measured": sigma, "method": how, "unit": "run"}


# series --run: label permutations within rounds that calibrate the penalty
PERMUTATIONS = 1000
PERMUTATION_LEVEL = 0.95


def _max_split(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row (a permutation), the largest drop of the l2 cost that one
    split at a label boundary makes: n1 n2 / n (m1 - m2)^2."""
    c1 = np.cumsum(counts)[:-1].astype(float)
    s1 = np.cumsum(sums, axis=-1)[..., :-1]
    n, tot = float(counts.sum()), sums.sum(axis=-1, keepdims=True)
    c2 = n - c1
    ok = (c1 > 0) & (c2 > 0)
    red = np.where(ok, (s1 / np.where(ok, c1, 1) - (tot - s1) / np.where(ok, c2, 1)) ** 2 * c1 * c2 / n, 0.0)
    return red.max(axis=-1)


def permutation_penalty(groups: list[np.ndarray], rounds: list[list[int]], *, permutations: int = PERMUTATIONS,
                        level: float = PERMUTATION_LEVEL, seed: int = BOOTSTRAP_SEED) -> dict | None:
    """The penalty of an interleaved series (`series --run`) calibrated by
    permuting labels: under no change the labels of one round are
    exchangeable (each round ran every label once, in a random order), so
    the processes of each round are shuffled among its labels, `permutations`
    times (seeded), and the `level` quantile of the largest one-split drop
    of the l2 cost is the penalty: on a flat series one split beats it with
    chance 1 - level, whatever the noise's shape or the drift between rounds
    (which the shuffling within rounds keeps). candidates() takes the larger
    of it and the noise's penalty: the noise's alone let through 2 false
    change points in 300 flat bimodal series with drift, the permutation's
    alone 14 (tests/test_series.py). Also the permutation p of the observed
    largest drop. None when no round has two labels."""
    ys = [np.log(g) for g in groups]
    if len(rounds) != len(ys) or any(len(r) != y.size for r, y in zip(rounds, ys)):
        raise ValueError("rounds: one round number per process of each label")
    slots: dict[int, list[tuple[int, float]]] = {}
    for i, (rs, y) in enumerate(zip(rounds, ys)):
        for r, v in zip(rs, y):
            slots.setdefault(int(r), []).append((i, float(v)))
    if not any(len({i for i, _ in sl}) > 1 for sl in slots.values()):
        return None
    counts = np.array([y.size for y in ys])
    rng = np.random.default_rng(seed)
    sums = np.zeros((permutations, len(ys)))
    for sl in slots.values():
        lab = np.array([i for i, _ in sl])
        vals = np.array([v for _, v in sl])
        # each permutation deals this round's values to its slots in a new order
        perm = vals[np.argsort(rng.random((permutations, vals.size)), axis=1)]
        for k, i in enumerate(lab):
            sums[:, i] += perm[:, k]
    null = _max_split(sums, counts)
    observed = float(_max_split(np.array([y.sum() for y in ys])[None, :], counts)[0])
    return {"penalty": float(np.quantile(null, level)), "level": level, "permutations": permutations,
            "p_any_change": float((1 + np.sum(null >= observed)) / (1 + permutations)),
            "method": f"the {level:.0%} quantile of the largest one-split drop of the cost over {permutations} "
                      "permutations of the labels within rounds (seeded)"}


def candidates(groups: list[np.ndarray], sigma: float, factor: float = PENALTY_FACTOR,
               penalty: float | None = None) -> dict:
    """Candidate change points of the log-medians: label indices where a new
    segment begins (1 .. len(groups)-1), from ruptures' PELT ("l2"); the
    penalty factor x sigma^2 x log(n), or `penalty` where that is larger."""
    import ruptures   # ~0.1-0.4 s on top of scipy: only when change points are searched

    counts = np.array([g.size for g in groups])
    y = np.log(np.concatenate(groups)).reshape(-1, 1)
    n = y.shape[0]
    pen = factor * sigma * sigma * math.log(max(n, 2))
    if penalty is not None:   # a calibrated floor: never below the noise's own penalty
        pen = max(pen, float(penalty))
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
          resamples: int, seed: int, runs: list | None = None) -> dict:
    if runs is not None:
        # the run as the unit: the runs of the labels on each side are the sample
        ra = [r for lb in runs[left[0]:left[1]] for r in lb]
        rb = [r for lb in runs[right[0]:right[1]] for r in lb]
        if not replicates.replicated(len(ra), len(rb)):
            ratio = float(np.exp(np.mean(np.log([replicates.run_figure(r) for r in rb]))
                                 - np.mean(np.log([replicates.run_figure(r) for r in ra]))))
            c = {"ratio": ratio, "change": ratio - 1, "ci95_ratio": None, "p_value": 1.0, "delta": float(delta),
                 "unit": replicates.UNIT, "n_a": len(ra), "n_b": len(rb), "one_run": True}
        else:
            c = replicates.compare_runs(ra, rb, delta=delta)
        return dict(c, index=j, left=list(left), right=list(right))
    a, b = _pool(groups, *left), _pool(groups, *right)
    c = abtest.compare_arms(a, b, delta=delta, resamples=min(resamples, _resamples(max(a.size, b.size), resamples)),
                             seed=seed)
    return dict(c, index=j, left=list(left), right=list(right))


def confirm(groups: list[np.ndarray], found: list[int], *, delta: float = abtest.DELTA,
            alpha: float = abtest.ALPHA, resamples: int = BOOTSTRAP_RESAMPLES,
            seed: int = BOOTSTRAP_SEED, runs: list | None = None) -> tuple[list[dict], list[dict]]:
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
        tests = [_test(groups, j, segs[k], segs[k + 1], delta=delta, resamples=quick, seed=seed, runs=runs)
                 for k, j in enumerate(cps)]
        lone = [t for t in tests if t.get("one_run")]
        if lone:
            worst = lone[0]
            rejected.append(dict(worst, verdict=None, p_adjusted=1.0,
                                 why="one run on a side: no run-to-run spread to test it with; "
                                     "measure that label again (2+ runs) or interleaved with its neighbours"))
            cps.remove(worst["index"])
            continue
        small = [t for t in tests if abs(math.log(t["ratio"])) < math.log1p(delta)]
        if small:
            worst = min(small, key=lambda t: abs(math.log(t["ratio"])))
            rejected.append(dict(worst, why=f"step below delta ({delta:.1%})"))
            cps.remove(worst["index"])
            continue
        decided = replicates.decide(tests, alpha=alpha) if runs is not None else abtest.decide(tests, alpha=alpha)
        bad = [t for t in decided if t["verdict"] not in CONFIRMING]
        if not bad:
            break
        worst = max(bad, key=lambda t: (t["p_adjusted"], -abs(math.log(t["ratio"]))))
        rejected.append(dict(worst, why=f"not confirmed: {worst['verdict']} between its segments"))
        cps.remove(worst["index"])

    def full(t: dict) -> dict:
        if runs is not None:
            return t
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
            seed: int = BOOTSTRAP_SEED, table: bool = True, runs: list | None = None,
            rounds: list | None = None) -> dict:
    """The whole analysis of one series: {"labels" (labels_table, unless
    table=False), "noise", "candidates", "change_points" (confirmed, in
    series order), "rejected", "delta", "alpha"}. Each change point also
    carries "neighbours": compare_arms between the two labels either side
    of it (the label before and the label where the new level begins)."""
    groups = _groups(labels)
    if len(groups) < MIN_LABELS:
        raise ValueError(f"a series needs at least {MIN_LABELS} labels, not {len(groups)}")
    if runs is not None:
        # labels from stored runs: the run is the unit (replicates.py); the
        # candidates come from the runs' figures, the penalty from their spread
        if len(runs) != len(groups) or any(not lb for lb in runs):
            raise ValueError("runs: per label, the process medians of each of its runs")
        figures = [np.array([replicates.run_figure(r) for r in lb]) for lb in runs]
        nz = run_noise(figures)
        # runs of a flat series are exchangeable: permuting them over the
        # labels calibrates the penalty (a floor under the noise's), which
        # the selection of the largest step on the same data needs
        perm = permutation_penalty(figures, [[0] * f.size for f in figures], seed=seed)
        cand = candidates(figures, nz["sigma"], factor, penalty=None if perm is None else perm["penalty"])
        cand["method"] += " (one point a run: the run's median of process medians)"
        if perm is not None:
            cand["calibration"] = dict(perm, method=perm["method"].replace("within rounds", "over the runs"))
    else:
        nz = noise(groups)
        # an interleaved series with its rounds: the penalty calibrated by permuting labels within rounds
        perm = permutation_penalty(groups, rounds, seed=seed) if rounds is not None else None
        cand = candidates(groups, nz["sigma"], factor, penalty=None if perm is None else perm["penalty"])
        if perm is not None:
            cand["calibration"] = perm
    kept, rejected = confirm(groups, cand["indices"], delta=delta, alpha=alpha, resamples=resamples, seed=seed,
                             runs=runs)
    kept = sorted(kept, key=lambda t: t["index"])
    for t in kept:
        j = t["index"]
        a, b = groups[j - 1], groups[j]
        if runs is not None:   # the two labels' runs, when each has 2+
            ok = replicates.replicated(len(runs[j - 1]), len(runs[j]))
            t["neighbours"] = (replicates.decide([replicates.compare_runs(runs[j - 1], runs[j], delta=delta)],
                                                 alpha=alpha)[0] if ok else None)
            continue
        t["neighbours"] = (abtest.decide([abtest.compare_arms(a, b, delta=delta, resamples=resamples, seed=seed)],
                                          alpha=alpha)[0] if a.size > 1 and b.size > 1 else None)
    return {"labels": labels_table(groups, resamples, seed) if table else None, "noise": nz,
            "candidates": cand, "change_points": kept,
            "rejected": sorted(rejected, key=lambda t: t["index"]), "delta": float(delta), "alpha": float(alpha)}
