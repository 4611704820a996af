"""What every validation script does at its edges: log lines on stderr, the
one exception that ends it (Failure: one line, exit 2), the last lines of a
failed program's output, and the CPU it measures on."""

from __future__ import annotations

import argparse
import os
import sys


class Failure(Exception):
    """Something the script cannot go on from; script_main prints it as one line."""


class Disturbed(Failure):
    """A side gave no figure because the CPU was taken from it, as the tool
    itself says (lmbench's lat_ctx prints no line when its overhead,
    measured while another task ran, leaves the switch at or below zero):
    an interleaved pair runs again as for a disturbed CPU share; a Failure
    when it stays so."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def tail(text: str, n: int = 8) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[-n:])


def script_main(main) -> None:
    """Run a validation script's main(): exit with its code; a Failure is
    one line and exit 2, ^C exit 130."""
    try:
        sys.exit(main())
    except Failure as e:
        log(f"run.py: {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        log("run.py: interrupted")
        sys.exit(130)


def pick_cpu(ap: argparse.ArgumentParser, requested: int | None) -> int:
    """--cpu, or the last CPU this process may use; a CPU it may not use is a usage error."""
    allowed = os.sched_getaffinity(0)
    cpu = max(allowed) if requested is None else requested
    if cpu not in allowed:
        ap.error(f"--cpu {cpu}: not a CPU this process may use ({', '.join(map(str, sorted(allowed)))})")
    return cpu
