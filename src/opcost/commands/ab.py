"""`opcost ab BENCH... --a PARAMS --b PARAMS`: an interleaved A/B with a verdict."""

from __future__ import annotations

import math

from .. import protocol
from ..console import warn
from ..errors import UsageError
from ..tables import format_comparison
from ..targets.vm_options import add_vm_options
from . import add_measure_options


def add_parser(sub) -> None:
    s = sub.add_parser("ab", help="interleaved A/B of two variants, with a verdict",
                       description="Each round runs one A and one B process in a random order. "
                       "PARAMS is key=value,key=value (cpu, arch and spin included); identical A and B "
                       "make an A/A run, which measures the noise. Without -p the design is sequential: "
                       "it looks after 10, 20 and 40 processes per arm (Pocock alpha spending unless "
                       "--boundary obf) and stops as soon as every verdict is settled; -p N measures exactly N.")
    s.add_argument("benches", nargs="+", metavar="BENCH")
    s.add_argument("--a", required=True, metavar="PARAMS", help="variant A (the baseline)")
    s.add_argument("--b", required=True, metavar="PARAMS", help="variant B (verdicts are B relative to A)")
    protocol.add_delta(s)
    s.add_argument("--verdict-on", metavar="COUNTER", default=None,
                   help="decide on this recorded counter (one of --counters, e.g. instructions:u) per op instead "
                   "of time; the absolute difference per op is said beside the ratio (docs/counts.md)")
    s.add_argument("--boundary", choices=protocol.BOUNDARIES, default=None, metavar="|".join(protocol.BOUNDARIES),
                   help="the sequential design's alpha spending (Lan-DeMets): pocock (default; stops sooner at "
                   "the same power) or obf (O'Brien-Fleming: spends almost nothing before the last look); "
                   "not with -p")
    add_measure_options(s, {"processes": None, "processes_help": "default: sequential, looks after "
                            + ", ".join(map(str, protocol.SCHEDULE)) + "; N: exactly N, the fixed design"})

    add_vm_options(s)
    s.add_argument("--bisect", action="store_true",
                   help="exit as `git bisect run` reads it: 0 when B is not slower than A beyond delta (good), "
                   "1 when it is (bad), 125 when still undecided (skip); docs/kernels.md")


def variant_pair(bench: str, a: str, b: str, cpus: list[str] | None, target) -> tuple:
    from ..spec import expand   # --help must not load it

    if cpus and len(cpus) > 1:
        raise UsageError(f"--cpu {'|'.join(cpus)}: ab compares one placement; give one CPU or A,B "
                         "(or put cpu= in --a/--b)")
    if "," in bench or ":" in bench:
        raise UsageError(f"BENCH {bench!r} is a benchmark name; give its parameters with --a and --b")
    pair = []
    for arm, params in (("--a", a), ("--b", b)):
        if "|" in params:
            raise UsageError(f"{arm} {params}: one variant per arm; `opcost run` expands value lists")
        spec = f"{bench}:{params}" if params.strip() else bench
        vs = expand(spec, target, cpus)
        if len(vs) != 1:
            raise UsageError(f"{arm} {params}: names {len(vs)} variants; each arm is one variant")
        pair.append(vs[0])
    return tuple(pair)


def design(args, settings, n_benches: int) -> bool:
    """The design -p and --boundary ask for, set in `settings`; True for the
    sequential one (stage 1, look, more rounds while needed: the runner
    needs a sequential_look). The fixed design says before measuring when
    it cannot show anything. `ab` and `fleet ab` (per host) alike."""
    if args.processes is not None and args.boundary is not None:
        raise UsageError(f"--boundary {args.boundary} is for the sequential design; -p {args.processes} "
                         "is the fixed one (drop one of them)")
    if args.processes is not None:
        why = protocol.never_significant(args.processes, n_benches)
        if why:
            warn(why)
        return False
    settings.stages = protocol.SCHEDULE
    settings.boundary = args.boundary or protocol.BOUNDARY
    settings.protocol = settings.protocol.with_(processes=protocol.SCHEDULE[0])
    return True


