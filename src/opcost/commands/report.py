"""`opcost report [RUN... | --last | --compare A B | --series BENCH --by KEY]
--format F [-o FILE]`: stored runs, comparisons and series in the formats
people read and tools consume, one module per format in opcost.formats
(FORMATS). A format with `serialize_runs(docs)` (html) takes several runs as
one document, reading each run's plain sample columns only."""

from __future__ import annotations

from .. import output, protocol
from ..errors import UsageError
from ..formats import FORMATS, screened
from ..model import kind_of
from ..safetext import printable
from . import REFS, add_store_option


def add_parser(sub) -> None:
    s = sub.add_parser("report", help="write stored runs or a comparison as text, markdown, csv, json, "
                       "Go benchmark format (benchstat) or hyperfine JSON",
                       description=REFS + " Without RUN, --last or --compare: the latest run. Formats: "
                       + ", ".join(f"{n} ({', '.join(m.KINDS)})" for n, m in FORMATS.items())
                       + "; several RUNs only where the outputs concatenate ("
                       + ", ".join(n for n, m in FORMATS.items() if getattr(m, "MANY", None) is not None) + ").")
    s.add_argument("runs", nargs="*", metavar="RUN", help="run id or label (several: one report each, "
                   "one after the other)")
    s.add_argument("--last", action="store_true", help="the latest stored run")
    s.add_argument("--compare", nargs="+", metavar="RUN", help="A B: compare stored runs (A the baseline; several "
                   "a side as RUN,RUN,...), as `opcost compare A B`")
    s.add_argument("--series", metavar="BENCH[:PARAMS]", help="the series of stored runs labelled --by KEY, "
                   "as `opcost series BENCH --by KEY`")
    s.add_argument("--by", metavar="KEY", help="with --series: the label key whose values are the series")
    s.add_argument("--order", metavar="V1,V2,...", help="with --series: the label values in order "
                   "(default: time of the runs)")
    s.add_argument("--order-file", metavar="FILE", help="with --series: the order, one value a line")
    protocol.add_delta(s, interleaved=False)
    s.add_argument("--any-machine", action="store_true", help="with --compare or --series: compare even when CPU "
                   "model or architecture differ")
    s.add_argument("--allow-emulated", action="store_true", help="with --compare or --series: give verdicts "
                   "(change points) on runs emulated under QEMU's TCG too, as `opcost compare --allow-emulated`")
    s.add_argument("--format", "-f", default="text", metavar="F",
                   help=f"one of {', '.join(FORMATS)} (default text)")
    s.add_argument("-o", "--output", metavar="FILE", default="-",
                   help="write here ('-', the default: standard output); an existing file only with --force")
    s.add_argument("--force", action="store_true", help="overwrite an existing -o FILE")
    add_store_option(s)


def check(args) -> str:
    """The arguments, before the store is opened: returns the kind of
    document the report is of."""

    fmt = args.format
    if fmt not in FORMATS:
        raise UsageError(f"--format {printable(fmt)}: unknown format; give one of {', '.join(FORMATS)}")
    series_only = [f for f, v in (("--by", args.by), ("--order", args.order), ("--order-file", args.order_file))
                   if v is not None]
    if args.series is not None:
        if args.compare is not None or args.runs or args.last:
            raise UsageError("--series BENCH --by KEY names its runs by their labels; give no RUN, --last or "
                             "--compare with it")
        from ..series import check_by   # --help must not load it

        check_by(args.by, f"--series {printable(args.series)}")
        kind = "series"
    elif series_only:
        raise UsageError(f"{series_only[0]} goes with --series BENCH (e.g. --series signal.catch --by commit)")
    elif args.compare is not None:
        if len(args.compare) != 2:
            raise UsageError(f"--compare takes two runs, A (the baseline) and B, not {len(args.compare)}: "
                             "e.g. --compare base next")
        if args.runs or args.last:
            raise UsageError("--compare A B names the runs itself; give no RUN or --last with it")
        kind = "comparison"
    else:
        if args.runs and args.last:
            raise UsageError("give RUN... or --last, not both (--last is the latest run)")
        for flag, given in (("--any-machine", args.any_machine), ("--allow-emulated", args.allow_emulated)):
            if given:
                raise UsageError(f"{flag} goes with --compare A B or --series BENCH (stored runs compared); a "
                                 "report of runs compares nothing")
        kind = "result"
    module = FORMATS[fmt]
    if kind not in module.KINDS:
        raise UsageError(f"--format {fmt} does not take a {kind} document (it takes: {', '.join(module.KINDS)}); "
                         + ("report the two runs one at a time, e.g. `opcost report A -f go`, and compare "
                            "those files" if kind == "comparison" else "choose another format"))
    if len(args.runs) > 1 and getattr(module, "MANY", None) is None and not hasattr(module, "serialize_runs"):
        many = [n for n, m in FORMATS.items() if getattr(m, "MANY", None) is not None or hasattr(m, "serialize_runs")]
        raise UsageError(f"--format {fmt} writes one document, and {len(args.runs)} runs were given; "
                         f"give one RUN, or use {', '.join(many)}")
    output.check_target(args.output, "-o", overwrite=args.force)
    return kind


