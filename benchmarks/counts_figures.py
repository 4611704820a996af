#!/usr/bin/env python3
"""Figures for exact kernel counts in a guest under TCG (issue 34), on
Debian's 6.1.0-50 cloud kernel (tests/kernels.py fetches it):

- aa20: an A/A (the same kernel and command line in both arms) over 20
  benchmarks in one `ab`, deciding on instructions:k: the verdicts, none of
  which may be slower or faster. Fixed design, -p P (default 6: the fewest
  processes whose p, Holm-adjusted over 20 benchmarks, can fall under 0.05).
- spread: `run` of syscall.null, ctx.pipe and signal.catch, 10 processes
  (10 boots): per benchmark, each boot's figure for instructions:k (its
  smallest batch per op), their minimum, median, maximum and (max-min)/median.
- ab: a kernel A/B on counts, 6.1.0-50 against 6.1.0-56, the same three
  benchmarks, the sequential design (looks after 10, 20, 40): the wall time
  to the verdict (goal: under 3 minutes) and the verdicts.

    python3 benchmarks/counts_figures.py [aa20|spread|ab ...] [--p N]

Bounded (each command at most 40 minutes) and niced; prints the machine's
load beside every figure and never fails on a figure: this machine is
shared, the figures are for the note."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

TWENTY = ["syscall.null", "syscall.read", "syscall.write", "syscall.stat", "syscall.fstat", "syscall.open",
          "ctx.pipe", "ctx.yield", "signal.catch", "signal.install", "ctx.unix", "ctx.futex", "ctx.eventfd",
          "proc.fork", "proc.vfork", "thread.create", "mem.pagefault", "mem.mmap", "epoll.wait",
          "timer.nanosleep"]
THREE = ["syscall.null", "ctx.pipe", "signal.catch"]
COUNT = ["--accel", "tcg", "--counters", "instructions:k", "--samples", "11", "--warmup", "1", "--target-ms", "1",
         "--no-progress"]


def opcost(args: list[str], out: Path) -> tuple[float, dict, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), XDG_DATA_HOME=tempfile.mkdtemp(prefix="opcost-fig-"))
    argv = ["nice", "-n", "10", sys.executable, "-m", "opcost", *args, "--no-store", "--json", str(out)]
    load = os.getloadavg()[0]
    t = time.monotonic()
    cp = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=2400, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - t
    print(f"  {' '.join(args[:3])}...: exit {cp.returncode}, {wall:.0f} s, load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    if not out.exists():
        raise SystemExit(f"no result: {cp.stderr.strip()[-400:]}")
    return wall, json.loads(out.read_text()), cp.stdout


def aa20(kernel: str, p: int, tmp: Path) -> None:
    _, doc, _ = opcost(["ab", *TWENTY, "--kernel", kernel, "--a", "cmdline=", "--b", "cmdline=", *COUNT,
                        "--verdict-on", "instructions:k", "-p", str(p)], tmp / "aa20.json")
    verdicts = {e["bench"]: e["verdict"] for e in doc["comparisons"]}
    print(f"aa20: A/A, {len(verdicts)} benchmarks, -p {p}, on instructions:k:")
    for e in doc["comparisons"]:
        on = e.get("decided_on") or {}
        print(f"  {e['bench']:16} {e['verdict']:13} A {on.get('a', float('nan')):12.3f} "
              f"B {on.get('b', float('nan')):12.3f} B/A {e.get('ratio', float('nan')):.4f}")
    tally = {v: list(verdicts.values()).count(v) for v in sorted(set(verdicts.values()))}
    print(f"aa20: verdicts {tally}; slower or faster: "
          f"{sum(v in ('slower', 'faster') for v in verdicts.values())} of {len(verdicts)}")


def spread(kernel: str, tmp: Path) -> None:
    _, doc, _ = opcost(["run", *THREE, "--kernel", kernel, *COUNT, "-p", "10"], tmp / "spread.json")
    print("spread: instructions:k per op, each boot's figure (its smallest batch), 10 boots:")
    for r in doc["results"]:
        figs = [min(s["counters"]["instructions:k"] for s in p["samples"]) for p in r["processes"]]
        med = statistics.median(figs)
        print(f"  {r['bench']:14} boots {len(figs):2}  min {min(figs):10.3f}  median {med:10.3f}  "
              f"max {max(figs):10.3f}  (max-min)/median {(max(figs) - min(figs)) / med:.4%}")


def ab(kernels: list[str], tmp: Path) -> None:
    wall, doc, _ = opcost(["ab", *THREE, "--a", f"kernel={kernels[0]}", "--b", f"kernel={kernels[1]}", *COUNT,
                           "--verdict-on", "instructions:k"], tmp / "ab.json")
    print(f"ab: {Path(kernels[0]).parent.name} against {Path(kernels[1]).parent.name}, on instructions:k: "
          f"{wall:.0f} s to the verdict (goal: under 180 s)")
    for e in doc["comparisons"]:
        on = e.get("decided_on") or {}
        print(f"  {e['bench']:14} {e['verdict']:13} A {on.get('a', float('nan')):10.3f} B {on.get('b', float('nan')):10.3f} "
              f"B-A {on.get('difference', float('nan')):+.3f} {on.get('ci95_difference')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="*", help="aa20, spread, ab (default: all three)")
    ap.add_argument("--p", type=int, default=6, choices=range(2, 41), metavar="2..40",
                    help="processes per arm for aa20 (default 6)")
    a = ap.parse_args()
    if set(a.what) - {"aa20", "spread", "ab"}:
        ap.error(f"unknown figure(s) {sorted(set(a.what) - {'aa20', 'spread', 'ab'})}: aa20, spread or ab")
    import kernels

    have = [str(k) for k in kernels.cached()]
    if len(have) < 2:
        raise SystemExit("the test kernels are not fetched: python3 tests/kernels.py")
    tmp = Path(tempfile.mkdtemp(prefix="opcost-counts-"))
    print(f"load average {os.getloadavg()}, {os.cpu_count()} CPUs")
    for what in a.what or ["aa20", "spread", "ab"]:
        {"aa20": lambda: aa20(have[0], a.p, tmp), "spread": lambda: spread(have[0], tmp),
         "ab": lambda: ab(have, tmp)}[what]()


if __name__ == "__main__":
    main()