def sequential_look(stages: tuple[int, ...], delta: float, say=None):
    """The runner's look after stage `number`: marks the benchmarks whose
    verdict is settled (measured no more) and says whether any is not.
    `say`: where the line after the first look goes (default: warn)."""
    def look(number: int, results: list) -> bool:
        from ..comparison import settled_after   # --help must not load it

        pairs = [(results[i], results[i + 1]) for i in range(0, len(results) - 1, 2)]
        seen: list = []
        done = settled_after([(a.processes, b.processes) for a, b in pairs], delta=delta, rounds=stages[number - 1],
                             entries=seen)
        for (a, b), d in zip(pairs, done):
            a.settled = b.settled = d
        if number == 1:   # what this noise can resolve, said before the user waits for more stages
            for (a, _), d, e in zip(pairs, done, seen):
                if not d and e is not None:
                    (say or warn)(resolvable_line(a.variant.bench, e, delta))
        return not all(done)
    return look


def resolvable_line(bench: str, e: dict, delta: float) -> str:
    """After the first look: the smallest difference this noise and N can
    resolve (abtest.resolvable), against delta."""
    r = e.get("resolvable")
    n = e.get("n_a")
    if r is None:
        return f"{bench}: after {n} processes per arm the noise leaves no difference resolvable yet; measuring on"

    by = e.get("resolvable_by_stage") or {}
    if "20" in by and "40" in by:   # the sequential rule's own sizing (issue 37)
        r20, r40 = by["20"], by["40"]
    else:
        # beyond delta, the part the CI's half-width sets shrinks as 1/sqrt(n)
        extra = math.log1p(r) - math.log1p(delta)
        r20, r40 = (math.expm1(math.log1p(delta) + extra / f) for f in (2 ** 0.5, 2))
    return (f"{bench}: after {n} processes per arm this noise resolves about {r:.1%} (80% of the time; delta "
            f"{delta:.1%}); 20 and 40 per arm: about {r20:.1%} and {r40:.1%}; measuring on")


def run(args, argv) -> int:
    if not args.bisect:
        return _run(args, argv)
    from ..bisect import on_error   # --help must not load it

    try:
        return _run(args, argv)
    except UsageError as e:   # under `git bisect run`: a kernel that does not boot is skipped, bad input stops it
        return on_error(e)


def _run(args, argv) -> int:
    from .. import session   # --help must not load it
    from ..comparison import ab_document, deciding_on   # --help must not load it
    from ..present import present   # --help must not load it

    settings = session.Settings.from_args(args, argv, "ab")
    settings.check()
    target = session.target_of(args, [args.a, args.b])
    cpus = session.cpu_option(args.cpu, target)
    pairs = [variant_pair(bench, args.a, args.b, cpus, target) for bench in args.benches]
    if len({p[0].bench for p in pairs}) != len(pairs):
        raise UsageError("a benchmark is named twice; give each once")
    session.check_verdict_on(args.verdict_on, settings.counters, target)
    look = sequential_look(settings.stages, args.delta) if design(args, settings, len(pairs)) else None
    with deciding_on(args.verdict_on):
        m = session.measure(settings, [v for pair in pairs for v in pair], target, look=look)
        doc = ab_document(m.results, a=args.a, b=args.b, delta=args.delta, run_id=m.recorder.run_id,
                          env=m.recorder.env, switches={p[0].bench: p[0].switches for p in pairs})
    from ..targets.vm.withhold import withhold_emulated   # --help must not load it

    doc = withhold_emulated(doc, args.allow_emulated)
    code = present(doc, format_comparison, settings.exports, measured=m)
    if args.bisect:
        from ..bisect import exit_code   # --help must not load it

        return exit_code(doc, code)
    return code
