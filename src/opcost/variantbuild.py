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

Another architecture (`--arch arm`, or `--cc arm-linux-gnueabihf-gcc`): the
builds' ELF header says what they are for (arches.elf_arch). What this
kernel runs natively runs as it is; anything else runs under qemu user-mode
emulation (qemu-arm, qemu-aarch64) and is flagged `emulated`: its timings
are qemu's, only its correctness means something. A program for another
architecture is linked -static (qemu-user finds no foreign shared
libraries by itself, and an x86_64 machine may have no i386 libc); the
probe (op mode) always is. A build nothing here
can run is refused before anything is measured, naming what it was built
for and what is missing.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import variantcache, probe
from .arches import describe_elf, elf_arch
from .crossprobe import default_cc
from .errors import UsageError
from .model import REFERENCE_NAME
from .spec import Variant

SOURCE_SUFFIXES = (".c", ".s", ".S", ".sx")
OP_SIGNATURE = "uint64_t opcost_op(uint64_t x)"
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
    arch: str = ""                   # what the builds are for (from their ELF header)
    emulator: str | None = None      # they run under this qemu, or natively (None)
    cached: list[str] = field(default_factory=list)   # the builds taken from the build cache
    pending: list = field(default_factory=list)       # cache writes, made by store_in_cache()
    cache: variantcache.Cache | None = None
    log: object = None

    def store_in_cache(self) -> None:
        """Store the new builds in the build cache: called once the study got
        past every check and measured (bad input stores nothing)."""
        for put, *put_args in self.pending:
            if put:
                put(*put_args)
        self.pending = []
        if self.cache and self.cache.unwritable and callable(self.log):
            self.log(f"the build cache cannot be written ({self.cache.unwritable}): the next run builds again")


def check_arch(arch: str | None) -> str | None:
    """--arch: an architecture opcost knows (x86_64, i386, aarch64, arm)."""
    if arch is None:
        return None
    name = arch.strip()
    if name not in probe.KNOWN_ARCHES:
        raise UsageError(f"--arch {arch!r} is not an architecture opcost knows; valid: "
                         f"{', '.join(probe.KNOWN_ARCHES)}")
    return name


def compiler_for(cc: str | None, arch: str | None) -> list[str]:
    """--cc as given, else the compiler for --arch (the host's cc, or the
    Debian cross compiler: arm-linux-gnueabihf-gcc for arm...), else cc."""
    if cc is not None:
        return check_compiler(cc)
    if arch is None:
        return check_compiler("cc")
    try:
        words = default_cc(arch)
    except UsageError as e:
        raise UsageError(f"--arch {arch}: {e}") from None
    return check_compiler(shlex.join(words))


def runner_for(arch: str, what: str) -> str | None:
    """How a build for `arch` runs here: natively (None) or under the qemu
    user-mode emulator it needs (its path); UsageError when neither."""
    if probe.runs_natively(arch):
        return None
    emu = probe.emulator(arch)
    if emu is None:
        raise UsageError(f"{what}: built for {arch}, this machine is {probe.host_arch()} and qemu-{arch} is not "
                         f"installed, so it cannot run here (apt-get install qemu-user, or build for "
                         f"{probe.host_arch()})")
    return emu


def arch_of_build(path: Path, what: str, want: str | None, cc: list[str]) -> str:
    """The architecture an object or executable is for, from its ELF header:
    --arch's when given (UsageError if the compiler built something else),
    and one that opcost knows how to run."""
    return _check_arch(elf_arch(path), describe_elf(path), what, want, cc)


def _check_arch(got: str | None, desc: str | None, what: str, want: str | None, cc: list[str]) -> str:
    if want is not None and got != want:
        raise UsageError(f"{shlex.join(cc)} builds {desc or 'non-ELF'} files, not {want}: pass --cc with a compiler "
                         f"for {want}, or leave --cc out to use the one for --arch {want}")
    if got is None:
        raise UsageError(f"{what}: built for {desc or 'an unknown format (not ELF)'} by {shlex.join(cc)}, "
                         f"this machine is {probe.host_arch()} and opcost runs x86_64, i386, aarch64 or arm "
                         "builds only")
    return got


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


