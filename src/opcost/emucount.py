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

Test hooks: OPCOST_PMU_SYSFS (pmu.py) decides whether perf could count;
OPCOST_COUNT_PLUGIN_ARGS adds arguments to the plugin (`api_range=5:7`
makes it act as if QEMU supported only API 5 to 7).
"""

from __future__ import annotations

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
           "syscall", "sysret", "iret", "cpuid", "invlpg-invpcid", "stac-clac", "rdtsc")
INSTRUCTIONS = "instructions"
EVENTS = (INSTRUCTIONS, *CLASSES)
SOURCE = "emulator"


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


def perf_counts_instructions() -> bool:
    """A core PMU is in sysfs (perf can count instructions on this machine)."""
    from .pmu import SYSFS, read_sysfs

    return any(p.core for p in read_sysfs(os.environ.get("OPCOST_PMU_SYSFS") or SYSFS).values())


def _split_event(event: str) -> tuple[str, str, bool]:
    """`instructions:u` -> ("instructions", "u", False); `:uk` is both sides: ""."""
    from .counters import parse_item

    base, uk, helper = parse_item(event, [])
    return base, ("" if set(uk) == {"u", "k"} else uk), helper


def split(events: list[str], *, target: str, arches: list[str], programs: bool) -> tuple[list[str], list[str]]:
    """(what the probe counts with perf, what the emulator counts), both in
    the order asked. UsageError (exit 2) for what cannot be counted here."""
    serve_instructions = None
    perf, emu = [], []
    for e in events:
        base, uk, helper = _split_event(e)
        if base not in EVENTS:
            perf.append(e)
            continue
        if base == INSTRUCTIONS:
            if serve_instructions is None:
                from .probe import runs_natively

                serve_instructions = target == "local" and (
                    not perf_counts_instructions() or any(not runs_natively(a) for a in arches))
            if not serve_instructions:
                perf.append(e)
                continue
        if target != "local":
            raise UsageError(f"--counters {e}: counted only by the emulator (QEMU with opcost's plugin), "
                             f"which runs the local target's probe under qemu-user; the {target} target has none")
        if uk == "k":
            raise UsageError(f"--counters {e}: kernel instructions are counted only in a guest (--kernel IMAGE, "
                             "the vm target under TCG); here perf cannot count them and qemu-user runs no kernel: "
                             f"ask for {base}:u (user code, exact, under qemu-user)")
        if helper:
            raise UsageError(f"--counters {e}: the emulator counts the measuring thread only; drop :helper")
        if programs:
            raise UsageError(f"--counters {e}: a whole program (variants with a program) has no counting windows; "
                             "the emulator counts an operation built into the probe (variants --mode op)")
        emu.append(e)
    return perf, emu


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


def prefix(arch: str, out: str, emulator: str | None = None) -> list[str]:
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
    return [qemu, "-plugin", f"{plugin},out={out}" + (f",{extra}" if extra else "")]


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
           emulator: str) -> None:
    """Put the windows' counts into the batches (warm-up first, then the
    measured ones, as the probe ran them), per op, and the events with their
    source into the header's counter list."""
    head, windows = read_windows(path)
    batches = [*warmup, *samples]
    if len(windows) != len(batches):
        raise ProbeError(f"the counting plugin saw {len(windows)} windows for {len(batches)} batches "
                         "(a probe without window markers?)")
    for b, w in zip(batches, windows):
        ops = float(b.get("executed", b["iters"])) * float(b.get("ops_per_iter", 1))
        c = b.setdefault("counters", {})
        for e in events:
            c[e] = value(w, e) / ops
    scope = head.get("scope", "thread")
    for e in events:
        header.setdefault("counters", []).append({
            "name": e, "status": "ok", "source": SOURCE, "exact": True, "scope": scope,
            "how": f"guest instructions counted by {emulator} with opcost's TCG plugin (API {head.get('api', '?')}) "
                   "between the probe's window markers"})
