"""The machine-environment description (`opcost env`), stored with every run.

Every field is ``{"value": ..., "source": ...}``: where the value came from (a
file, a syscall, a CPUID leaf), so a reader can judge it. A value that cannot
be had is ``None`` with a short ``"reason"``; collecting never raises, because
a missing /sys file must not cost a run.

Values are JSON-native (str dict keys, lists, no tuples), so an environment
read back from the store compares equal to a freshly collected one.

Native facts (CPUID leaves, XCR0, MIDR_EL1) come from the probe's `cpuid`
command; the caller parses that line and passes it in (`LocalTarget.env()`:
this machine's environment is collect() with its probe's answers).
"""

from __future__ import annotations

import contextvars
import glob
import gzip
import os
import platform
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from .spec import _cpu_ranges

SYS_CPU = Path("/sys/devices/system/cpu")

Field = dict[str, Any]

# ---- the sources ------------------------------------------------------------

# Every file (FILES) and directory listing (DIRS) collect() reads, as shell
# globs: the one list of them. On this machine collect() reads them itself
# and nothing else (_read and _listdir refuse a path not listed here); on
# another machine the POSIX shell script made from them (shell_script())
# reads them there and its output becomes a Snapshot (snapshot_of(), for
# targets/ssh.py). tests/test_env.py runs both here and compares them.
# Besides these: uname, glibc's version and the kernel config's
# CONFIG_PREEMPT* lines (/proc/config.gz or /boot/config-RELEASE), read by
# each path in its own way.
FILES = ("/proc/cpuinfo", "/proc/cmdline", "/proc/meminfo", "/proc/sys/kernel/perf_event_paranoid",
         "/sys/hypervisor/type", "/sys/kernel/realtime", "/sys/kernel/debug/sched/preempt",
         "/sys/devices/system/cpu/online", "/sys/devices/system/cpu/smt/control",
         "/sys/devices/system/cpu/cpufreq/boost", "/sys/devices/system/cpu/intel_pstate/no_turbo",
         "/sys/devices/system/clocksource/clocksource0/current_clocksource",
         "/sys/devices/system/clocksource/clocksource0/available_clocksource",
         "/sys/devices/system/node/online",
         "/sys/devices/system/cpu/cpu[0-9]*/cpu_capacity",
         "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor",
         "/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list",
         "/sys/devices/system/cpu/cpu0/cache/index[0-9]*/level",
         "/sys/devices/system/cpu/cpu0/cache/index[0-9]*/type",
         "/sys/devices/system/cpu/cpu0/cache/index[0-9]*/size",
         "/sys/devices/system/cpu/cpu0/cache/index[0-9]*/shared_cpu_list",
         "/sys/devices/system/cpu/vulnerabilities/*",
         "/sys/devices/system/cpu/isolated", "/sys/devices/system/cpu/nohz_full",
         "/sys/kernel/mm/transparent_hugepage/enabled", "/proc/sys/kernel/randomize_va_space",
         "/proc/irq/default_smp_affinity", "/proc/irq/[0-9]*/smp_affinity_list")
DIRS = ("/sys/devices/system/cpu", "/sys/devices/system/cpu/cpu0/cache", "/sys/devices/system/cpu/vulnerabilities",
        "/sys/bus/event_source/devices", "/proc/irq")


def _glob_re(pattern: str) -> re.Pattern[str]:
    """A shell glob of FILES as a regex: `*` within one path component, `[...]` a class."""
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out += "[^/]*"
        elif c == "[":
            j = pattern.index("]", i)
            out += pattern[i:j + 1]
            i = j
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out)


_FILE_RES = tuple(_glob_re(p) for p in FILES)


class UndeclaredSource(Exception):
    """collect() asked for a path that FILES/DIRS do not list: a remote host
    would never send it. A bug here, shown as the field's internal error."""


def _declared(path: str, dir: bool = False) -> str:
    """`path` if FILES (or DIRS) list it; SYS_CPU stands for its usual place
    (a test moves it)."""
    real, moved = "/sys/devices/system/cpu", str(SYS_CPU)
    canon = real + path[len(moved):] if moved != real and (path + "/").startswith(moved + "/") else path
    if dir and canon in DIRS or not dir and any(r.fullmatch(canon) for r in _FILE_RES):
        return path
    raise UndeclaredSource(f"{path} is not in env.{'DIRS' if dir else 'FILES'}")


