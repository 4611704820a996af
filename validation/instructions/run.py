#!/usr/bin/env python3
"""Agreement check: opcost's instruction benchmarks against hand-written C loops.

For xsave, xsavec, xrstor and fxsave (each hot and cold) and 64-bit unsigned
division (inline instruction and shift-subtract software division, dependent
chain) this runs one opcost process and one process of ref.c (the
instruction in a bare loop, built here with `cc -O2`) at the same batch
length, interleaved in a freshly shuffled order every round, and prints
opcost/reference per operation against the band (default 0.95-1.05). How
(the two processes, what is kept alike and what deliberately not):
validation/harness/refcompare.py.

Both sides run under the same conditions: mask = XCR0, state = sse (all
components init, then xmm15 loaded), page-aligned area sized by CPUID.0DH;
cold: each batch on the next of 16 such areas (pages), its flush-alone batch
timed right after it on the same area and subtracted from it.
x86_64 only.

Usage: validation/instructions/run.py [--rounds 12] [--cpu N] [--json OUT] [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from validation.harness.checkout import Command, checkout_opcost  # noqa: E402
from validation.harness.refcompare import compare_main  # noqa: E402
from validation.harness.script import script_main  # noqa: E402

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


def opcost_command() -> Command:
    """`python -m opcost` from this checkout, with this checkout's probe
    (an installed opcost may predate the instruction benchmarks)."""
    return checkout_opcost(probe=True)


def main(argv: list[str] | None = None) -> int:
    return compare_main(argv, doc=__doc__, here=HERE, ops=OPS, band="0.95,1.05",
                        schema="opcost.validation-instructions/1", opcost_command=opcost_command, aux_fields=True)


if __name__ == "__main__":
    script_main(main)
