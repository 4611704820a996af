#!/usr/bin/env python3
"""Accuracy check: opcost against hand-written C loops for the same operations.

For each of four operations (null syscall, pipe round trip, sched_yield pair,
self-signal) this runs, interleaved in a freshly shuffled order every round:

  (a) one opcost process:
        opcost run SPEC -p 1 -n 20 -w 3 --cpu CPU --no-store --json TMP
      statistic: results[0].summary.median_ns (the median batch, per op);
  (b) one reference process (ref.c, built here with `cc -O2`):
        ref OP ITERS 23 CPU
      with ITERS = the batch length opcost calibrated for that operation
      (results[0].processes[0].samples[0].iters); statistic: the median of its
      last 20 batches (the first 3 are warm-up, as in opcost).

and prints opcost/reference per operation: the median of the per-round
ratios, their min-max, and PASS/FAIL against the band (default 0.97-1.03).
It is a report: exit 0 after printing, unless something crashed; with
--check, exit 1 when a ratio is outside the band.

What is done to keep the comparison about opcost and not about the setup:
  * same CPU for both (default: the last CPU we may run on), both pinned,
    helpers on the same CPU;
  * same batch length (opcost's calibrated iteration count), same number of
    warm-up and measured batches, same statistic (median batch);
  * every round runs the operations in a new random order; for each, the
    opcost process and the reference process run back to back, which one
    first drawn at random, so machine drift (other load, host noise) hits
    both sides alike; the ratio is formed per round within such a pair;
  * before round 1, one opcost process per operation only learns the batch
    length (discarded), so a reference process may run before its opcost
    partner;
  * a pair in which either process got less than --min-share (0.8) of the
    CPU (CPU time / wall time; opcost: its per-batch getrusage and wall_ns
    summed over the measured batches; reference: its whole-process rusage,
    helper included, over its wall time) was disturbed by another task on
    the CPU and is run again, up to --retries (3) times; every attempt is
    kept in --json;
  * opcost's runner gives every probe process a random-length environment
    variable (stack placement randomisation); the reference gets the same
    (a random 0-4096 byte variable), so a lucky or unlucky fixed stack
    alignment of the reference does not bias the ratio.
What is deliberately *not* equalised, because it is the point of the check:
opcost's overhead subtraction (clock pair + empty-loop cost per iteration),
its TSC-to-ns conversion (TSC rate calibrated against CLOCK_MONOTONIC_RAW)
versus the reference's plain clock_gettime(CLOCK_MONOTONIC), its per-batch
bookkeeping between batches, its static probe binary versus a plain
dynamically linked `cc -O2` program, and whatever the opcost CLI process
does while its probe runs (reading the probe's output, and any threads it
has, which can share the measuring CPU).

Usage: validation/overhead/run.py [--rounds 10] [--cpu N] [--json OUT] [--check]
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from loops import checkout_opcost, compare_main, script_main  # noqa: E402

# (name shown, opcost spec, ref OP)
OPS = [
    ("syscall.null", "syscall.null", "getppid"),
    ("ctx.pipe", "ctx.pipe", "pipe"),
    ("ctx.yield", "ctx.yield", "yield"),
    ("signal.catch", "signal.catch", "signal"),
]


def opcost_command() -> tuple[list[str], dict[str, str], str]:
    """The opcost CLI: on PATH, else `python -m opcost` from this checkout."""
    exe = shutil.which("opcost")
    if exe:
        return [exe], dict(os.environ), exe
    return checkout_opcost(REPO)


def main(argv: list[str] | None = None) -> int:
    return compare_main(argv, doc=__doc__, here=HERE, ops=OPS, band="0.97,1.03", schema="opcost.validation-overhead/1",
                        opcost_command=opcost_command)

if __name__ == "__main__":
    script_main(main)
