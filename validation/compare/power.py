#!/usr/bin/env python3
"""Power, accuracy and time to a verdict: a known extra cost is injected into
syscall.null with `spin` and `opcost ab` must report it. A is spin=1, B is
spin=1+k: the two arms run identical code but for k more dependent adds
after each system call (same benchmark, same parameters but the count, same
protocol: the verdict logic sees nothing else).

The size injected is measured, not assumed: the k adds cost less after a
system call than alone (the probe's header `spin.ns`), so "3%" by the alone
cost measured about 2.4%. Before the comparisons of a case, a calibration
(interleaved `opcost ab ... -p --calibration-processes`, the comparisons'
own options and CPU) measures spin=1 against spin=1+k: k starts from the
alone cost and is refined on the measured extra cost over A (a line through
0 fitted to the calibration runs whose 95% CI is narrower than +/- the asked
size: extra share = slope x k), until the measured extra cost is the asked
share of the base; when no run resolves it (a loaded machine), k stays the
alone cost's and the output says so. Printed next to the target: that calibration figure with its CI, and
the size over all the case's comparisons (every process median of A and of
B pooled), which is the truth the estimate errors are taken against.

By default `ab` runs its sequential design (no -p: looks after 10, 20, 40
processes per arm). With --fixed N the first --fixed-comparisons
comparisons of a case also run the fixed design `-p N` on the same injected
case, the two back to back in a random order, and the median wall time of
the two designs to a verdict is compared.

Targets (issue 13): 3% reported `slower` in >= 90% of comparisons at the
default delta, 2% in >= 80% with --delta 1; estimate within 1 percentage
point of the truth. A true change equal to the threshold delta is called
`slower` only when its estimate lands above it (about half the time), so
the 2% case runs with --delta 1 (stated in the output)."""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from validation.harness.checkout import ab, probe_header  # noqa: E402


def fake_clock_of(opts: list[str]) -> str | None:
    """The --fake-clock NS among the run options, if any."""
    for i, o in enumerate(opts):
        if o == "--fake-clock" and i + 1 < len(opts):
            return opts[i + 1]
        if o.startswith("--fake-clock="):
            return o.split("=", 1)[1]
    return None


def spin_for(target: float, base_ns: float, cpu: str, fake_clock: str | None = None) -> tuple[int, float, float]:
    """k extra adds whose measured alone-cost is closest to target * base. A
    short chain costs less per add than a long one (out-of-order execution
    hides part of it), so k is refined on the measured extra cost itself.
    On the fake clock (the tests), the alone cost is the fake clock's too:
    the start of the calibration, and so its bounds (k0 / 4 to 4 k0), must
    not depend on how fast the adds are on this CPU."""
    def header(spin: int) -> dict:
        return probe_header("syscall.null", spin, cpu, fake_clock)

    one = header(1)["spin"]["ns"]
    want = target * base_ns
    per_add = (header(201)["spin"]["ns"] - one) / 200
    k = max(1, round(want / per_add))
    tried: dict[int, float] = {}
    for _ in range(4):
        tried[k] = header(1 + k)["spin"]["ns"] - one
        nxt = max(1, round(k * want / tried[k])) if tried[k] > 0 else k * 2
        if nxt in tried:
            break
        k = nxt
    k = min(tried, key=lambda j: abs(tried[j] - want))
    return k, one, tried[k]


