"""Building a user's source for `opcost variants`: one build per -D NAME,
compiled and linked before anything is measured, in a temporary directory
removed afterwards (and by the next run if a killed opcost left one). The
builds come back as Variants whose executable travels on them (`exe`: a
probe with the user's operation linked in; `program`: a whole program run
under `opcost-probe time`), so the runner measures them like any other.

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
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .spec import Variant

SOURCE_SUFFIXES = (".c", ".s", ".S", ".sx")
OP_SIGNATURE = "uint64_t opcost_op(uint64_t x)"
REFERENCE_NAME = "(empty opcost_op)"
REFERENCE_SOURCE = "#include <stdint.h>\nuint64_t opcost_op(uint64_t x) { return x; }\n"
_DEFINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(=.*)?\Z", re.S)
_ERROR_LINES = 20
COMPILE_TIMEOUT = 300


@dataclass
class Build:
    mode: str                        # "program" | "op"
    variants: list[Variant]          # the -D variants in order, then the reference (op mode)
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
            out.append(Variant("program", {"define": f"-D{d}", **common}, cpu, arch, ("define",),
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
            out.append(Variant("user.op", {**extra, **common}, cpu, arch, ("define",), "opcost_op call",
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
    gone: list[Path] = []
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


def default_samples(mode: str) -> tuple[int, int]:
    """(samples, warmup) per process: a program run is already a fresh
    process, so by default each probe process times one run, after the
    untimed preflight run that also checks the exit status."""
    return (1, 0) if mode == "program" else (20, 3)