# The script: $1 is a marker no file holds; every section starts with a line
# MARK + a letter (F file, D directory listing, U uname, G glibc, C kernel
# config, S Cpus_allowed_list of the shell, Z the end).
def shell_script() -> str:
    """The POSIX shell script that reads FILES and DIRS (and uname, glibc,
    the kernel config) where it runs; parse_shell_output() reads its output."""
    return r'''m=$1
for f in ''' + " ".join(FILES) + r'''; do
  if [ -f "$f" ] && [ -r "$f" ]; then printf '%sF %s\n' "$m" "$f"; cat -- "$f" 2>/dev/null; printf '\n'; fi
done
for d in ''' + " ".join(DIRS) + r'''; do
  if [ -d "$d" ]; then printf '%sD %s\n' "$m" "$d"; ls -1 -- "$d" 2>/dev/null; fi
done
printf '%sU\n' "$m"; uname -m; uname -n; uname -r; uname -v
printf '%sG\n' "$m"; getconf GNU_LIBC_VERSION 2>/dev/null
r=$(uname -r)
if [ -r /proc/config.gz ] && command -v zcat >/dev/null 2>&1; then
  printf '%sC /proc/config.gz\n' "$m"; zcat /proc/config.gz 2>/dev/null | grep '^CONFIG_PREEMPT'
elif [ -r "/boot/config-$r" ]; then
  printf '%sC %s\n' "$m" "/boot/config-$r"; grep '^CONFIG_PREEMPT' "/boot/config-$r"
fi
printf '%sS\n' "$m"; grep '^Cpus_allowed_list' /proc/self/status
printf '%sZ\n' "$m"
'''


class Marked:
    """The output of a script that starts each section with MARK + a letter
    (shell_script(), and a target's own sections before it): `files` path
    -> text, `dirs` path -> names, `config` (path, text) or None,
    `sections` letter -> lines (an "R" section: its header's rest)."""

    def __init__(self, text: str, mark: str):
        self.files: dict[str, str] = {}
        self.dirs: dict[str, list[str]] = {}
        self.sections: dict[str, list[str]] = {}
        self.config: tuple[str, str] | None = None
        kind, name, lines = "", "", []   # type: ignore[var-annotated]

        def flush() -> None:
            if kind == "F":
                self.files[name] = "\n".join(lines)
            elif kind == "D":
                self.dirs[name] = [ln for ln in lines if ln]
            elif kind == "C":
                self.config = (name, "\n".join(lines))
            elif kind == "R":
                self.sections[kind] = [name]
            elif kind:
                self.sections[kind] = lines

        for line in text.split("\n"):
            if line.startswith(mark):
                flush()
                head = line[len(mark):]
                kind, name, lines = head[:1], head[2:], []
            else:
                lines.append(line)
        flush()

    def snapshot(self, source: str) -> "Snapshot":
        uname = (self.sections.get("U", []) + ["", "", "", ""])[:4]
        glibc = next((ln.strip() for ln in self.sections.get("G", []) if ln.strip()), None)
        return Snapshot(self.files, self.dirs, (uname[0], uname[1], uname[2], uname[3]), glibc, self.config,
                        source=source)


class Snapshot:
    """Another machine's files, as read there (shell_script(), run by
    targets/ssh.py): `files` path -> text, `dirs` path -> entry names, its uname and
    glibc. collect(..., snapshot=) reads these instead of this machine's."""

    def __init__(self, files: dict[str, str], dirs: dict[str, list[str]], uname: tuple[str, str, str, str],
                 glibc: str | None, kernel_config: tuple[str, str] | None = None, source: str = "remote"):
        self.files, self.dirs, self.uname, self.glibc = files, dirs, uname, glibc
        self.kernel_config = kernel_config   # (path, its CONFIG_PREEMPT* lines)
        self.source = source

    def read(self, path: str) -> str:
        if path in self.files:
            return self.files[path]
        raise FileNotFoundError(path)

    def listdir(self, path: str) -> list[str]:
        if path in self.dirs:
            return self.dirs[path]
        raise FileNotFoundError(path)


_SNAPSHOT: contextvars.ContextVar[Snapshot | None] = contextvars.ContextVar("opcost_env_snapshot", default=None)


def _listdir(path: str | Path) -> list[str]:
    snap = _SNAPSHOT.get()
    if snap is not None:
        return list(snap.listdir(str(path)))
    return [p.name for p in Path(_declared(str(path), dir=True)).iterdir()]


def _field(value: Any, source: str, reason: str | None = None) -> Field:
    field = {"value": value, "source": source}
    if value is None:
        field["reason"] = reason or "not available"
    return field


