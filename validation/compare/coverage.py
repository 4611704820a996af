#!/usr/bin/env python3
"""CI coverage by simulation over real A/A data: do opcost's 95% CIs of B/A
cover the true ratio 93-97% of the time, also after a sequential `ab`
stopped early?

Input: the comparison documents kept by `aa.py --keep DIR` (real interleaved
A/A runs on this machine). Each process median is divided by the median of
its own comparison (drift between sessions removed, the shape of the noise
kept: skew, outliers, bimodality), all are pooled per benchmark, and each
trial draws A and B processes from the pool without replacement and
multiplies B by a known ratio r. --design sequential (default): 40 per arm
in rounds, the sequential rule of `ab` (looks at 10, 20, 40, delta 2%,
--boundary: `ab`'s default unless given)
decides where it stops, and the 95% CI it reports there is checked;
--design fixed: --n per arm, abtest.ratio_ci (--ci bootstrap) or, to set
it beside, the Hodges-Lehmann interval of log B - log A (--ci moses: the
Mann-Whitney test inverted, exact under a shift; docs/statistics.md's other
effect, not opcost's: its contract's ratio is of medians), or Price &
Bonett's distribution-free interval for a ratio of medians (--ci
price-bonett: each log median's variance from two order statistics). Also reported:
how often the real A/A comparisons' own CIs contained 1."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from opcost import abtest, sequential  # noqa: E402


def u_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u) for u = 0..m n under the null, no ties: the exact
    distribution of the Mann-Whitney U (pairs with A above B) by counting
    the arrangements of m A's and n B's."""
    table = [[np.ones(1)] * (n + 1)] + [[np.ones(1)] + [np.zeros(0)] * n for _ in range(m)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            c = np.zeros(i * j + 1)
            c[j:] += table[i - 1][j]          # the largest is one of A's: above all j B's
            c[:i * (j - 1) + 1] += table[i][j - 1]   # the largest is one of B's
            table[i][j] = c
    return np.cumsum(table[m][n]) / table[m][n].sum()


def u_quantile(m: int, n: int, tail: float) -> int:
    """The largest k with P(U < k) <= tail under the null."""
    return int(np.searchsorted(u_cdf(m, n), tail, side="right"))


def moses(a: np.ndarray, b: np.ndarray, conf: float = 0.95) -> tuple[float, float]:
    """The Hodges-Lehmann (Moses) CI of the ratio: the k-th smallest and
    largest of the m x n pairwise log B_j - log A_i, k from U's exact
    quantile (Hollander & Wolfe, ch. 4)."""
    d = np.sort((np.log(b)[:, None] - np.log(a)[None, :]).ravel())
    k = u_quantile(a.size, b.size, (1 - conf) / 2)
    return float(np.exp(d[k])), float(np.exp(d[d.size - 1 - k]))


def price_bonett(a: np.ndarray, b: np.ndarray, conf: float = 0.95) -> tuple[float, float]:
    """Price & Bonett (2002, J. Stat. Comput. Simul. 72:119): the ratio of
    medians +/- z sqrt(var A + var B) on the log scale, each variance
    ((y_(n-c+1) - y_(c)) / (2 z_c))^2, c = round(n/2 - sqrt(n)), z_c the
    normal quantile of the binomial tail P(X <= c - 1) at p = 1/2."""
    from scipy import stats

    def var(y):
        y = np.sort(np.log(y))
        c = max(1, int(round(y.size / 2 - np.sqrt(y.size))))
        z = stats.norm.isf(stats.binom.cdf(c - 1, y.size, 0.5))
        return ((y[y.size - c] - y[c - 1]) / (2 * z)) ** 2

    est = float(np.log(np.median(b) / np.median(a)))
    half = float(stats.norm.isf((1 - conf) / 2)) * float(np.sqrt(var(a) + var(b)))
    return float(np.exp(est - half)), float(np.exp(est + half))


def trial(arr: np.ndarray, r: float, args, rng, t: int) -> tuple[bool, int]:
    """(the CI covers r, processes per arm it stopped at)."""
    n = sequential.STAGES[-1] if args.design == "sequential" else args.n
    idx = rng.choice(arr.size, size=2 * n, replace=False)
    a, b = arr[idx[:n]], arr[idx[n:]] * r
    if args.design == "fixed":
        if args.ci != "bootstrap":
            lo, hi = (moses if args.ci == "moses" else price_bonett)(a, b)
            return bool(lo <= r <= hi), n
        _, (lo, hi) = abtest.ratio_ci(a, b, resamples=args.resamples, seed=t)
        return bool(lo <= r <= hi), n
    rounds = list(range(n))
    (e,), _ = sequential.decide([(rounds, list(a), rounds, list(b))], delta=args.delta / 100, rounds=n,
                                final=True, resamples=args.resamples, boundary=args.boundary)
    lo, hi = e["ci95_ratio"]
    return bool(lo <= r <= hi), e["sequential"]["processes_per_arm"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("docs", help="directory of A/A comparison documents (aa.py --keep)")
    ap.add_argument("--design", choices=("sequential", "fixed"), default="sequential")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--n", type=int, default=10, help="--design fixed: processes per arm")
    ap.add_argument("--ci", choices=("bootstrap", "moses", "price-bonett"), default="bootstrap",
                    help="--design fixed: opcost's CI (bootstrap), or beside it the Hodges-Lehmann one (moses) "
                         "or Price-Bonett's for a ratio of medians")
    ap.add_argument("--delta", type=float, default=2.0, help="--design sequential: delta in percent")
    ap.add_argument("--boundary", choices=sorted(sequential.BOUNDARIES), default=sequential.DEFAULT_BOUNDARY,
                    help="--design sequential: the alpha spending (default: ab's)")
    ap.add_argument("--ratios", default="1.0,1.02,1.03,1.05")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.ci != "bootstrap" and args.design != "fixed":
        ap.error(f"--ci {args.ci} is for --design fixed (the sequential rule uses opcost's own CI)")
    pools: dict[str, list[float]] = {}
    direct: dict[str, list[bool]] = {}
    files = sorted(Path(args.docs).glob("*.json"))
    if not files:
        raise SystemExit(f"no comparison documents in {args.docs}: run aa.py --keep {args.docs} first")
    for f in files:
        for e in json.loads(f.read_text())["comparisons"]:
            ma = e["a"]["summary"]["process_medians_ns"]
            mb = e["b"]["summary"]["process_medians_ns"]
            center = float(np.median(ma + mb))
            pools.setdefault(e["bench"], []).extend(x / center for x in ma + mb)
            lo, hi = e["ci95_ratio"]
            direct.setdefault(e["bench"], []).append(lo <= 1.0 <= hi)
    rng = np.random.default_rng(args.seed)
    ratios = [float(r) for r in args.ratios.split(",")]
    t0 = time.monotonic()
    print(f"{len(files)} real A/A comparisons; {args.trials} simulated comparisons per benchmark and ratio, "
          + (f"sequential design ({args.boundary}; looks at 10, 20, 40 per arm, delta "
             f"{args.delta:g}%)" if args.design == "sequential" else f"fixed design, {args.n} vs {args.n}, {args.ci} CI"))
    print(f"{'benchmark':<16} {'pool':>5} {'real A/A CIs containing 1':>26}  " +
          "  ".join(f"coverage r={r:g} (stopped at 10/20/40)" for r in ratios))
    for bench, pool in pools.items():
        arr = np.asarray(pool)
        cells = []
        for r in ratios:
            got = [trial(arr, r, args, rng, t) for t in range(args.trials)]
            stops = Counter(n for _, n in got)
            cells.append(f"{sum(h for h, _ in got) / args.trials:>14.1%} ("
                         + "/".join(str(stops.get(n, 0)) for n in sequential.STAGES) + ")")
        d = direct[bench]
        print(f"{bench:<16} {arr.size:>5} {sum(d):>19}/{len(d)} = {sum(d) / len(d):.1%}  " + "  ".join(cells),
              flush=True)
    print(f"target: 93-97%; {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
