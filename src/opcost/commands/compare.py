"""`opcost compare RUN_A RUN_B`: two stored runs (not interleaved)."""

from __future__ import annotations

from .. import protocol
from ..errors import UsageError
from ..text import printable
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
    from ..present import present
    from ..report import format_comparison
    from ..session import exports_of
    from ..store import open_store

    exports = exports_of(args, "comparison")
    with open_store(args.store, readonly=True) as store:
        doc = compare_stored(store, args.run_a, args.run_b, delta=args.delta, force=args.force)
    return present(doc, format_comparison, exports)


def compare_stored(store, ref_a: str, ref_b: str, *, delta: float, force: bool, force_flag: str = "--force") -> dict:
    """The opcost.comparison/1 document of two stored runs (`opcost compare`,
    `opcost report --compare`): refused when they are the same run, or ran on
    different machines unless `force` (the option that says so: `force_flag`).
    Switches per operation come from the runs' plans (A's first)."""
    from ..env import differences
    from ..model import plan_of, same_machine, switches_of

    id_a, id_b = store.resolve(ref_a), store.resolve(ref_b)
    if id_a == id_b:
        raise UsageError(f"{printable(ref_a)} and {printable(ref_b)} are the same stored run ({id_a}); "
                         "compare two different runs, or measure noise with an interleaved "
                         "`opcost ab BENCH --a P --b P`")
    run_a, run_b = store.load_run(id_a, summaries=True), store.load_run(id_b, summaries=True)
    same_machine([(id_a, run_a.get("env") or {}), (id_b, run_b.get("env") or {})], force=force,
                 anyway=f"{force_flag} to compare anyway")
    from ..comparison import stored_document

    return stored_document(run_a, run_b, delta=delta, switches=switches_of(plan_of(run_a), plan_of(run_b)),
                           diffs=differences(run_a.get("env") or {}, run_b.get("env") or {}))
