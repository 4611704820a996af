#!/usr/bin/env python3
"""Which alpha-spending boundary should `ab`'s sequential design use?
Decided by simulation, not by taste: `sequential.decide` itself (the rule
`ab` replays: twice the smaller p of Mann-Whitney and KS, the look's level,
delta, the equivalence stop) on simulated per-process medians, with each
boundary (Lan-DeMets O'Brien-Fleming and Pocock spending) on the very same
data, and the fixed design at 20 per arm (abtest.decide) for reference.

Noise: log-normal per-process medians at CVs 0.5%, 1%, 2%, 3%, and
resampled from real per-process medians (data/aa_pool.json: 88 real A/A
comparisons on the shared 2-core VM, each process relative to its
comparison's median; robust CV 5.7-9.7%, heavy-tailed). B is A's
distribution times 1 + effect. Each trial draws 40 per arm; the sequential
rule sees the first 10, 20, 40 as its looks (the rounds of `ab`).

Printed per case: `slower`/`faster` rate (at effect 0: the false rate, A/A
target <= 5%; above 0: `slower` is the power), where it stopped
(10/20/40), expected and median processes per arm to a verdict relative to
the fixed design's 20 (time aim <= 0.5; `ab` runs the arms in rounds, so
processes per arm is wall time up to the per-look overhead), and the
coverage of the 95% CI reported where it stopped (target 93-97%). Seeded."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from opcost import abtest, sequential  # noqa: E402

POOL = Path(__file__).resolve().parent / "data" / "aa_pool.json"
FIXED = 20


def draw(noise: str, n: int, rng, pools) -> np.ndarray:
    if noise.startswith("real:"):
        return rng.choice(pools[noise[5:]], size=n, replace=True)
    cv = float(noise.rstrip("%")) / 100
    return np.exp(cv * rng.standard_normal(n) - cv * cv / 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=400, help="simulated comparisons per case")
    ap.add_argument("--noise", default="0.5%,1%,2%,3%,real:syscall.null",
                    help="log-normal CVs, or real:BENCH from data/aa_pool.json")
    ap.add_argument("--effects", default="0,0.02,0.03,0.05")
    ap.add_argument("--deltas", default="1,2", help="delta in percent")
    ap.add_argument("--boundaries", default="obf,pocock")
    ap.add_argument("--resamples", type=int, default=300, help="bootstrap resamples per look")
    ap.add_argument("--seed", type=int, default=20261125)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="ks_2samp")
    pools = {b: np.asarray(v) for b, v in json.loads(POOL.read_text())["pools"].items()}
    bounds = args.boundaries.split(",")
    n = sequential.STAGES[-1]
    t0 = time.monotonic()
    print(f"{args.trials} simulated comparisons per case (seed {args.seed}); the same data for every design; "
          f"time = processes per arm to a verdict / {FIXED} (the fixed design's)")
    print("levels: " + "; ".join(f"{b} " + ", ".join(f"{lk.p_level:.3g}" for lk in sequential.looks(
        sequential.STAGES, boundary=b)) for b in bounds))
    head = (f"{'noise':<17} {'delta':>5} {'effect':>6}  {'design':<7} {'slower':>7} {'faster':>7} "
            f"{'stopped 10/20/40':>16}  {'E[n]/20':>7} {'med n/20':>8}  {'coverage':>8}")
    print(head)
    summary = []
    for noise in args.noise.split(","):
        for delta in (float(x) for x in args.deltas.split(",")):
            for effect in (float(x) for x in args.effects.split(",")):
                rng = np.random.default_rng([args.seed, zlib.crc32(noise.encode()), int(delta * 10), int(effect * 1000)])
                rows: dict[str, list] = {b: [] for b in bounds}
                rows["fixed20"] = []
                truth = 1 + effect
                for _ in range(args.trials):
                    a = 100 * draw(noise, n, rng, pools)
                    b = 100 * truth * draw(noise, n, rng, pools)
                    r = list(range(n))
                    for bd in bounds:
                        (e,), _ = sequential.decide([(r, list(a), r, list(b))], delta=delta / 100, rounds=n,
                                                    final=True, resamples=args.resamples, boundary=bd)
                        lo, hi = e["ci95_ratio"]
                        rows[bd].append((e["verdict"], e["sequential"]["processes_per_arm"], lo <= truth <= hi))
                    [f] = abtest.decide([abtest.compare_arms(a[:FIXED], b[:FIXED], delta=delta / 100,
                                                               resamples=args.resamples)])
                    lo, hi = f["ci95_ratio"]
                    rows["fixed20"].append((f["verdict"], FIXED, lo <= truth <= hi))
                for name, got in rows.items():
                    t = len(got)
                    slower = sum(v == "slower" for v, _, _ in got) / t
                    faster = sum(v == "faster" for v, _, _ in got) / t
                    ns = [k for _, k, _ in got]
                    stops = "/".join(str(sum(k == s for k in ns)) for s in sequential.STAGES)
                    cov = sum(c for _, _, c in got) / t
                    print(f"{noise:<17} {delta:>4g}% {effect:>6.0%}  {name:<7} {slower:>7.1%} {faster:>7.1%} "
                          f"{stops if name != 'fixed20' else '-':>16}  {statistics.mean(ns) / FIXED:>7.2f} "
                          f"{statistics.median(ns) / FIXED:>8.2f}  {cov:>8.1%}", flush=True)
                    summary.append({"noise": noise, "delta": delta, "effect": effect, "design": name,
                                    "slower": slower, "faster": faster, "mean_n": statistics.mean(ns),
                                    "median_n": statistics.median(ns), "coverage": cov})
    se = math.sqrt(0.05 * 0.95 / args.trials)
    print(f"\n{time.monotonic() - t0:.0f} s. Targets: A/A slower+faster <= 5% (Monte-Carlo SE at 5%: {se:.1%}); "
          "power: 3% at delta 2% >= 90%, 2% at delta 1% >= 80%; time (median n / 20) aim <= 0.5; coverage 93-97%.")
    print("per boundary, over the cases of each target:")
    for bd in [*bounds, "fixed20"]:
        mine = [s for s in summary if s["design"] == bd]
        aa = max(s["slower"] + s["faster"] for s in mine if s["effect"] == 0)
        p3 = {s["noise"]: s["slower"] for s in mine if s["effect"] == 0.03 and s["delta"] == 2}
        p2 = {s["noise"]: s["slower"] for s in mine if s["effect"] == 0.02 and s["delta"] == 1}
        tm = {s["noise"]: s["median_n"] / FIXED for s in mine if (s["effect"], s["delta"]) in ((0.03, 2), (0.02, 1))}
        cov = [s["coverage"] for s in mine]
        print(f"  {bd:<7} worst A/A {aa:.1%}; power 3%/delta 2: "
              + ", ".join(f"{k} {v:.0%}" for k, v in p3.items()) + "; power 2%/delta 1: "
              + ", ".join(f"{k} {v:.0%}" for k, v in p2.items())
              + f"; median n/20 on those: {min(tm.values()):.2f}-{max(tm.values()):.2f}; coverage {min(cov):.1%}-{max(cov):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
