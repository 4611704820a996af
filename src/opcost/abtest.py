"""A/B comparison of two variants: pure functions over per-process medians.

This module owns the "real or noise" decision of docs/statistics.md. The unit of
analysis is the per-process median (one float per probe process, ns per op)
of arm A and arm B of one benchmark; batches are never pooled here.

- estimate and test (issue 25, test_and_estimate): with 6 or more complete
  rounds of an interleaved run, the Hodges-Lehmann estimate of the
  per-round log ratios and its exact signed-rank interval; with 10 or more
  (and, in the sequential design, a floor the look's level can use) the
  paired min-p test (signed-rank and rank sum, swapped within rounds);
  otherwise the Hodges-Lehmann shift of log times with Moses' interval,
  tested by min(p_MWU, p_KS) calibrated by permutation (twice the smaller
  with ties). The ratio of medians B/A with its
  percentile-bootstrap CI stays beside it (the JSON contract);
- threshold: delta, default 2%, fixed (aa_noise is information only);
- verdicts (verdict(), the fixed design): same/negligible only with the
  whole CI inside +/- delta, slower/faster significant with the whole CI
  clearing delta; the sequential design's graded_verdict (issue 37):
  slower/faster significant at 1% with the estimate beyond delta;
- many benchmarks: Holm-Bonferroni across the benchmarks of one report, and
  the geometric mean of the ratios;
- an inconclusive one says how many processes per arm would likely decide
  it, rounded up to the declared schedule (10, 20, 40).

No I/O, no printing; callers turn the dicts into opcost.comparison/1.
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import combinations

# Imported first: it keeps BLAS thread pools off the CPUs being measured.
from .model import Entry
from .stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from .protocol import PAIRED_EXACT_MAX, PAIRED_MIN, PAIRED_SAMPLES, SCHEDULE

import numpy as np  # noqa: E402
from scipy import stats as sps  # noqa: E402

ALPHA = 0.05
DELTA = 0.02
MIN_PROCESSES = 6
MAD_SCALE = 1.4826
# The sampling SD of a median of n normal values is sigma * sqrt(pi / (2n)):
# the median is pi/2 times less efficient than the mean.
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
# Mann-Whitney's asymptotic relative efficiency against the t test under
# normality is 3/pi, so it needs pi/3 times the t test's sample size.
MWU_ARE_FACTOR = math.pi / 3
# The exact Mann-Whitney null distribution is cheap well beyond the largest
# declared stage (40 per arm); past this, the normal approximation is exact enough.
MWU_EXACT_MAX = 100
VERDICTS = ("faster", "slower", "same", "negligible", "inconclusive")


def _arm(xs, name: str) -> np.ndarray:
    a = np.asarray(xs, dtype=float).ravel()
    if a.size == 0:
        raise ValueError(f"arm {name} has no process medians")
    # A per-op time that is not a positive number is a broken measurement,
    # and a ratio of medians over it means nothing.
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"arm {name}: per-process medians must be finite and > 0")
    return a


def ratio_ci(a, b, conf: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
             seed: int = BOOTSTRAP_SEED) -> tuple[float, list[float] | None]:
    """Ratio of medians B/A and its percentile-bootstrap CI.

    Each arm is resampled with replacement independently (the arms are two
    independent sets of processes; pairing round by round would assume the
    interleaving order matters, which it is randomised precisely not to).
    The CI is None with fewer than 2 processes in either arm: a bootstrap
    of one value is a point, which would read as certainty.
    """
    a, b = _arm(a, "A"), _arm(b, "B")
    ratio = float(np.median(b) / np.median(a))
    if a.size < 2 or b.size < 2:
        return ratio, None
    ma, mb = resampled_medians(a, b, resamples, seed)
    lo, hi = np.percentile(mb / ma, [(1 - conf) / 2 * 100, (1 + conf) / 2 * 100])
    return ratio, [float(lo), float(hi)]


def resampled_medians(a: np.ndarray, b: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap both ratio CIs share: each arm's processes resampled
    with replacement, independently, `resamples` times; the median of every
    resample of A and of B."""
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, a.size, size=(resamples, a.size))
    ib = rng.integers(0, b.size, size=(resamples, b.size))
    return np.median(a[ia], axis=1), np.median(b[ib], axis=1)


def counter_ratio(a, b, conf: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                  seed: int = BOOTSTRAP_SEED) -> dict:
    """One counter per op in arms A and B (one value per process: that
    process's median batch): the medians, the ratio B/A and the difference
    B-A, each with a percentile-bootstrap CI over processes, from the same
    resamples as the time ratio's (ratio_ci).

    A count may be 0 (no context switch in a syscall): the difference is
    always defined; the ratio is None when A's median is 0, and a CI bound
    is None (unbounded) where resamples of A have a median of 0. "differs":
    the CI of the ratio (of the difference, when there is no ratio)
    excludes 1 (0): at 95%, without adjustment across counters."""
    a = np.asarray(a, dtype=float).ravel()
    b = np.asarray(b, dtype=float).ravel()
    for arm, x in (("A", a), ("B", b)):
        if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x < 0):
            raise ValueError(f"arm {arm}: per-process counts must be finite and >= 0")
    med_a, med_b = float(np.median(a)), float(np.median(b))
    out: dict = {"a": med_a, "b": med_b, "n_a": int(a.size), "n_b": int(b.size),
                 "ratio": med_b / med_a if med_a > 0 else None, "ci95_ratio": None,
                 "difference": med_b - med_a, "ci95_difference": None}
    if med_a == 0:
        out["note"] = "zero in both arms" if med_b == 0 else "A counts 0 per op: no ratio (see the difference)"
    if a.size >= 2 and b.size >= 2:
        ma, mb = resampled_medians(a, b, resamples, seed)
        q = [(1 - conf) / 2 * 100, (1 + conf) / 2 * 100]
        lo, hi = np.percentile(mb - ma, q)
        out["ci95_difference"] = [float(lo), float(hi)]
        if med_a > 0:
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(ma > 0, mb / np.where(ma > 0, ma, 1.0), np.inf)
                bounds = np.percentile(r, q)
            out["ci95_ratio"] = [float(x) if np.isfinite(x) else None for x in bounds]
    ci, one = (out["ci95_ratio"], 1.0) if out["ratio"] is not None else (out["ci95_difference"], 0.0)
    if ci is not None:
        out["differs"] = bool((ci[0] is not None and ci[0] > one) or (ci[1] is not None and ci[1] < one))
    return out


