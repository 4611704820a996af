#!/usr/bin/env python3
"""Stored runs compared: which unit and which method, by simulation with
opcost's own functions.

Each simulated run is P processes (per-process medians) drawn from a noise
model, every process of the run multiplied by the run's offset
exp(N(0, offset^2)) (another boot, another hour); side B's runs are also
multiplied by the true effect. Methods on the same data:

- pooled: every process of a side's runs pooled into one arm,
  abtest.compare_arms + abtest.decide (what `compare` did before: the
  process as the unit across runs);
- runs: replicates.compare_runs + replicates.decide (each run reduced to the
  median of its process medians; Welch t on logs, or pooled t for 1 against
  3+ runs);
- hboot: a hierarchical bootstrap (resample the runs of a side, then the
  processes of each run; percentile CI of the ratio of the sides' geometric
  means of run medians); verdict slower/faster when the CI excludes 1 and the
  ratio is at least delta away from 1.

Printed per cell: false slower/faster on A/A, CI coverage of the true ratio,
and `slower` at the effects asked for. Seeded; --trials per cell.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from opcost import abtest, replicates  # noqa: E402

POOL = Path(__file__).resolve().parent / "data" / "aa_pool.json"


def noise_models(pool: dict) -> dict:
    real = np.array(pool["pools"]["syscall.null"], dtype=float)

    def lognormal(rng, n):
        return np.exp(0.02 * rng.standard_normal(n))

    def bimodal(rng, n):   # 70/30 on two levels 20% apart, 1% within a level
        lvl = np.where(rng.random(n) < 0.3, 0.8, 1.0)
        return lvl * np.exp(0.01 * rng.standard_normal(n))

    def real_pool(rng, n):
        return rng.choice(real, size=n, replace=True)

    return {"lognormal 2%": lognormal, "bimodal 70/30": bimodal, "real A/A pool": real_pool}


def hboot(runs_a, runs_b, rng, resamples: int = 1000):
    def side(runs):
        k = len(runs)
        # each run's bootstrap medians (resample its processes), then each
        # resample picks k runs with replacement and takes its runs' medians
        meds = np.stack([np.median(r[rng.integers(0, r.size, size=(resamples, r.size))], axis=1) for r in runs])
        pick = rng.integers(0, k, size=(resamples, k))
        return np.log(meds[pick, np.arange(resamples)[:, None]]).mean(axis=1)
    d = side(runs_b) - side(runs_a)
    lo, hi = np.percentile(d, [2.5, 97.5])
    est = np.mean([np.log(np.median(r)) for r in runs_b]) - np.mean([np.log(np.median(r)) for r in runs_a])
    return math.exp(est), [math.exp(lo), math.exp(hi)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--processes", type=int, default=10, help="processes per run")
    ap.add_argument("--offsets", default="0,0.005,0.01,0.02", help="run-to-run offset SDs (log)")
    ap.add_argument("--designs", default="1x1,2x2,3x3,1x3", help="runs per side, AxB")
    ap.add_argument("--effects", default="0,0.05", help="true effects (B/A - 1)")
    ap.add_argument("--delta", type=float, default=0.02)
    ap.add_argument("--hboot", type=int, default=300, help="hierarchical bootstrap resamples (0: skip)")
    ap.add_argument("--models", default="", help="noise models, comma-separated (default: all)")
    ap.add_argument("--seed", type=int, default=20261127)
    args = ap.parse_args()
    every = noise_models(json.loads(POOL.read_text()))
    models = {k: v for k, v in every.items() if not args.models or k in args.models.split(",")}
    offsets = [float(x) for x in args.offsets.split(",")]
    designs = [tuple(int(y) for y in x.split("x")) for x in args.designs.split(",")]
    effects = [float(x) for x in args.effects.split(",")]
    t0 = time.monotonic()
    print(f"{args.trials} comparisons a cell, {args.processes} processes a run, delta {args.delta:.0%}, "
          f"seed {args.seed}; SE of a 5% rate: {math.sqrt(0.05 * 0.95 / args.trials):.1%}")
    print(f"{'noise':<14} {'offset':>6} {'runs':>5} {'effect':>6}  "
          f"{'pooled: s/f  cover':>20}  {'runs: s/f  cover  unrepl':>26}  {'hboot: s/f  cover':>19}")
    for mname, draw in models.items():
        for off in offsets:
            for ka, kb in designs:
                for eff in effects:
                    rng = np.random.default_rng([args.seed, int(off * 1e4), ka, kb, int(eff * 1e4),
                                                 list(every).index(mname)])
                    sf = {"pooled": 0, "runs": 0, "hboot": 0}
                    cover = {"pooled": 0, "runs": 0, "hboot": 0}
                    tested = 0
                    truth = 1 + eff
                    for _ in range(args.trials):
                        ra = [draw(rng, args.processes) * math.exp(off * rng.standard_normal())
                              for _ in range(ka)]
                        rb = [draw(rng, args.processes) * math.exp(off * rng.standard_normal()) * truth
                              for _ in range(kb)]
                        c = abtest.decide([abtest.compare_arms(np.concatenate(ra), np.concatenate(rb),
                                                               delta=args.delta, resamples=300)])[0]
                        want = "slower" if eff > 0 else None
                        hit = (c["verdict"] == want) if want else c["verdict"] in ("slower", "faster")
                        sf["pooled"] += hit
                        cover["pooled"] += c["ci95_ratio"][0] <= truth <= c["ci95_ratio"][1]
                        if replicates.replicated(ka, kb):
                            tested += 1
                            r = replicates.decide([replicates.compare_runs(ra, rb, delta=args.delta)])[0]
                            sf["runs"] += (r["verdict"] == want) if want else r["verdict"] in ("slower", "faster")
                            cover["runs"] += r["ci95_ratio"][0] <= truth <= r["ci95_ratio"][1]
                        if args.hboot and ka * kb > 1:
                            est, ci = hboot(ra, rb, rng, args.hboot)
                            claim = (ci[0] > 1 or ci[1] < 1) and abs(est - 1) >= args.delta
                            v = ("slower" if est > 1 else "faster") if claim else None
                            sf["hboot"] += (v == want) if want else v is not None
                            cover["hboot"] += ci[0] <= truth <= ci[1]
                    n = args.trials

                    def pc(x, m=n):
                        return f"{x / m:6.1%}" if m else "     -"
                    hb = (f"{pc(sf['hboot'])} {pc(cover['hboot'])}" if args.hboot and ka * kb > 1
                          else "     -      -")
                    print(f"{mname:<14} {off:6.1%} {ka}x{kb:<3} {eff:6.1%}  {pc(sf['pooled'])} {pc(cover['pooled'])}"
                          f"       {pc(sf['runs'], tested)} {pc(cover['runs'], tested)} {pc(n - tested)}"
                          f"   {hb}", flush=True)
    print(f"({time.monotonic() - t0:.0f} s; s/f: `slower` at an effect, false slower/faster at 0; "
          f"cover: the 95% CI holds the true ratio; unrepl: no verdict, one run a side)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
