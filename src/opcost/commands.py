"""One function per subcommand: turn parsed arguments into calls and output.
Library errors propagate to cli.main, which prints them."""

from __future__ import annotations

import re
import sys

from . import probe
from .cli import dump_json
from .errors import EXIT_OK, UsageError


def cmd_list(args, argv) -> int:
    table = probe.benchmark_table()
    if args.json:
        dump_json({**table, "generic_params": [
            {"name": "cpu", "help": "CPU for the measuring side, or A,B (measuring side, helper)"},
            {"name": "arch", "help": "probe architecture", "choices": probe.installed_arches()}]})
        return EXIT_OK
    for b in table["benchmarks"]:
        print(f"{b['name']:<16} {b['summary']}")
        print(f"{'':<16} op: {b['op']}")
        for p in b["params"]:
            allowed = "|".join(p["choices"]) if p["type"] == "enum" else (
                f"{p['min']}..{p['max']}" if p["type"] == "int" else "text")
            print(f"{'':<16}   {p['name']}={allowed} (default {p['default']}): {p['help']}")
    print(f"\nevery benchmark also takes cpu=A[,B] and arch={'|'.join(probe.installed_arches())}")
    return EXIT_OK


def collect_env() -> dict:
    from .env import collect

    version = probe.probe_version()
    info = {"probe_version": version, "compiler": version.split(" ", 3)[-1] if version else None}
    return collect(probe.cpuid(), info)


def cmd_env(args, argv) -> int:
    env = collect_env()
    if args.json:
        dump_json(env)
    else:
        from .env import format_env

        print(format_env(env))
    return EXIT_OK


def check_counters(text: str | None, known: list[str]) -> str | None:
    """Unknown names are usage errors; known names this machine cannot count
    are not (they come back as <not supported> with the reason)."""
    if text is None:
        return None
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise UsageError("--counters is empty; give perf event names, e.g. context-switches,task-clock")
    for n in names:
        base, _, mods = n.partition(":")
        if not (base in known or re.fullmatch(r"r[0-9a-fA-F]+", base)) or not re.fullmatch(r"[uk]*", mods):
            raise UsageError(f"unknown counter {n!r}; valid: {', '.join(known)}, rNNNN (raw hex), "
                             "each optionally with :u (user only) or :k (kernel only)")
    return ",".join(names)


def check_run_options(args) -> None:
    for name, low in (("processes", 1), ("samples", 1), ("warmup", 0)):
        v = getattr(args, name)
        if v < low:
            raise UsageError(f"--{name} {v}: must be at least {low}")
    if not 1 <= args.target_ms <= 60000:
        raise UsageError(f"--target-ms {args.target_ms:g}: a batch must last 1 to 60000 ms")
    if args.iters is not None and args.iters < 1:
        raise UsageError(f"--iters {args.iters}: must be at least 1")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be positive (seconds)")
    if args.fake_clock is not None and not 0 < args.fake_clock <= 1e9:
        raise UsageError(f"--fake-clock {args.fake_clock:g}: give the fake cost of one operation in ns (0 < NS <= 1e9)")
    if args.no_store and args.store:
        raise UsageError("--store and --no-store contradict each other; give one")


def plan_variants(specs: list[str], cpu: str | None) -> list:
    from .spec import check_cpu_list, expand

    host = probe.host_arch()
    arches = probe.installed_arches()
    default_cpus = check_cpu_list(cpu, "--cpu") if cpu else None
    if not specs:
        specs = [b["name"] for b in probe.benchmark_table(host)["benchmarks"]]
    variants = []
    for s in specs:
        variants += expand(s, probe.benchmark_table, host, arches, default_cpus)
    seen = set()
    for v in variants:
        k = (v.bench, tuple(sorted(v.all_params().items())))
        if k in seen:
            raise UsageError(f"{v.key()} is asked for twice; give each variant once")
        seen.add(k)
    return variants


def cmd_run(args, argv) -> int:
    from .export.json_result import check_writable
    from .progress import make_progress
    from .record import Recorder
    from .report import format_results
    from .runner import RunOptions, Runner

    check_run_options(args)
    variants = plan_variants(args.specs, args.cpu)
    counters = check_counters(args.counters, probe.benchmark_table()["counters"])
    if args.json:
        check_writable(args.json)
    store = None
    if not args.no_store:
        from .store import open_store

        store = open_store(args.store)
    opts = RunOptions(processes=args.processes, samples=args.samples, warmup=args.warmup,
                      target_ms=args.target_ms, iters=args.iters, counters=counters,
                      fake_clock=args.fake_clock, seed=args.seed, timeout=args.timeout)
    runner = Runner(variants, opts, warn=_warn)
    runner.preflight()
    runner.recorder = Recorder(store=store, json_path=args.json, env=collect_env(), argv=["opcost", *argv],
                               label=args.label)
    total = len(variants) * args.processes * (args.warmup + args.samples)
    try:
        with make_progress(total, enabled=False if args.no_progress else None) as prog:
            runner.progress = prog
            outcome = runner.run()
    finally:
        if store:
            store.close()
    print(format_results([vr.to_json() for vr in outcome.results]))
    if runner.recorder.run_id is not None:
        print(f"\nstored as run {runner.recorder.run_id}" + (f" ({args.label})" if args.label else ""), file=sys.stderr)
    if outcome.status == "interrupted":
        print("opcost: interrupted; everything measured so far was kept", file=sys.stderr)
    elif outcome.error is not None:
        print(f"opcost: {outcome.error}", file=sys.stderr)
    return outcome.exit_code


def _warn(msg: str) -> None:
    print(f"opcost: {msg}", file=sys.stderr)


def cmd_history(args, argv) -> int:
    from .history import format_history
    from .store import open_store

    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: must be at least 1")
    with open_store(args.store) as store:
        runs = store.list_runs(args.limit)
    if args.json:
        dump_json(runs)
    else:
        print(format_history(runs))
    return EXIT_OK


def cmd_show(args, argv) -> int:
    from .report import format_results
    from .store import open_store

    with open_store(args.store) as store:
        doc = store.load_run(args.run)
    if args.json == "-":
        dump_json(doc)
        return EXIT_OK
    if args.json:
        from .export.json_result import check_writable, serialize, write_atomic

        check_writable(args.json)
        write_atomic(args.json, serialize(doc))
    print(f"run {doc['run_id']}" + (f" ({doc['label']})" if doc.get("label") else "") +
          f", {doc.get('created', '')}, {doc.get('status', '')}")
    print(format_results(doc["results"]))
    return EXIT_OK