def p_value(a, b) -> dict:
    """Two-sided Mann-Whitney U and two-sample Kolmogorov-Smirnov.

    Mann-Whitney: the exact null distribution when there are no ties (the
    normal approximation is poor at 5-10 processes per arm, where opcost
    lives); with ties the exact distribution does not apply, so the normal
    approximation with tie and continuity correction. KS: scipy's exact
    two-sample distribution (conservative under ties).

    Returns {"mannwhitney", "ks", "p", "mwu_method"} and a "note" when the
    input is degenerate (p = 1.0). "p" is combined_p: twice the smaller of
    the two, capped at 1.
    """
    a, b = _arm(a, "A"), _arm(b, "B")
    if a.size < 2 or b.size < 2:
        return {"mannwhitney": 1.0, "ks": 1.0, "p": 1.0, "mwu_method": None,
                "note": f"too few processes to test ({a.size} vs {b.size}; need at least 2 per arm)"}
    both = np.concatenate([a, b])
    if np.ptp(both) == 0:
        # Every value equal: no test statistic can tell the arms apart, and
        # scipy's asymptotic variance would be 0 (p = nan).
        return {"mannwhitney": 1.0, "ks": 1.0, "p": 1.0, "mwu_method": None,
                "note": "all process medians are identical"}
    ties = np.unique(both).size < both.size
    method = "asymptotic" if ties or max(a.size, b.size) > MWU_EXACT_MAX else "exact"
    p1 = float(sps.mannwhitneyu(a, b, alternative="two-sided", method=method,
                                use_continuity=True).pvalue)
    p2 = ks_p(a, b)
    p1, p2 = min(p1, 1.0), min(p2, 1.0)
    return {"mannwhitney": p1, "ks": p2, "p": combined_p(p1, p2), "mwu_method": method}


def ks_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided two-sample KS p (scipy, method auto: exact at opcost's
    sizes). Two untied samples always differ by at least 1/max(n_a, n_b) in
    their ECDFs (the smallest value belongs to one of them), so a statistic no
    larger has p = 1 exactly: scipy's exact routine computes that 1 with a
    rounding error above 1, rejects it and falls back to the asymptotic
    distribution with a RuntimeWarning ("Exact calculation unsuccessful"),
    which two near-identical arms (an A/A run, tied process medians) hit."""
    both = np.sort(np.concatenate([a, b]))
    d = float(np.max(np.abs(np.searchsorted(np.sort(a), both, side="right") / a.size
                            - np.searchsorted(np.sort(b), both, side="right") / b.size)))
    if d <= 1.0 / max(a.size, b.size) + 1e-12:
        return 1.0
    return float(sps.ks_2samp(a, b, alternative="two-sided", method="auto").pvalue)


def combined_p(p_mannwhitney: float, p_ks: float) -> float:
    """The one p of the two tests, for the fixed and the sequential design
    alike: twice the smaller, capped at 1 (Bonferroni for taking the smaller
    of two). The plain smaller p is not a p-value: the two tests disagree
    often enough that, on null data, the smaller falls under 0.05 in about
    5.8% of comparisons at 20 and 40 processes per arm
    (validation/compare/fixed_p.py). Twice it is valid whatever the
    dependence between the two tests (P(min < a/2) <= P(p1 < a/2) + P(p2 <
    a/2) <= a); it is conservative (about 3% at 0.05), the price of not
    calibrating the minimum by permutation for every comparison."""
    return min(1.0, 2 * min(p_mannwhitney, p_ks))


# --- the estimate, the test and the interval the verdict uses (issue 25) ---
#
# Paired rounds: an interleaved run (ab, variants) runs one A and one B process
# in every round, in a random order; what drifts between rounds drifts for
# both. With every round complete (one A and one B each) and at least
# PAIRED_MIN rounds, the unit is the round, and the test is a within-round
# permutation test (issue 25): under "no difference" A and B of a round are
# exchangeable, so swapping them in any set of rounds (a sign vector) leaves
# the data's distribution unchanged. Two statistics are computed on every
# sign vector: Wilcoxon's signed-rank on the per-round log ratios
# log(b) - log(a), and the rank sum of B's values among all 2n values (the
# swap exchanges a round's two pooled ranks); the p is that of the smaller
# of their two p's, calibrated over the same sign vectors (min-p, Westfall &
# Young 1993), exact over all 2^n vectors up to PAIRED_EXACT_MAX rounds,
# else from PAIRED_SAMPLES seeded ones ((1 + count) / (1 + B), Phipson & Smyth
# 2010). Why both: the signed-rank gives the largest ranks to the largest
# |log ratios|, which under bimodal noise are the rounds whose A and B
# landed on different levels (noise); the rank sum compares each round's
# values within the pooled order, where a shift within a level still
# counts (paired_power.py and the audit: power 44.5% -> 85% on bimodal, 8.8%
# -> 12.5% on the A/A pool, the same on log-normal). The estimate is the
# Hodges-Lehmann estimate of the per-round log ratios (median of the Walsh
# averages) with its exact signed-rank interval (Hollander & Wolfe 1999,
# ch. 3). Below PAIRED_MIN rounds any paired test's p cannot fall under
# 2 / 2^n (0.031 at 6), so the test is the unpaired one below (chosen from
# the design, not the data; protocol.PAIRED_MIN, 10: 2/2^10 = 0.002 leaves
# room for Holm), but from PAIRED_CI_MIN (6) complete rounds the estimate and
# its interval stay paired: the unpaired interval ignores the rounds and
# covers 100% under drift (audit, drift n=6), the paired one its exact level
# (96.9% at 6 rounds: its achievable levels are 96.9% and 93.8%).
#
# Unpaired (stored runs, unequal rounds, fewer than PAIRED_MIN rounds): the
# Hodges-Lehmann shift of log B against log A (median of all pairwise
# differences) with Moses' interval (the Mann-Whitney test inverted,
# Hollander & Wolfe ch. 4), and as test min(p_MWU, p_KS) calibrated by
# permutation: its null distribution depends only on the two arm sizes
# (without ties), so it is computed once per pair of sizes (exactly, by
# enumerating the labellings, when there are at most PERM_EXACT_MAX; else
# from PERM_SAMPLES seeded random ones) and cached. Valid at the nominal
# level, without the floor of twice the smaller p (0.057 at 4 per arm).
# With ties, or beyond CALIBRATE_MAX per arm, twice the smaller p
# (combined_p), valid and conservative.
PERM_EXACT_MAX = 20_000
PERM_SAMPLES = 40_000
PERM_SEED = 25
CALIBRATE_MAX = 60
# The paired min-p test: exact over every sign vector up to
# protocol.PAIRED_EXACT_MAX rounds (2^16 = 65,536 vectors), else
# protocol.PAIRED_SAMPLES seeded ones; the paired interval from 6 rounds.
PAIRED_CI_MIN = 6
# Hodges-Lehmann needs every pairwise difference: beyond this many the
# estimate is the ratio of medians with its bootstrap CI.
HL_MAX_PAIRS = 1_000_000


def pairs_of(a, b, rounds) -> tuple[np.ndarray, np.ndarray] | None:
    """A's and B's values paired by round, when every round has exactly one
    of each (else None: unpaired). rounds: (rounds of A, rounds of B)."""
    if rounds is None:
        return None
    ra, rb = (list(r) for r in rounds)
    if len(ra) != len(a) or len(rb) != len(b) or len(set(ra)) != len(ra) or set(ra) != set(rb) \
            or len(set(rb)) != len(rb):
        return None
    ib = {r: i for i, r in enumerate(rb)}
    order = sorted(range(len(ra)), key=lambda i: ra[i])
    return (np.asarray([a[i] for i in order], dtype=float),
            np.asarray([b[ib[ra[i]]] for i in order], dtype=float))


@lru_cache(maxsize=256)
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t), t = 0..n(n+1)/2, for the signed-rank statistic of n
    untied, non-zero differences under the null (each sign a fair coin)."""
    m = n * (n + 1) // 2
    c = np.zeros(m + 1)
    c[0] = 1.0
    for k in range(1, n + 1):
        c[k:] = c[k:] + c[:-k].copy()
    return np.cumsum(c) / 2.0 ** n


