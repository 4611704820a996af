"""The audit's noise: per-process medians as opcost's statistics see them,
for the scenarios of validation/stats/audit.py. Pure numpy, seeded by the
caller's generator; no opcost import (the adapters are audit.py's).

Every value is relative: arm A's true location is 1, arm B's is 1 + effect
(B = A's distribution times 1 + effect, so the true ratio of medians B/A is
exactly 1 + effect in every scenario). What each scenario models:

- normal: N(1, CV 2%) per process, independent;
- lognormal: exp(N(0, 3%)) per process, independent;
- bimodal: each process lands on one of two levels, 70% at 1.0 and 30% at
  1.24, with 0.6% spread within a level (true CV about 10%, robust CV under
  1%: what the shared VM's and opcost's own A/A pool's processes do);
- pool: resampled real per-process medians (validation/compare/data/
  aa_pool.json: 500 per benchmark from 88 real A/A comparisons on a shared
  2-core VM, each relative to its comparison's median; heavy-tailed, with a
  second level near 0.56);
- drift: log-normal 1% per process times a slow linear trend across the
  rounds (5% from the first round to the last, either direction), the same
  for both arms of a round: what interleaving is for;
- stored runs (offset 0.5%, 1%, 2%): R runs per side, each run's processes
  log-normal 2% times that run's own offset exp(N(0, offset)): a reboot, an
  hour later, another page layout. The run is the replicate; the processes
  of one run share its offset.

Interleaved scenarios return (a, b, rounds): process i of each arm ran in
round i. Stored scenarios return (runs_a, runs_b): lists of arrays, one per
run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

POOL = Path(__file__).resolve().parents[1] / "compare" / "data" / "aa_pool.json"

NORMAL_CV = 0.02
LOGNORMAL_SIGMA = 0.03
BIMODAL_HIGH_SHARE = 0.30
BIMODAL_HIGH = 1.24
BIMODAL_WITHIN = 0.006
DRIFT_SIGMA = 0.01
DRIFT_TOTAL = 0.05
STORED_SIGMA = 0.02
OFFSETS = (0.005, 0.01, 0.02)

INTERLEAVED = ("normal", "lognormal", "bimodal", "pool", "drift")


def load_pool(name: str = "syscall.null") -> np.ndarray:
    pools = json.loads(POOL.read_text())["pools"]
    if name == "all":
        return np.concatenate([np.asarray(v, dtype=float) for v in pools.values()])
    if name not in pools:
        raise ValueError(f"no pool {name!r} in {POOL.name}; one of {', '.join(pools)} or all")
    return np.asarray(pools[name], dtype=float)


class Noise:
    """One arm's per-process noise (location 1) for a scenario name; the
    pool is read once."""

    def __init__(self, pool: np.ndarray | None = None):
        self.pool = pool

    def process(self, name: str, rng: np.random.Generator, n: int) -> np.ndarray:
        if name == "normal":
            # A normal CV of 2% is never near 0: no clipping needed.
            return 1 + NORMAL_CV * rng.standard_normal(n)
        if name == "lognormal":
            return np.exp(LOGNORMAL_SIGMA * rng.standard_normal(n))
        if name == "bimodal":
            high = rng.random(n) < BIMODAL_HIGH_SHARE
            return np.where(high, BIMODAL_HIGH, 1.0) * np.exp(BIMODAL_WITHIN * rng.standard_normal(n))
        if name == "pool":
            if self.pool is None:
                raise ValueError("the pool scenario needs the pool")
            return rng.choice(self.pool, size=n, replace=True)
        if name == "drift":
            return np.exp(DRIFT_SIGMA * rng.standard_normal(n))
        raise ValueError(f"unknown scenario {name!r}")

    def interleaved(self, name: str, rng: np.random.Generator, n: int,
                    effect: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """n rounds, one process of A and one of B per round."""
        a = self.process(name, rng, n)
        b = self.process(name, rng, n) * (1 + effect)
        if name == "drift":
            # The trend is the machine's: round i costs the same extra for
            # A and B. Centred, so the run's median location stays 1.
            sign = 1.0 if rng.random() < 0.5 else -1.0
            trend = np.exp(sign * DRIFT_TOTAL * (np.arange(n) / max(n - 1, 1) - 0.5))
            a, b = a * trend, b * trend
        return a, b, np.arange(n)

    def stored(self, offset: float, rng: np.random.Generator, runs: int, per_run: int,
               effect: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """runs stored runs per side of per_run processes each; each run
        shifted by its own offset exp(N(0, offset))."""
        def side(scale: float) -> list[np.ndarray]:
            return [scale * float(np.exp(offset * rng.standard_normal()))
                    * np.exp(STORED_SIGMA * rng.standard_normal(per_run)) for _ in range(runs)]
        return side(1.0), side(1 + effect)

    def series(self, name: str, rng: np.random.Generator, labels: int, per_label: int,
               disturb: tuple[int, float] | None = None) -> list[np.ndarray]:
        """A flat series: `labels` labels of per_label processes. name is an
        interleaved scenario's (each label the same noise), or
        "offset:0.01" (each label a stored run with its own offset).
        disturb=(i, x): label i alone is shifted by 1 + x."""
        out = []
        for i in range(labels):
            if name.startswith("offset:"):
                off = float(name.split(":", 1)[1])
                x = float(np.exp(off * rng.standard_normal())) * np.exp(STORED_SIGMA * rng.standard_normal(per_label))
            else:
                x = self.process(name, rng, per_label)
            if disturb is not None and disturb[0] == i:
                x = x * (1 + disturb[1])
            out.append(x)
        return out


def true_cv(name: str, pool: np.ndarray | None = None) -> float:
    """The scenario's true relative spread of one process (SD / mean), for
    the line that sets it beside the robust CV opcost reads."""
    if name == "normal":
        return NORMAL_CV
    if name == "lognormal":
        return float(np.sqrt(np.exp(LOGNORMAL_SIGMA ** 2) - 1))
    if name == "bimodal":
        p, h = BIMODAL_HIGH_SHARE, BIMODAL_HIGH
        mean = 1 - p + p * h
        var = p * (1 - p) * (h - 1) ** 2 + (BIMODAL_WITHIN * mean) ** 2
        return float(np.sqrt(var) / mean)
    if name == "pool" and pool is not None:
        return float(np.std(pool) / np.mean(pool))
    if name == "drift":
        return float(np.hypot(DRIFT_SIGMA, DRIFT_TOTAL / np.sqrt(12)))
    raise ValueError(f"no true CV for {name!r}")
