"""`opcost show RUN`: a stored run, as the command that measured it printed it."""

from __future__ import annotations

import sys

from ..console import terminal_width, use_color
from ..errors import UsageError
from ..text import printable
from . import REFS, add_export_options


def add_parser(sub) -> None:
    s = sub.add_parser("show", help="print a stored run", description=REFS + " An ab or variants run is "
                       "printed as its comparison, rebuilt from the stored results.")
    s.add_argument("run", metavar="RUN", help="run id or label")
    s.add_argument("--store", metavar="URL", help="result store")
    add_export_options(s, "its opcost.result/1 document")


def run(args, argv) -> int:
    from .. import export
    from ..runner import fill_summaries
    from ..session import exports_of, local_target
    from ..store import open_store

    exports = exports_of(args, "result")
    with open_store(args.store, readonly=True) as store:
        doc = store.load_run(args.run)
    fill_summaries(doc)
    export.write(exports, doc)
    if export.to_stdout(exports):
        return 0   # the document alone on stdout, as `--json -` always gave
    print(f"run {doc['run_id']}" + (f" ({printable(doc['label'])})" if doc.get("label") else "") +
          f", {doc.get('created', '')}, {doc.get('status', '')}" +
          (f", {doc['kind']}" if doc.get("kind") not in (None, "run") else ""))
    print(format_stored(doc, local_target()))
    return 0


def format_stored(doc: dict, target) -> str:
    """A stored run as the command that measured it printed it: `ab` and
    `variants` runs as their comparison, a `series --run` as its series (rebuilt from the stored results and
    the stored command line, an `ab`'s switches per operation from the
    target's table), any other as the results table."""
    from ..comparison import ab_document, variants_document
    from ..report import format_comparison, format_results, format_variants
    from ..session import switches_table

    args = _stored_args(doc)
    res = doc["results"]
    if doc.get("kind") == "ab" and args is not None and len(res) == 2 * len(args.benches):
        from ..targets.vm import withhold_emulated

        cdoc = ab_document(res, a=args.a, b=args.b, delta=args.delta / 100, run_id=doc["run_id"],
                           env=doc.get("env"), switches=switches_table(target))
        cdoc = withhold_emulated(cdoc, getattr(args, "allow_emulated", False))
        return format_comparison(cdoc, color=use_color(sys.stdout), width=terminal_width(sys.stdout))
    if doc.get("kind") == "variants" and args is not None and res:
        vdoc = variants_document(res, delta=args.delta / 100, run_id=doc["run_id"], env=doc.get("env"))
        return format_variants(vdoc, [r for r in res if not r["params"].get("reference")] +
                               [r for r in res if r["params"].get("reference")], color=use_color(sys.stdout),
                               width=terminal_width(sys.stdout))
    if doc.get("kind") == "series" and args is not None and args.over is not None:
        from ..report import format_series
        from ..series import measured_document, parse_over

        param, values = parse_over(args.over)
        if len(res) == len(values) and sum(1 for r in res if r.get("processes")) >= 3:
            return format_series(measured_document(res, values, param=param, spec=args.run, delta=args.delta / 100,
                                                   run_id=doc["run_id"], env=doc.get("env")),
                                 color=use_color(sys.stdout))
    return format_results(res, width=terminal_width(sys.stdout))


def _stored_args(doc: dict):
    """The stored command line parsed again (ab's --a/--b/--delta), or None
    when it does not parse (another version's options)."""
    from . import build_parser, check_args

    argv = doc.get("argv") or []
    try:
        args = build_parser().parse_args([str(a) for a in argv[1:]])
        check_args(args)
    except (UsageError, SystemExit):
        return None
    return args if args.command == doc.get("kind") else None