@lru_cache(maxsize=256)
def _rank_sum_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u), u = 0..mn, Mann-Whitney's U of sizes m, n without ties
    (the number of partitions of u into at most m parts of size at most n)."""
    # f[j][u]: arrangements with j of the first sample: the classic recursion
    # on the largest value, built up one value at a time.
    f = np.zeros((m + 1, m * n + 1))
    f[0, 0] = 1.0
    for k in range(1, m + n + 1):
        # adding value k: it goes to A (j -> j+1, U += number of B below it = k-1-j)
        g = f.copy()          # to B: U unchanged
        for j in range(min(k, m), 0, -1):
            sh = k - 1 - (j - 1)
            if sh < 0 or sh > n:
                continue
            g[j, sh:] += f[j - 1, :f.shape[1] - sh]
        f = g
    dist = f[m] / f[m].sum()
    return np.cumsum(dist)


def _order_index(cdf: np.ndarray, conf: float) -> int:
    """The largest c with P(T <= c - 1) <= (1 - conf) / 2: the interval is
    [W_(c), W_(M + 1 - c)] (1-based order statistics); 0 when no c >= 1
    qualifies (the design is too small for this confidence)."""
    a2 = (1 - conf) / 2
    ok = np.nonzero(cdf <= a2 + 1e-12)[0]
    return int(ok[-1]) + 1 if ok.size else 0


def paired_hl(d, conf: float = 0.95) -> tuple[float, list[float] | None]:
    """Hodges-Lehmann estimate of the centre of the differences d (median of
    the Walsh averages (d_i + d_j) / 2, i <= j) and its exact signed-rank
    interval at `conf` (normal approximation beyond 60 pairs); None when n
    is too small to reach `conf`."""
    d = np.asarray(d, dtype=float)
    n = d.size
    i, j = np.triu_indices(n)
    w = np.sort((d[i] + d[j]) / 2)
    est = float(np.median(w))
    if n <= 60:
        c = _order_index(_signed_rank_cdf(n), conf)
    else:
        m = n * (n + 1) / 2
        c = int(math.floor(m / 2 - float(sps.norm.ppf(1 - (1 - conf) / 2)) * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)))
    if c < 1:
        return est, None
    return est, [float(w[c - 1]), float(w[w.size - c])]


def shift_hl(la, lb, conf: float = 0.95) -> tuple[float, list[float] | None]:
    """Hodges-Lehmann shift of lb against la (median of all pairwise
    differences lb_j - la_i) and Moses' interval at `conf`: exact
    Mann-Whitney order statistics up to 60 per arm, normal beyond."""
    la, lb = np.asarray(la, dtype=float), np.asarray(lb, dtype=float)
    m, n = la.size, lb.size
    diff = np.sort((lb[None, :] - la[:, None]).ravel())
    est = float(np.median(diff))
    if max(m, n) <= CALIBRATE_MAX:
        c = _order_index(_rank_sum_cdf(min(m, n), max(m, n)), conf)
    else:
        c = int(math.floor(m * n / 2 - float(sps.norm.ppf(1 - (1 - conf) / 2)) * math.sqrt(m * n * (m + n + 1) / 12)))
    if c < 1:
        return est, None
    return est, [float(diff[c - 1]), float(diff[diff.size - c])]


def _labellings(n_a: int, n_b: int) -> tuple[np.ndarray, bool]:
    """Boolean rows (True: the value of that rank belongs to A): every
    labelling when there are at most PERM_EXACT_MAX, else PERM_SAMPLES
    seeded random ones. Returns (rows, exact)."""

    n = n_a + n_b
    if math.comb(n, n_a) <= PERM_EXACT_MAX:
        rows = np.zeros((math.comb(n, n_a), n), dtype=bool)
        for k, idx in enumerate(combinations(range(n), n_a)):
            rows[k, list(idx)] = True
        return rows, True
    rng = np.random.default_rng(PERM_SEED)
    keys = rng.random((PERM_SAMPLES, n))
    rows = np.argsort(keys, axis=1) < n_a
    return rows, False


def _mwu_ks_stats(rows: np.ndarray, n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Per labelling: |U_A - n_a n_b / 2| and the KS distance (in units of
    1 / (n_a n_b), integers, so that equal statistics compare equal)."""
    n = n_a + n_b
    ranks = np.arange(1, n + 1)
    u = (rows * ranks).sum(axis=1) - n_a * (n_a + 1) // 2
    u2 = np.abs(2 * u - n_a * n_b)
    ca = np.cumsum(rows, axis=1, dtype=np.int32) * n_b
    cb = np.cumsum(~rows, axis=1, dtype=np.int32) * n_a
    ks = np.abs(ca - cb).max(axis=1)
    return u2, ks