def _read(path: str | Path) -> tuple[str | None, str | None]:
    """(stripped text, None) or (None, why not)."""
    try:
        snap = _SNAPSHOT.get()
        if snap is not None:
            return snap.read(str(path)).strip(), None
        return Path(_declared(str(path))).read_text(errors="replace").strip(), None
    except FileNotFoundError:
        return None, "not present"
    except PermissionError:
        return None, "permission denied"
    except OSError as exc:
        return None, exc.strerror or type(exc).__name__


def tree_snapshot(root: str | Path) -> Snapshot:
    """The files FILES and DIRS list, read under `root` instead of / (a copy
    of a machine's /sys and /proc, or a test's made-up one): collect(...,
    snapshot=) then describes that tree; uname is this machine's."""

    root = str(root).rstrip("/")
    files, dirs = {}, {}
    for pattern in FILES:
        for path in glob.glob(root + pattern):
            try:
                files[path[len(root):]] = Path(path).read_text(errors="replace")
            except OSError:
                continue
    for d in DIRS:
        try:
            dirs[d] = sorted(os.listdir(root + d))
        except OSError:
            continue
    u = os.uname()
    return Snapshot(files, dirs, (u.machine, u.nodename, u.release, u.version), None, None, source=f"the tree {root}")


def cpu_list(text: str | None) -> list[int]:
    """The CPUs of a kernel CPU list ("0-3,8,10-11"); [] for none or nonsense."""
    out: list[int] = []
    for part in (text or "").strip().split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            continue
        out += range(int(lo), int(hi if sep else lo) + 1)
    return sorted(set(out))


def _file_field(path: str | Path, convert: Callable[[str], Any] = str) -> Field:
    text, reason = _read(path)
    return _field(None if text is None else convert(text), str(path), reason)


def _cpu_dirs() -> list[tuple[int, Path]]:
    """(index, /sys/devices/system/cpu/cpuN) for every CPU sysfs knows."""
    try:
        entries = _listdir(SYS_CPU)
    except OSError:
        return []
    dirs = [(int(n[3:]), SYS_CPU / n) for n in entries if re.fullmatch(r"cpu\d+", n)]
    return sorted(dirs)


def _per_cpu_files(relative: str) -> dict[str, str]:
    """{"N": text} of cpuN/<relative> for each CPU where it is readable."""
    found = {}
    for index, path in _cpu_dirs():
        text, _ = _read(path / relative)
        if text is not None:
            found[str(index)] = text
    return found


# ---- /proc/cpuinfo ----------------------------------------------------------

def _cpuinfo() -> tuple[list[dict[str, str]], str | None]:
    """One dict per processor block, and the reason when there are none."""
    text, reason = _read("/proc/cpuinfo")
    if text is None:
        return [], reason
    blocks = []
    for chunk in text.split("\n\n"):
        block = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                block[key.strip()] = value.strip()
        if "processor" in block:
            blocks.append(block)
    return blocks, None if blocks else "no processor entries"


# Field -> /proc/cpuinfo keys tried in order: x86 names, then arm64 names
# (arm64 has no model name, family or microcode lines).
_CPUINFO_FIELDS = {
    "cpu_vendor": ("vendor_id", "CPU implementer"),
    "cpu_model_name": ("model name",),
    "cpu_family": ("cpu family", "CPU architecture"),
    "cpu_model": ("model", "CPU part"),
    "cpu_stepping": ("stepping", "CPU revision"),
    "cpu_microcode": ("microcode",),
}


def _cpuinfo_field(blocks: list[dict[str, str]], why_empty: str | None,
                   keys: tuple[str, ...]) -> Field:
    if not blocks:
        return _field(None, "/proc/cpuinfo", why_empty)
    for key in keys:
        if key in blocks[0]:
            return _field(blocks[0][key], f"/proc/cpuinfo '{key}' (cpu 0)")
    return _field(None, "/proc/cpuinfo",
                  "no " + " or ".join(f"'{k}'" for k in keys) + " line")


# Arm's MIDR part numbers (implementer 0x41) for the cores people pick between
# on big.LITTLE / DynamIQ machines; others are shown as their hex part.
_ARM_PARTS = {
    0xc05: "Cortex-A5", 0xc07: "Cortex-A7", 0xc08: "Cortex-A8", 0xc09: "Cortex-A9", 0xc0d: "Cortex-A12",
    0xc0e: "Cortex-A17", 0xc0f: "Cortex-A15", 0xd03: "Cortex-A53", 0xd04: "Cortex-A35", 0xd05: "Cortex-A55",
    0xd07: "Cortex-A57", 0xd08: "Cortex-A72", 0xd09: "Cortex-A73", 0xd0a: "Cortex-A75", 0xd0b: "Cortex-A76",
    0xd0c: "Neoverse-N1", 0xd0d: "Cortex-A77", 0xd40: "Neoverse-V1", 0xd41: "Cortex-A78", 0xd44: "Cortex-X1",
    0xd46: "Cortex-A510", 0xd47: "Cortex-A710", 0xd48: "Cortex-X2", 0xd49: "Neoverse-N2", 0xd4b: "Cortex-A78C",
    0xd4d: "Cortex-A715", 0xd4e: "Cortex-X3", 0xd4f: "Neoverse-V2", 0xd80: "Cortex-A520", 0xd81: "Cortex-A720",
    0xd82: "Cortex-X4", 0xd84: "Neoverse-V3", 0xd8e: "Neoverse-N3",
}


