#!/usr/bin/env python3
"""Agreement check: opcost's instruction benchmarks against hand-written C loops.

For xsave, xsavec, xrstor and fxsave (each hot and cold) and 64-bit unsigned
division (inline instruction and shift-subtract software division, dependent
chain) this runs, interleaved in a freshly shuffled order every round:

  (a) one opcost process:
        opcost run SPEC -p 1 -n 20 -w 3 --cpu CPU --no-store --json TMP
      statistic: results[0].summary.median_ns (the median batch, per op);
  (b) one reference process (ref.c, built here with `cc -O2`):
        ref OP ITERS 23 CPU
      with ITERS = the batch length opcost calibrated for that operation
      (results[0].processes[0].samples[0].iters); statistic: the median of its
      last 20 batches (the first 3 are warm-up, as in opcost).

and prints opcost/reference per operation: the median of the per-round
ratios, their min-max, and PASS/FAIL against the band (default 0.95-1.05).
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

Both sides run under the same conditions: mask = XCR0, state = sse (all
components init, then xmm15 loaded), page-aligned area sized by CPUID.0DH;
cold: each batch on the next of 16 such areas (pages), its flush-alone batch
timed right after it on the same area and subtracted from it.
x86_64 only.

Usage: validation/instructions/run.py [--rounds 10] [--cpu N] [--json OUT] [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from loops import checkout_opcost, compare_main, script_main  # noqa: E402

# (name shown, opcost spec, ref OP)
OPS = [
    ("xsave hot", "xstate.xsave:cache=hot", "xsave_hot"),
    ("xsave cold", "xstate.xsave:cache=cold", "xsave_cold"),
    ("xsavec hot", "xstate.xsavec:cache=hot", "xsavec_hot"),
    ("xsavec cold", "xstate.xsavec:cache=cold", "xsavec_cold"),
    ("xrstor hot", "xstate.xrstor:cache=hot", "xrstor_hot"),
    ("xrstor cold", "xstate.xrstor:cache=cold", "xrstor_cold"),
    ("fxsave hot", "xstate.fxsave:cache=hot", "fxsave_hot"),
    ("fxsave cold", "xstate.fxsave:cache=cold", "fxsave_cold"),
    ("div inline", "insn.div:variant=inline,width=64,signed=no,form=latency", "div_inline"),
    ("div soft", "insn.div:variant=soft,width=64,signed=no,form=latency", "div_soft"),
]


def opcost_command() -> tuple[list[str], dict[str, str], str]:
    """`python -m opcost` from this checkout, with this checkout's probe
    (an installed opcost may predate the instruction benchmarks)."""
    return checkout_opcost(REPO, probe=True)


def main(argv: list[str] | None = None) -> int:
    return compare_main(argv, doc=__doc__, here=HERE, ops=OPS, band="0.95,1.05", schema="opcost.validation-instructions/1",
                        opcost_command=opcost_command, aux_fields=True)

if __name__ == "__main__":
    script_main(main)
