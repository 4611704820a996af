#!/usr/bin/env python3
"""Series of stored runs and bimodal series: false change points per flat
series and steps found, by simulation with changepoint.analyse itself.

Each label is R runs (R=1: one run a label, as `run --label commit=X` once
per commit) of P processes; every process of a run is multiplied by the
run's offset exp(N(0, offset^2)); processes are log-normal (2%) or bimodal
(70/30 on two levels 20% apart, 1% within a level). Analysed two ways:

- process: the process as the unit (what a stored series did before, and
  what an interleaved series still does);
- run: the run as the unit (replicates.py; what a stored series does now).

A flat series has no step; a stepped one has +5% from a random inner label.
Printed: false change points per flat series (goal <= 0.05), and for the
stepped ones the share where the step was found within one label.
Seeded; --series per cell.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from opcost import changepoint  # noqa: E402


def draw(rng, kind: str, n: int) -> np.ndarray:
    if kind == "bimodal":
        return np.where(rng.random(n) < 0.3, 0.8, 1.0) * np.exp(0.01 * rng.standard_normal(n))
    return np.exp(0.02 * rng.standard_normal(n))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--series", type=int, default=200)
    ap.add_argument("--labels", type=int, default=10)
    ap.add_argument("--processes", type=int, default=10, help="processes a run")
    ap.add_argument("--runs", default="1,2", help="runs a label")
    ap.add_argument("--offsets", default="0,0.005,0.01,0.02")
    ap.add_argument("--noise", default="lognormal,bimodal")
    ap.add_argument("--step", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=20261127)
    args = ap.parse_args()
    t0 = time.monotonic()
    print(f"{args.series} series a cell, {args.labels} labels, {args.processes} processes a run, "
          f"step {args.step:.0%}, seed {args.seed}")
    print(f"{'noise':<10} {'offset':>6} {'runs/label':>10}  {'process: false/series  found':>29}  "
          f"{'run: false/series  found':>25}")
    for kind in args.noise.split(","):
        for off in (float(x) for x in args.offsets.split(",")):
            for r in (int(x) for x in args.runs.split(",")):
                rng = np.random.default_rng([args.seed, int(off * 1e4), r, len(kind)])
                false = {"process": 0, "run": 0}
                found = {"process": 0, "run": 0}
                for s in range(args.series):
                    for stepped in (False, True):
                        at = int(rng.integers(2, args.labels - 1)) if stepped else None
                        runs = [[draw(rng, kind, args.processes) * math.exp(off * rng.standard_normal())
                                 * (1 + args.step if at is not None and i >= at else 1.0) * 100
                                 for _ in range(r)] for i in range(args.labels)]
                        labels = [np.concatenate(lb) for lb in runs]
                        for unit in ("process", "run"):
                            a = changepoint.analyse(labels, table=False, resamples=500,
                                                    runs=runs if unit == "run" else None)
                            idx = [c["index"] for c in a["change_points"]]
                            if at is None:
                                false[unit] += len(idx)
                            else:
                                found[unit] += any(abs(i - at) <= 1 for i in idx)
                n = args.series
                print(f"{kind:<10} {off:6.1%} {r:>10}  {false['process'] / n:>20.3f} {found['process'] / n:>7.1%}"
                      f"  {false['run'] / n:>16.3f} {found['run'] / n:>7.1%}", flush=True)
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
