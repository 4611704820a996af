"""One measuring session, the sequence `run`, `ab` and `variants` share:
plan the variants (SPECs against the probe's table), check the run options,
open the store, preflight every variant (so bad input fails before anything
is stored), measure with the runner while the recorder keeps every process
(store, --json); the command then presents it (present.py: where the run
went, how it ended, the exit code).

Options are typed (`Settings`, with the `Protocol`), not an argparse
Namespace: a command builds them once from its arguments. Every step takes
the target the variants run on (targets/): `target_of(args)` is the one
`--target` names (this machine without one); the fleet passes its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from . import counters, formats, labels, output, targets
from .console import warn
from .emucount import EVENTS, split
from .errors import UsageError
from .model import Plan
from .pmu import SYSFS, read_sysfs
from .probe import runs_natively
from .progress import make_progress
from .protocol import Protocol
from .record import Recorder
from .redact import redact_argv
from .runner import Outcome, RunOptions, Runner
from .spec import Variant, cpu_alternatives, expand, parse_over
from .store import open_store
from .targets.base import Target

# `opcost run` with no SPEC: one figure for each kind of cost the seeds ask
# about, about 45 s at the default protocol. The rest of `opcost list`
# (hackbench's whole runs, the xstate family, exec/spawn...) is asked for by name.
DEFAULT_SUITE = ("syscall.null", "syscall.read", "syscall.write", "syscall.stat", "syscall.fstat", "syscall.open",
                 "ctx.pipe", "ctx.yield", "ctx.unix", "ctx.futex", "signal.catch", "signal.install",
                 "proc.fork", "thread.create", "mem.pagefault", "xstate.xsave")


def default_suite(table: dict) -> list[str]:
    names = {b["name"] for b in table["benchmarks"]}
    return [n for n in DEFAULT_SUITE if n in names]


@dataclass
class Settings:
    """Everything a measuring command decided from its arguments."""
    protocol: Protocol
    kind: str = "run"                        # run | ab | variants | series (stored with the run)
    argv: list[str] = field(default_factory=list)
    counters: str | None = None              # --counters as given
    parallel: int = 1
    label: str | None = None                 # the name label (labels["name"])
    labels: dict[str, str] = field(default_factory=dict)   # --label KEY=VALUE (a bare TEXT: name=TEXT)
    exports: list[tuple[str, str]] = field(default_factory=list)   # (format, path): --json, --export
    store: str | None = None                 # URL; None: the default store
    no_store: bool = False
    progress: bool = True
    stages: tuple[int, ...] = ()             # ab's sequential design: looks after these rounds
    boundary: str | None = None              # and its alpha spending (sequential.BOUNDARIES), recorded per process
    plan: Plan = field(default_factory=Plan)  # what was asked, stored with the run (completed by `measure`)

    @classmethod
    def from_args(cls, args, argv: list[str], kind: str, **protocol) -> "Settings":

        names = labels.parse_all(args.label)

        # The command line as stored and exported: a --store URL's password masked.
        proto = Protocol.from_args(args, **protocol)
        return cls(protocol=proto, kind=kind, argv=["opcost", *redact_argv(argv)],
                   counters=args.counters, parallel=getattr(args, "parallel", None) or 1,
                   label=names.get(labels.NAME), labels=names,
                   exports=exports_of(args), store=args.store, no_store=args.no_store,
                   progress=not args.no_progress, plan=replace(plan_of(args, kind), seed=proto.seed))

    @property
    def document(self) -> str:
        """The document this command writes: `run` a result, `series` a
        series, the others a comparison."""
        return {"run": "result", "series": "series"}.get(self.kind, "comparison")

    def check(self) -> None:
        """What the numeric ranges (checked at parsing) cannot say."""

        if self.no_store and self.store:
            raise UsageError("--store and --no-store contradict each other; give one")
        formats.check(self.exports, self.document)


def plan_of(args, kind: str) -> Plan:
    """The plan a measuring command's arguments ask for (model.Plan; what
    depends on the variants and the target, `measure` adds)."""
    specs = {"run": lambda: list(getattr(args, "specs", None) or []), "ab": lambda: list(args.benches),
             "variants": lambda: [args.source], "series": lambda: [args.run]}[kind]()
    over = None
    if getattr(args, "over", None) is not None:

        param, values = parse_over(args.over)
        over = {"param": param, "values": values}
    delta = getattr(args, "delta", None)
    return Plan(kind=kind, specs=specs, a=getattr(args, "a", None), b=getattr(args, "b", None),
                delta=delta, over=over, ops=getattr(args, "ops", None),
                allow_emulated=bool(getattr(args, "allow_emulated", False)),
                verdict_on=getattr(args, "verdict_on", None))


def completed_plan(settings: Settings, variants: list[Variant], target: Target) -> Plan:
    """The settings' plan with what the variants and the target say: the
    sequential design, switches per operation (the probe's table), the target."""
    return replace(settings.plan, stages=list(settings.stages), boundary=settings.boundary, target=target.name,
                   switches={v.bench: v.switches for v in variants if v.switches})


def exports_of(args, document: str | None = None) -> list[tuple[str, str]]:
    """--json FILE (an alias of --export json:FILE) and every --export
    FORMAT:FILE, each checked (format known, path writable; with `document`,
    the format takes that kind of document)."""
    out = []
    if getattr(args, "json", None) is not None:
        output.check_target(args.json)
        out.append(("json", args.json))
    out += [formats.parse(text) for text in getattr(args, "export", None) or []]
    named = ([f"--json {args.json}"] if getattr(args, "json", None) is not None else []) + [
        f"--export {text}" for text in getattr(args, "export", None) or []]
    output.check_distinct(list(zip(named, (p for _, p in out))))
    if document is not None:
        formats.check(out, document)
    return out


def local_target() -> Target:
    """This machine as a target (targets.local_target: one per process, so
    its probe's table and CPU placements are asked once)."""
    return targets.local_target()


def target_of(args, texts: list | tuple = ()) -> Target:
    """The target the arguments name, ready to use (targets.target_of:
    `--target SPEC`, a virtual machine when --kernel or a kernel=/cmdline=
    among `texts` -- the SPECs, arms, --over -- asks for one, docs/kernels.md,
    else this machine); cli.main closes it on the way out."""
    return targets.target_of(args, texts)


def counter_plan(text: str | None, target: Target):
    """`--counters` -> a counters.Plan (profiles expanded), or None. Unknown
    names are usage errors; known names the target cannot count are not
    (they come back as <not supported> with the reason)."""
    if text is None:
        return None
    return counters.expand(text, [*target.benchmark_table()["counters"], *EVENTS], catalog=target.pmu_catalog)


def counter_split(plan, variants: list[Variant], target: Target) -> tuple[str | None, tuple]:
    """(the probe's --counters list, the events QEMU's counting plugin
    serves): emucount.split, with the plan's PMU encodings kept."""
    if plan is None:
        return None, ()
    counts_by_emulator = getattr(target, "counts_by_emulator", None)
    mode = ("user" if target.name == "local" else
            "system" if counts_by_emulator is not None and counts_by_emulator() else None)

    def perf_counts() -> bool:   # a core PMU in sysfs: perf counts instructions here
        return any(p.core for p in read_sysfs(os.environ.get("OPCOST_PMU_SYSFS") or SYSFS).values())

    arches = {v.arch or target.host_arch() for v in variants}   # a vm target's: its guests'
    _, emu = split(list(plan.events), mode=mode, target=target.name,
                   foreign=any(not runs_natively(a) for a in arches),
                   programs=any(v.program for v in variants), perf_counts=perf_counts,
                   unclassified=next((a for a in sorted(arches) if a not in ("x86_64", "i386")), None))
    if not emu:
        return plan.probe_list(), ()
    rest = replace(plan, events=[e for e in plan.events if e not in emu])
    return (rest.probe_list() or None), tuple(emu)


def check_verdict_on_asked(counter: str | None, text: str | None) -> None:
    """Before any target is reached (a fleet connects later): --verdict-on
    with no --counters at all names a counter the run cannot record."""
    if counter is not None and not text:
        raise UsageError(f"--verdict-on {counter}: not a counter this run records; ask for it with --counters "
                         f"(e.g. --counters {counter} --verdict-on {counter})")


def check_verdict_on(counter: str | None, text: str | None, target: Target) -> None:
    """--verdict-on names a counter the run records (an event of --counters,
    profiles expanded, or a derived metric); else one line, exit 2."""
    if counter is None:
        return
    plan = counter_plan(text, target)
    asked = [*plan.events, *(d.name for d in plan.derived)] if plan else []
    if counter not in asked:
        raise UsageError(f"--verdict-on {counter}: not a counter this run records; "
                         + (f"--counters gives {', '.join(asked)}" if asked else
                            f"ask for it with --counters (e.g. --counters {counter} --verdict-on {counter})"))


def check_helper_counters(plan, variants: list[Variant], target: Target) -> None:
    """`:helper` events need a benchmark with a helper: when none of the
    variants has one, that is a usage error (with some, the others report
    the events as <not supported>, saying why)."""
    if plan is None or not plan.helper_events():
        return
    table = {b["name"]: b for b in target.benchmark_table()["benchmarks"]}
    if not any(table.get(v.bench, {}).get("helper") for v in variants):
        two = ", ".join(sorted(n for n, b in table.items() if b.get("helper"))) or "none in this probe"
        raise UsageError(f"--counters {', '.join(plan.helper_events())}: :helper counts a benchmark's helper "
                         f"(its second thread or process), and {', '.join(sorted({v.bench for v in variants}))} "
                         f"has none; two-party benchmarks: {two}")


def cpu_option(text: str | None, target: Target) -> list[str] | None:
    """--cpu: one placement `A` or `A,B`, alternatives `A|B`, ranges `A-B`:
    the list of placements (one variant each), or None when not given."""
    return cpu_alternatives(text, target, "--cpu") if text is not None else None


def plan_variants(specs: list[str], cpus: list[str] | None, target: Target) -> list[Variant]:
    """Every variant the SPECs name (the default suite without one),
    checked against the target's table; a variant asked for twice is an error."""
    if not specs:
        specs = default_suite(target.benchmark_table(target.host_arch()))
    variants: list[Variant] = []
    for s in specs:
        variants += expand(s, target, cpus)
    seen = set()
    for v in variants:
        k = (v.bench, tuple(sorted(v.all_params().items())))
        if k in seen:
            raise UsageError(f"{v.key()} is asked for twice; give each variant once")
        seen.add(k)
    return variants


@dataclass
class Measured:
    recorder: Recorder
    outcome: Outcome
    settings: Settings

    @property
    def results(self) -> list[dict]:
        return [vr.to_json() for vr in self.outcome.results]


def measure(settings: Settings, variants: list[Variant], target: Target, look=None, warn=warn) -> Measured:
    """Check, preflight, run on the target with a progress display, recording
    after every process; the store is closed on the way out, whatever happens.
    The caller has checked `settings` (Settings.check) before planning.
    With settings.stages, `look` decides after each stage whether to go on
    (runner.Runner). `warn` says what happens on the way (the fleet
    prefixes the host)."""
    plan = counter_plan(settings.counters, target)
    check_helper_counters(plan, variants, target)
    store = None
    if not settings.no_store:
        store = open_store(settings.store, on_wait=warn)
    p = settings.protocol
    probe_counters, emulated = counter_split(plan, variants, target)
    opts = RunOptions(protocol=p, counters=probe_counters, emulated=emulated,
                      derived=plan.derived if plan else [], parallel=settings.parallel, stages=settings.stages,
                      boundary=settings.boundary, compares=settings.kind in ("ab", "variants", "series"))
    runner = Runner(variants, opts, target=target, warn=warn, look=look)
    try:
        runner.preflight()
        exports = settings.exports if settings.document == "result" else []   # a comparison is written at the end
        runner.recorder = Recorder(store=store, exports=exports, env=target.env(),
                                   argv=settings.argv, label=settings.label, kind=settings.kind, warn=warn,
                                   labels=settings.labels, plan=completed_plan(settings, variants, target))
        copies = 1 + (settings.parallel if settings.parallel > 1 else 0)
        rounds = settings.stages[-1] if settings.stages else p.processes   # sequential: at most
        total = len(variants) * rounds * (p.warmup + p.samples) * copies
        with make_progress(total, enabled=None if settings.progress else False) as prog:
            runner.progress = prog
            outcome = runner.run()
    finally:
        if store:
            store.close()
    return Measured(runner.recorder, outcome, settings)
