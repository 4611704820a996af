#!/usr/bin/env python3
"""Accuracy check: opcost against hand-written C loops for the same operations.

For each of five operations (null syscall through glibc and with the
instruction inline, pipe round trip, sched_yield pair, self-signal) this runs
one opcost process and one process of ref.c (the operation in a bare loop,
built here with `cc -O2`) at the same batch length, interleaved in a freshly
shuffled order every round, and prints opcost/reference per operation
against the band (default 0.97-1.03), then the two sides' process medians
as distributions (levels, matched quantiles, two-sample tests). How (the two
processes, what is kept alike and what deliberately not, the distributions):
validation/harness/refcompare.py.

Usage: validation/overhead/run.py [--rounds 12] [--cpu N] [--json OUT] [--check] [--checkout]
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from validation.harness.checkout import Command, checkout_opcost, installed_opcost  # noqa: E402
from validation.harness.refcompare import compare_main  # noqa: E402
from validation.harness.script import script_main  # noqa: E402

# (name shown, opcost spec, ref OP)
OPS = [
    ("syscall.null", "syscall.null", "getppid"),
    ("syscall.null inline", "syscall.null:via=inline", "getppid-inline"),
    ("ctx.pipe", "ctx.pipe", "pipe"),
    ("ctx.yield", "ctx.yield", "yield"),
    ("signal.catch", "signal.catch", "signal"),
]


def opcost_command() -> Command:
    """The opcost CLI: on PATH, else `python -m opcost` from this checkout."""
    return installed_opcost() or checkout_opcost()


def main(argv: list[str] | None = None) -> int:
    return compare_main(argv, doc=__doc__, here=HERE, ops=OPS, band="0.97,1.03",
                        schema="opcost.validation-overhead/1", opcost_command=opcost_command)


if __name__ == "__main__":
    script_main(main)
