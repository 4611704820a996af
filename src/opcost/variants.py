"""`opcost variants`: one source file, one build per -D NAME, measured
interleaved (seed 004's shell loop of `gcc -DX; time ./x` as one command).

This module owns the builds: checking the input, compiling every variant
before anything is measured, choosing the mode, and the temporary directory
that holds the binaries (removed afterwards). Measuring and statistics are
the ones of `opcost ab` (commands._measure, comparison.py).

Two modes:
- program: SOURCE defines main. Each variant is linked into a program, and
  `opcost-probe time` runs it, one sample per run: elapsed time (fork to
  wait, CLOCK_MONOTONIC_RAW), user and system time from wait4, like time(1).
- op: SOURCE defines `uint64_t opcost_op(uint64_t x)`. Each variant is linked
  into its own probe (make USER_OP=SOURCE USER_CFLAGS="CFLAGS -DNAME") whose
  benchmark user.op calls it in a dependent chain with the usual protocol
  (calibrated batches, loop and clock overhead subtracted). An empty
  opcost_op, built with the same compiler and flags, is measured alongside as
  the reference: the cost of the call itself.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import ProbeError, UsageError
from .spec import Variant

SOURCE_SUFFIXES = (".c", ".s", ".S", ".sx")
OP_SIGNATURE = "uint64_t opcost_op(uint64_t x)"
REFERENCE_NAME = "(empty opcost_op)"
REFERENCE_SOURCE = "#include <stdint.h>\nuint64_t opcost_op(uint64_t x) { return x; }\n"
_DEFINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(=.*)?\Z", re.S)
_ERROR_LINES = 20
COMPILE_TIMEOUT = 300


@dataclass(frozen=True)
class BuiltVariant(Variant):
    """A Variant whose probe process is a built binary: `exe` (a user.op probe)
    or `program` (run under `opcost-probe time`)."""
    name: str = ""
    exe: str = ""
    program: tuple = ()

    def key(self) -> str:
        return self.name


@dataclass
class Build:
    mode: str                        # "program" | "op"
    variants: list[BuiltVariant]     # the -D variants in order, then the reference (op mode)
    cc: list[str]
    cflags: list[str]
    source: Path


def probe_source_dir() -> Path:
    """The probe's sources: shipped in the package (opcost/_probe/src), or the
    source checkout's probe/ when running from it."""
    here = Path(__file__).resolve().parent
    for d in (here / "_probe" / "src", here.parents[1] / "probe"):
        if (d / "Makefile").is_file() and (d / "user_op.c").is_file():
            return d
    raise UsageError("this installation has no probe sources (opcost/_probe/src), which --mode op compiles; "
                     "reinstall with `pip install .` or use --mode program")


def check_source(text: str) -> Path:
    p = Path(text)
    if not p.exists():
        raise UsageError(f"SOURCE {text}: no such file; give a C (.c) or assembly (.s, .S) file")
    if not p.is_file():
        raise UsageError(f"SOURCE {text} is not a regular file; give a C (.c) or assembly (.s, .S) file")
    try:
        with open(p, "rb"):
            pass
    except OSError as e:
        raise UsageError(f"SOURCE {text} cannot be read: {e.strerror}") from None
    if p.suffix not in SOURCE_SUFFIXES:
        raise UsageError(f"SOURCE {text}: opcost compiles C (.c) or assembly (.s, .S, .sx); "
                         f"{p.suffix or 'no extension'} is neither (rename the file)")
    return p.resolve()


def check_defines(defines: list[str] | None) -> list[str]:
    if not defines:
        raise UsageError("give at least one -D NAME (one build per -D; the first is the baseline A), "
                         "e.g. -D FAST -D SLOW")
    seen = set()
    for d in defines:
        if not _DEFINE.match(d):
            raise UsageError(f"-D {d!r} is not NAME or NAME=VALUE with NAME a C identifier")
        if d in seen:
            raise UsageError(f"-D {d} is given twice; give each variant once")
        seen.add(d)
    return defines