def _arm_core_name(implementer: str | None, part: str | None) -> str | None:
    try:
        imp, prt = int(implementer or "", 0), int(part or "", 0)
    except ValueError:
        return None
    if imp == 0x41 and prt in _ARM_PARTS:
        return _ARM_PARTS[prt]
    return f"implementer {imp:#04x} part {prt:#05x}"


def _per_cpu(blocks: list[dict[str, str]], why_empty: str | None) -> Field:
    source = "/proc/cpuinfo; /sys/devices/system/cpu/cpuN/cpu_capacity"
    if not blocks:
        return _field(None, source, why_empty)
    cpus = []
    for block in blocks:
        index = block["processor"]
        entry: dict[str, Any] = {"cpu": int(index)}
        if "model name" in block:
            entry["model"] = block["model name"]
        else:  # arm64: big.LITTLE cores differ by implementer/part
            for key in ("CPU implementer", "CPU part", "CPU variant", "CPU revision"):
                entry[key.removeprefix("CPU ")] = block.get(key)
            entry["model"] = _arm_core_name(block.get("CPU implementer"), block.get("CPU part"))
        capacity, _ = _read(SYS_CPU / f"cpu{index}" / "cpu_capacity")
        entry["capacity"] = int(capacity) if capacity is not None else None
        cpus.append(entry)
    return _field(cpus, source)


def core_types(per_cpu: list[dict] | None) -> list[dict]:
    """CPUs grouped by core type (model, and capacity where the kernel gives
    one): what a user picks between with --cpu on a big.LITTLE machine."""
    groups: dict[tuple, list[int]] = {}
    for e in per_cpu or []:
        groups.setdefault((e.get("model"), e.get("capacity")), []).append(e["cpu"])
    return [{"model": m, "capacity": c, "cpus": _cpu_ranges(sorted(cpus)), "count": len(cpus)}
            for (m, c), cpus in sorted(groups.items(), key=lambda kv: -(kv[0][1] or 0))]


# ---- probe cpuid ------------------------------------------------------------

def _cpuid_kind(cpuid: dict | None) -> tuple[str | None, str | None]:
    """("x86" | "arm", None) or (None, why the cpuid line is of no use)."""
    if cpuid is None:
        return None, "probe cpuid output not given"
    if "vendor" in cpuid:
        return "x86", None
    if "cntfrq_hz" in cpuid:
        return "arm", None
    return None, cpuid.get("reason") or "probe cpuid output not recognised"


def _cpuid_cpu(cpuid: dict | None) -> Field:
    kind, reason = _cpuid_kind(cpuid)
    if kind == "x86":
        keys = ("vendor", "brand", "signature", "family", "model", "stepping")
        return _field({k: (cpuid or {}).get(k) for k in keys},
                      "probe cpuid: leaves 0, 1, 0x80000002-0x80000004")
    if kind == "arm":
        source = ("probe: MIDR_EL1 (mrs, emulated by Linux)" if (cpuid or {}).get("arch") != "arm"
                  else "probe (32-bit Arm: MIDR is privileged; /proc/cpuinfo has the part)")
        if (cpuid or {}).get("midr") is None:
            return _field(None, source, (cpuid or {}).get("midr_reason"))
        keys = ("midr", "implementer", "part", "variant", "revision", "architecture")
        return _field({k: (cpuid or {}).get(k) for k in keys}, source)
    return _field(None, "probe cpuid", reason)


def _cpuid_features(cpuid: dict | None) -> Field:
    source = "probe cpuid: leaves 1, 7, 0x80000001, 0x80000007"
    kind, reason = _cpuid_kind(cpuid)
    if kind == "x86":
        return _field((cpuid or {}).get("features"), source, "not in the cpuid output")
    if kind == "arm" and (cpuid or {}).get("arch") == "arm":
        return _field({k: (cpuid or {}).get(k) for k in ("idiva", "idivt", "neon")},
                      "probe: AT_HWCAP (32-bit Arm: hardware divide in ARM/Thumb state, NEON)")
    if kind == "arm":
        reason = "no CPUID on aarch64"
    return _field(None, source, reason)


