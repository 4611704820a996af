"""`opcost compare RUN_A RUN_B`: stored runs (not interleaved), one or
several a side (the runs are then the replicates)."""

from __future__ import annotations

from .. import protocol
from ..errors import UsageError
from ..tables import format_comparison
from . import REFS, add_export_options, add_store_option


def add_parser(sub) -> None:
    s = sub.add_parser("compare", help="compare stored runs (not interleaved)",
                       description=REFS + " Several runs a side (RUN,RUN,... or repeated --a/--b) are the "
                       "replicates: each run's median is one value, and the verdict rests on the run-to-run "
                       "spread; with one run a side there is no verdict (docs/commands/compare.md).")
    s.add_argument("run_a", metavar="RUN_A", nargs="?", help="run id or label, or several joined by commas (the baseline)")
    s.add_argument("run_b", metavar="RUN_B", nargs="?", help="run id or label, or several joined by commas")
    s.add_argument("--a", dest="more_a", action="append", default=[], metavar="RUN",
                   help="a run of side A (the baseline); repeat for several")
    s.add_argument("--b", dest="more_b", action="append", default=[], metavar="RUN",
                   help="a run of side B; repeat for several")
    protocol.add_delta(s, interleaved=False)
    s.add_argument("--force", action="store_true", help="compare even when CPU model or architecture differ")
    s.add_argument("--allow-emulated", action="store_true",
                   help="give verdicts on runs emulated under QEMU's TCG too (their timings are QEMU's, not the "
                   "CPU's), as ab --allow-emulated does")
    add_store_option(s)
    add_export_options(s, "the opcost.comparison/1 document")


def sides(args) -> tuple[list[str], list[str]]:
    """The run references of side A and side B: RUN_A RUN_B, or --a/--b
    (repeated), not both."""
    if args.more_a or args.more_b:
        if args.run_a is not None:
            raise UsageError("give the runs as RUN_A RUN_B or with --a/--b, not both")
        if not args.more_a or not args.more_b:
            raise UsageError(f"--{'a' if not args.more_a else 'b'} RUN is missing: give at least one run "
                             "a side (--a RUN [--a RUN ...] --b RUN [--b RUN ...])")
        return args.more_a, args.more_b
    if args.run_b is None:
        raise UsageError("RUN_A and RUN_B are required: give both sides (e.g. compare 12 20, or several runs a "
                         "side: compare 12,13,14 20,21,22, or --a RUN --b RUN repeated)")
    return [args.run_a], [args.run_b]


def run(args, argv) -> int:
    from ..comparison import compare_stored   # --help must not load it
    from ..present import present   # --help must not load it
    from ..session import exports_of   # --help must not load it
    from ..store import open_store   # --help must not load it

    ref_a, ref_b = sides(args)
    exports = exports_of(args, "comparison")
    with open_store(args.store, readonly=True) as store:
        doc = compare_stored(store, ref_a[0] if len(ref_a) == 1 else ref_a,
                             ref_b[0] if len(ref_b) == 1 else ref_b, delta=args.delta, force=args.force,
                             allow_emulated=args.allow_emulated)
    return present(doc, format_comparison, exports)
