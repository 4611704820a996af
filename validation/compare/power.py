#!/usr/bin/env python3
"""Power, accuracy and time to a verdict: a known extra cost is injected into
syscall.null with `spin` and `opcost ab` must report it. A is spin=1, B is
spin=1+k: the two arms run identical code but for k more dependent adds,
whose cost the probe measures alone (header `spin.ns`), so the true ratio is
1 + (alone(1+k) - alone(1)) / median(A). k is chosen for the target slowdown.

By default `ab` runs its sequential design (no -p: looks after 10, 20, 40
processes per arm). With --fixed N every comparison also runs the fixed
design `-p N` on the same injected case, the two back to back in a random
order, and the median wall time of the two designs to a verdict is compared.

Targets (issue 13): 3% reported `slower` in >= 90% of comparisons at the
default delta, 2% in >= 80% with --delta 1; estimate within 1 percentage
point of the truth. A true change equal to the threshold delta is called
`slower` only when its estimate lands above it (about half the time), so
the 2% case runs with --delta 1 (stated in the output)."""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from validation.harness.checkout import ab, probe_header  # noqa: E402


def spin_for(target: float, base_ns: float, cpu: str) -> tuple[int, float, float]:
    """k extra adds whose measured alone-cost is closest to target * base. A
    short chain costs less per add than a long one (out-of-order execution
    hides part of it), so k is refined on the measured extra cost itself."""
    one = probe_header("syscall.null", 1, cpu)["spin"]["ns"]
    want = target * base_ns
    per_add = (probe_header("syscall.null", 201, cpu)["spin"]["ns"] - one) / 200
    k = max(1, round(want / per_add))
    tried: dict[int, float] = {}
    for _ in range(4):
        tried[k] = probe_header("syscall.null", 1 + k, cpu)["spin"]["ns"] - one
        nxt = max(1, round(k * want / tried[k])) if tried[k] > 0 else k * 2
        if nxt in tried:
            break
        k = nxt
    k = min(tried, key=lambda j: abs(tried[j] - want))
    return k, one, tried[k]


def one(k: int, opts: list[str]) -> tuple[dict, float]:
    t = time.monotonic()
    doc = ab(["syscall.null"], "spin=1", f"spin={1 + k}", opts)
    return doc["comparisons"][0], time.monotonic() - t


def row(name: str, target: float, delta: float, k: int, extra: float, got: list[tuple[dict, float]]) -> str:
    n = len(got)
    slower = sum(e["verdict"] == "slower" for e, _ in got)
    errors = [(e["ratio"] - 1) - extra / e["median_a"] for e, _ in got]
    within = sum(abs(x) <= 0.01 for x in errors)
    stops = statistics.median(e["sequential"]["processes_per_arm"] if "sequential" in e else e["n_a"] for e, _ in got)
    return (f"{target:>8.0%}  {delta:>4g}%  {name:<11}  {k:>4}  {extra:>8.2f}  {slower:>3}/{n} {slower / n:>5.0%}  "
            f"{statistics.median(errors):>+7.2%} {max(errors, key=abs):>+7.2%}  {within:>4}/{n}  "
            f"{stops:>7g}  {statistics.median(w for _, w in got):>6.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--comparisons", type=int, default=30)
    ap.add_argument("--targets", default="0.03:2,0.02:1", help="slowdown:delta%% pairs")
    ap.add_argument("--cpu", default="1")
    ap.add_argument("--fixed", type=int, default=None, metavar="N", help="also run -p N on every case and compare times")
    ap.add_argument("run_options", nargs="*", default=[], help="passed to opcost ab (after --)")
    args = ap.parse_args()
    base = ab(["syscall.null"], "spin=1", "spin=1", ["-p", "5", "--cpu", args.cpu])["comparisons"][0]["median_a"]
    print(f"syscall.null:spin=1 costs {base:.1f} ns here")
    rng = random.Random(13)
    rows, ratios = [], []
    t0 = time.monotonic()
    for pair in args.targets.split(","):
        target, delta = (float(x) for x in pair.split(":"))
        k, _, extra = spin_for(target, base, args.cpu)
        designs: dict[str, list] = {"sequential": [], **({f"fixed -p {args.fixed}": []} if args.fixed else {})}
        for i in range(args.comparisons):
            opts = [*args.run_options, "--cpu", args.cpu, "--delta", f"{delta:g}", "--seed", str(1000 + i)]
            order = list(designs)
            rng.shuffle(order)
            for name in order:
                e, wall = one(k, opts + (["-p", str(args.fixed)] if name != "sequential" else []))
                designs[name].append((e, wall))
                truth = extra / e["median_a"]
                q = e.get("sequential")
                print(f"target {target:.0%} k={k} {name}: {i + 1}/{args.comparisons} {e['verdict']:<12} "
                      f"estimate {e['ratio'] - 1:+.2%} truth {truth:+.2%} "
                      f"after {q['processes_per_arm'] if q else e['n_a']} per arm ({wall:.0f} s)", flush=True)
        rows += [row(name, target, delta, k, extra, got) for name, got in designs.items()]
        if args.fixed:
            walls = {name: statistics.median(w for _, w in got) for name, got in designs.items()}
            ratios.append((target, walls["sequential"] / walls[f"fixed -p {args.fixed}"]))
    print(f"\n{time.monotonic() - t0:.0f} s; opcost ab syscall.null --a spin=1 --b spin=1+k "
          f"{' '.join(args.run_options)} --cpu {args.cpu}")
    print("injected  delta  design          k  extra ns  slower          error (median, worst)  within 1 pp  "
          "per arm  wall s  (medians)")
    print("\n".join(rows))
    for target, r in ratios:
        print(f"time to a verdict, {target:.0%} injected: sequential / fixed -p {args.fixed} = {r:.2f} (median wall times)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
