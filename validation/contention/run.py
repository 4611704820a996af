#!/usr/bin/env python3
"""Does the figure opcost compares leave out waiting for the CPU? (issue 25,
item 1; docs/statistics.md, "The figure: time on the CPU".)

Two A/B pairs of known shape, each measured quiet and beside a CPU hog on
the measuring CPU at 25%, 50% and 75% duty:

- an injected cost: `ab syscall.null --a spin=1 --b spin=K` (K-1 dependent
  adds more per operation: a difference that is exact);
- the popcount shape of program: `variants popcount.c -D SOFT -D HW
  --cflags-for HW=-mpopcnt --mode op` (libgcc's table-driven popcount
  against one `popcnt`), both called in a dependent chain inside the probe.

The hog is started and stopped here: one process pinned to the measuring
CPU, busy for duty x PERIOD_MS then asleep for the rest of each period,
ending by itself after HOG_LIMIT_S whatever happens, killed when its
condition ends. Every repetition runs all conditions in a fresh random order,
so the quiet reference is measured in the same run, interleaved with the
loaded ones.

Per condition and pair: the B/A ratio by the figure opcost compares
(`ratio`: time on the CPU for these benchmarks, which do not block) and by
wall time (the arms' `median_wall_ns`), the share of the measured time lost
waiting (summary.contention), and each ratio under load over the quiet
ratio of the same repetition. The goal: the figure's within 2% of quiet at
every duty, where wall time's need not be. Report only: prints the figures,
exits 0 (these machines are shared); exit 2 when a measurement fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from validation.harness.checkout import build_probe, checkout_opcost  # noqa: E402
from validation.harness.script import Failure, log, pick_cpu, script_main  # noqa: E402

DUTIES = (0.0, 0.25, 0.50, 0.75)   # 0: quiet
PERIOD_MS = 20.0                   # the hog's busy+sleep slice
HOG_LIMIT_S = 300                  # a hog ends by itself after this
RUN_TIMEOUT_S = 240                # one opcost command
POPCOUNT = """#include <stdint.h>
uint64_t opcost_op(uint64_t x) { return x + (uint64_t)__builtin_popcountll(x); }
"""
HOG = """
import os, sys, time
duty, period, limit = float(sys.argv[1]), float(sys.argv[2]) / 1e3, float(sys.argv[3])
end = time.monotonic() + limit
busy, idle = duty * period, (1.0 - duty) * period
while time.monotonic() < end:
    t = time.monotonic() + busy
    while time.monotonic() < t:
        pass
    time.sleep(idle)