def split_flags(text: str, opt: str = "--cflags") -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:
        raise UsageError(f"{opt} {text!r}: {e}") from None


def join_cflags(given: list[str] | None) -> list[str]:
    """--cflags, repeatable: each occurrence is appended (never a silent
    last-wins); none given: -O2."""
    if not given:
        return ["-O2"]
    return [f for text in given for f in split_flags(text)]


def variant_flags(given: list[str] | None, defines: list[str]) -> dict[str, list[str]]:
    """--cflags-for NAME=FLAGS (repeatable, appended in order): extra flags of
    the variant -D NAME (or -D NAME=VALUE) only. {define: flags}."""
    names = {d.split("=", 1)[0]: d for d in defines}
    out: dict[str, list[str]] = {}
    for text in given or []:
        name, eq, flags = text.partition("=")
        name = name.strip()
        if not eq or not name:
            raise UsageError(f"--cflags-for {text!r}: expected NAME=FLAGS with NAME one of the -D variants "
                             f"({', '.join(names)}), e.g. --cflags-for {next(iter(names))}=-mpopcnt")
        if name not in names:
            raise UsageError(f"--cflags-for {text!r}: {name} is not one of the -D variants; valid: "
                             f"{', '.join(names)}")
        words = split_flags(flags, f"--cflags-for {name}=")
        if not words:
            raise UsageError(f"--cflags-for {text!r} gives no flags; give some, e.g. --cflags-for {name}=-mpopcnt, "
                             "or leave it out")
        out.setdefault(names[name], []).extend(words)
    return out


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


