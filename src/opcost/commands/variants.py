"""`opcost variants SOURCE -D NAME...`: one build per -D, measured interleaved,
each compared with the first (seed 004's `gcc -DX; time ./x` loop as one
command). The builds are variantbuild.py's; measuring is the session's."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

from .. import protocol
from ..console import warn
from ..errors import UsageError
from ..safetext import printable
from ..tables import format_variants
from ..targets.vm_options import add_vm_options
from . import add_measure_options, add_notes_flag


def add_parser(sub) -> None:
    s = sub.add_parser("variants", help="compile SOURCE once per -D NAME and compare the builds, interleaved",
                       description="SOURCE (C or assembly) is compiled once per -D NAME (cc CFLAGS -DNAME); the "
                       "builds are measured interleaved and each is compared to the first. Program mode (SOURCE "
                       "defines main): each run of the program is one sample, timed like time(1); defaults "
                       "-n 1 -w 0 after one untimed check run. Op mode (SOURCE defines "
                       "uint64_t opcost_op(uint64_t x)): linked into the probe as benchmark user.op and "
                       "measured per call, with an empty opcost_op as the reference; defaults -n 20 -w 3. "
                       "--arch (or a cross --cc) builds for another architecture; what this machine cannot "
                       "run natively runs under qemu-user, flagged emulated (timings meaningless). "
                       "--cpu 0-1 or --cpu '0|2': one row per build and CPU. "
                       "--cflags takes the next word whatever it starts with: --cflags -O3, "
                       "--cflags '-O2 -march=native'; repeated, the flags add up. The builds are cached "
                       "(${XDG_CACHE_HOME:-~/.cache}/opcost/builds): the same study again measures at once. "
                       "--kernel K (or --target vm:K) runs every build in QEMU guests of K, a boot the unit; "
                       "--over 'kernel=K1|K2' (or cmdline=) runs each build on each: docs/kernels.md.")
    add_build_options(s, arch=True)
    add_notes_flag(s)

    add_vm_options(s)
    s.add_argument("--over", dest="machines", action="append", metavar="PARAM=V1|V2|...",
                   help="run every build on each machine: kernel=K1|K2 (kernel images) or cmdline=A|B (kernel "
                   "parameters; with --kernel); repeated, every combination. One -D: each machine compared with "
                   "the first (kernel against kernel); several: each machine's builds with its first")


def add_build_options(s, *, arch: bool, target: bool = True) -> None:
    """SOURCE, -D and the options of building and measuring the builds, as
    `variants` and `fleet variants` take them (`arch`: --arch, for this
    machine only; `target`: --target)."""
    s.add_argument("source", metavar="SOURCE", help="C (.c) or assembly (.s, .S) file")
    s.add_argument("-D", dest="defines", action="append", metavar="NAME[=VALUE]",
                   help="one variant per -D; the first is the baseline A")
    s.add_argument("--mode", choices=("auto", "program", "op"), default="auto",
                   help="program (SOURCE defines main) or op (it defines opcost_op); default: from SOURCE")
    if arch:
        s.add_argument("--cc", default=None, help="C compiler (default cc, or the cross compiler for --arch, "
                       "e.g. arm-linux-gnueabihf-gcc)")
        s.add_argument("--arch", default=None, metavar="ARCH",
                       help="build for this architecture (x86_64, i386, aarch64, arm) with its compiler; one this "
                       "machine cannot run natively runs under qemu (qemu-arm...), flagged emulated")
    else:
        s.add_argument("--cc", default=None, help="C compiler for the hosts of this machine's architecture "
                       "(default cc; the hosts of another architecture: its cross compiler, e.g. "
                       "aarch64-linux-gnu-gcc)")
    s.add_argument("--ops", default=None, metavar="N",
                   help="program mode: one run of the program performs N operations (its loop count); the "
                   "figures are per operation (a run's time / N, start-up and exit included);")
    s.add_argument("--cflags", action="append", default=None, metavar="FLAGS",
                   help="compiler flags of every variant (default -O2); repeatable, each adds to the last")
    s.add_argument("--cflags-for", dest="cflags_for", action="append", default=None, metavar="NAME=FLAGS",
                   help="flags of the variant -D NAME only, after --cflags (e.g. --cflags-for HW=-mpopcnt); "
                   "repeatable")
    s.add_argument("--no-build-cache", dest="build_cache", action="store_false",
                   help="build every variant afresh, neither using nor storing cached builds")
    protocol.add_delta(s)
    s.add_argument("--verdict-on", metavar="COUNTER", default=None,
                   help="decide on this recorded counter (one of --counters, e.g. instructions:u) per op instead "
                   "of time (docs/counts.md)")
    # the defaults of these depend on the mode (see the description): None until it is known
    add_measure_options(s, {"samples": None, "samples_help": "default: program 1, op 20",
                            "warmup": None, "warmup_help": "default: program 0, op 3",
                            "target_ms": None, "target_ms_help": "op mode; default 10"}, target=target)


def check_ops(args) -> int:
    """--ops (range-checked with the other numbers: protocol.BOUNDS), 0 when not given."""
    ops = args.ops or 0
    if args.mode == "op" and ops:
        raise UsageError("--ops applies to --mode program (a run performs N operations); in op mode one "
                         "opcost_op call is the operation")
    return ops


def one_cpu_each(given: str, cpus: list[str]) -> None:
    """A build runs on one CPU: --cpu A,B (measuring CPU, helper) is refused."""
    pair = next((c for c in cpus if "," in c), None)
    if pair is not None:
        raise UsageError(f"--cpu {given}: a build runs on one CPU, {pair} names two (measuring CPU, "
                         f"helper); give CPUs, e.g. --cpu {pair.split(',')[0]}, --cpu 0-1 or --cpu '0|2' "
                         "(one row per CPU)")


def check_mode_options(mode: str, args, given: dict) -> None:
    """What applies to op mode only, refused in program mode (known once built)."""
    if mode == "program":
        for opt, val in (("--target-ms", given["target_ms"]), ("--iters", args.iters), ("--counters", args.counters)):
            if val is not None:
                raise UsageError(f"{opt} applies to --mode op; in program mode one sample is one whole run")


def with_mode_defaults(settings, mode: str, given: dict) -> None:
    """The samples and warmup of the mode (variantbuild.default_samples) where not given."""
    from .. import variantbuild   # --help must not load it

    ds, dw = variantbuild.default_samples(mode)
    settings.protocol = settings.protocol.with_(samples=ds if given["samples"] is None else given["samples"],
                                                warmup=dw if given["warmup"] is None else given["warmup"])


def run(args, argv) -> int:
    from .. import variantbuild, session   # --help must not load it

    source = variantbuild.check_source(args.source)
    defines = variantbuild.check_defines(args.defines)
    arch = variantbuild.check_arch(args.arch)
    ops = check_ops(args)
    target = session.target_of(args, args.machines or [])
    machines = machine_list(args.machines, target)
    if target.name == "vm" and arch is None and args.cc is None and target.host_arch() != variantbuild.probe.host_arch():
        arch = target.host_arch()   # another architecture's guests (read from the kernel image): its compiler
    if target.name == "vm" and arch not in (None, target.host_arch()):
        raise UsageError(f"--arch {arch}: the virtual machine runs {target.host_arch()} builds only (its kernel "
                         f"and probe are {target.host_arch()}); give --arch {target.host_arch()}, or a kernel of "
                         f"{arch}, or measure here without --kernel")
    if arch is not None and target.name != "vm":
        variantbuild.runner_for(arch, f"--arch {arch}")   # before compiling: can it run here at all?
    cc = variantbuild.compiler_for(args.cc, arch)
    cflags = variantbuild.join_cflags(args.cflags)
    extra_flags = variantbuild.variant_flags(args.cflags_for, defines)
    given = {k: getattr(args, k) for k in ("samples", "warmup", "target_ms")}
    # provisional protocol (every range is checked before compiling anything)
    settings = session.Settings.from_args(args, argv, "variants", samples=given["samples"] or 1,
                                          warmup=given["warmup"] or 0)
    settings.check()
    if args.cpu is not None:
        cpus = session.cpu_option(args.cpu, target) or []
        one_cpu_each(args.cpu, cpus)
    else:
        cpus = [str(target.default_cpu())]
    session.counter_plan(args.counters, target)   # before the builds (seconds each in op mode), not after
    # SIGTERM and SIGHUP stop it like Ctrl-C (interrupts.install): measuring
    # stops, what was measured is kept, the build directory is removed on the way out.
    return _build_and_measure(args, settings, target, source=source, defines=defines, cc=cc, cflags=cflags,
                              cpus=cpus, given=given, arch=arch, ops=ops, extra_flags=extra_flags,
                              machines=machines)


def machine_list(given: list[str] | None, target) -> list[tuple]:
    """--over kernel=K1|K2 / cmdline=A|B (each at most once): the machines
    every build runs on, as Variant.machine tuples, every combination in
    the order given; [()] without --over (the target's one machine)."""

    if not given:
        return [()]
    lists: dict[str, list[str]] = {}
    for text in given:
        name, eq, values = text.partition("=")
        name = name.strip()
        vals = [v.strip() for v in values.split("|")]
        if not eq or name not in ("kernel", "cmdline"):
            raise UsageError(f"--over {printable(text)}: variants runs its builds over machines: give "
                             "kernel=K1|K2 (kernel images) or cmdline=A|B (kernel parameters)")
        if name in lists:
            raise UsageError(f"--over {name}= is given twice; give every value once, e.g. --over '{name}=A|B'")
        if name == "kernel" and any(not v for v in vals):
            raise UsageError(f"--over {printable(text)}: an empty kernel; give kernel=K1|K2 with image paths")
        if len(set(vals)) != len(vals):
            raise UsageError(f"--over {printable(text)} names a value twice; give each once")
        for v in vals:
            target.check_machine_param(name, v)
        lists[name] = vals
    if "kernel" not in lists and getattr(target, "default", None) is None:
        raise UsageError("--over cmdline=... boots --kernel with each; give --kernel PATH (or --over kernel=...)")
    keys = [k for k in ("kernel", "cmdline") if k in lists]
    return [tuple(zip(keys, combo)) for combo in itertools.product(*(lists[k] for k in keys))]


def on_machines(variants: list, machines: list[tuple]) -> list:
    """Every build on every machine, machine by machine, the reference
    builds (op mode) last as `show` lists them; each named after its
    machine when there are several (-DFAST kernel=K1)."""

    if machines == [()]:
        return variants
    out = [replace(v, machine=m, name=" ".join([v.name, *(f"{k}={val}" for k, val in m)]))
           for m in machines for v in variants]
    return [v for v in out if not v.params.get("reference")] + [v for v in out if v.params.get("reference")]


def compared(variants: list) -> int:
    """How many comparisons a variants run makes (comparison.variants_document; 0 with one build):
    every build but the first of its group (its CPU and machine; its CPU
    alone with one -D over several machines), reference builds left out."""
    mine = [v for v in variants if not v.params.get("reference")]
    across = len({v.machine for v in mine}) > 1 and len({v.params.get("define") for v in mine}) == 1
    groups = {(v.all_params().get("cpu"),) if across else (v.all_params().get("cpu"), v.machine) for v in mine}
    return len(mine) - len(groups)


def _build_and_measure(args, settings, target, *, source, defines, cc, cflags, cpus, given, arch, ops,
                       extra_flags, machines) -> int:
    from .. import variantbuild, variantcache, session   # --help must not load it
    from ..comparison import deciding_on, variants_document   # --help must not load it
    from ..present import present   # --help must not load it

    in_vm = target.name == "vm"
    session.check_verdict_on(args.verdict_on, settings.counters, target)
    with variantbuild.make_workdir() as tmp:
        b = variantbuild.build(source=source, defines=defines, cc=cc, cflags=cflags, mode=args.mode, workdir=Path(tmp),
                        cpus=cpus, arch=arch, ops=ops, log=warn, extra_flags=extra_flags,
                        cache=variantcache.Cache() if args.build_cache else None,
                        guest="the virtual machine" if in_vm else None,
                        guest_arch=target.host_arch() if in_vm else None)
        check_mode_options(b.mode, args, given)
        with_mode_defaults(settings, b.mode, given)
        runs = on_machines(b.variants, machines)
        n = compared(runs)
        if args.processes is not None and n:   # the fixed design says before measuring when it cannot show anything
            why = protocol.never_significant(settings.protocol.processes, n)
            if why:
                warn(why)
        m = session.measure(settings, runs, target)
        b.store_in_cache()   # past every check: bad input never leaves a cached build
    res = m.results
    from ..targets.vm.withhold import withhold_emulated   # --help must not load it

    with deciding_on(args.verdict_on):
        doc = withhold_emulated(variants_document(res, delta=args.delta, run_id=m.recorder.run_id,
                                                  env=m.recorder.env), args.allow_emulated)
    return present(doc, lambda d, color, width: format_variants(d, res, color=color, width=width, all_notes=args.notes),
                   settings.exports,
                   measured=m)
