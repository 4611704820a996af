"""`opcost show RUN`: a stored run, as the command that measured it printed it."""

from __future__ import annotations

from functools import partial

from .. import formats
from ..errors import UsageError
from ..safetext import printable
from ..tables import format_comparison, format_fleet, format_results, format_series, format_variants
from . import REFS, add_export_options, add_notes_flag, add_store_option


def add_parser(sub) -> None:
    s = sub.add_parser("show", help="print a stored run", description=REFS + " An ab or variants run is "
                       "printed as its comparison, rebuilt from the stored results; a `fleet ab` or `fleet "
                       "variants` record as its table across hosts (--json: its opcost.fleet/1 document).")
    s.add_argument("run", metavar="RUN", help="run id or label")
    s.add_argument("--functions", nargs="?", type=int, const=15, default=None, metavar="N",
                   help="where the instructions are: the N functions (default 15) the emulator counted most "
                   "instructions in, per op; an ab run: B-A per function, largest change first (docs/counts.md)")
    add_store_option(s)
    add_export_options(s, "its opcost.result/1 document")
    add_notes_flag(s)


def run(args, argv) -> int:
    from ..present import present   # --help must not load it
    from ..session import exports_of   # --help must not load it
    from ..store import open_store   # --help must not load it

    exports = exports_of(args, "result")
    if args.functions is not None and args.functions < 1:
        raise UsageError(f"--functions {args.functions}: give how many functions to show, 1 or more (e.g. 15)")
    with open_store(args.store, readonly=True) as store:
        # the table alone reads no sample when the summaries are stored, and a process at a time when
        # they are not (a run of 10^6 samples)
        doc = store.load_run(args.run, summaries=True, table_only=not exports and args.functions is None)
        if args.functions is None and doc.get("kind") == "fleet":   # a `fleet ab`'s record: its document,
            from ..comparison import stored_fleet                     # rebuilt from its hosts' runs

            fdoc = stored_fleet(store, doc)
            if fdoc is not None:
                formats.check(exports, "fleet")
                return present(fdoc, fleet_table, exports, alone=True)
    if args.functions is not None:
        from ..emucount import format_functions   # --help must not load it

        print(format_functions(doc, args.functions))
        return 0
    # the document alone on stdout with `--json -`, as it always was
    return present(doc, partial(stored_table, all_notes=args.notes), exports, alone=True)


def fleet_table(doc: dict, *, color: bool, width: int | None) -> str:
    return f"run {doc['run_id']}, fleet\n" + format_fleet(doc, color=color, width=width)


def stored_table(doc: dict, *, color: bool, width: int | None, all_notes: bool = False) -> str:
    """A stored run: a line saying which (and what it lacks, if it may lack
    processes: history.missing_note), then its table (format_stored)."""
    from ..history import missing_note     # a command loads what it uses when it runs

    note = missing_note(doc)
    return (f"run {doc['run_id']}" + (f" ({printable(doc['label'])})" if doc.get("label") else "") +
            f", {doc.get('created', '')}, {doc.get('status', '')}" +
            (f", {doc['kind']}" if doc.get("kind") not in (None, "run") else "") + "\n"
            + (f"{note}\n" if note else "") + format_stored(doc, color=color, width=width, all_notes=all_notes))


def format_stored(doc: dict, *, color: bool = False, width: int | None = None, all_notes: bool = True) -> str:
    """A stored run as the command that measured it printed it: `ab` and
    `variants` runs as their comparison, a `series --run` as its series,
    rebuilt from the stored results and the stored plan alone (model.Plan:
    arms, delta, --over, switches per operation); any other, or a run whose
    plan is not known, as the results table."""
    from ..comparison import stored_comparison   # --help must not load it
    from ..series import stored_series   # --help must not load it

    res = doc["results"]
    cdoc = stored_comparison(doc)
    if cdoc is not None and cdoc.get("kind") == "variants":
        return format_variants(cdoc, [r for r in res if not r["params"].get("reference")] +
                               [r for r in res if r["params"].get("reference")], color=color, width=width,
                               all_notes=all_notes)
    if cdoc is not None:
        return format_comparison(cdoc, color=color, width=width)
    sdoc = stored_series(doc)
    if sdoc is not None:
        return format_series(sdoc, color=color)
    return format_results(res, width=width, all_notes=all_notes)