class _Builder:
    """One study's builds: the objects compiled (or their facts found in the
    cache), then the programs or probes linked from them; what was taken
    from the cache, and what to store there once the study has measured."""

    def __init__(self, source: Path, cc: list[str], cflags: list[str], workdir: Path, extra_flags: dict,
                 cache: variantcache.Cache | None, log, several: bool) -> None:
        self.source, self.cc, self.cflags, self.workdir = source, cc, cflags, workdir
        self.extra_flags, self.cache, self.log, self.several = extra_flags, cache, log, several
        self.objs: dict[str, Path] = {}
        self.syms: dict[str, set[str]] = {}
        self.found: dict[str, tuple[str | None, str | None]] = {}   # define -> (arch, ELF description)
        self.keys: dict[str, str] = {}
        self.srcs: dict[str, list[Path]] = {}
        self.cached: list[str] = []
        # stored by Build.store_in_cache once the study has measured: bad input (a
        # variant that does not compile, an option of the other mode, a bad store)
        # leaves nothing in the cache
        self.pending: list = []

    def flags_of(self, d: str) -> list[str]:
        return [*self.cflags, *self.extra_flags.get(d, [])]

    def compile_obj(self, i: int, d: str) -> Path:
        obj = self.workdir / (_file_name(d, i) + ".o")
        argv = [*self.cc, *self.flags_of(d), f"-D{d}", "-c", str(self.source)]
        _run_tool([*argv, "-o", str(obj)], f"variant -D{d} does not compile: {shlex.join(argv)}")
        self.objs[d] = obj
        return obj

    def scan(self, defines: list[str]) -> None:
        """Each variant's symbols, architecture and ELF description: from the
        cache, or from its object compiled now."""
        cache = self.cache
        for i, d in enumerate(defines):
            self.srcs[d] = variantcache.source_files(self.source, self.flags_of(d))
            self.keys[d] = variantcache.key(what="variant", sources=self.srcs[d], cc=self.cc,
                                            flags=[*self.flags_of(d), f"-D{d}"], probe_dir=None)
            meta = cache.meta(self.keys[d]) if cache else None
            if meta is not None and isinstance(meta.get("symbols"), list):
                self.syms[d] = set(meta["symbols"])
                self.found[d] = (meta.get("arch"), meta.get("elf"))
                continue
            obj = self.compile_obj(i, d)
            self.syms[d] = _symbols(obj, self.source)
            self.found[d] = (elf_arch(obj), describe_elf(obj))
            if cache and self.found[d][0] is not None:
                self.pending.append((cache.put_meta, self.keys[d], {
                    "symbols": sorted(self.syms[d]), "arch": self.found[d][0], "elf": self.found[d][1],
                    "define": d, "source": str(self.source)}))

    def named(self, d: str, cpu: str) -> str:
        return f"{d} cpu={cpu}" if self.several else d

    def own(self, d: str) -> dict[str, str]:
        """The variant's own params: its define, and its --cflags-for flags."""
        extra = self.extra_flags.get(d)
        return {"define": f"-D{d}", **({"cflags_for": shlex.join(extra)} if extra else {})}

    def from_cache(self, k: str, name: str, dst: Path, what: str) -> Path | None:
        hit = self.cache.file(k, name) if self.cache else None
        if hit is None:
            return None
        self.cached.append(what)
        self.log(f"{what}: using the cached build {hit.parent} (nothing compiled)")
        return variantcache.link_or_copy(hit, dst)

    def programs(self, defines: list[str], cpus: list[str], got: str, emu: str | None, common: dict,
                 ops: int, guest: str | None, remote: str | None) -> list[Variant]:
        """--mode program: each variant linked into a program of its own."""
        # qemu-user finds no shared libraries of another architecture by itself, and
        # a kernel that runs i386 natively may have no i386 loader and libc installed
        foreign = got != probe.host_arch()
        link_extra = ["-static"] if (foreign or guest or remote) and "-static" not in self.cflags else []
        if link_extra:
            self.log(f"linking the {got} builds -static, to run " + (
                f"under {os.path.basename(emu)}" if emu else f"in {guest} (no libc there)" if guest
                else f"on {remote} (their libc is unknown)" if remote else f"without {got} shared libraries here"))
            common["link"] = "-static"
        op = "operation (program run / --ops)" if ops else "program run"
        exe_name = "program" + "".join(link_extra)
        out = []
        for i, d in enumerate(defines):
            exe = self.workdir / _file_name(d, i)
            if self.from_cache(self.keys[d], exe_name, exe, f"variant -D{d}") is None:
                obj = self.objs.get(d) or self.compile_obj(i, d)
                _run_tool([*self.cc, *self.flags_of(d), *link_extra, "-o", str(exe), str(obj)],
                          f"variant -D{d} does not link")
                arch_of_build(exe, f"variant -D{d}", got, self.cc)
                self.pending.append((self.cache and self.cache.put_file, self.keys[d], exe_name, exe))
            prog = (emu, str(exe)) if emu else (str(exe),)
            for cpu in cpus:
                out.append(Variant("program", {**self.own(d), **common}, cpu, got, ("define",), op,
                                   name=self.named(f"-D{d}", cpu), program=prog, emulator=emu or "", ops=ops))
        return out

    def probes(self, defines: list[str], cpus: list[str], got: str, emu: str | None, common: dict) -> list[Variant]:
        """--mode op: each variant's operation linked into a probe of its own,
        and the reference probe (an empty opcost_op)."""
        src_dir = probe_source_dir()
        user_src = _make_safe(self.source, self.workdir)
        iquote = [] if user_src == self.source else ["-iquote", str(self.source.parent)]
        ref = self.workdir / "reference.c"
        ref.write_text(REFERENCE_SOURCE)
        jobs = [(f"-D{d}", user_src, [*self.flags_of(d), *iquote, f"-D{d}"], _file_name(d, i), self.own(d),
                 variantcache.key(what="probe", sources=self.srcs[d], cc=self.cc, flags=[*self.flags_of(d), f"-D{d}"],
                                  probe_dir=src_dir))
                for i, d in enumerate(defines)]
        jobs.append((REFERENCE_NAME, ref, list(self.cflags), "reference", {"define": "", "reference": "empty opcost_op"},
                     variantcache.key(what="reference", sources=[], cc=self.cc, flags=list(self.cflags),
                                      probe_dir=src_dir, extra=REFERENCE_SOURCE)))
        out = []
        make = None
        for name, src, flags, fname, extra, k in jobs:
            exe = self.workdir / f"opcost-probe-{fname}"
            what = f"variant {name}" if name != REFERENCE_NAME else "the reference probe (empty opcost_op)"
            if self.from_cache(k, "probe", exe, what) is None:
                make = make or shutil.which("make")
                if make is None:
                    raise UsageError("--mode op links the operation into the probe with make, which is not "
                                     "installed; install make (apt-get install make)")
                self.log(f"building the probe with {name}")
                _run_tool([make, "-s", "-C", str(src_dir), f"OUT={exe}", f"USER_OP={src}",
                           f"USER_CFLAGS={shlex.join(flags)}", f"CC={shlex.join(self.cc)}"],
                          f"variant {name}: building the probe with it failed" if name != REFERENCE_NAME
                          else "building the reference probe (empty opcost_op) failed")
                arch_of_build(exe, f"variant {name}", got, self.cc)
                self.pending.append((self.cache and self.cache.put_file, k, "probe", exe))
            for cpu in cpus:
                out.append(Variant("user.op", {**extra, **common}, cpu, got, ("define",), "opcost_op call",
                                   name=self.named(name, cpu), exe=str(exe), emulator=emu or ""))
        return out


