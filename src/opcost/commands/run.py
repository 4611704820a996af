"""`opcost run [SPEC...]`: measure benchmarks (no SPEC: the default suite)."""

from __future__ import annotations

from functools import partial

from ..console import warn
from ..errors import UsageError
from ..targets.vm_options import add_vm_options
from . import add_measure_options, add_notes_flag


def add_parser(sub) -> None:
    s = sub.add_parser("run", help="measure benchmarks (no SPEC: the default suite)",
                       description="SPEC is bench.name or bench.name:key=value,key=value; "
                       "key=a|b|c expands into one variant per value. cpu and arch are parameters "
                       "of every benchmark (cpu=A or cpu=A,B for the measuring side and its helper).")
    s.add_argument("specs", nargs="*", metavar="SPEC")
    add_measure_options(s)
    add_notes_flag(s)
    s.add_argument("--parallel", default=None, metavar="N",
                   help="also run N copies at once, copy i pinned to the i-th allowed CPU (wrapping), and "
                   "report per-copy and total throughput and scaling efficiency against one copy")

    add_vm_options(s)


def run(args, argv) -> int:
    from .. import session   # --help must not load it
    from ..present import present, results_table   # --help must not load it

    settings = session.Settings.from_args(args, argv, "run")
    settings.check()
    target = session.target_of(args, args.specs)
    variants = session.plan_variants(args.specs, session.cpu_option(args.cpu, target), target)
    if settings.parallel > 1:
        pinned = [v.key() for v in variants if "cpu" in v.given]
        if args.cpu or pinned:
            raise UsageError(f"--parallel {args.parallel} places every copy on its own CPU itself; drop "
                             + ("--cpu" if args.cpu else f"cpu= from {pinned[0]}")
                             + " (restrict the CPUs with taskset instead)")
        from ..parallel import place   # --help must not load it

        cpus, wrapped = place(settings.parallel, target.allowed_cpus())
        if wrapped:
            warn(f"--parallel {args.parallel}: only {len(set(cpus))} CPU(s) allowed, so copies share CPUs "
                 f"(copy i on CPU {', '.join(map(str, cpus))} in turn); per-copy throughput includes time-sharing")
    m = session.measure(settings, variants, target)
    # the result's exports were written by the recorder during the run
    return present(m.results, partial(results_table, all_notes=args.notes), settings.exports, measured=m)