def _cpu_counter(cpuid: dict | None) -> Field:
    kind, reason = _cpuid_kind(cpuid)
    if kind == "x86":
        return _field({"invariant_tsc": ((cpuid or {}).get("features") or {}).get("invariant_tsc"),
                       "leaf_0x15": (cpuid or {}).get("tsc_leaf_0x15"),
                       "leaf_0x16": (cpuid or {}).get("tsc_leaf_0x16")},
                      "probe cpuid: 0x80000007 EDX[8], leaves 0x15, 0x16")
    if kind == "arm":
        if (cpuid or {}).get("arch") == "arm":
            return _field({"clock": (cpuid or {}).get("clock"), "cntfrq_hz": (cpuid or {}).get("cntfrq_hz"),
                           "note": (cpuid or {}).get("clock_note")}, "probe: CNTFRQ (mrc p15) when CNTVCT is readable")
        return _field({"cntfrq_hz": (cpuid or {}).get("cntfrq_hz")}, "probe: CNTFRQ_EL0")
    return _field(None, "probe cpuid", reason)


def _xstate(cpuid: dict | None) -> Field:
    source = "probe: XGETBV(0), cpuid leaf 0xD"
    kind, reason = _cpuid_kind(cpuid)
    if kind == "x86":
        if (cpuid or {}).get("xcr0") is None:
            return _field(None, source, "OS has not enabled XSAVE (CPUID.1:ECX.OSXSAVE clear)")
        value = {"xcr0": (cpuid or {})["xcr0"], "features": (cpuid or {}).get("xcr0_features")}
        value.update((cpuid or {}).get("xsave") or {})
        return _field(value, source)
    if kind == "arm":
        reason = "no XSAVE on aarch64" if (cpuid or {}).get("arch") != "arm" else "no XSAVE on 32-bit Arm"
    return _field(None, source, reason)


def _hypervisor(cpuid: dict | None, blocks: list[dict[str, str]]) -> Field:
    kind, _ = _cpuid_kind(cpuid)
    sys_type, _ = _read("/sys/hypervisor/type")
    flags = blocks[0].get("flags") if blocks else None
    return _field({
        "cpuid_bit": (cpuid or {}).get("hypervisor") if kind == "x86" else None,
        "cpuid_vendor": (cpuid or {}).get("hypervisor_vendor") if kind == "x86" else None,
        "sys_hypervisor_type": sys_type,
        "cpuinfo_flag": None if flags is None else "hypervisor" in flags.split(),
    }, "probe cpuid leaf 1 ECX[31] and 0x40000000; /sys/hypervisor/type; "
       "/proc/cpuinfo flags")


# ---- kernel -----------------------------------------------------------------

def _kernel_config_preempt(release: str) -> tuple[str | None, str | None]:
    """Build-time preemption model from the kernel config, and its path."""
    snap = _SNAPSHOT.get()
    if snap is not None:
        configs = [snap.kernel_config] if snap.kernel_config else []
    else:
        configs = []
        for path in ("/proc/config.gz", f"/boot/config-{release}"):
            try:
                opener = gzip.open if path.endswith(".gz") else open
                with opener(path, "rt", errors="replace") as f:
                    configs.append((path, f.read()))
                break
            except OSError:
                continue
    for path, config in configs:
        for option, model in (("CONFIG_PREEMPT_RT", "rt"), ("CONFIG_PREEMPT_LAZY", "lazy"),
                              ("CONFIG_PREEMPT", "full"), ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
                              ("CONFIG_PREEMPT_NONE", "none")):
            if re.search(rf"^{option}=y$", config, re.M):
                return model, path
    return None, None