def run(args, argv) -> int:
    from ..store import open_store   # --help must not load it

    kind = check(args)
    module = FORMATS[args.format]
    missing = getattr(module, "available", lambda: None)()
    if missing:
        raise UsageError(missing)
    docs = []
    with open_store(args.store, readonly=True) as store:
        if kind == "series":
            from ..series import read_order, stored_document   # --help must not load it

            order, how = read_order(args.order, args.order_file)
            docs.append(stored_document(store, args.series, args.by.strip(), order=order, order_how=how,
                                        delta=args.delta, force=args.any_machine,
                                        allow_emulated=args.allow_emulated))
        elif kind == "comparison":
            from ..comparison import compare_stored   # --help must not load it

            docs.append(compare_stored(store, args.compare[0], args.compare[1], delta=args.delta,
                                       force=args.any_machine, force_flag="--any-machine",
                                       allow_emulated=args.allow_emulated))
        else:
            refs = list(args.runs)
            if not refs:
                latest = store.list_runs(1)
                if not latest:
                    raise UsageError("the store holds no runs yet; measure one with `opcost run BENCH`")
                refs = [f"id:{latest[0]['id']}"]
            ids = [store.resolve(r) for r in refs]   # every reference checked before any is loaded
            if len(ids) > 1 and hasattr(module, "serialize_runs"):
                # one page of many runs: each reduced as it is read, its samples' plain columns only
                output.save(args.output, screened(args.format, module.serialize_runs(_runs(store, ids,
                                                                                              sample_data=False))))
                return 0
            docs.extend(_fleet(store, d) for d in _runs(store, ids, sample_data=True,
                                                        table_only=getattr(module, "TABLE_ONLY", False)))
    data = getattr(module, "MANY", b"").join(_serialize(module, d) for d in docs)
    output.save(args.output, screened(args.format, data))
    return 0


def _fleet(store, doc: dict) -> dict:
    """A `fleet ab` record as its opcost.fleet/1 document (rebuilt from its
    hosts' runs); any other run as it is."""
    if doc.get("kind") != "fleet":
        return doc
    from ..comparison import stored_fleet   # --help must not load it

    return stored_fleet(store, doc) or doc


def _serialize(module, doc: dict) -> bytes:
    """One document in `module`'s format; a stored `ab`, `variants` or
    `series --run` run, in a format that renders what they printed
    (`serialize_stored`), as its comparison or series, rebuilt from its plan
    (comparison.stored_comparison, series.stored_series)."""

    if kind_of(doc) == "fleet" and "fleet" not in module.KINDS:
        raise UsageError(f"-f {module.NAME}: run {doc.get('run_id')} is a fleet record, which {module.NAME} does "
                         f"not take; give -f text or -f json")
    stored = getattr(module, "serialize_stored", None)
    if stored is not None and "results" in doc and doc.get("run_id") is not None:
        from ..comparison import stored_comparison   # --help must not load it
        from ..series import stored_series   # --help must not load it

        rebuilt = stored_comparison(doc) or stored_series(doc)
        if rebuilt is not None:
            return stored(doc, rebuilt)
    return module.serialize(doc)


def _runs(store, ids, *, sample_data: bool, table_only: bool = False):
    """The runs one at a time, summaries filled where a run has none;
    sample_data=False: each sample only its plain columns (what a page of
    many runs draws); table_only: a plain run without its samples, its
    summaries computed a process at a time where it has none (a format whose
    `TABLE_ONLY` says its results table is all it writes: text, markdown, csv)."""
    for run_id in ids:
        yield store.load_run(run_id, sample_data=sample_data, summaries=True, table_only=table_only)
