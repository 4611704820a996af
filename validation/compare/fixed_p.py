#!/usr/bin/env python3
"""Is the fixed design's p a p-value? Null data (A and B drawn from one
distribution), the two tests of abtest.p_value (Mann-Whitney U and KS) on
every simulated comparison, and how often each candidate p falls under
alpha (0.05):

- plain: the smaller of the two p (what the fixed design, `ab -p N` and
  `compare`, tested before issue 13's seq2 work);
- doubled: twice the smaller, capped at 1 (abtest.combined_p, what every
  design tests now).

A valid p-value falls under alpha at most alpha of the time on null data.
Seeded; the distribution of the per-process medians is normal or log-normal
(CV --cv), which does not matter to rank tests without ties, and is printed
for both to show it. Also: the fixed design's whole rule (abtest.decide,
delta 2%) -- how often it says slower/faster or claims any difference."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from opcost import abtest  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=4000, help="simulated comparisons per row")
    ap.add_argument("--n", default="5,10,20,40", help="processes per arm")
    ap.add_argument("--cv", type=float, default=0.02)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=20261125)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.monotonic()
    se = math.sqrt(args.alpha * (1 - args.alpha) / args.trials)
    print(f"null data, {args.trials} comparisons per row, seed {args.seed}; a rate above "
          f"{args.alpha:.0%} + 2 SE ({args.alpha + 2 * se:.2%}) is not a valid p-value")
    print(f"{'noise':<11} {'n/arm':>5}  {'MWU < a':>8} {'KS < a':>8}  {'plain min < a':>13}  "
          f"{'2*min < a':>10}  {'fixed rule: any claim (plain / doubled)':>40}  {'slower/faster (plain / doubled)':>32}")
    for dist in ("normal", "lognormal"):
        for n in (int(x) for x in args.n.split(",")):
            mw = ks = plain = doubled = claim_p = claim_d = wrong_p = wrong_d = 0
            for _ in range(args.trials):
                if dist == "normal":
                    a, b = 100 * (1 + args.cv * rng.standard_normal((2, n)))
                else:
                    a, b = 100 * np.exp(args.cv * rng.standard_normal((2, n)))
                c = abtest.compare_arms(a, b, resamples=200)
                p1, p2 = c["p_mannwhitney"], c["p_ks"]
                mw += p1 < args.alpha
                ks += p2 < args.alpha
                plain += min(p1, p2) < args.alpha
                doubled += c["p_value"] < args.alpha
                for p, which in ((min(p1, p2), "p"), (c["p_value"], "d")):
                    [d] = abtest.decide([dict(c, p_value=p)], args.alpha)
                    claim = d["verdict"] in ("slower", "faster", "negligible")
                    wrong = d["verdict"] in ("slower", "faster")
                    if which == "p":
                        claim_p += claim
                        wrong_p += wrong
                    else:
                        claim_d += claim
                        wrong_d += wrong
            t = args.trials
            print(f"{dist:<11} {n:>5}  {mw / t:>8.2%} {ks / t:>8.2%}  {plain / t:>13.2%}  {doubled / t:>10.2%}  "
                  f"{claim_p / t:>19.2%} / {claim_d / t:<18.2%}  {wrong_p / t:>15.2%} / {wrong_d / t:<14.2%}",
                  flush=True)
    print(f"{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