def _preempt_model(version: str, release: str) -> Field:
    """The preemption model in effect, from the most direct source readable:
    debugfs names the current one; otherwise the uname version tells how the
    kernel was built, and for PREEMPT_DYNAMIC kernels preempt= on the command
    line or the config's default says which model was chosen at boot."""
    path = "/sys/kernel/debug/sched/preempt"
    text, _ = _read(path)
    match = re.search(r"\((\w+)\)", text or "")  # "none voluntary (full) lazy"
    if match:
        return _field(match.group(1), path)
    realtime, _ = _read("/sys/kernel/realtime")
    if realtime == "1":
        return _field("rt", "/sys/kernel/realtime")

    tokens = version.split()
    if "PREEMPT_RT" in tokens:
        return _field("rt", "uname(2) version: PREEMPT_RT")
    if "PREEMPT" in tokens:
        return _field("full", "uname(2) version: PREEMPT")
    built, config_path = _kernel_config_preempt(release)
    if "PREEMPT_DYNAMIC" in tokens:
        cmdline, _ = _read("/proc/cmdline")
        chosen = re.search(r"(?:^|\s)preempt=(\w+)", cmdline or "")
        if chosen:
            return _field(chosen.group(1),
                          "uname(2) version: PREEMPT_DYNAMIC; /proc/cmdline preempt=")
        if built:
            return _field(built, f"uname(2) version: PREEMPT_DYNAMIC; default from {config_path}")
        return _field("dynamic", "uname(2) version: PREEMPT_DYNAMIC "
                                 "(boot-time model not visible: no debugfs, preempt= or config)")
    if built in ("none", "voluntary"):
        return _field(built, f"uname(2) version; {config_path}")
    return _field("none_or_voluntary", "uname(2) version: no PREEMPT token")


# ---- CPUs, frequency, clocks ------------------------------------------------

def _boost() -> Field:
    text, _ = _read(SYS_CPU / "cpufreq/boost")
    if text is not None:
        return _field(text == "1", str(SYS_CPU / "cpufreq/boost"))
    text, _ = _read(SYS_CPU / "intel_pstate/no_turbo")
    if text is not None:
        return _field(text == "0", str(SYS_CPU / "intel_pstate/no_turbo") + " (inverted)")
    return _field(None, f"{SYS_CPU}/cpufreq/boost, {SYS_CPU}/intel_pstate/no_turbo",
                  "neither present")


def _governors() -> Field:
    found = _per_cpu_files("cpufreq/scaling_governor")
    return _field(found or None, f"{SYS_CPU}/cpuN/cpufreq/scaling_governor",
                  "no cpufreq policy (no frequency-scaling driver, usual in VMs)")


def _smt_siblings() -> Field:
    found = _per_cpu_files("topology/thread_siblings_list")
    return _field(found or None, f"{SYS_CPU}/cpuN/topology/thread_siblings_list",
                  "no CPU topology in sysfs")


def _clocksource() -> Field:
    base = Path("/sys/devices/system/clocksource/clocksource0")
    current, reason = _read(base / "current_clocksource")
    available, _ = _read(base / "available_clocksource")
    if current is None:
        return _field(None, str(base), reason)
    return _field({"current": current,
                   "available": available.split() if available is not None else None},
                  f"{base}/current_clocksource, available_clocksource")


def _caches() -> Field:
    base = SYS_CPU / "cpu0/cache"
    try:
        dirs = [base / n for n in _listdir(base) if re.fullmatch(r"index\d+", n)]
    except OSError as exc:
        return _field(None, str(base), exc.strerror or "not readable")
    caches = []
    for path in sorted(dirs, key=lambda p: int(p.name[5:])):
        entry: dict[str, Any] = {}
        for name in ("level", "type", "size", "shared_cpu_list"):
            entry[name], _ = _read(path / name)
        if entry["level"] is not None:
            entry["level"] = int(entry["level"])
        caches.append(entry)
    return _field(caches or None, f"{base}/index*/{{level,type,size,shared_cpu_list}}",
                  "no cache entries")


def _vulnerabilities() -> Field:
    base = SYS_CPU / "vulnerabilities"
    try:
        names = sorted(_listdir(base))
    except OSError as exc:
        return _field(None, str(base), exc.strerror or "not readable")
    return _field({name: _read(base / name)[0] for name in names} or None, str(base),
                  "directory empty")


# ---- PMU --------------------------------------------------------------------

# Event sources every kernel registers that count no hardware events, and
# "msr" (x86 TSC/APERF/MPERF, present even in VMs without a PMU).
_NON_PMU_SOURCES = {"software", "tracepoint", "kprobe", "uprobe", "breakpoint", "msr"}
# Core PMUs, which give cycles/instructions: "cpu" (x86, RISC-V SBI; Intel
# hybrid: cpu_core, cpu_atom), arm64 "armv8_*" (armv8_pmuv3_0,
# armv8_cortex_a53, ...), Apple M-series "apple_*_pmu".
_CORE_PMU = re.compile(r"cpu|cpu_core|cpu_atom|armv[78]_\w+|apple_\w+_pmu")


