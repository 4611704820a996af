#!/usr/bin/env python3
"""CI coverage by simulation over real A/A data: do opcost's 95% CIs of B/A
cover the true ratio 93-97% of the time?

Input: the comparison documents kept by `aa.py --keep DIR` (real interleaved
A/A runs on this machine). Each process median is divided by the median of
its own comparison (drift between sessions removed, the shape of the noise
kept: skew, outliers, bimodality), all are pooled per benchmark, and each
trial draws n A and n B processes from the pool without replacement,
multiplies B by a known ratio r, and asks compare.ratio_ci for the CI.
Also reported: how often the real A/A comparisons' own CIs contained 1."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from opcost import compare  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("docs", help="directory of A/A comparison documents (aa.py --keep)")
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--n", type=int, default=10, help="processes per arm in each simulated comparison")
    ap.add_argument("--ratios", default="1.0,1.02,1.05")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
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
    print(f"{len(files)} real A/A comparisons; {args.trials} simulated comparisons of {args.n} vs {args.n} "
          "processes per benchmark and ratio")
    print(f"{'benchmark':<16} {'pool':>5} {'real A/A CIs containing 1':>26}  " +
          "  ".join(f"coverage r={r:g}" for r in ratios))
    for bench, pool in pools.items():
        arr = np.asarray(pool)
        cov = []
        for r in ratios:
            hits = 0
            for t in range(args.trials):
                idx = rng.choice(arr.size, size=2 * args.n, replace=False)
                a, b = arr[idx[: args.n]], arr[idx[args.n:]] * r
                _, (lo, hi) = compare.ratio_ci(a, b, resamples=2000, seed=t)
                hits += lo <= r <= hi
            cov.append(hits / args.trials)
        d = direct[bench]
        print(f"{bench:<16} {arr.size:>5} {sum(d):>19}/{len(d)} = {sum(d) / len(d):.1%}  " +
              "  ".join(f"{c:>14.1%}" for c in cov))
    print("target: 93-97%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
