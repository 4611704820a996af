"""`opcost compare RUN_A RUN_B`: two stored runs (not interleaved)."""

from __future__ import annotations

from .. import protocol
from . import REFS, add_export_options, add_store_option


def add_parser(sub) -> None:
    s = sub.add_parser("compare", help="compare two stored runs (not interleaved)", description=REFS)
    s.add_argument("run_a", metavar="RUN_A", help="run id or label (the baseline)")
    s.add_argument("run_b", metavar="RUN_B", help="run id or label")
    protocol.add_delta(s, interleaved=False)
    s.add_argument("--force", action="store_true", help="compare even when CPU model or architecture differ")
    add_store_option(s)
    add_export_options(s, "the opcost.comparison/1 document")


def run(args, argv) -> int:
    from ..comparison import compare_stored
    from ..present import present
    from ..tables import format_comparison
    from ..session import exports_of
    from ..store import open_store

    exports = exports_of(args, "comparison")
    with open_store(args.store, readonly=True) as store:
        doc = compare_stored(store, args.run_a, args.run_b, delta=args.delta, force=args.force)
    return present(doc, format_comparison, exports)


