"""`opcost compare RUN_A RUN_B`: two stored runs (not interleaved)."""

from __future__ import annotations

from .. import protocol
from ..console import emit, table_stream, terminal_width, use_color
from ..errors import UsageError
from ..text import printable
from . import REFS, add_export_options

# Runs that differ in these measured different machines: not comparable without --force.
IDENTITY_FIELDS = ("arch", "cpu_model_name", "guest_cpu_model")   # guest: the vm target's (docs/kernels.md)


def add_parser(sub) -> None:
    s = sub.add_parser("compare", help="compare two stored runs (not interleaved)", description=REFS)
    s.add_argument("run_a", metavar="RUN_A", help="run id or label (the baseline)")
    s.add_argument("run_b", metavar="RUN_B", help="run id or label")
    protocol.add_delta(s, interleaved=False)
    s.add_argument("--force", action="store_true", help="compare even when CPU model or architecture differ")
    s.add_argument("--store", metavar="URL", help="result store")
    add_export_options(s, "the opcost.comparison/1 document")


def run(args, argv) -> int:
    from .. import export
    from ..session import exports_of
    from ..store import open_store

    exports = exports_of(args, "comparison")
    with open_store(args.store, readonly=True) as store:
        doc = compare_stored(store, args.run_a, args.run_b, delta=args.delta / 100, force=args.force)
    export.write(exports, doc)
    out = table_stream(exports)
    from ..report import format_comparison

    emit([format_comparison(doc, color=use_color(out), width=terminal_width(out))], out)
    return 0


def compare_stored(store, ref_a: str, ref_b: str, *, delta: float, force: bool, force_flag: str = "--force") -> dict:
    """The opcost.comparison/1 document of two stored runs (`opcost compare`,
    `opcost report --compare`): refused when they are the same run, or ran on
    different machines unless `force` (the option that says so: `force_flag`)."""
    from ..env import differences
    from ..runner import fill_summaries

    id_a, id_b = store.resolve(ref_a), store.resolve(ref_b)
    if id_a == id_b:
        raise UsageError(f"{printable(ref_a)} and {printable(ref_b)} are the same stored run ({id_a}); "
                         "compare two different runs, or measure noise with an interleaved "
                         "`opcost ab BENCH --a P --b P`")
    run_a, run_b = store.load_run(id_a), store.load_run(id_b)
    diffs = differences(run_a.get("env") or {}, run_b.get("env") or {})
    clash = [d for d in diffs if d[0] in IDENTITY_FIELDS]
    if clash and not force:
        what = "; ".join(f"{f}: {a!r} vs {b!r}" for f, a, b in clash)
        raise UsageError(f"runs {id_a} and {id_b} ran on different machines ({what}); "
                         f"their costs are not comparable ({force_flag} to compare anyway)")
    from ..comparison import pair_results, stored_document
    from ..session import local_target, switches_table

    pair_results(run_a, run_b)   # input checked before numpy is imported
    fill_summaries(run_a)
    fill_summaries(run_b)
    return stored_document(run_a, run_b, delta=delta, switches=switches_table(local_target()), diffs=diffs)