def check_compiler(cc: str) -> list[str]:
    try:
        words = shlex.split(cc)
    except ValueError as e:
        raise UsageError(f"--cc {cc!r}: {e}") from None
    if not words:
        raise UsageError("--cc is empty; give a C compiler, e.g. --cc gcc")
    if shutil.which(words[0]) is None:
        raise UsageError(f"compiler '{words[0]}' not found; install gcc or pass --cc")
    return words


def split_flags(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:
        raise UsageError(f"--cflags {text!r}: {e}") from None


def _trim(output: str) -> str:
    lines = [ln.rstrip() for ln in output.strip().splitlines() if ln.strip()]
    more = len(lines) - _ERROR_LINES
    lines = lines[:_ERROR_LINES] + ([f"... ({more} more lines)"] if more > 0 else [])
    return "\n".join("  " + ln for ln in lines) if lines else "  (no output)"


def _run_tool(argv: list[str], what: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, cwd=cwd,
                            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{what}: the compiler did not finish within {COMPILE_TIMEOUT} s") from None
    except OSError as e:
        raise UsageError(f"{what}: cannot run {argv[0]}: {e.strerror}") from None
    if cp.returncode != 0:
        raise UsageError(f"{what} (exit status {cp.returncode}):\n{_trim(cp.stderr + cp.stdout)}")
    return cp


def _symbols(obj: Path, source: Path) -> set[str]:
    """Global symbols the object defines, by nm; without nm, a look at the
    source text (good enough for the two names that matter)."""
    nm = shutil.which("nm")
    if nm:
        cp = subprocess.run([nm, "-g", "--defined-only", str(obj)], capture_output=True, text=True)
        if cp.returncode == 0:
            return {ln.split()[-1] for ln in cp.stdout.splitlines() if len(ln.split()) >= 2}
    text = source.read_text(errors="replace")
    return {n for n in ("main", "opcost_op")
            if re.search(rf"\b{n}\s*\(", text) or re.search(rf"^\s*{n}\s*:", text, re.M)}


def _file_name(define: str, i: int) -> str:
    return f"v{i}_" + re.sub(r"[^A-Za-z0-9_]", "_", define.split("=", 1)[0])


def choose_mode(mode: str, syms: dict[str, set[str]]) -> str:
    """auto: op if SOURCE defines opcost_op, program if it defines main."""
    if mode == "auto":
        has_op = {d for d, s in syms.items() if "opcost_op" in s}
        has_main = {d for d, s in syms.items() if "main" in s}
        if has_op and has_main:
            raise UsageError("SOURCE defines both main and opcost_op; pass --mode program or --mode op")
        if has_op:
            mode = "op"
        elif has_main:
            mode = "program"
        else:
            raise UsageError(f"SOURCE defines neither main (a whole program, --mode program) nor opcost_op "
                             f"({OP_SIGNATURE}, --mode op)")
    need = "main" if mode == "program" else "opcost_op"
    for d, s in syms.items():
        if need not in s:
            raise UsageError(f"variant -D{d} does not define {need}, which --mode {mode} needs"
                             + (f" ({OP_SIGNATURE})" if mode == "op" else ""))
    return mode


def build(*, source: Path, defines: list[str], cc: list[str], cflags: list[str], mode: str,
          workdir: Path, cpu: str, arch: str, log=None) -> Build:
    """Compile every variant into workdir; raise UsageError naming the first
    variant that does not compile or link, before anything is measured."""
    log = log or (lambda msg: None)
    objs, syms = {}, {}
    for i, d in enumerate(defines):
        obj = workdir / (_file_name(d, i) + ".o")
        _run_tool([*cc, *cflags, f"-D{d}", "-c", str(source), "-o", str(obj)],
                  f"variant -D{d} does not compile: {shlex.join([*cc, *cflags, f'-D{d}', '-c', str(source)])}")
        objs[d], syms[d] = obj, _symbols(obj, source)
    mode = choose_mode(mode, syms)
    common = {"mode": mode, "source": str(source), "cc": shlex.join(cc), "cflags": shlex.join(cflags)}
    out = []
    if mode == "program":
        for i, d in enumerate(defines):
            exe = workdir / _file_name(d, i)
            _run_tool([*cc, *cflags, "-o", str(exe), str(objs[d])], f"variant -D{d} does not link")
            out.append(BuiltVariant("program", {"define": f"-D{d}", **common}, cpu, arch, ("define",),
                                    "program run", name=f"-D{d}", program=(str(exe),)))
    else:
        src_dir = probe_source_dir()
        make = shutil.which("make")
        if make is None:
            raise UsageError("--mode op links the operation into the probe with make, which is not installed; "
                             "install make (apt-get install make)")
        user_src = _make_safe(source, workdir)
        iquote = [] if user_src == source else ["-iquote", str(source.parent)]
        ref = workdir / "reference.c"
        ref.write_text(REFERENCE_SOURCE)
        jobs = [(f"-D{d}", user_src, [*cflags, *iquote, f"-D{d}"], _file_name(d, i), {"define": f"-D{d}"})
                for i, d in enumerate(defines)]
        jobs.append((REFERENCE_NAME, ref, list(cflags), "reference", {"define": "", "reference": "empty opcost_op"}))
        for name, src, flags, fname, extra in jobs:
            log(f"building the probe with {name}")
            exe = workdir / f"opcost-probe-{fname}"
            _run_tool([make, "-s", "-C", str(src_dir), f"OUT={exe}", f"USER_OP={src}",
                       f"USER_CFLAGS={shlex.join(flags)}", f"CC={shlex.join(cc)}"],
                      f"variant {name}: building the probe with it failed" if name != REFERENCE_NAME
                      else "building the reference probe (empty opcost_op) failed")
            out.append(BuiltVariant("user.op", {**extra, **common}, cpu, arch, ("define",), "opcost_op call",
                                    name=name, exe=str(exe)))
    return Build(mode, out, cc, cflags, source)


def _make_safe(source: Path, workdir: Path) -> Path:
    """make cannot name a prerequisite with spaces, ':' or '#' in it: such a
    SOURCE is copied (its directory stays on the quote include path)."""
    if re.search(r"[\s:#$%\\]", str(source)):
        dst = workdir / ("user_source" + source.suffix)
        shutil.copyfile(source, dst)
        return dst
    return source


WORKDIR_PREFIX = "opcost-variants-"


def sweep_stale_workdirs(root: Path | None = None) -> list[Path]:
    """Remove build directories left by an opcost that was killed (SIGKILL
    skips the clean-up): their names carry the owner's pid, and a directory
    whose owner no longer runs is removed. Returns what was removed."""
    root = Path(root or tempfile.gettempdir())
    gone = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return gone
    for d in entries:
        m = re.fullmatch(re.escape(WORKDIR_PREFIX) + r"([0-9]+)-.*", d.name)
        if not m or not d.is_dir() or d.is_symlink():
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)
            continue  # its owner still runs (or a process we may not signal)
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        gone.append(d)
    return gone


def make_workdir() -> tempfile.TemporaryDirectory:
    sweep_stale_workdirs()
    return tempfile.TemporaryDirectory(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")


class VariantRunnerMixin:
    """Runs each variant's own binary; in program mode the per-process timeout
    comes from how long the preflight run took (unless --timeout is given)."""

    def _request(self, v, rnd, idx, pad=True):
        req = super()._request(v, rnd, idx, pad)
        req.exe = v.exe or None
        req.program = v.program or None
        req.params = {}  # define, mode, source... describe the build; user.op has no parameters
        return req

    def preflight(self) -> None:
        """As Runner.preflight, one variant at a time (in program mode this
        runs each program once, untimed: it must exit 0), with the failure
        named by its variant rather than by its temporary binary."""
        from . import probe

        t0 = time.monotonic()
        for vr in self.results:
            v = vr.variant
            req = self._request(v, 0, 0, pad=False)
            try:
                reason = probe.check(req)
            except ProbeError as e:
                msg = str(e).replace(f"{req.bench}: probe setup failed: ", "")
                for path in (v.exe, *(v.program or ())):
                    if path:
                        msg = msg.replace(f"program {path} ", "the program ").replace(path, v.name)
                raise ProbeError(f"variant {v.name}: {msg}") from None
            if reason is not None:
                vr.status, vr.reason = "unsupported", reason
                self.warn(f"{v.name}: cannot be measured here: {reason}")
        per = (time.monotonic() - t0) / max(1, len(self.results))
        if self.program_mode and self.opts.timeout is None:
            self.opts.timeout = 60.0 + 20.0 * per * (self.opts.warmup + self.opts.samples)


def runner_class(program_mode: bool):
    from .runner import Runner

    class VariantRunner(VariantRunnerMixin, Runner):
        pass

    VariantRunner.program_mode = program_mode
    return VariantRunner


def default_samples(mode: str) -> tuple[int, int]:
    """(samples, warmup) per process: a program run is already a fresh
    process, so by default each probe process times one run, after the
    untimed preflight run that also checks the exit status."""
    return (1, 0) if mode == "program" else (20, 3)


def rel_path(p: Path) -> str:
    try:
        return os.path.relpath(p)
    except ValueError:
        return str(p)


_MODE_TEXT = {"program": "whole program, each run timed like time(1): elapsed from fork to wait, "
                         "user and system from wait4",
              "op": "opcost_op called in a dependent chain inside the probe; loop and clock overhead "
                    "subtracted, the call itself not"}


def run_variants(args, argv) -> int:
    """`opcost variants`: check the input, build every variant, measure them
    interleaved (commands._measure), compare each to the first (Holm across
    the comparisons), print, --json, store."""
    from .commands import check_run_options
    from .output import check_target
    from .spec import check_cpu_list, default_cpu

    source = check_source(args.source)
    defines = check_defines(args.defines)
    cc = check_compiler(args.cc)
    cflags = split_flags(args.cflags)
    delta = args.delta / 100
    given = {k: getattr(args, k) for k in ("samples", "warmup", "target_ms")}
    # provisional values: the ranges are checked before compiling anything
    args.samples = 1 if given["samples"] is None else given["samples"]
    args.warmup = 0 if given["warmup"] is None else given["warmup"]
    args.target_ms = 10.0 if given["target_ms"] is None else given["target_ms"]
    check_run_options(args)
    if args.cpu is not None:
        cpu = check_cpu_list(args.cpu, "--cpu")
        if "," in cpu:
            raise UsageError(f"--cpu {args.cpu}: variants run on one CPU; give one, e.g. --cpu {cpu.split(',')[0]}")
    else:
        cpu = str(default_cpu())
    if args.json is not None:
        check_target(args.json)
    if args.counters is not None:  # before the builds (seconds each in op mode), not after
        from . import probe
        from .commands import check_counters

        check_counters(args.counters, probe.benchmark_table()["counters"])

    # SIGTERM and SIGHUP stop it like Ctrl-C (interrupts.install): measuring
    # stops, what was measured is kept, the build directory is removed on the way out.
    return _build_and_measure(args, argv, source=source, defines=defines, cc=cc, cflags=cflags, delta=delta,
                              cpu=cpu, given=given)


def _build_and_measure(args, argv, *, source, defines, cc, cflags, delta, cpu, given) -> int:
    import sys

    from . import output, probe
    from .commands import _emit, _finish, _measure, _table_stream
    from .export.json_comparison import serialize

    with make_workdir() as tmp:
        b = build(source=source, defines=defines, cc=cc, cflags=cflags, mode=args.mode, workdir=Path(tmp),
                  cpu=cpu, arch=probe.host_arch(), log=lambda m: print(f"opcost: {m}", file=sys.stderr))
        if b.mode == "program":
            for opt, val in (("--target-ms", given["target_ms"]), ("--iters", args.iters),
                             ("--counters", args.counters)):
                if val is not None:
                    raise UsageError(f"{opt} applies to --mode op; in program mode one sample is one whole run")
        ds, dw = default_samples(b.mode)
        args.samples = ds if given["samples"] is None else given["samples"]
        args.warmup = dw if given["warmup"] is None else given["warmup"]
        recorder, outcome = _measure(args, argv, b.variants, kind="variants", result_json=None,
                                     runner_cls=runner_class(b.mode == "program"))
    res = [vr.to_json() for vr in outcome.results]
    doc = variants_document(res, delta=delta, run_id=recorder.run_id, env=recorder.env)
    if args.json is not None:
        output.write(args.json, serialize(doc))
    out = _table_stream(args.json)
    _emit([format_variants(doc, res, color=out.isatty())], out)
    return _finish(recorder, outcome, args.label, args.store)


def variants_document(res: list[dict], *, delta: float, run_id, env) -> dict:
    """The `opcost.comparison/1` document of a variants run from its results:
    the builds in -D order, then (op mode) the empty-opcost_op reference, as
    `opcost variants` measures and stores them (so `show` rebuilds it)."""
    from . import comparison

    mine = [r for r in res if not r["params"].get("reference")]
    ref = next((r for r in res if r["params"].get("reference")), None)
    entries = [comparison.entry(mine[0], r, delta=delta, key=r["key"]) for r in mine[1:]]
    entries, summary = comparison.finish(entries)
    ref_ns = (ref.get("summary") or {}).get("median_ns") if ref else None
    builds = []
    for r in mine:
        s = r.get("summary") or {}
        d = {"name": r["key"], "status": r["status"], "median_ns": s.get("median_ns"),
             "median_cycles": s.get("median_cycles")}
        if ref_ns is not None and s.get("median_ns") is not None:
            d["net_median_ns"] = s["median_ns"] - ref_ns
        builds.append(d)
    p = mine[0]["params"]
    info = {"source": p["source"], "mode": p["mode"], "cc": p["cc"], "cflags": p["cflags"],
            "baseline": mine[0]["key"], "builds": builds,
            "call_overhead": None if ref is None else {
                "what": "an empty opcost_op (return x) built with the same compiler and flags, measured "
                        "interleaved; comparisons and medians include it, net_median_ns does not",
                "median_ns": ref_ns, "median_cycles": (ref.get("summary") or {}).get("median_cycles")}}
    return comparison.document(kind="variants", interleaved=True, entries=entries, summary=summary, delta=delta,
                               a={"params": mine[0]["key"], "run_id": run_id},
                               b={"params": ", ".join(r["key"] for r in mine[1:]), "run_id": run_id},
                               aa=False, env=env, variants=info)


def format_variants(doc: dict, results: list[dict], color: bool = False) -> str:
    from .report import fmt_ns, format_comparison, format_results

    info = doc["variants"]
    out = [f"{rel_path(Path(info['source']))}: {info['mode']} mode ({_MODE_TEXT[info['mode']]})\n"
           f"built with: {info['cc']} {info['cflags']} -DNAME".rstrip(),
           format_results(results)]
    ovh = info.get("call_overhead")
    if ovh and ovh.get("median_ns") is not None:
        net = ", ".join(f"{b['name']} {fmt_ns(b.get('net_median_ns'))}" for b in info["builds"])
        out.append(f"call overhead: {REFERENCE_NAME} costs {fmt_ns(ovh['median_ns'])} per call "
                   f"({ovh['median_cycles']:.1f} cycles); net of it: {net}.\n"
                   "The comparisons below include the call.")
    if doc["comparisons"]:
        others = len(doc["comparisons"])
        out.append(f"interleaved: every round ran one process of each variant in a random order\n"
                   f"A (baseline): {doc['a']['params']}; verdicts are each other variant relative to A"
                   + (f", p Holm-adjusted across the {others} comparisons" if others > 1 else ""))
        out.append(format_comparison(doc, color=color).split("\n\n", 1)[1])
    else:
        out.append("one variant: measured alone, nothing to compare (give a second -D to compare with it)")
    return "\n\n".join(out)