def _pmu() -> Field:
    base = Path("/sys/bus/event_source/devices")
    try:
        devices = sorted(_listdir(base))
    except OSError as exc:
        return _field(None, str(base), exc.strerror or "not readable")
    core = [d for d in devices if _CORE_PMU.fullmatch(d)]
    other = [d for d in devices if d not in core and d not in _NON_PMU_SOURCES]
    if core:
        summary = "hardware PMU: " + ", ".join(core)
    elif other:
        summary = "no core PMU (no cycles/instructions); other: " + ", ".join(other)
    else:
        summary = "no hardware PMU"
    return _field({"devices": devices, "core": core, "summary": summary}, str(base))


# ---- isolation, interrupts, memory, layout -----------------------------------

def _isolation(cmdline: str | None) -> Field:
    """The CPUs kept from the scheduler (isolcpus=) and the tick (nohz_full=),
    as the kernel says (sysfs) or, where it does not, the command line."""
    value: dict[str, Any] = {}
    for name, key in (("isolated", "isolcpus"), ("nohz_full", "nohz_full")):
        text, _ = _read(SYS_CPU / name)
        if text is None:
            m = re.search(rf"(?:^|\s){key}=(?:[a-z_,]*,)?([0-9][0-9,-]*)", cmdline or "")
            text = m.group(1) if m else None
        value[name] = text or ""
    return _field(value, f"{SYS_CPU}/isolated, nohz_full; /proc/cmdline isolcpus=, nohz_full=")


def _irq_affinity() -> Field:
    """How many interrupts may land on each CPU (their smp_affinity_list),
    and the affinity new ones get."""
    base = "/proc/irq"
    try:
        irqs = [n for n in _listdir(base) if n.isdigit()]
    except OSError as exc:
        return _field(None, base, exc.strerror or "not readable")
    per_cpu: dict[str, int] = {}
    for n in irqs:
        text, _ = _read(f"{base}/{n}/smp_affinity_list")
        for c in cpu_list(text):
            per_cpu[str(c)] = per_cpu.get(str(c), 0) + 1
    default, _ = _read(f"{base}/default_smp_affinity")
    return _field({"irqs": len(irqs), "per_cpu": dict(sorted(per_cpu.items(), key=lambda kv: int(kv[0]))),
                   "default_mask": default}, f"{base}/N/smp_affinity_list, {base}/default_smp_affinity")


def _thp() -> Field:
    path = "/sys/kernel/mm/transparent_hugepage/enabled"
    text, reason = _read(path)
    m = re.search(r"\[(\w+)\]", text or "")
    return _field(m.group(1) if m else None, path, reason or "no [choice] in it")


# ---- the rest ---------------------------------------------------------------

def _meminfo_total() -> Field:
    text, reason = _read("/proc/meminfo")
    match = re.search(r"^MemTotal:\s+(\d+) kB", text or "", re.M)
    return _field(int(match.group(1)) * 1024 if match else None,
                  "/proc/meminfo MemTotal", reason or "no MemTotal line")


def _glibc() -> Field:
    snap = _SNAPSHOT.get()
    if snap is not None:
        return _field(snap.glibc, f"getconf GNU_LIBC_VERSION ({snap.source})", "not glibc")
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):  # name unknown to this libc (musl, ...)
        value = None
    return _field(value, "os.confstr('CS_GNU_LIBC_VERSION')", "not glibc")


def _probe_info_field(probe_info: dict | None, key: str) -> Field:
    if probe_info is None:
        return _field(None, "probe header", "probe header not given")
    return _field(probe_info.get(key), f"probe header '{key}'", "not in the probe header")


def collect(cpuid: dict | None = None, probe_info: dict | None = None, snapshot: Snapshot | None = None) -> dict:
    """The environment as {field: {"value", "source"[, "reason"]}}.

    cpuid: the parsed `opcost-probe cpuid` line, or None without a probe.
    probe_info: the probe header (keys "compiler", "probe_version"), or None.
    snapshot: another machine's files (a remote host), read instead of this one's.
    """
    token = _SNAPSHOT.set(snapshot)
    try:
        return _collect(cpuid, probe_info, snapshot)
    finally:
        _SNAPSHOT.reset(token)