def calibrate(target: float, base: float, cpu: str, opts: list[str], processes: int, steps: int,
              seed: int) -> tuple[int, float, list[float] | None, list[tuple[int, float, float]], str]:
    """k such that the measured extra cost of spin=1+k over spin=1 is
    target x A's median: interleaved `ab -p processes` runs at k, refined on
    a line through 0 (share = slope x k) fitted to the runs that resolved
    it. k starts where the adds' cost measured alone (the probe's header)
    puts it. A run resolves the size when its 95% CI of B/A is narrower than
    +/- target (else noise, not k, decides what it measured: on a loaded
    machine a 20-per-arm run can be +/-30% wide, and chasing it would inject
    10x the asked size); k never moves beyond 4x either way of the start.
    Returns k, its measured extra share and that run's 95% CI of B/A - 1,
    every (k, measured share, CI half-width), and how k was chosen."""
    k0, _, _ = spin_for(target, base, cpu, fake_clock_of(opts))
    k = k0
    tried: list[tuple[int, float, float]] = []

    def measure(k: int, i: int) -> dict:
        e = ab(["syscall.null"], "spin=1", f"spin={1 + k}",
               [*opts, "-p", str(processes), "--cpu", cpu, "--seed", str(seed + i)])["comparisons"][0]
        lo, hi = e["ci95_ratio"] or (0.0, math.inf)
        tried.append((k, e["ratio"] - 1, (hi - lo) / 2))
        print(f"  calibration {target:.0%}: k={k} measured {e['ratio'] - 1:+.2%} "
              f"[{lo - 1:+.2%}, {hi - 1:+.2%}]", flush=True)
        return e

    e = None
    for i in range(steps):
        e = measure(k, i)
        good = [(kk, m) for kk, m, half in tried if half < target]
        if not good:
            continue     # unresolved: measure again at the same k
        slope = sum(kk * m for kk, m in good) / sum(kk * kk for kk, _ in good)
        nxt = round(target / slope) if slope > 0 else k
        nxt = min(1023, max(1, k0 // 4, min(4 * k0, nxt)))
        if nxt == k:
            break
        k = nxt
        e = None
    if e is None:
        e = measure(k, steps)
    resolved = any(half < target for _, _, half in tried)
    how = ("refined on the measured extra cost" if resolved else
           "the alone-cost k: no calibration run resolved the size at this noise (every 95% CI wider than "
           f"+/-{target:.0%})")
    lo, hi = e["ci95_ratio"] or (None, None)
    return k, e["ratio"] - 1, None if lo is None else [lo - 1, hi - 1], tried, how


def one(k: int, opts: list[str]) -> tuple[dict, float]:
    t = time.monotonic()
    doc = ab(["syscall.null"], "spin=1", f"spin={1 + k}", opts)
    return doc["comparisons"][0], time.monotonic() - t


def pooled(got: list[tuple[dict, float]]) -> float:
    """The injected size over every process of every comparison of a case:
    median of all B process medians over median of all A's, less 1."""
    a = [x for e, _ in got for x in e["a"]["summary"]["process_medians_ns"]]
    b = [x for e, _ in got for x in e["b"]["summary"]["process_medians_ns"]]
    return statistics.median(b) / statistics.median(a) - 1


def row(name: str, target: float, delta: float, k: int, truth: float, got: list[tuple[dict, float]]) -> str:
    n = len(got)
    slower = sum(e["verdict"] == "slower" for e, _ in got)
    errors = [(e["ratio"] - 1) - truth for e, _ in got]
    within = sum(abs(x) <= 0.01 for x in errors)
    stops = statistics.median(e["sequential"]["processes_per_arm"] if "sequential" in e else e["n_a"] for e, _ in got)
    covered = sum(e["ci95_ratio"] is not None and e["ci95_ratio"][0] <= 1 + truth <= e["ci95_ratio"][1]
                  for e, _ in got)
    return (f"{target:>8.0%}  {truth:>+8.2%}  {delta:>4g}%  {name:<11}  {k:>4}  {slower:>3}/{n} {slower / n:>5.0%}  "
            f"{statistics.median(errors):>+7.2%} {max(errors, key=abs):>+7.2%}  {within:>4}/{n}  "
            f"{covered:>4}/{n}  {stops:>7g}  {statistics.median(w for _, w in got):>6.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--comparisons", type=int, default=30)
    ap.add_argument("--targets", default="0.03:2,0.02:1", help="slowdown:delta%% pairs")
    ap.add_argument("--cpu", default="1")
    ap.add_argument("--fixed", type=int, default=None, metavar="N", help="also run -p N and compare times")
    ap.add_argument("--fixed-comparisons", type=int, default=None, metavar="M",
                    help="with --fixed: only the first M comparisons of a case also run -p N (default: all)")
    ap.add_argument("--calibration-processes", type=int, default=20, help="per arm, each calibration run")
    ap.add_argument("--calibration-steps", type=int, default=3, help="refinements of k at most")
    ap.add_argument("--minutes", type=float, default=None, help="start no comparison after this long (per case)")
    ap.add_argument("--keep", default=None, help="directory for the comparison entries (JSON lines)")
    ap.add_argument("run_options", nargs="*", default=[], help="passed to opcost ab (after --)")
    args = ap.parse_args()
    base = ab(["syscall.null"], "spin=1", "spin=1", [*args.run_options, "-p", "5", "--cpu", args.cpu])
    base = base["comparisons"][0]["median_a"]
    print(f"syscall.null:spin=1 costs {base:.1f} ns here; load average {os.getloadavg()[0]:.2f}")
    rng = random.Random(13)
    rows, ratios, sizes = [], [], []
    keep = open(args.keep, "w") if args.keep else None
    t0 = time.monotonic()
    for c, pair in enumerate(args.targets.split(",")):
        target, delta = (float(x) for x in pair.split(":"))
        k, measured, ci, tried, how = calibrate(target, base, args.cpu, args.run_options, args.calibration_processes,
                                           args.calibration_steps, 500 + 100 * c)
        fixed_name = f"fixed -p {args.fixed}"
        designs: dict[str, list] = {"sequential": [], **({fixed_name: []} if args.fixed else {})}
        tc = time.monotonic()
        for i in range(args.comparisons):
            if args.minutes is not None and time.monotonic() - tc > args.minutes * 60:
                print(f"  --minutes {args.minutes:g}: {i} of {args.comparisons} comparisons", flush=True)
                break
            opts = [*args.run_options, "--cpu", args.cpu, "--delta", f"{delta:g}", "--seed", str(1000 + i)]
            order = [d for d in designs if d == "sequential" or args.fixed_comparisons is None
                     or i < args.fixed_comparisons]
            rng.shuffle(order)
            for name in order:
                e, wall = one(k, opts + (["-p", str(args.fixed)] if name != "sequential" else []))
                designs[name].append((e, wall))
                if keep:
                    keep.write(json.dumps({"target": target, "delta": delta, "k": k, "design": name, "wall_s": wall,
                                           "entry": e}) + "\n")
                q = e.get("sequential")
                print(f"target {target:.0%} k={k} {name}: {i + 1}/{args.comparisons} {e['verdict']:<12} "
                      f"estimate {e['ratio'] - 1:+.2%} "
                      f"after {q['processes_per_arm'] if q else e['n_a']} per arm ({wall:.0f} s, "
                      f"load {os.getloadavg()[0]:.2f})", flush=True)
        truth = pooled([g for got in designs.values() for g in got])
        sizes.append((target, k, measured, ci, truth, tried, how, sum(len(g) for g in designs.values())))
        rows += [row(name, target, delta, k, truth, got) for name, got in designs.items() if got]
        if args.fixed and designs[fixed_name]:
            # the time ratio over the comparisons that ran both designs
            m = len(designs[fixed_name])
            walls = {name: statistics.median(w for _, w in got[:m]) for name, got in designs.items()}
            ratios.append((target, m, walls["sequential"] / walls[fixed_name],
                           statistics.median(e["sequential"]["processes_per_arm"] for e, _ in designs["sequential"][:m])
                           / args.fixed))
    print(f"\n{time.monotonic() - t0:.0f} s; opcost ab syscall.null --a spin=1 --b spin=1+k "
          f"{' '.join(args.run_options)} --cpu {args.cpu}; load average now {os.getloadavg()[0]:.2f}")
    for target, k, measured, ci, truth, tried, how, n in sizes:
        cis = f" [{ci[0]:+.2%}, {ci[1]:+.2%}]" if ci else ""
        print(f"injected {target:.0%} asked: k={k}; calibration (-p {args.calibration_processes}) measured "
              f"{measured:+.2%}{cis}; over all {n} comparisons' processes {truth:+.2%} (the truth below); "
              f"k: {how}; calibration runs (k, measured +/- CI half-width): "
              + ", ".join(f"{kk} {m:+.2%}+/-{h:.1%}" for kk, m, h in tried))
    print("asked  measured  delta  design          k  slower          error (median, worst)  within 1 pp  "
          "CI covers  per arm  wall s  (medians)")
    print("\n".join(rows))
    for target, m, r, rn in ratios:
        print(f"time to a verdict, {target:.0%} injected: sequential / fixed -p {args.fixed} = {r:.2f} "
              f"(median wall times over the {m} comparisons that ran both); processes per arm: {rn:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