"""


class Hog:
    """A duty-cycled CPU hog pinned to one CPU, for the `with` block only."""

    def __init__(self, cpu: int, duty: float):
        self.cpu, self.duty, self.proc = cpu, duty, None

    def __enter__(self):
        if self.duty > 0:
            self.proc = subprocess.Popen([sys.executable, "-c", HOG, str(self.duty), str(PERIOD_MS),
                                          str(HOG_LIMIT_S)], preexec_fn=lambda: os.sched_setaffinity(0, {self.cpu}))
            time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def opcost(argv: list[str], keep: Path | None = None) -> dict:
    """One opcost command of this checkout (its probe too); its --json
    document (also written into `keep`, a directory, when given)."""
    cmd, env, _ = checkout_opcost(probe=True)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "doc.json"
        try:
            cp = subprocess.run([*cmd, *argv, "--no-store", "--no-progress", "--json", str(out)],
                                capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, cwd=d)
        except subprocess.TimeoutExpired:
            raise Failure(f"opcost {' '.join(argv[:2])}: no answer within {RUN_TIMEOUT_S} s") from None
        if cp.returncode not in (0, 1) or not out.exists():
            raise Failure(f"opcost {' '.join(argv[:2])} failed ({cp.returncode}): {cp.stderr.strip()[-400:]}")
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{len(list(keep.iterdir())):03d}.json").write_text(out.read_text())
        return json.loads(out.read_text())


def figures(doc: dict) -> dict:
    """The B/A ratios of the first comparison of a document, by the figure and by wall time."""
    c = doc["comparisons"][0]
    sa, sb = c["a"]["summary"], c["b"]["summary"]
    lost = [(s.get("contention") or {}).get("lost_share") for s in (sa, sb)]
    return {"ratio": c["ratio"], "ratio_wall": sb["median_wall_ns"] / sa["median_wall_ns"],
            "figure": sa.get("figure"), "lost": max((x for x in lost if x is not None), default=None),
            "a_ns": sa["median_ns"], "a_wall_ns": sa["median_wall_ns"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", type=int, help="the measuring CPU (default: the last this process may use)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of every condition (default 3)")
    ap.add_argument("-p", "--processes", type=int, default=8, help="processes per arm (default 8)")
    ap.add_argument("-n", "--samples", type=int, default=15, help="measured batches per process (default 15)")
    ap.add_argument("--spin", type=int, default=201, help="B's spin= against A's spin=1 (default 201)")
    ap.add_argument("--keep", type=Path, help="a directory to keep every comparison document in")
    args = ap.parse_args()
    cpu = pick_cpu(ap, args.cpu)
    build_probe()
    common = ["-p", str(args.processes), "-n", str(args.samples), "-w", "3", "--cpu", str(cpu)]
    src_dir = Path(tempfile.mkdtemp(prefix="opcost-contention-"))
    (src_dir / "popcount.c").write_text(POPCOUNT)
    pairs = {
        f"syscall.null spin=1 vs spin={args.spin}":
            ["ab", "syscall.null", "--a", "spin=1", "--b", f"spin={args.spin}", *common],
        "popcount SOFT vs HW (op mode)":
            ["variants", str(src_dir / "popcount.c"), "-D", "SOFT", "-D", "HW", "--cflags-for", "HW=-mpopcnt",
             "--mode", "op", *common],
    }
    rng = random.Random(25)
    rows: list[dict] = []
    t0 = time.monotonic()
    for rep in range(args.reps):
        order = list(DUTIES)
        rng.shuffle(order)
        for duty in order:
            with Hog(cpu, duty):
                for name, argv in pairs.items():
                    f = figures(opcost(argv, args.keep))
                    rows.append({"rep": rep, "duty": duty, "pair": name, **f})
                    log(f"rep {rep + 1}/{args.reps}, hog {duty:.0%}, {name}: ratio {f['ratio']:.4f} "
                        f"(wall {f['ratio_wall']:.4f}), lost {f['lost'] or 0:.1%}, {time.monotonic() - t0:.0f} s")
    print(f"contention: measuring CPU {cpu}, hog pinned there ({PERIOD_MS:g} ms busy+sleep periods), "
          f"{args.reps} repetitions, {args.processes} processes per arm, {args.samples} batches each; "
          f"{time.monotonic() - t0:.0f} s")
    print("ratio: B/A by the figure opcost compares; wall: by wall time; x quiet: over the quiet ratio of the "
          "same repetition; lost: share of the measured time lost waiting (the larger arm's)")
    for name in pairs:
        print(f"\n{name} (figure: {next(r['figure'] for r in rows if r['pair'] == name)})")
        print(f"  {'hog':>4}  {'ratio':>7}  {'wall':>7}  {'ratio x quiet':>22}  {'wall x quiet':>22}  {'lost':>13}")
        quiet = {r["rep"]: r for r in rows if r["pair"] == name and r["duty"] == 0.0}
        for duty in DUTIES:
            rs = [r for r in rows if r["pair"] == name and r["duty"] == duty]
            rel = [r["ratio"] / quiet[r["rep"]]["ratio"] for r in rs]
            relw = [r["ratio_wall"] / quiet[r["rep"]]["ratio_wall"] for r in rs]
            lost = [r["lost"] or 0.0 for r in rs]

            def span(xs):
                return f"{statistics.median(xs):.4f} [{min(xs):.3f}-{max(xs):.3f}]"
            print(f"  {duty:>4.0%}  {statistics.median(r['ratio'] for r in rs):>7.4f}  "
                  f"{statistics.median(r['ratio_wall'] for r in rs):>7.4f}  {span(rel):>22}  {span(relw):>22}  "
                  f"{min(lost):>5.1%}-{max(lost):.1%}")
    worst = max(abs(r["ratio"] / q["ratio"] - 1) for r in rows
                for q in [next(x for x in rows if x["pair"] == r["pair"] and x["rep"] == r["rep"] and x["duty"] == 0)])
    worst_w = max(abs(r["ratio_wall"] / q["ratio_wall"] - 1) for r in rows
                  for q in [next(x for x in rows
                                 if x["pair"] == r["pair"] and x["rep"] == r["rep"] and x["duty"] == 0)])
    print(f"\nlargest departure from the quiet ratio: figure {worst:.2%}, wall time {worst_w:.2%} "
          f"(goal: figure within 2%)")
    return 0


if __name__ == "__main__":
    script_main(main)