def build(*, source: Path, defines: list[str], cc: list[str], cflags: list[str], mode: str,
          workdir: Path, cpus: list[str], arch: str | None = None, ops: int = 0, log=None,
          extra_flags: dict[str, list[str]] | None = None, cache: variantcache.Cache | None = None,
          guest: str | None = None, remote: str | None = None, guest_arch: str | None = None) -> Build:
    """Compile every variant into workdir; raise UsageError naming the first
    variant that does not compile or link, or that cannot run here, before
    anything is measured. `arch`: --arch (the builds must be for it), or None
    (whatever the compiler builds). One Variant per build and CPU of `cpus`
    (named `-DNAME cpu=C` when there are several). `extra_flags`: the flags
    of --cflags-for, per define, after `cflags`. `cache`: builds found there
    are used as they are (nothing compiled; said on `log`), builds made are
    stored there (variantcache.py). `guest`: the builds run in this
    virtual machine (no libc in its initramfs), whose architecture is
    `guest_arch` (x86_64 if not given): they must be for it, never run under
    an emulator here, and a program is linked -static. `remote`: the builds run on
    other machines of their architecture (the fleet's hosts, named so in
    what is said): never under an emulator here, and a program is linked
    -static (the hosts' libc is unknown)."""
    log = log or (lambda msg: None)
    b = _Builder(source, cc, cflags, workdir, extra_flags or {}, cache, log, several=len(cpus) > 1)
    b.scan(defines)
    # what the compiler builds, from the first object: refused before linking if nothing here runs it
    first = defines[0]
    got = _check_arch(*b.found[first], f"variant -D{first}", arch, cc)
    want = guest_arch or "x86_64"
    if guest and got != want:
        raise UsageError(f"variant -D{first}: {shlex.join(cc)} builds for {got}; {guest} runs {want} builds only: "
                         f"give --arch {want} (or an {want} compiler with --cc) or measure here without --kernel")
    emu = None if remote or guest else runner_for(got, f"variant -D{first}")
    mode = choose_mode(mode, b.syms)
    if ops and mode != "program":
        raise UsageError("--ops applies to --mode program (a run performs N operations); in op mode one "
                         "opcost_op call is the operation")
    common = {"mode": mode, "source": str(source), "cc": shlex.join(cc), "cflags": shlex.join(cflags)}
    if emu:
        common["emulated"] = os.path.basename(emu)
        log(f"the builds are for {got}: they run under {os.path.basename(emu)} (emulated: the timings are "
            f"qemu's, not an {got} CPU's; correctness only)")
    if ops:
        common["ops"] = str(ops)
    out = (b.programs(defines, cpus, got, emu, common, ops, guest, remote) if mode == "program"
           else b.probes(defines, cpus, got, emu, common))
    return Build(mode, out, cc, cflags, source, got, emu, b.cached, b.pending, cache, log)


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
