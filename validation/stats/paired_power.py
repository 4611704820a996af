#!/usr/bin/env python3
"""Issue 25, paired rounds on bimodal data: which paired test keeps power.

For the audit's interleaved scenarios (validation/stats/scenarios.py), 20
rounds, A/A and a true 2%: the share of p < 0.05 (two-sided) of
- the signed-rank test on per-round log ratios (what opcost uses when the
  rounds pair A and B),
- a Mann-Whitney rank sum permuted within rounds (A and B of a round
  swapped at random: a sign-flip test on the per-round differences of the
  pooled ranks),
- the minimum p of the two, calibrated over the same within-round
  permutations (so it keeps alpha),
- the unpaired Mann-Whitney test, for reference.
Permutation p-values from 4,000 random sign vectors plus the observed one.
Seeded; 400 comparisons a cell (Monte-Carlo SE up to 2.5 pp). An
experiment whose output (results/paired-power-2026-11-28.txt)
docs/statistics.md cites; the min-p it found is now opcost's paired test
(abtest.paired_minp, exact over all swaps up to 16 rounds).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scenarios  # noqa: E402

S = 4000
REPS = 400


def tests(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float, float]:
    n = a.size
    d = np.log(b) - np.log(a)
    signs = np.vstack([np.ones(n), rng.choice([-1.0, 1.0], size=(S, n))])
    sr = np.abs(signs @ (sps.rankdata(np.abs(d)) * np.sign(d)))
    pooled = sps.rankdata(np.concatenate([np.log(a), np.log(b)]))
    mw = np.abs(signs @ (pooled[n:] - pooled[:n]))

    def pv(t: np.ndarray) -> np.ndarray:
        return 1 - np.searchsorted(np.sort(t), t, side="left") / t.size

    psr, pmw = pv(sr), pv(mw)
    mn = np.minimum(psr, pmw)
    return float(psr[0]), float(pmw[0]), float(np.mean(mn <= mn[0])), float(sps.mannwhitneyu(b, a).pvalue)


def main() -> int:
    warnings.simplefilter("ignore")
    nz = scenarios.Noise(scenarios.load_pool("syscall.null"))
    rng = np.random.default_rng(11)
    print(f"20 rounds, {REPS} comparisons a cell, {S} within-round permutations; share of p < 0.05")
    print(f"{'scenario':<10} {'effect':>6}  {'signed-rank':>11}  {'within-round MWU':>16}  {'min-p':>6}  {'unpaired MWU':>12}")
    for name in ("bimodal", "pool", "lognormal", "drift"):
        for eff in (0.0, 0.02):
            hits = np.zeros(4)
            for _ in range(REPS):
                a, b, _r = nz.interleaved(name, rng, 20, eff)
                hits += np.array(tests(a, b, rng)) < 0.05
            s = hits / REPS
            print(f"{name:<10} {eff:>6.0%}  {s[0]:>11.1%}  {s[1]:>16.1%}  {s[2]:>6.1%}  {s[3]:>12.1%}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