def _collect(cpuid: dict | None, probe_info: dict | None, snapshot: Snapshot | None) -> dict:
    u = os.uname()
    machine, nodename, release, version = snapshot.uname if snapshot is not None else (
        u.machine, u.nodename, u.release, u.version)
    uname = SimpleNamespace(machine=machine, nodename=nodename, release=release, version=version)
    blocks, why_no_cpuinfo = _cpuinfo()
    makers: list[tuple[str, Callable[[], Field]]] = [
        ("arch", lambda: _field(uname.machine, "uname(2) machine")),
        ("hostname", lambda: _field(uname.nodename, "uname(2) nodename")),
        ("kernel_release", lambda: _field(uname.release, "uname(2) release")),
        ("kernel_version", lambda: _field(uname.version, "uname(2) version")),
        ("kernel_cmdline", lambda: _file_field("/proc/cmdline")),
        ("preempt_model", lambda: _preempt_model(uname.version, uname.release)),
        *((name, lambda keys=keys: _cpuinfo_field(blocks, why_no_cpuinfo, keys))
          for name, keys in _CPUINFO_FIELDS.items()),
        ("cpuid_cpu", lambda: _cpuid_cpu(cpuid)),
        ("cpuid_features", lambda: _cpuid_features(cpuid)),
        ("cpu_counter", lambda: _cpu_counter(cpuid)),
        ("per_cpu", lambda: _per_cpu(blocks, why_no_cpuinfo)),
        ("core_types", lambda: _field(core_types(env["per_cpu"]["value"]), "per_cpu grouped by model and capacity",
                                      None if env["per_cpu"]["value"] else env["per_cpu"].get("reason"))),
        ("cpus_online", lambda: _file_field(SYS_CPU / "online")),
        ("smt_siblings", _smt_siblings),
        ("smt_control", lambda: _file_field(SYS_CPU / "smt/control")),
        ("cpufreq_governor", _governors),
        ("cpufreq_boost", _boost),
        ("clocksource", _clocksource),
        ("hypervisor", lambda: _hypervisor(cpuid, blocks)),
        ("xstate", lambda: _xstate(cpuid)),
        ("vulnerabilities", _vulnerabilities),
        ("perf_event_paranoid",
         lambda: _file_field("/proc/sys/kernel/perf_event_paranoid", int)),
        ("pmu", _pmu),
        ("isolated_cpus", lambda: _isolation(env["kernel_cmdline"]["value"])),
        ("irq_affinity", _irq_affinity),
        ("transparent_hugepage", _thp),
        ("aslr", lambda: _file_field("/proc/sys/kernel/randomize_va_space", int)),
        ("numa_nodes", lambda: _file_field("/sys/devices/system/node/online")),
        ("memory_total_bytes", _meminfo_total),
        ("cpu_caches", _caches),
        ("glibc_version", _glibc),
        ("python_version", lambda: _field(
            f"{platform.python_implementation()} {platform.python_version()}", "platform") if snapshot is None
         else _field(None, snapshot.source, "not used there: the probe and a POSIX shell script read the host")),
        ("probe_version", lambda: _probe_info_field(probe_info, "probe_version")),
        ("probe_compiler", lambda: _probe_info_field(probe_info, "compiler")),
    ]
    env = {}
    for name, make in makers:
        try:
            env[name] = make()
        except Exception as exc:  # odd kernel output must not cost the run
            env[name] = _field(None, "opcost.env",
                               f"internal error: {type(exc).__name__}: {exc}")
    return env


# ---- rendering and comparison -----------------------------------------------

def _compact(value: Any, nested: bool = False) -> str:
    if isinstance(value, dict):
        text = ", ".join(f"{k}={_compact(v, True)}" for k, v in value.items())
        return "{" + text + "}" if nested else text
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v, True) for v in value) + "]"
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    # One line per field, whatever the kernel put in a string.
    return str(value).replace("\n", "\\n")


def format_env(env: dict) -> str:
    """One aligned "field: value   [source]" line per field."""
    width = max((len(name) for name in env), default=0) + 1
    lines = []
    for name, field in env.items():
        value = field.get("value")
        text = _compact(value) if value is not None else f"- ({field.get('reason')})"
        lines.append(f"{name + ':':<{width}} {text}   [{field.get('source')}]")
    return "\n".join(lines)


def _diff(path: str, a: Any, b: Any, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            _diff(f"{path}.{key}", a.get(key), b.get(key), out)
    elif a != b:
        out.append((path, a, b))


def differences(env_a: dict, env_b: dict) -> list[tuple[str, Any, Any]]:
    """(field, value_a, value_b) for every value that differs; sources are
    ignored. Dict values are compared key by key ("vulnerabilities.mds"); a
    field missing on one side counts as None."""
    out: list[tuple[str, Any, Any]] = []
    env_a, env_b = env_a if isinstance(env_a, dict) else {}, env_b if isinstance(env_b, dict) else {}
    for name in list(env_a) + [n for n in env_b if n not in env_a]:
        _diff(name, _value(env_a.get(name)), _value(env_b.get(name)), out)
    return out


def _value(entry: Any) -> Any:
    """A field's value: {"value": V, "source": ...} as opcost records it; a bare
    value (an imported file may carry one, the schema allows it) as itself."""
    return entry.get("value") if isinstance(entry, dict) else entry
