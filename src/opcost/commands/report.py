"""`opcost report [RUN... | --last | --compare A B] --format F [-o FILE]`:
stored runs and comparisons in the formats people read and tools consume,
one module per format in opcost.export (FORMATS)."""

from __future__ import annotations

from .. import protocol
from ..errors import UsageError
from ..text import printable
from . import REFS


def add_parser(sub) -> None:
    from ..export import FORMATS

    s = sub.add_parser("report", help="write stored runs or a comparison as text, markdown, csv, json, "
                       "Go benchmark format (benchstat) or hyperfine JSON",
                       description=REFS + " Without RUN, --last or --compare: the latest run. Formats: "
                       + ", ".join(f"{n} ({', '.join(m.KINDS)})" for n, m in FORMATS.items())
                       + "; several RUNs only where the outputs concatenate ("
                       + ", ".join(n for n, m in FORMATS.items() if getattr(m, "MANY", None) is not None) + ").")
    s.add_argument("runs", nargs="*", metavar="RUN", help="run id or label (several: one report each, "
                   "one after the other)")
    s.add_argument("--last", action="store_true", help="the latest stored run")
    s.add_argument("--compare", nargs="+", metavar="RUN", help="A B: compare two stored runs (A the baseline), "
                   "as `opcost compare A B`")
    protocol.add_delta(s, interleaved=False)
    s.add_argument("--any-machine", action="store_true", help="with --compare: compare even when CPU model or "
                   "architecture differ")
    s.add_argument("--format", "-f", default="text", metavar="F",
                   help=f"one of {', '.join(FORMATS)} (default text)")
    s.add_argument("-o", "--output", metavar="FILE", default="-",
                   help="write here ('-', the default: standard output); an existing file only with --force")
    s.add_argument("--force", action="store_true", help="overwrite an existing -o FILE")
    s.add_argument("--store", metavar="URL", help="result store")


def check(args) -> str:
    """The arguments, before the store is opened: returns the kind of
    document the report is of."""
    from .. import output
    from ..export import FORMATS

    fmt = args.format
    if fmt not in FORMATS:
        raise UsageError(f"--format {printable(fmt)}: unknown format; give one of {', '.join(FORMATS)}")
    if args.compare is not None:
        if len(args.compare) != 2:
            raise UsageError(f"--compare takes two runs, A (the baseline) and B, not {len(args.compare)}: "
                             "e.g. --compare base next")
        if args.runs or args.last:
            raise UsageError("--compare A B names the runs itself; give no RUN or --last with it")
        kind = "comparison"
    else:
        if args.runs and args.last:
            raise UsageError("give RUN... or --last, not both (--last is the latest run)")
        kind = "result"
    module = FORMATS[fmt]
    if kind not in module.KINDS:
        raise UsageError(f"--format {fmt} does not take a {kind} document (it takes: {', '.join(module.KINDS)}); "
                         + ("report the two runs one at a time, e.g. `opcost report A -f go`, and compare "
                            "those files" if kind == "comparison" else "choose another format"))
    if len(args.runs) > 1 and getattr(module, "MANY", None) is None:
        many = [n for n, m in FORMATS.items() if getattr(m, "MANY", None) is not None]
        raise UsageError(f"--format {fmt} writes one document, and {len(args.runs)} runs were given; "
                         f"give one RUN, or use {', '.join(many)}")
    output.check_target(args.output, "-o", overwrite=args.force)
    return kind


def run(args, argv) -> int:
    from .. import output
    from ..export import FORMATS
    from ..runner import fill_summaries
    from ..store import open_store

    kind = check(args)
    module = FORMATS[args.format]
    docs = []
    with open_store(args.store, readonly=True) as store:
        if kind == "comparison":
            from .compare import compare_stored

            docs.append(compare_stored(store, args.compare[0], args.compare[1], delta=args.delta / 100,
                                       force=args.any_machine, force_flag="--any-machine"))
        else:
            refs = list(args.runs)
            if not refs:
                latest = store.list_runs(1)
                if not latest:
                    raise UsageError("the store holds no runs yet; measure one with `opcost run BENCH`")
                refs = [f"id:{latest[0]['id']}"]
            ids = [store.resolve(r) for r in refs]   # every reference checked before any is loaded
            for run_id in ids:
                doc = store.load_run(run_id)
                fill_summaries(doc)
                docs.append(doc)
    data = getattr(module, "MANY", b"").join(module.serialize(d) for d in docs)
    output.write(args.output, data)
    return 0
