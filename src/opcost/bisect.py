"""`opcost ab ... --bisect`: the A/B's answer as `git bisect run` reads an
exit code. 0: good (B is not slower than A beyond delta in any benchmark:
faster, same or negligible); 1: bad (B is slower in at least one); 125: skip
(a verdict still undecided after the largest stage, withheld, or the run
failed: git tries a neighbouring commit). An interrupted run keeps its
128+signal, which makes `git bisect run` stop. No other code for a verdict."""

from __future__ import annotations

import sys

from .model import Comparison
from .redact import redact

GOOD, BAD, SKIP = 0, 1, 125


def exit_code(doc: dict, run_code: int) -> int:
    if run_code >= 128:       # interrupted: git bisect run stops, as the user asked
        return run_code
    verdicts = [e.verdict for e in Comparison.from_json(doc).comparisons]
    if run_code != 0 or not verdicts:
        return SKIP
    if "slower" in verdicts:
        return BAD
    if all(v in ("faster", "same", "negligible") for v in verdicts):
        return GOOD
    return SKIP


def on_error(e: Exception) -> int:
    """Bad input under --bisect: exit 2 would read as "bad" to `git bisect
    run`. A kernel that does not boot (targets/vm.BootFailed) is skipped
    (125: a commit that does not build or boot tells nothing about the
    cost); any other bad input stops the bisection (128), with its one line."""

    print(f"opcost: {redact(str(e))}", file=sys.stderr)
    from .targets.vm.protocol import BootFailed   # the vm package (~0.25 s): only when a boot failed

    return SKIP if isinstance(e, BootFailed) else 128
