"""One function per subcommand: turn parsed arguments into calls and output.
Library errors propagate to cli.main, which prints them."""

from __future__ import annotations

import os
import sys

from . import probe
from .cli import dump_json
from .errors import EXIT_OK, UsageError
from .text import printable


def cmd_list(args, argv) -> int:
    table = probe.benchmark_table()
    if args.json:
        dump_json({**table, "default_suite": default_suite(table), "generic_params": [
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
    print(f"\nevery benchmark also takes cpu=A[,B] (or a range A-B: one variant per CPU), "
          f"arch={'|'.join(probe.installed_arches())} and spin=N")
    print(f"default suite (`opcost run` with no SPEC): {' '.join(default_suite(table))}")
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


def check_counters(text: str | None, known: list[str]):
    """`--counters` -> a counters.Plan (profiles expanded), or None. Unknown
    names are usage errors; known names this machine cannot count are not
    (they come back as <not supported> with the reason)."""
    from .counters import expand

    return expand(text, known)


def check_run_options(args) -> None:
    """What the numeric ranges (cli.BOUNDS, checked at parsing) cannot say."""
    if args.no_store and args.store:
        raise UsageError("--store and --no-store contradict each other; give one")


# `opcost run` with no SPEC: one figure for each kind of cost the seeds ask
# about, about 45 s at the default protocol. The rest of `opcost list`
# (hackbench's whole runs, the xstate family, exec/spawn...) is asked for by name.
DEFAULT_SUITE = ("syscall.null", "syscall.read", "syscall.write", "syscall.stat", "syscall.fstat", "syscall.open",
                 "ctx.pipe", "ctx.yield", "ctx.unix", "ctx.futex", "signal.catch", "signal.install",
                 "proc.fork", "thread.create", "mem.pagefault", "xstate.xsave")


def default_suite(table: dict) -> list[str]:
    names = {b["name"] for b in table["benchmarks"]}
    return [n for n in DEFAULT_SUITE if n in names]


def plan_variants(specs: list[str], cpu: str | None) -> list:
    from .spec import cpu_alternatives, expand

    host = probe.host_arch()
    arches = probe.installed_arches()
    default_cpus = cpu_alternatives(cpu, "--cpu") if cpu else None
    if not specs:
        specs = default_suite(probe.benchmark_table(host))
    variants = []
    for s in specs:
        variants += expand(s, probe.benchmark_table, host, arches, default_cpus,
                           placement_of=probe.placement_of)
    seen = set()
    for v in variants:
        k = (v.bench, tuple(sorted(v.all_params().items())))
        if k in seen:
            raise UsageError(f"{v.key()} is asked for twice; give each variant once")
        seen.add(k)
    return variants


def _measure(args, argv, variants: list, *, kind: str, result_json: str | None, runner_cls=None):
    """The measuring sequence of `run` and `ab`: check the output paths and the
    store, preflight every variant (so bad input fails before anything is
    stored), then run with a progress bar, recording after every process."""
    from . import output
    from .progress import make_progress
    from .record import Recorder
    from .runner import RunOptions, Runner

    plan = check_counters(args.counters, probe.benchmark_table()["counters"])
    if args.json is not None:
        output.check_target(args.json)
    store = None
    if not args.no_store:
        from .store import open_store

        store = open_store(args.store, on_wait=_warn)
    opts = RunOptions(processes=args.processes, samples=args.samples, warmup=args.warmup,
                      target_ms=args.target_ms, iters=args.iters,
                      counters=plan.probe_list() if plan else None, derived=plan.derived if plan else [],
                      fake_clock=args.fake_clock, seed=args.seed, timeout=args.timeout,
                      parallel=getattr(args, "parallel", None) or 1)
    runner = (runner_cls or Runner)(variants, opts, warn=_warn)
    try:
        runner.preflight()
        runner.recorder = Recorder(store=store, json_path=result_json, env=collect_env(),
                                   argv=["opcost", *argv], label=args.label, kind=kind, warn=_warn)
        total = len(variants) * args.processes * (args.warmup + args.samples) * (1 + (opts.parallel if opts.parallel > 1 else 0))
        with make_progress(total, enabled=False if args.no_progress else None) as prog:
            runner.progress = prog
            outcome = runner.run()
    finally:
        if store:
            store.close()
    return runner.recorder, outcome


def _finish(recorder, outcome, label: str | None, store_url: str | None = None) -> int:
    """Where the run went and how it ended, on stderr; the exit code."""
    lines = []
    if recorder.run_id is not None and recorder.store_error is None:
        lines.append(f"\nstored as run {recorder.run_id}" + (f" ({label})" if label else "")
                     + f" in {_store_name(store_url)}")
    elif recorder.store_error is not None:
        lines.append(f"opcost: the store missed {recorder.store_missed} process(es) of this run "
                     + (f"(run {recorder.run_id} there is incomplete); " if recorder.run_id is not None else "; ")
                     + f"everything measured is in {recorder.json_path or recorder.rescue_path}")
    if outcome.status == "interrupted":
        lines.append(f"opcost: interrupted ({_signal_name(outcome.signum)}); everything measured so far was kept")
    elif outcome.error is not None:
        lines.append(f"opcost: {outcome.error}")
    _emit(lines, sys.stderr)
    code = outcome.exit_code
    if recorder.store_error is not None and code == 0:
        code = recorder.store_error.exit_code
    return code


def _signal_name(signum: int | None) -> str:
    import signal

    return signal.Signals(signum or signal.SIGINT).name


def _store_name(url: str | None) -> str:
    """The store as a user would type it: ~ for the home directory."""
    from .store import default_store_path

    text = str(default_store_path()) if url is None else url
    home = os.path.expanduser("~")
    return "~" + text[len(home):] if home not in ("", "/") and text.startswith(home + "/") else text


def _emit(lines: list[str], stream) -> None:
    """Print at the end of a run: a closed terminal (SIGHUP) or pipe must not
    turn a finished run into a traceback."""
    try:
        for line in lines:
            print(line, file=stream, flush=True)
    except OSError:
        pass


def _table_stream(json_path: str | None):
    """`--json -` puts the document on stdout; the table then goes to stderr."""
    return sys.stderr if json_path == "-" else sys.stdout


def cmd_run(args, argv) -> int:
    from .report import format_results

    check_run_options(args)
    variants = plan_variants(args.specs, args.cpu)
    if (args.parallel or 1) > 1:
        pinned = [v.key() for v in variants if "cpu" in v.given]
        if args.cpu or pinned:
            raise UsageError(f"--parallel {args.parallel} places every copy on its own CPU itself; drop "
                             + ("--cpu" if args.cpu else f"cpu= from {pinned[0]}")
                             + " (restrict the CPUs with taskset instead)")
        from .parallel import place

        cpus, wrapped = place(args.parallel)
        if wrapped:
            _warn(f"--parallel {args.parallel}: only {len(set(cpus))} CPU(s) allowed, so copies share CPUs "
                  f"(copy i on CPU {', '.join(map(str, cpus))} in turn); per-copy throughput includes time-sharing")
    recorder, outcome = _measure(args, argv, variants, kind="run", result_json=args.json)
    _emit([format_results([vr.to_json() for vr in outcome.results])], _table_stream(args.json))
    return _finish(recorder, outcome, args.label, args.store)


def _warn(msg: str) -> None:
    print(f"opcost: {msg}", file=sys.stderr)


def cmd_history(args, argv) -> int:
    from .history import format_history
    from .store import open_store

    if args.action == "clean":
        with open_store(args.store, on_wait=_warn) as store:
            gone = store.clean_abandoned()
        print(f"marked {len(gone)} abandoned run(s)" + (f": {', '.join(map(str, gone))}" if gone else ""))
        return EXIT_OK
    with open_store(args.store, readonly=True) as store:
        runs = store.list_runs(args.limit)
    if args.json:
        dump_json(runs)
    else:
        print(format_history(runs))
    return EXIT_OK


def cmd_show(args, argv) -> int:
    from .store import open_store

    if args.json is not None and args.json != "-":
        from . import output

        output.check_target(args.json)
    with open_store(args.store, readonly=True) as store:
        doc = store.load_run(args.run)
    fill_summaries(doc)
    if args.json == "-":
        dump_json(doc)
        return EXIT_OK
    if args.json is not None:
        from .export.json_result import serialize

        output.write(args.json, serialize(doc))
    print(f"run {doc['run_id']}" + (f" ({printable(doc['label'])})" if doc.get("label") else "") +
          f", {doc.get('created', '')}, {doc.get('status', '')}" +
          (f", {doc['kind']}" if doc.get("kind") not in (None, "run") else ""))
    print(format_stored(doc))
    return EXIT_OK


def format_stored(doc: dict) -> str:
    """A stored run as the command that measured it printed it: `ab` and
    `variants` runs as their comparison (rebuilt from the stored results and
    the stored command line), any other as the results table."""
    from .report import format_comparison, format_results

    args = _stored_args(doc)
    res = doc["results"]
    if doc.get("kind") == "ab" and args is not None and len(res) == 2 * len(args.benches):
        return format_comparison(ab_document(res, a=args.a, b=args.b, delta=args.delta / 100,
                                             run_id=doc["run_id"], env=doc.get("env")),
                                 color=sys.stdout.isatty())
    if doc.get("kind") == "variants" and args is not None and res:
        from .variants import format_variants, variants_document

        vdoc = variants_document(res, delta=args.delta / 100, run_id=doc["run_id"], env=doc.get("env"))
        return format_variants(vdoc, [r for r in res if not r["params"].get("reference")] +
                               [r for r in res if r["params"].get("reference")], color=sys.stdout.isatty())
    return format_results(res)


def _stored_args(doc: dict):
    """The stored command line parsed again (ab's --a/--b/--delta), or None
    when it does not parse (another version's options)."""
    from .cli import build_parser, check_args

    argv = doc.get("argv") or []
    try:
        args = build_parser().parse_args([str(a) for a in argv[1:]])
        check_args(args)
    except (UsageError, SystemExit):
        return None
    return args if args.command == doc.get("kind") else None


def fill_summaries(doc: dict) -> None:
    """A stored run's summaries are computed from the processes it holds: a
    run that never finished (killed, abandoned) has none yet, and one that
    was interrupted between storing a process and summarizing it is behind."""
    from .runner import summarize_variant

    for r in doc.get("results", []):
        procs = [p for p in r.get("processes") or [] if p.get("samples")]
        s = r.get("summary") or {}
        if procs and s.get("n_processes") != len(procs):
            fresh = summarize_variant(procs)
            for keep in ("derived", "parallel"):   # need the run's plan: kept as stored
                if keep in s:
                    fresh[keep] = s[keep]
            r["summary"] = fresh


def _ab_variants(bench: str, a: str, b: str, cpu: str | None) -> tuple:
    from .spec import cpu_alternatives, expand

    host, arches = probe.host_arch(), probe.installed_arches()
    default_cpus = cpu_alternatives(cpu, "--cpu") if cpu else None
    if default_cpus and len(default_cpus) > 1:
        raise UsageError(f"--cpu {cpu}: ab compares one placement; give one CPU or A,B (or put cpu= in --a/--b)")
    if "," in bench or ":" in bench:
        raise UsageError(f"BENCH {bench!r} is a benchmark name; give its parameters with --a and --b")
    pair = []
    for arm, params in (("--a", a), ("--b", b)):
        if "|" in params:
            raise UsageError(f"{arm} {params}: one variant per arm; `opcost run` expands value lists")
        spec = f"{bench}:{params}" if params.strip() else bench
        vs = expand(spec, probe.benchmark_table, host, arches, default_cpus, placement_of=probe.placement_of)
        if len(vs) != 1:
            raise UsageError(f"{arm} {params}: names {len(vs)} variants; each arm is one variant")
        pair.append(vs[0])
    return tuple(pair)


def _switches(bench: str) -> int:
    for b in probe.benchmark_table()["benchmarks"]:
        if b["name"] == bench:
            return b.get("switches_per_op", 0)
    return 0


def cmd_ab(args, argv) -> int:
    from .report import format_comparison

    check_run_options(args)
    pairs = [_ab_variants(bench, args.a, args.b, args.cpu) for bench in args.benches]
    if len({p[0].bench for p in pairs}) != len(pairs):
        raise UsageError("a benchmark is named twice; give each once")
    recorder, outcome = _measure(args, argv, [v for pair in pairs for v in pair], kind="ab", result_json=None)
    doc = ab_document([vr.to_json() for vr in outcome.results], a=args.a, b=args.b, delta=args.delta / 100,
                      run_id=recorder.run_id, env=recorder.env)
    if args.json:
        from . import output
        from .export.json_comparison import serialize

        output.write(args.json, serialize(doc))
    out = _table_stream(args.json)
    _emit([format_comparison(doc, color=out.isatty())], out)
    return _finish(recorder, outcome, args.label, args.store)


def ab_document(results: list[dict], *, a: str, b: str, delta: float, run_id, env) -> dict:
    """The `opcost.comparison/1` document of an A/B run from its results, in
    pairs A, B per benchmark as `cmd_ab` measures and stores them (so `show`
    rebuilds it from the store)."""
    from . import comparison

    pairs = [(results[i], results[i + 1]) for i in range(0, len(results) - 1, 2)]
    entries = [comparison.entry(ra, rb, delta=delta, key=ra["bench"], switches=_switches(ra["bench"]))
               for ra, rb in pairs]
    entries, summary = comparison.finish(entries)
    return comparison.document(kind="ab", interleaved=True, entries=entries, summary=summary, delta=delta,
                               a={"params": a, "run_id": run_id}, b={"params": b, "run_id": run_id},
                               aa=all(ra["params"] == rb["params"] for ra, rb in pairs), env=env)


_IDENTITY_FIELDS = ("arch", "cpu_model_name")


def cmd_compare(args, argv) -> int:
    from . import output
    from .env import differences
    from .report import format_comparison, result_key
    from .store import open_store

    delta = args.delta / 100
    if args.json is not None:
        output.check_target(args.json)
    with open_store(args.store, readonly=True) as store:
        id_a, id_b = store.resolve(args.run_a), store.resolve(args.run_b)
        if id_a == id_b:
            raise UsageError(f"{printable(args.run_a)} and {printable(args.run_b)} are the same stored run ({id_a}); "
                             "compare two different runs, or measure noise with an interleaved "
                             "`opcost ab BENCH --a P --b P`")
        run_a, run_b = store.load_run(id_a), store.load_run(id_b)
    fill_summaries(run_a)
    fill_summaries(run_b)
    diffs = differences(run_a.get("env") or {}, run_b.get("env") or {})
    clash = [d for d in diffs if d[0] in _IDENTITY_FIELDS]
    if clash and not args.force:
        what = "; ".join(f"{f}: {a!r} vs {b!r}" for f, a, b in clash)
        raise UsageError(f"runs {id_a} and {id_b} ran on different machines ({what}); "
                         "their costs are not comparable (--force to compare anyway)")
    by_key_b = {result_key(r): r for r in run_b["results"]}
    pairs = [(r, by_key_b[result_key(r)]) for r in run_a["results"] if result_key(r) in by_key_b]
    if not pairs:
        ka = ", ".join(result_key(r) for r in run_a["results"]) or "none"
        kb = ", ".join(result_key(r) for r in run_b["results"]) or "none"
        raise UsageError(f"runs {id_a} and {id_b} share no benchmark variant (A: {ka}; B: {kb}); "
                         "compare runs of the same benchmarks and parameters")
    from . import comparison

    matched = {result_key(a) for a, _ in pairs}
    unmatched = [result_key(r) for r in run_a["results"] + run_b["results"] if result_key(r) not in matched]
    entries = [comparison.entry(a, b, delta=delta, key=result_key(a), switches=_switches(a["bench"]))
               for a, b in pairs]
    entries, summary = comparison.finish(entries)
    doc = comparison.document(
        kind="compare", interleaved=False, entries=entries, summary=summary, delta=delta,
        a={"run_id": id_a, "label": run_a.get("label"), "created": run_a.get("created")},
        b={"run_id": id_b, "label": run_b.get("label"), "created": run_b.get("created")}, aa=False,
        env_differences=[{"field": f, "a": a, "b": b} for f, a, b in diffs], unmatched=unmatched,
        env_a=run_a.get("env"), env_b=run_b.get("env"))
    if args.json is not None:
        from .export.json_comparison import serialize

        output.write(args.json, serialize(doc))
    out = _table_stream(args.json)
    _emit([format_comparison(doc, color=out.isatty())], out)
    return EXIT_OK


def cmd_probe(args, argv) -> int:
    from . import probe_build

    if args.probe_command == "build":
        path = probe_build.build(args.arch, args.cc, args.static, args.out)
        info = probe.find_probe(args.arch)
        how = ("runs natively" if probe.runs_natively(args.arch)
               else f"runs under {os.path.basename(info.emulator)} (correctness only)" if info and info.emulator
               else "cannot run here (install qemu-user to run it emulated)")
        print(f"built {path} ({args.arch}, {'static' if args.static else 'dynamic'}); {how}")
        return EXIT_OK
    rows = probe_build.probes()
    if args.json:
        dump_json({"probes": rows})
        return EXIT_OK
    for r in rows:
        print(f"{r['arch']:<8} {r['runs']:<48} {r['path'] or ''}")
    return EXIT_OK


def cmd_variants(args, argv) -> int:
    from .variants import run_variants

    return run_variants(args, argv)
