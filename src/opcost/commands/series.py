"""`opcost series`: where in an ordered series of labels the cost changed.

Two sources: stored runs labelled KEY=VALUE (`series BENCH[:PARAMS] --by
KEY`, seed 003's commit-by-commit walk), or one interleaved run that
measures every label itself (`series --run SPEC --over PARAM=V1|V2|...`)."""

from __future__ import annotations

from .. import protocol
from ..console import warn
from ..errors import EXIT_BENCH_FAILED, UsageError
from ..safetext import printable
from ..tables import format_series
from ..targets.vm_options import add_vm_options, given
from . import add_measure_options


def add_parser(sub) -> None:
    s = sub.add_parser(
        "series", help="where in a series of labels (commits, kernels, values) the cost changed",
        description="Stored: `opcost series BENCH[:PARAMS] --by KEY` walks the runs labelled KEY=VALUE "
        "(opcost run --label KEY=VALUE), in the order of --order/--order-file or else of the runs' time, "
        "taking from each run the one variant of BENCH matching PARAMS (runs of one value are pooled). "
        "Measured: `opcost series --run SPEC --over PARAM=V1|V2|...` runs every label in each round, in a "
        "fresh random order, as one stored run. Change points: ruptures' PELT on per-process log-medians, "
        "each confirmed by the comparison of the segments either side (docs/statistics.md).")
    s.add_argument("bench", nargs="?", metavar="BENCH[:PARAMS]", help="the benchmark (stored runs)")
    g = s.add_argument_group("stored runs")
    g.add_argument("--by", metavar="KEY", help="the label key whose values are the series (e.g. commit)")
    g.add_argument("--order", metavar="V1,V2,...", help="the label values in series order (default: time of the runs)")
    g.add_argument("--order-file", metavar="FILE",
                   help="the label values one a line (e.g. from git rev-list --reverse A..B)")
    g.add_argument("--force", action="store_true", help="walk the series even when CPU model or architecture differ")
    m = s.add_argument_group("measured")
    m.add_argument("--run", metavar="SPEC", help="measure the labels of one variant of this benchmark")
    m.add_argument("--over", action="append", metavar="PARAM=V1|V2|...",
                   help="the labels: values of PARAM in series order (once)")
    m.add_argument("--verdict-on", metavar="COUNTER", default=None,
                   help="find the change points on this recorded counter (one of --counters) per op instead of "
                   "time (docs/counts.md)")
    protocol.add_delta(s)
    add_measure_options(s)

    add_vm_options(s)


def _mode(args) -> str:
    if isinstance(args.over, list):
        if len(args.over) > 1:
            raise UsageError(f"--over is given {len(args.over)} times; give it once, with every value "
                             "(e.g. --over 'spin=1|2|4')")
        args.over = args.over[0]
    if args.run is not None or args.over is not None:
        if args.bench is not None:
            raise UsageError(f"give either BENCH --by KEY (stored runs) or --run SPEC --over PARAM=... "
                             f"(measure), not both (BENCH {printable(args.bench)} with --run/--over)")
        if args.run is None or args.over is None:
            raise UsageError("--run SPEC and --over PARAM=V1|V2|... go together (e.g. --run syscall.null "
                             "--over spin=1|1|4|4)")
        stray = [f for f, v in (("--by", args.by), ("--order", args.order), ("--order-file", args.order_file)) if v]
        if stray:
            raise UsageError(f"{stray[0]} is for stored runs; with --run the order is --over's")
        if args.force:
            raise UsageError("--force is for stored runs (a series across machines); --run measures here, "
                             "on one machine: leave it out")
        return "measured"
    if args.bench is None:
        raise UsageError("give BENCH --by KEY (a series of stored runs, e.g. signal.catch --by commit) "
                         "or --run SPEC --over PARAM=V1|V2|...")
    measuring = _measuring_options(args)
    if measuring:
        raise UsageError(f"{measuring[0]} is for --run SPEC --over ... (measuring); a series of stored runs "
                         "reads what they measured: leave it out")
    from ..series import check_by   # --help must not load it

    vm = given(args)
    if vm:   # a series of stored runs boots nothing: its runs say where they ran
        raise UsageError(f"{vm[0]} is for measuring (series --run SPEC --over ...); a series of stored runs "
                         f"walks runs already measured, whatever they ran on: leave {', '.join(vm)} out")
    check_by(args.by, f"series {printable(args.bench)}")
    return "stored"


# Options that only a measured series uses (dest, flag, default): given to
# a series of stored runs they would change nothing.
_MEASURING = [(f.dest, f.flags[0], f.default) for f in protocol.FIELDS] + [
    ("target", "--target", None), ("cpu", "--cpu", None), ("counters", "--counters", None),
    ("label", "--label", None), ("no_store", "--no-store", False)]
# (the virtual machine's options are vm_options.given()'s; --allow-emulated stays:
# stored runs may have run under TCG)


def _measuring_options(args) -> list[str]:
    return [flag for dest, flag, default in _MEASURING if getattr(args, dest, default) != default]


def run(args, argv) -> int:
    mode = _mode(args)
    if mode != "measured" and getattr(args, "verdict_on", None):
        raise UsageError("--verdict-on goes with --run (a measured series: its counters are asked with --counters); "
                         "a stored series is walked on time")
    return measured(args, argv) if mode == "measured" else stored(args)


def series_table(doc: dict, *, color: bool, width: int | None) -> str:
    """The series table (its width is its own)."""

    return format_series(doc, color=color)


def stored(args) -> int:
    from ..present import present   # --help must not load it
    from ..series import read_order, stored_document   # --help must not load it
    from ..session import exports_of   # --help must not load it
    from ..spec import split_spec   # --help must not load it
    from ..store import open_store   # --help must not load it

    exports = exports_of(args, "series")
    bench, _ = split_spec(args.bench)
    order, how = read_order(args.order, args.order_file)
    with open_store(args.store, readonly=True) as store:
        doc = stored_document(store, args.bench, args.by.strip(), order=order, order_how=how,
                              delta=args.delta, force=args.force, allow_emulated=args.allow_emulated)
    return present(doc, series_table, exports)


def measured(args, argv) -> int:
    from .. import session   # --help must not load it
    from ..present import present   # --help must not load it
    from ..series import measured_document, over_variants   # --help must not load it
    from ..spec import parse_over   # --help must not load it

    param, values = parse_over(args.over)
    settings = session.Settings.from_args(args, argv, "series")
    settings.check()
    target = session.target_of(args, [args.run, args.over])
    variants = over_variants(args.run, param, values, target, session.cpu_option(args.cpu, target))
    session.check_verdict_on(args.verdict_on, settings.counters, target)
    m = session.measure(settings, variants, target)
    doc = None
    if any(r.get("processes") for r in m.results):
        from ..comparison import deciding_on   # --help must not load it

        try:
            with deciding_on(args.verdict_on):
                doc = measured_document(m.results, values, param=param, spec=args.run, delta=args.delta,
                                        run_id=m.recorder.run_id, env=m.recorder.env,
                                        allow_emulated=args.allow_emulated)
        except UsageError as e:   # too few labels measured (interrupted): what was measured is stored
            warn(f"the series was not analysed: {e}")
    code = present(doc, series_table, settings.exports, measured=m)
    # No series to show (labels that cannot be measured here): not a success.
    return EXIT_BENCH_FAILED if code == 0 and doc is None else code
