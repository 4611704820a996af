"""Exact counts from an emulator: the probe under `qemu-ARCH` with the opcount
TCG plugin (probe/plugin/opcount.c), for the counters perf cannot give here.

The probe brackets every measured batch (warm-up included) with marker
instructions (probe/marker.h: NOPs on hardware). The plugin writes one JSON
line per window, in order: the guest instructions executed strictly between
the markers, user and kernel (`u`, `k`), and the costly x86 classes
(`classes.u`, `classes.k`: CR3 writes, MSR reads and writes...). Here the
n-th window becomes the n-th batch's counters, per op like every counter
(the count over iters x ops_per_iter), recorded with their source
(`emulator`, exact) in the probe header's counter list.

Which events the emulator serves (`split`): the classes always (perf has no
such event); `instructions` where perf cannot count it (no core PMU in
sysfs, as in most cloud VMs, or a probe for another architecture that runs
under qemu anyway). Under qemu-user no kernel runs: `instructions:k` and the
classes' `:k` are usage errors there (the kernel's instructions are counted
in a guest, the vm target under TCG).

Test hooks: OPCOST_PMU_SYSFS (pmu.py; read by session.counter_split) decides whether perf could count;
OPCOST_COUNT_PLUGIN_ARGS adds arguments to the plugin (`api_range=5:7`
makes it act as if QEMU supported only API 5 to 7).
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from .errors import ProbeError, UsageError

PLUGIN_API = 1
# the costly classes, as the plugin names them (probe/plugin/classify.h)
CLASSES = ("cr3-writes", "msr-writes", "msr-reads", "xsave-family", "fences", "verw", "swapgs",
           "syscall", "sysret", "iret", "cpuid", "invlpg-invpcid", "stac-clac", "rdtsc", "locked")
INSTRUCTIONS = "instructions"
EVENTS = (INSTRUCTIONS, *CLASSES)
SOURCE = "emulator"
FIXED_WINDOWS = 2      # the probe's windows before its batches when counted (run of 1, run of 2 iterations)


def _dev_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "probe"


def plugin_path() -> Path | None:
    """The plugin: shipped in the package beside the probe, or built in the
    source tree by `make -C probe`."""
    for p in (Path(__file__).resolve().parent / "_probe" / "opcost-count.so",
              _dev_dir() / "opcost-probe-count.so"):
        if p.is_file():
            return p
    return None


def _split_event(event: str) -> tuple[str, str, bool]:
    """`instructions:u` -> ("instructions", "u", False); `:uk` is both sides:
    "" (the modifiers as counters.py reads them, after the last '/')."""
    at = event.find(":", event.rfind("/") + 1)
    if at < 0:
        return event, "", False
    segs = event[at + 1:].split(":")
    uk = next((x for x in segs if x != "helper"), "")
    return event[:at], ("" if set(uk) == {"u", "k"} else uk), "helper" in segs


def split(events: list[str], *, mode: str | None, target: str, foreign: bool, programs: bool,
          perf_counts=lambda: False, unclassified: str | None = None) -> tuple[list[str], list[str]]:
    """(what the probe counts with perf, what the emulator counts), both in
    the order asked. `mode`: "user" (the local target: the probe under
    qemu-user), "system" (the vm target under TCG: the plugin in
    qemu-system), None (no emulator: perf only); `foreign`: a probe for
    another architecture (under qemu anyway); `perf_counts()`: perf can
    count instructions here (a core PMU). A list that also names events
    only perf counts (software events...) leaves `instructions` to perf, as
    before: the emulator serves a run only when it can serve all of it.
    `unclassified`: the architecture of code the emulator would count whose
    instructions the plugin does not classify (classify.h knows x86's
    only: an aarch64 or arm probe, an arm64 guest), or None.
    UsageError (exit 2) for what cannot be counted here."""
    ours = [e for e in events if _split_event(e)[0] in EVENTS]
    others = [e for e in events if _split_event(e)[0] not in EVENTS]
    classes = [e for e in ours if _split_event(e)[0] != INSTRUCTIONS]
    if classes and others:
        raise UsageError(f"--counters {', '.join(classes)}: counted only by the emulator (QEMU with opcost's plugin), "
                         f"which cannot count {', '.join(others)} at the same time; ask for them in another run")
    serve = bool(ours) and not others and (
        mode == "system" or (mode == "user" and (bool(classes) or foreign or not perf_counts())))
    if not serve:
        if classes:
            raise UsageError(f"--counters {classes[0]}: counted only by the emulator (QEMU with opcost's plugin): the "
                             "local target's probe under qemu-user, or a guest under TCG (--kernel IMAGE --accel tcg); "
                             f"the {target} target has none here")
        return list(events), []
    if classes and unclassified:
        raise UsageError(f"--counters {classes[0]}: the counting plugin classifies x86 instructions only; on "
                         f"{unclassified} it counts instructions (instructions:u, and instructions:k in a guest), not their classes")
    for e in ours:
        base, uk, helper = _split_event(e)
        if uk == "k" and mode == "user":
            raise UsageError(f"--counters {e}: kernel instructions are counted only in a guest (--kernel IMAGE, "
                             "the vm target under TCG); here perf cannot count them and qemu-user runs no kernel: "
                             f"ask for {base}:u (user code, exact, under qemu-user)")
        if helper:
            raise UsageError(f"--counters {e}: the emulator counts " + (
                "the measuring thread only" if mode == "user" else "both sides of a benchmark in one window (all "
                "vCPUs)") + "; drop :helper")
        if programs:
            raise UsageError(f"--counters {e}: a whole program (variants with a program) has no counting windows; "
                             "the emulator counts an operation built into the probe (variants --mode op)")
    return [], list(ours)


@lru_cache(maxsize=None)
def qemu_facts(qemu: str) -> tuple[str, bool]:
    """(QEMU's version, whether it takes -plugin)."""
    try:
        v = subprocess.run([qemu, "--version"], capture_output=True, text=True, timeout=30).stdout
        h = subprocess.run([qemu, "-h"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"cannot run {qemu}: {e}") from None
    first = v.splitlines()[0] if v.strip() else ""
    version = first.split("version", 1)[1].strip().split()[0] if "version" in first else "unknown"
    return version, "-plugin" in h


def qemu_for(arch: str) -> str:
    for name in (f"qemu-{arch}", f"qemu-{arch}-static"):
        found = shutil.which(name)
        if found:
            return found
    raise UsageError(f"counting by the emulator needs qemu-{arch} (apt-get install qemu-user), "
                     "which is not installed")


def prefix(arch: str, out: str, emulator: str | None = None, blocks: bool = True) -> list[str]:
    """The command that runs a probe for `arch` under QEMU with the plugin
    writing its windows to `out`. UsageError: no QEMU, no plugin support, no
    plugin built."""
    qemu = emulator or qemu_for(arch)
    version, plugins = qemu_facts(qemu)
    if not plugins:
        raise UsageError(f"{os.path.basename(qemu)} (QEMU {version}) was built without TCG plugin support "
                         "(no -plugin option), so it cannot count; install a QEMU built with plugins "
                         "(Debian's qemu-user is)")
    plugin = plugin_path()
    if plugin is None:
        raise UsageError("the counting plugin (opcost-count.so) is not built: `make -C probe` in the source tree, "
                         "or reinstall opcost")
    extra = os.environ.get("OPCOST_COUNT_PLUGIN_ARGS", "")
    return [qemu, "-plugin", f"{plugin},out={out}" + (",blocks=on" if blocks else "") + (f",{extra}" if extra else "")]


def load_failure(stderr: str, qemu: str) -> str | None:
    """The one line saying why QEMU refused the plugin, or None."""
    lines = stderr.strip().splitlines()
    mine = [ln for ln in lines if ln.startswith("opcount:")]
    if not mine and not any("Could not load plugin" in ln for ln in lines):
        return None
    version, _ = qemu_facts(qemu)
    why = mine[-1].removeprefix("opcount: ") if mine else \
        next(ln for ln in lines if "Could not load plugin" in ln).split(": ", 1)[-1]
    return f"{os.path.basename(qemu)} (QEMU {version}) cannot load opcost's counting plugin: {why}"


def read_windows(path: str | Path) -> tuple[dict, list[dict]]:
    """The plugin's output: its header line and its windows, in order."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise ProbeError(f"the counting plugin wrote nothing readable ({e.strerror})") from None
    head: dict = {}
    windows: list[dict] = []
    for ln in lines:
        try:
            d = json.loads(ln)
        except json.JSONDecodeError:
            raise ProbeError(f"the counting plugin wrote a line that is not JSON: {ln[:80]!r}") from None
        if "plugin" in d:
            head = d
        elif "window" in d:
            windows.append(d)
    return head, windows


def value(window: dict, event: str) -> int:
    """The count of one event (`instructions:u`, `cr3-writes:k`, ...) in a window."""
    base, uk, _ = _split_event(event)
    sides = [uk] if uk else ["u", "k"]
    if base == INSTRUCTIONS:
        return sum(int(window.get(s, 0)) for s in sides)
    cls = window.get("classes") or {}
    return sum(int((cls.get(s) or {}).get(base, 0)) for s in sides)


def inject(header: dict, warmup: list[dict], samples: list[dict], events: list[str], path: str | Path,
           emulator: str, exe: str | None = None) -> None:
    """The plugin's file of one probe process under qemu-user into its batches
    (inject_windows), the blocks folded into the probe's functions."""
    head, windows = read_windows(path)
    inject_windows(header, warmup, samples, events, head, windows, emulator,
                   Symbols.of_elf(exe) if exe and head.get("blocks") else None)


def _ops(b: dict) -> float:
    return float(b.get("executed", b["iters"])) * float(b.get("ops_per_iter", 1))


def _fixed(prepared: bool, one, two) -> int:
    """The fixed part from the probe's two first windows: for a loop, its run
    of one iteration less the difference of its runs of two and one; for a
    prepared benchmark, whose windows are one and two empty calls, their
    difference (one call)."""
    return int(two) - int(one) if prepared else 2 * int(one) - int(two)


def inject_windows(header: dict, warmup: list[dict], samples: list[dict], events: list[str], head: dict,
                   windows: list[dict], emulator: str, symbols: "Symbols | None" = None) -> None:
    """Put the windows' counts into the batches (warm-up first, then the
    measured ones, as the probe ran them), per op, and the events with their
    source into the header's counter list; with `symbols`, the measured
    windows' blocks folded into functions (header.count_functions).

    The probe's first two windows (OPCOST_COUNTING=1) are its run of one
    iteration and of two (a prepared benchmark's: one and two calls of an
    empty run, made as its segments are): they give the fixed part (_fixed),
    whose user instructions (and classes) are taken off every batch's window
    (once per batch; once per iteration for a prepared benchmark, whose
    every iteration is a call of its own), so that a short batch's count
    per op is its operations' alone."""
    batches = [*warmup, *samples]
    fixed: dict = {}
    fixed_fn: dict[str, float] = {}
    if len(windows) == len(batches) + FIXED_WINDOWS:
        one, two = windows[0], windows[1]
        prepared = bool(header.get("prepare"))
        if symbols is not None and head.get("blocks"):
            f1, f2 = per_function([one], symbols), per_function([two], symbols)
            fixed_fn = {k: float(_fixed(prepared, f1.get(k, 0), f2.get(k, 0))) for k in set(f1) | set(f2)}
        cls1, cls2 = ((one.get("classes") or {}).get("u") or {}), ((two.get("classes") or {}).get("u") or {})
        fixed = {"u": _fixed(prepared, one.get("u", 0), two.get("u", 0)),
                 "classes": {"u": {c: _fixed(prepared, cls1.get(c, 0), cls2.get(c, 0)) for c in cls1}}}
        windows = windows[FIXED_WINDOWS:]
    if len(windows) != len(batches):
        raise ProbeError(f"the counting plugin saw {len(windows)} windows for {len(batches)} batches "
                         "(a probe without window markers?)")
    calls = (lambda b: float(b.get("executed", b["iters"]))) if header.get("prepare") else (lambda b: 1.0)
    for b, w in zip(batches, windows):
        c = b.setdefault("counters", {})
        for e in events:
            _, uk, _ = _split_event(e)
            less = value(fixed, e.split(":")[0] + ":u") if fixed and uk != "k" else 0
            c[e] = max(0.0, value(w, e) - less * calls(b)) / _ops(b)
    measured = windows[len(warmup):]
    if symbols is not None and head.get("blocks") and measured:
        # the cleanest windows only (the smallest count per op): a timer interrupt in a window adds
        # its functions, not the operation's
        per = [(int(w.get("u", 0)) + int(w.get("k", 0))) / _ops(b) for w, b in zip(measured, samples)]
        clean = [(w, b) for w, b, x in zip(measured, samples, per) if x <= min(per) * (1 + 1e-9)]
        n_calls = sum(calls(b) for _, b in clean)
        header["count_functions"] = fold([w for w, _ in clean], sum(_ops(b) for _, b in clean), symbols,
                                         {k: v * n_calls for k, v in fixed_fn.items() if v > 0})
        header["count_functions_windows"] = f"{len(clean)} of {len(measured)} (those with the smallest count per op)"
    scope = head.get("scope", "thread")
    for e in events:
        header.setdefault("counters", []).append({
            "name": e, "status": "ok", "source": SOURCE, "exact": True, "scope": scope,
            "fixed_part": {"u": int(fixed.get("u", 0))} if fixed else None,
            "how": f"guest instructions counted by {emulator} with opcost's TCG plugin (API {head.get('api', '?')}"
                   + (", one window over all vCPUs, TCG single-threaded" if scope == "all-vcpus" else "")
                   + ") between the probe's window markers, less the window's fixed part"})


# --- where the instructions are: the windows' blocks folded into functions ---

TOP_FUNCTIONS = 40     # kept per process (the rest summed as "(other)")


class Symbols:
    """Function symbols by address: (start, end, name), sorted."""

    def __init__(self, entries: list[tuple[int, int, str]]):
        self.entries = sorted(entries)
        self._starts = [e[0] for e in self.entries]
        self._bisect = bisect.bisect_right

    def name(self, addr: int) -> str | None:
        i = self._bisect(self._starts, addr) - 1
        if i < 0:
            return None
        start, end, name = self.entries[i]
        return name if addr < end or end == start else None

    @classmethod
    def of_elf(cls, path: str | Path) -> "Symbols":
        """The function symbols of a static, non-PIE ELF (the probe, a
        variant's build): their addresses are where qemu-user runs them.
        Nothing (an empty table) when the file has no symbol table."""
        from elftools.common.exceptions import ELFError   # pyelftools (~0.2 s): only when a counting run reads an ELF
        from elftools.elf.elffile import ELFFile   # pyelftools (~0.2 s): only when a counting run reads an ELF
        # pyelftools (~0.2 s): only when a counting run reads an ELF
        from elftools.elf.sections import SymbolTableSection

        out: list[tuple[int, int, str]] = []
        try:
            with open(path, "rb") as f:
                elf = ELFFile(f)
                arm = elf["e_machine"] == "EM_ARM"
                tab = elf.get_section_by_name(".symtab")
                for sym in tab.iter_symbols() if isinstance(tab, SymbolTableSection) else []:
                    if sym["st_info"]["type"] != "STT_FUNC" or not sym["st_value"] or not sym.name:
                        continue
                    start = sym["st_value"] & ~1 if arm else sym["st_value"]   # Thumb's bit 0
                    out.append((start, start + sym["st_size"], sym.name))
        except (OSError, ELFError):
            return cls([])
        return cls(out)

    @classmethod
    def of_kallsyms(cls, text: str) -> "Symbols":
        """/proc/kallsyms (`ADDR TYPE NAME [module]`, text symbols t/T): each
        function ends where the next symbol starts."""
        addrs: list[tuple[int, str]] = []
        for ln in text.splitlines():
            parts = ln.split()
            if len(parts) >= 3 and parts[1] in ("t", "T"):
                try:
                    addrs.append((int(parts[0], 16), parts[2]))
                except ValueError:
                    continue
        addrs.sort()
        return cls([(a, addrs[i + 1][0] if i + 1 < len(addrs) else a + 4096, n) for i, (a, n) in enumerate(addrs)])


def per_function(windows: list[dict], symbols: Symbols) -> dict[str, int]:
    """The windows' blocks ([address, instructions]) summed by function; an
    address no symbol covers is named by its hex address."""
    per: dict[str, int] = {}
    for w in windows:
        for addr, n in w.get("blocks") or []:
            name = symbols.name(int(addr)) or f"{int(addr):#x}"
            per[name] = per.get(name, 0) + int(n)
    return per


def fold(windows: list[dict], ops: float, symbols: Symbols, less: dict[str, float] | None = None) -> list[list]:
    """The windows' blocks folded into functions: [[function, instructions
    per op], ...], largest first, the top TOP_FUNCTIONS and the rest as
    "(other)"; `less`: instructions to take off per function first (the
    windows' fixed part)."""
    per = {k: float(v) for k, v in per_function(windows, symbols).items()}
    for k, v in (less or {}).items():
        per[k] = max(0.0, per.get(k, 0.0) - v)
    ranked = sorted(((k, v) for k, v in per.items() if v > 0), key=lambda kv: (-kv[1], kv[0]))
    out = [[name, n / ops] for name, n in ranked[:TOP_FUNCTIONS]]
    rest = sum(n for _, n in ranked[TOP_FUNCTIONS:])
    if rest:
        out.append(["(other)", rest / ops])
    return out


def functions_of(result: dict) -> dict[str, float]:
    """One result's instructions per op by function: the median over its
    processes (a process that did not see a function counts 0 for it)."""
    import statistics   # statistics (~30 ms): only when blocks are folded into functions

    procs = [dict((p.get("header") or {}).get("count_functions") or []) for p in result.get("processes") or []
             if (p.get("header") or {}).get("count_functions")]
    names = {n for p in procs for n in p}
    return {n: float(statistics.median([p.get(n, 0.0) for p in procs])) for n in names}


def format_functions(doc: dict, top: int = 15) -> str:
    """`show RUN --functions`: per result the functions the emulator counted
    most instructions in, per op; an ab run's pairs as B-A per function,
    largest change first."""
    res = doc.get("results") or []
    lines: list[str] = []
    plan = doc.get("plan") or {}
    if plan.get("kind") == "ab" and len(res) % 2 == 0:
        for ra, rb in zip(res[0::2], res[1::2]):
            fa, fb = functions_of(ra), functions_of(rb)
            if not fa and not fb:
                continue
            names = set(fa) | set(fb)
            diff = sorted(((fb.get(n, 0.0) - fa.get(n, 0.0), n) for n in names), key=lambda t: (-abs(t[0]), t[1]))
            lines.append(f"{ra['bench']}: instructions per op by function, B against A (emulator, exact; "
                         "largest change first)")
            lines.append(f"  {'function':<40} {'A':>12} {'B':>12} {'B-A':>12}")
            for d, n in diff[:top]:
                lines.append(f"  {n:<40} {fa.get(n, 0.0):>12.3f} {fb.get(n, 0.0):>12.3f} {d:>+12.3f}")
        return "\n".join(lines) if lines else _no_functions()
    for r in res:
        f = functions_of(r)
        if not f:
            continue
        key = r.get("key") or r.get("bench")
        lines.append(f"{key}: instructions per op by function (emulator, exact; median over processes)")
        for n, v in sorted(f.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
            lines.append(f"  {n:<40} {v:>12.3f}")
    return "\n".join(lines) if lines else _no_functions()


def _no_functions() -> str:
    return ("no per-function counts in this run: they are recorded when the emulator counts "
            "(--counters instructions:u where perf cannot count, or the insns profile; docs/counts.md)")