def _tail(stat: np.ndarray) -> np.ndarray:
    """P(S >= s) for each row's s, over the rows (a permutation distribution)."""
    order = np.sort(stat)
    return 1.0 - np.searchsorted(order, stat, side="left") / stat.size


@lru_cache(maxsize=128)
def minp_table(n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The permutation null of min(p_MWU, p_KS) for arm sizes n_a, n_b
    (without ties): the sorted U and KS statistics (for the marginal p of
    an observation), the sorted min-p over the labellings, and whether it is
    exact (enumerated) rather than sampled."""
    rows, exact = _labellings(n_a, n_b)
    u2, ks = _mwu_ks_stats(rows, n_a, n_b)
    mp = np.minimum(_tail(u2), _tail(ks))
    return np.sort(u2), np.sort(ks), np.sort(mp), exact


def calibrated_p(a, b) -> tuple[float, float, float, str]:
    """min(p_MWU, p_KS) calibrated by permutation (minp_table): returns
    (p, p_MWU, p_KS, method) with the marginal p's of the same permutation
    distribution. The data must be untied."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n_a, n_b = a.size, b.size
    su, sk, smp, exact = minp_table(n_a, n_b)
    both = np.concatenate([a, b])
    lab = np.zeros(both.size, dtype=bool)
    lab[:n_a] = True
    row = lab[np.argsort(both, kind="stable")][None, :]
    u2, ks = _mwu_ks_stats(row, n_a, n_b)
    pu = float(1.0 - np.searchsorted(su, u2[0], side="left") / su.size)
    pk = float(1.0 - np.searchsorted(sk, ks[0], side="left") / sk.size)
    m = min(pu, pk)
    count = np.searchsorted(smp, m + 1e-12, side="right")
    if exact:
        return float(count / smp.size), pu, pk, "permutation min-p (exact)"
    # a sampled permutation p: (1 + count) / (1 + B) is valid (Phipson & Smyth 2010)
    return float((1 + count) / (1 + smp.size)), pu, pk, f"permutation min-p ({smp.size} labellings)"

def _tail_int(stat: np.ndarray) -> np.ndarray:
    """P(S >= s) for each row's s (non-negative integers), over the rows:
    _tail by counting."""
    ge = np.cumsum(np.bincount(stat)[::-1])[::-1]
    return ge[stat] / stat.size


@lru_cache(maxsize=16)
def _sign_vectors(n: int) -> tuple[np.ndarray, bool]:
    """Sign vectors (+1: the round as measured, -1: its A and B swapped),
    the identity first: all 2^n up to PAIRED_EXACT_MAX rounds, else the
    identity and PAIRED_SAMPLES seeded random ones. Returns (rows, exact)."""
    if n <= PAIRED_EXACT_MAX:
        bits = (np.arange(2 ** n, dtype=np.int64)[:, None] >> np.arange(n)) & 1
        return (1.0 - 2.0 * bits), True
    rng = np.random.default_rng(PERM_SEED)
    rows = np.vstack([np.ones((1, n)), rng.choice([-1.0, 1.0], size=(PAIRED_SAMPLES, n))])
    return rows, False


def paired_minp(la, lb) -> tuple[float, float, float, str]:
    """The within-round permutation min-p test on log times of complete
    rounds (la[i], lb[i] measured in round i): returns (p, p_signed_rank,
    p_rank_sum, method); each p counts the sign vectors at least as extreme
    as the observed one (two-sided). Ties are kept (average ranks; a zero
    log ratio has sign 0): the permutation distribution is conditional on
    the data, so the test stays exact."""
    la, lb = np.asarray(la, dtype=float), np.asarray(lb, dtype=float)
    n = la.size
    d = lb - la
    sr = sps.rankdata(np.abs(d)) * np.sign(d)
    pooled = sps.rankdata(np.concatenate([la, lb]))
    rs = pooled[n:] - pooled[:n]
    signs, exact = _sign_vectors(n)
    # Both statistics are multiples of 1/2 (average ranks): twice them are
    # integers, so each one's tail is counted (bincount), not sorted.
    t_sr = np.rint(2 * np.abs(signs @ sr)).astype(np.int64)
    t_rs = np.rint(2 * np.abs(signs @ rs)).astype(np.int64)
    p_sr, p_rs = _tail_int(t_sr), _tail_int(t_rs)
    mp = np.minimum(p_sr, p_rs)
    count = int(np.count_nonzero(mp <= mp[0] + 1e-12))
    if exact:
        return count / mp.size, float(p_sr[0]), float(p_rs[0]), "exact"
    # sampled: the identity counted once as the observed statistic (Phipson & Smyth 2010)
    return count / mp.size, float(p_sr[0]), float(p_rs[0]), f"{PAIRED_SAMPLES} sign vectors"


def p_floor(n_a: int, n_b: int, paired: bool = False) -> float:
    """The smallest p the test of this design can give: what a run of these
    sizes can at best show. Paired: 2 / 2^n (the signed-rank's); unpaired:
    2 / C(n_a + n_b, n_a) (the permutation test's)."""
    if paired and n_a == n_b and n_a >= PAIRED_MIN:
        # exact: the sign vector of every round as measured and its mirror;
        # sampled: the observed one alone, 1 / (1 + B)
        return 2.0 / 2.0 ** n_a if n_a <= PAIRED_EXACT_MAX else 1.0 / (1 + PAIRED_SAMPLES)
    if min(n_a, n_b) < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def test_and_estimate(a, b, rounds=None, conf: float = 0.95, paired_floor_max: float | None = None) -> dict:
    """The test and the estimate the verdict uses, paired when the rounds
    pair the processes (pairs_of) and there are at least PAIRED_MIN of them,
    else unpaired (see above). paired_floor_max: the paired test only when
    its smallest p (p_floor) is at most this (the sequential design: Holm
    over the report's benchmarks must be able to reach the look's level;
    issue 37), else the unpaired test beside the paired interval. Returns
    {"paired", "test", "p", "estimate" (a ratio B/A), "ci95_estimate",
    "estimator", "n_pairs"?, "note"?}."""
    a, b = _arm(a, "A"), _arm(b, "B")
    pr = pairs_of(a, b, rounds)
    out: dict = {}
    if pr is not None and pr[0].size >= PAIRED_CI_MIN:
        d = np.log(pr[1]) - np.log(pr[0])
        est, ci = paired_hl(d, conf)
        out["estimator"] = "Hodges-Lehmann of per-round log ratios (signed-rank interval)"
        out["estimate"], out["ci95_estimate"] = math.exp(est), None if ci is None else [math.exp(x) for x in ci]
        n = int(pr[0].size)
        if n >= PAIRED_MIN and (paired_floor_max is None or p_floor(n, n, True) <= paired_floor_max):
            out["paired"], out["n_pairs"] = True, int(d.size)
            if np.all(d == 0):
                out.update(test="paired min-p", p=1.0, note="every round's A and B are identical")
            else:
                p, _, _, method = paired_minp(np.log(pr[0]), np.log(pr[1]))
                out.update(test=f"paired min-p: Wilcoxon signed-rank and rank sum, swapped within rounds ({method})",
                           p=min(1.0, p))
            return out
        # 6-9 rounds, or a paired floor too high for the family: the paired
        # interval, the unpaired test (the paired p's floor is 2 / 2^n)
        unpaired = test_and_estimate(a, b, None, conf)
        out.update(paired=False, test=unpaired["test"], p=unpaired["p"])
        if "note" in unpaired:
            out["note"] = unpaired["note"]
        return out
    out["paired"] = False
    la, lb = np.log(a), np.log(b)
    if a.size * b.size <= HL_MAX_PAIRS and min(a.size, b.size) >= 1:
        est, ci = shift_hl(la, lb, conf)
        out["estimator"] = "Hodges-Lehmann shift of log times (Moses interval)"
        out["estimate"], out["ci95_estimate"] = math.exp(est), None if ci is None else [math.exp(x) for x in ci]
    else:
        r, ci = ratio_ci(a, b, conf)
        out.update(estimator="ratio of medians (bootstrap)", estimate=r, ci95_estimate=ci)
    both = np.concatenate([a, b])
    if a.size < 2 or b.size < 2 or np.ptp(both) == 0:
        out.update(test="none", p=1.0)
        return out
    if np.unique(both).size == both.size and max(a.size, b.size) <= CALIBRATE_MAX:
        p, _, _, method = calibrated_p(a, b)
        out.update(test=method, p=p)
    else:
        q = p_value(a, b)
        out.update(test="twice the smaller p of Mann-Whitney U and KS", p=q["p"])
    return out


def robust_cv(a, b) -> float:
    """Pooled robust CV of the per-process medians of both arms.

    Each value is taken relative to its own arm's median (so a real A/B
    difference does not count as noise), the relative residuals of both arms
    are pooled, and their MAD is scaled by 1.4826 to estimate a standard
    deviation. MAD rather than SD: one process that landed on a bad memory
    layout or a noisy neighbour must not inflate the threshold.
    """
    a, b = _arm(a, "A"), _arm(b, "B")
    res = np.concatenate([a / np.median(a) - 1, b / np.median(b) - 1])
    return float(MAD_SCALE * np.median(np.abs(res - np.median(res))))


def aa_noise(a, b) -> float:
    """A/A noise of this comparison: the relative standard error of the
    difference between the two arms' medians,

        cv * sqrt(1/na + 1/nb) * sqrt(pi/2)

    where cv is robust_cv(a, b) and sqrt(pi/2) is the median's efficiency
    factor (SE of a median = sigma * sqrt(pi / 2n)). It is the spread two
    identical variants would show at these sample sizes. 0.0 when either arm
    has fewer than 2 processes: the noise is not estimable, and such a
    comparison is inconclusive anyway (p = 1, no CI).
    """
    a, b = _arm(a, "A"), _arm(b, "B")
    if a.size < 2 or b.size < 2:
        return 0.0
    return robust_cv(a, b) * math.sqrt(1 / a.size + 1 / b.size) * MEDIAN_EFFICIENCY


def holm(pvalues: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in input order.

    Step-down: the k-th smallest (0-based) is multiplied by m - k, a running
    maximum keeps the adjusted values monotone in the order of the raw ones,
    and they are capped at 1.
    """
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return [float(x) for x in out]


def geomean(ratios) -> float:
    r = np.asarray(ratios, dtype=float)
    if r.size == 0:
        raise ValueError("geomean of no ratios")
    return float(np.exp(np.mean(np.log(r))))


def across_hosts(log_ratios, delta: float = DELTA, alpha: float = ALPHA) -> dict:
    """One benchmark across hosts, the host as the unit (`fleet ab`): each
    host's figure is its own interleaved A/B's log ratio; the estimate is
    their geometric mean, its 95% CI the t-interval over the hosts (mean
    +/- t(n-1) * sd / sqrt(n) on the log scale), the test the one-sample t
    test of the mean log ratio against 0, and the verdict the same rule as
    one host's (verdict(): fixed delta). A t-interval because the hosts are
    few (3 boards: a bootstrap or a rank interval has too few distinct
    values to reach 95%) and a log ratio near 1 is close to symmetric.
    Identical hosts (sd 0, as under a fake clock) give a zero-width interval
    and p 0 (or 1 with no difference). One host: no interval, inconclusive."""
    x = np.asarray(log_ratios, dtype=float)
    n = int(x.size)
    if n == 0:
        raise ValueError("across_hosts of no hosts")
    mean = float(np.mean(x))
    out: dict = {"n_hosts": n, "geomean_ratio": math.exp(mean), "alpha": alpha, "delta": float(delta),
                 "method": "t-interval over the hosts' log ratios"}
    if n < 2:
        out.update(ci95=None, p_value=None, verdict="inconclusive",
                   note="one host: an interval across hosts needs two or more")
        return out
    sd = float(np.std(x, ddof=1))
    if sd > 0:   # scipy's one-sample t test and its interval
        t = sps.ttest_1samp(x, 0.0)
        p = float(t.pvalue)
        lo, hi = (float(v) for v in t.confidence_interval(confidence_level=1 - alpha))
    else:        # identical hosts: scipy has no answer (0 / 0); a zero-width interval
        p, lo, hi = (1.0 if mean == 0 else 0.0), mean, mean
    ci = [math.exp(lo), math.exp(hi)]
    out.update(ci95=ci, p_value=p, sd_log=sd, verdict=verdict(math.exp(mean), ci, p, delta, alpha))
    return out


def processes_needed(cv: float, delta: float, alpha: float = ALPHA, power: float = 0.95) -> int:
    """Processes per arm for a two-sided Mann-Whitney test at level alpha to
    detect a relative difference delta with the given power, when the
    per-process medians have coefficient of variation cv:

        n = ceil(2 * (z_{1-alpha/2} + z_power)^2 * (cv/delta)^2 * pi/3)

    the two-sample normal sizing, inflated by pi/3 for Mann-Whitney's
    efficiency; never fewer than 6 (below that the exact test can barely
    reach p < 0.05 at all). Reproduces the sizing table of docs/statistics.md.
    """
    if delta <= 0:
        raise ValueError("delta must be > 0")
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    n = 2 * z * z * (cv / delta) ** 2 * MWU_ARE_FACTOR
    return max(MIN_PROCESSES, math.ceil(n))


def next_schedule(n: int) -> int | None:
    """The smallest declared stage (10, 20, 40) with at least n processes
    per arm; None beyond 40: the declared schedule cannot decide it, and
    going further would be optional stopping."""
    return next((s for s in SCHEDULE if s >= n), None)


def verdict(ratio: float, ci: list[float] | None, p_adj: float, delta_eff: float,
            alpha: float = ALPHA) -> str:
    """B relative to A, from the estimate, its CI, the (Holm-adjusted) p and
    a FIXED practical threshold delta (issue 25: never widened by noise):

    - same: not significant and the whole CI inside [1 - delta, 1 + delta]
      (equivalence: two one-sided tests at 2.5% each);
    - negligible: significant, and the whole CI inside +/- delta;
    - slower / faster: significant, and the whole CI clears delta (above
      1 + delta: slower; below 1 - delta: faster), so the claim "B differs
      by more than delta" is itself shown at the CI's confidence
      (beyond_delta() is then true);
    - inconclusive: anything else (not significant with a CI that reaches
      past delta; significant with a CI that reaches across +/- delta, a
      difference that may or may not matter; or a significant difference
      of shape, KS, whose shift CI straddles 1).

    A true effect of exactly delta is then called same/negligible only when
    the CI's far end falls short of it, and slower/faster only when its near
    end clears it: each at most (1 - conf) / 2 of the time. An A/A is called
    slower/faster only when its CI misses 1 by more than delta.
    """
    if ci is None:
        return "inconclusive"
    inside = 1 - delta_eff <= ci[0] and ci[1] <= 1 + delta_eff
    if p_adj < alpha:
        if inside:
            return "negligible"
        if ci[0] > 1 + delta_eff:
            return "slower"
        if ci[1] < 1 - delta_eff:
            return "faster"
        return "inconclusive"
    return "same" if inside else "inconclusive"


def graded_verdict(estimate: float, ci: list[float] | None, p_adj: float, delta: float, level: float) -> str:
    """The sequential design's verdict (issue 37), B relative to A:

    - slower / faster: significant (Holm-adjusted p under the look's level,
      the design's alpha 1%) and the estimate beyond +/- delta; whether the
      CI clears delta too is said beside it (beyond_delta, and the CI's near
      end), as Pinpoint and benchstat give an estimate with its interval;
    - negligible / same: the whole CI inside +/- delta (significant or not);
    - inconclusive: anything else.

    Error rates (validation/stats/audit.py, docs/statistics.md): an A/A is
    called slower/faster at most alpha (1%) by construction (Pocock
    spending, Holm); a true effect of exactly delta is called slower about
    half the time (its estimate lies beyond delta half the time): a
    `slower` says "B costs more, most likely by more than delta", and
    `beyond_delta` says when that is shown at the CI's confidence."""
    if ci is None:
        return "inconclusive"
    inside = 1 - delta <= ci[0] and ci[1] <= 1 + delta
    significant = p_adj < level
    if significant and estimate > 1 + delta:
        return "slower"
    if significant and estimate < 1 - delta:
        return "faster"
    if inside:
        return "negligible" if significant else "same"
    return "inconclusive"


def beyond_delta(ci: list[float] | None, delta: float) -> bool:
    """The whole CI clears 1 +/- delta: the difference is shown to be at
    least delta (a slower/faster claim "beyond delta")."""
    return ci is not None and (ci[0] > 1 + delta or ci[1] < 1 - delta)


def compare_arms(a, b, *, delta: float = DELTA, seed: int = BOOTSTRAP_SEED,
                 resamples: int = BOOTSTRAP_RESAMPLES, rounds=None, paired_floor_max: float | None = None) -> dict:
    """One benchmark: effect, CI, tests and threshold; no verdict yet (that
    needs the family-wise adjustment across the report, see decide()).

    rounds: (rounds of A's processes, rounds of B's), when the two arms
    were measured interleaved: complete rounds make the comparison paired
    (test_and_estimate). `ratio`/`ci95_ratio` (B/A of medians, bootstrap)
    stay as before; the verdict uses `estimate`/`ci95_estimate` and
    `p_value` (the test named in `test`)."""
    a, b = _arm(a, "A"), _arm(b, "B")
    ratio, ci = ratio_ci(a, b, resamples=resamples, seed=seed)
    p = p_value(a, b)
    te = test_and_estimate(a, b, rounds, paired_floor_max=paired_floor_max)
    out = {
        "n_a": int(a.size),
        "n_b": int(b.size),
        "median_a": float(np.median(a)),
        "median_b": float(np.median(b)),
        "ratio": ratio,
        "ci95_ratio": ci,
        "change": ratio - 1,
        "estimate": te["estimate"],
        "ci95_estimate": te["ci95_estimate"],
        "estimator": te["estimator"],
        "paired": te["paired"],
        "test": te["test"],
        "p_mannwhitney": p["mannwhitney"],
        "p_ks": p["ks"],
        "p_value": te["p"],
        "p_floor": p_floor(int(a.size), int(b.size), te["paired"]),
        "mwu_method": p["mwu_method"],
        "cv_robust": robust_cv(a, b),
        "aa_noise": aa_noise(a, b),
        "delta": float(delta),
        "delta_requested": float(delta),
    }
    if te["paired"]:
        out["n_pairs"] = te["n_pairs"]
    out["resolvable"] = resolvable(out)
    note = te.get("note") or p.get("note")
    if note:
        out["note"] = note
    return out


def decide(comparisons: list[dict], alpha: float = ALPHA) -> list[dict]:
    """Verdicts for the benchmarks of one report (compare_arms() outputs).

    Holm-Bonferroni across all of them (adds "p_adjusted"), then "verdict".
    An inconclusive one also gets "processes_needed" (per arm) and
    "schedule": the next declared stage that reaches it, or None with a
    "schedule_note" when even 40 would not. Returns new dicts.
    """
    padj = holm([c["p_value"] for c in comparisons])
    out = []
    for c, pa in zip(comparisons, padj):
        c = dict(c, p_adjusted=pa)
        est, ci = Entry(c).verdict_ratio
        c["verdict"] = verdict(est, ci, pa, c["delta"], alpha)
        if c["verdict"] in ("slower", "faster"):
            c["beyond_delta"] = beyond_delta(ci, c["delta"])
        if c["verdict"] == "inconclusive":
            c.update(advice(c, alpha))
        out.append(c)
    return out


# A difference is "resolvable" when the rule would call it slower/faster 80%
# of the time: the CI must clear delta from an estimate at the difference,
# i.e. the difference must exceed delta by (z_{1-alpha/2} + z_{0.80}) /
# z_{1-alpha/2} = 1.43 half-widths of the 95% CI (on the log scale).
POWER = 0.80
_RESOLVE = (1.959963984540054 + 0.8416212335729143) / 1.959963984540054


def half_width(c: dict) -> float | None:
    """The half-width, on the log scale, of the CI the verdict uses (the
    estimate's, else the ratio's); None without one."""
    ci = Entry(c).verdict_ratio[1]
    if not ci or ci[0] <= 0 or ci[1] <= 0:
        return None
    return (math.log(ci[1]) - math.log(ci[0])) / 2


def resolvable(c: dict) -> float | None:
    """The smallest relative difference this comparison's noise and sizes
    resolve (called slower/faster with 80% probability by the rule, whose
    CI must clear delta): delta plus 1.43 half-widths of its CI, on the log
    scale, so bimodal or heavy-tailed process medians and pairing count as
    they do in the CI. None when the design cannot reach significance at
    all (p_floor >= alpha) or there is no CI."""
    if c.get("p_floor", 0.0) >= ALPHA:
        return None
    hw = half_width(c)
    return None if hw is None else math.expm1(math.log1p(c.get("delta", DELTA)) + _RESOLVE * hw)


def resolvable_graded(hw95: float, delta: float, z_level: float, power: float = POWER) -> float:
    """The smallest relative difference the sequential design's rule
    (graded_verdict) calls slower/faster with probability `power`, given
    the 95% half-width hw95 (log scale) the design reaches: its estimate
    must lie beyond delta (a difference delta + z_power SE) and its test
    must reach the look's level (a difference (z_level + z_power) SE),
    SE = hw95 / z_0.975."""
    zp = float(sps.norm.ppf(power))
    se = hw95 / 1.959963984540054
    return math.expm1(max(math.log1p(delta) + zp * se, (z_level + zp) * se))


def advice(c: dict, alpha: float = ALPHA) -> dict:
    """What would decide an inconclusive comparison: "processes_needed" (per
    arm) and "schedule", the next declared stage that reaches it, or None
    with a "schedule_note" when even 40 would not.

    The CI's half-width shrinks as 1/sqrt(n); two ways to decide: a CI that
    clears delta (an estimate beyond delta by 1.43 half-widths, 80% power)
    or a CI inside +/- delta (half-width under delta - |estimate - 1|). Sized
    for the cheaper of the two from the CI measured, which carries this
    run's noise, pairing and shape (validation/compare/verdict_rule.py
    checks the sizing on the rule itself). Without a CI (too few processes
    for one), the normal sizing formula over the robust CV."""
    d = c["delta"]
    est = Entry(c).verdict_ratio[0]
    ch = abs(math.log(est)) if est and est > 0 else abs(c["change"])
    n = max(c["n_a"], c["n_b"])
    hw = half_width(c)
    if hw is not None and hw > 0 and n >= 2:
        targets = [max(ch - math.log1p(d), 0.0) / _RESOLVE, max(math.log1p(d) - ch, 0.0) / _RESOLVE]
        need = min(math.ceil(n * (hw / t) ** 2) if t > 0 else math.inf for t in targets)
        need = max(MIN_PROCESSES, need) if math.isfinite(need) else 10 ** 6
    else:
        target = max(abs(ch - math.log1p(d)), 1e-9)
        cv = c.get("cv_robust")
        if cv is None:
            na, nb = c["n_a"], c["n_b"]
            cv = c["aa_noise"] / (math.sqrt(1 / na + 1 / nb) * MEDIAN_EFFICIENCY) if na > 1 and nb > 1 else 0.0
        need = processes_needed(cv, target, alpha)
    # "More" means a stage beyond what already ran: re-running the same
    # count would not change an inconclusive answer.
    out: dict = {"processes_needed": int(need), "schedule": next_schedule(max(need, n + 1))}
    if out["schedule"] is None:
        # said beside processes_needed ("about N processes per arm would ... (beyond ...)"): N once
        out["schedule_note"] = f"beyond the declared schedule {', '.join(map(str, SCHEDULE))}"
    return out


def summary(comparisons: list[dict]) -> dict:
    """Report-wide: geometric mean of the ratios and how many of each verdict."""
    counts = {v: 0 for v in VERDICTS}
    for c in comparisons:
        if "verdict" in c:
            counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    return {
        "geomean_ratio": geomean([c["ratio"] for c in comparisons]) if comparisons else None,
        "n": len(comparisons),
        "counts": counts,
    }


def arm_flags(summary_a: dict, summary_b: dict) -> list[dict]:
    """The flags of both arms' summaries (stats.summarize), each tagged with
    its arm: {"arm": "A", "flag": "unstable", "detail": ...,
    "text": "A: unstable: ..."}. Every verdict carries them."""
    out = []
    for arm, s in (("A", summary_a), ("B", summary_b)):
        for f in (s or {}).get("flags") or []:
            detail = f.get("detail", "")
            out.append({"arm": arm, "flag": f["flag"], "detail": detail,
                        "text": f"{arm}: {f['flag']}: {detail}" if detail else f"{arm}: {f['flag']}"})
    return out


def _draws(arms: list, resamples: int, seed: int) -> list:
    """Bootstrap medians of each arm, resampled independently (as ratio_ci
    does): one array of `resamples` medians per arm."""
    rng = np.random.default_rng(seed)
    out = []
    for x in arms:
        x = np.asarray(x, dtype=float)
        idx = rng.integers(0, x.size, size=(resamples, x.size))
        out.append(np.median(x[idx], axis=1))
    return out


def _pct(draws, conf: float) -> list[float] | None:
    d = np.asarray(draws, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return None
    lo, hi = np.percentile(d, [(1 - conf) / 2 * 100, (1 + conf) / 2 * 100])
    return [float(lo), float(hi)]


def saving_ci(pairs: list[tuple], conf: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
              seed: int = BOOTSTRAP_SEED) -> dict:
    """A saving and its confidence, the savings table's (seed 000) figures:
    for pairs [(a, b), ...] of per-process values (A's and B's processes of
    one quantity, e.g. user ns per op), the saving sum(median(a) - median(b))
    and the relative saving sum(...) / sum(median(a)), each with a
    percentile-bootstrap CI: every arm resampled with replacement on its own,
    the processes being the independent unit, exactly as ratio_ci. One pair is
    one benchmark's saving; two pairs are the seed's system-wide estimate
    (child-fp and parent-fp summed). "of_b": the saving over sum(median(b)),
    the seed's denominator for that estimate. "spans_zero": the saving's CI
    contains 0 (not shown to differ). CIs are None with fewer than 2
    processes in an arm."""
    arms = [np.asarray(x, dtype=float) for pair in pairs for x in pair]
    meds = [float(np.median(x)) for x in arms]
    diff = sum(meds[0::2]) - sum(meds[1::2])
    sa, sb = sum(meds[0::2]), sum(meds[1::2])
    out: dict = {"saving": diff, "improvement": diff / sa if sa else None, "of_b": diff / sb if sb else None,
                 "ci95": None, "ci95_improvement": None, "ci95_of_b": None, "spans_zero": None}
    if any(x.size < 2 for x in arms):
        return out
    d = _draws(arms, resamples, seed)
    da, db = sum(d[0::2]), sum(d[1::2])
    dd = da - db
    with np.errstate(divide="ignore", invalid="ignore"):
        out["ci95"] = _pct(dd, conf)
        out["ci95_improvement"] = _pct(dd / da, conf) if sa else None
        out["ci95_of_b"] = _pct(dd / db, conf) if sb else None
    ci = out["ci95"]
    out["spans_zero"] = bool(ci is not None and ci[0] <= 0 <= ci[1])
    return out
