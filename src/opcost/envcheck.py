"""`opcost env --check`: what this machine offers a measurement and what it
lacks, one row each, ok or warn, with the command that fixes it (pyperf's
`system show`); `--apply` and `--reset` (pyperf's `system tune`/`reset`) for
the safe, reversible subset, as root.

The facts are the environment every run stores (env.collect(): governor,
boost, SMT siblings, isolated CPUs, interrupts, THP, ASLR,
perf_event_paranoid, the PMU), read from a tree instead of / when given one
(env.tree_snapshot: a test's made-up /sys and /proc); besides them only what
changes from second to second (load and steal now, from /proc) and what the
tools here can do (KVM: the vm target's kvm_usable; QEMU and its plugins;
the cross compilers and qemu-user, as the probe looks them up).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from . import env as envmod
from .errors import UsageError
from .tables import _table

OK, WARN = "ok", "warn"


@dataclass
class Row:
    check: str
    status: str       # ok | warn
    here: str         # what this machine has
    fix: str = ""     # the command (or step) that fixes a warn; "" for ok


@dataclass
class Tools:
    """What the checks ask of the tools here (tests give their own)."""
    kvm: Callable[[], str | None]                  # None: usable; else why not
    which: Callable[[str], str | None] = shutil.which
    qemu_plugins: Callable[[str], str | None] | None = None   # the QEMU binary -> None: -plugin works; else why not

    @staticmethod
    def here() -> "Tools":
        from .targets.vm.host import kvm_usable   # the vm package (~0.25 s): only --check asks it

        def kvm() -> str | None:
            why = kvm_usable()
            qemu = shutil.which(QEMU)
            return why if why is not None or qemu is None else _qemu_kvm_starts(qemu)

        return Tools(kvm=kvm, qemu_plugins=_qemu_plugin_support)


def _qemu_kvm_starts(qemu: str, wait: float = 2.0) -> str | None:
    """None when QEMU starts a KVM guest (-cpu host, as the vm target asks)
    and is still running after `wait` seconds, paused before its first
    instruction; else QEMU's last words. /dev/kvm opening is not enough: a
    paravirtual KVM in a VM opens and then refuses the host CPU's MSRs."""
    try:
        p = subprocess.Popen([qemu, "-accel", "kvm", "-machine", "pc", "-cpu", "host", "-nodefaults", "-display",
                              "none", "-S", "-monitor", "none"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        return f"{qemu} did not start ({exc.strerror})"
    try:
        _, err = p.communicate(timeout=wait)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None
    said = [ln.removeprefix(f"{os.path.basename(qemu)}: ").removeprefix("error: ") for ln in err.splitlines()
            if ln.strip()]
    return (f"/dev/kvm opens, but QEMU -accel kvm -cpu host exits {p.returncode}: " + (said[0] if said else "no message")
            + " (the vm target's trial boot falls back to TCG)")


def _qemu_plugin_support(qemu: str) -> str | None:
    """None when this QEMU takes -plugin (built with TCG plugins), else why not."""
    try:
        cp = subprocess.run([qemu, "-plugin", "help", "-display", "none", "-machine", "none"], capture_output=True,
                            text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{qemu} did not answer ({type(exc).__name__})"
    said = cp.stdout + cp.stderr
    if "invalid option" in said or "plugin support" in said.lower():
        return "built without TCG plugin support"
    return None


# The QEMU the vm target boots, and the other architectures' cross compilers
# and qemu-user (as crossprobe and probe look them up).
QEMU = "qemu-system-x86_64"
CROSS = {"i386": ("i686-linux-gnu-gcc", "gcc-i686-linux-gnu", None),
         "aarch64": ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu", "qemu-aarch64"),
         "arm": ("arm-linux-gnueabihf-gcc", "gcc-arm-linux-gnueabihf", "qemu-arm")}
LOAD_PER_CPU = 0.1      # a 1-min load average above this per CPU: something else runs
STEAL_SHARE = 0.01      # more than 1% of the CPU time stolen by the hypervisor


def measuring_cpu(e: dict, tree: bool) -> int:
    """The CPU a run measures on by default: the last one this process may
    use (the last online CPU of a tree)."""
    if not tree:
        return max(os.sched_getaffinity(0))
    online = envmod.cpu_list(e["cpus_online"]["value"])
    return online[-1] if online else 0


def now(root: str = "/", interval: float = 0.5) -> dict:
    """Load and steal now: the 1-minute load average, and the share of CPU
    time the hypervisor stole over `interval` seconds (since boot, where
    /proc/stat did not move: a tree)."""
    def read(name: str) -> str | None:
        try:
            return Path(root.rstrip("/") + name).read_text()
        except OSError:
            return None

    def cpu_times(text: str | None) -> list[int] | None:
        m = re.search(r"^cpu\s+(.*)$", text or "", re.M)
        return [int(x) for x in m.group(1).split()] if m else None

    load = read("/proc/loadavg")
    a = cpu_times(read("/proc/stat"))
    if a is not None and root == "/":
        time.sleep(interval)
    b = cpu_times(read("/proc/stat"))
    steal = None
    over = "since boot"
    if a and b and len(a) >= 8:
        d = [y - x for x, y in zip(a, b)]
        if sum(d) > 0:
            a, over = d, f"over {interval:g} s"
        steal = a[7] / sum(a) if sum(a) else None
    return {"load1": float(load.split()[0]) if load else None, "steal": steal, "steal_over": over}


def checks(e: dict, now_: dict, tools: Tools, cpu: int, ncpus: int) -> list[Row]:
    """The rows, from the environment `e` (env.collect), the load and steal
    `now_`, and the tools; `cpu` is the measuring CPU."""
    v = {k: (f or {}).get("value") for k, f in e.items()}
    why = {k: (f or {}).get("reason") for k, f in e.items()}
    return _cpu_rows(v, why, cpu, ncpus) + _now_rows(now_, ncpus) + _kernel_rows(v, why) + _tool_rows(tools)


def _cpu_rows(v: dict, why: dict, cpu: int, ncpus: int) -> list[Row]:
    """The measuring CPU's own: its governor, boost, SMT sibling, isolation, interrupts."""
    rows = []
    gov = v.get("cpufreq_governor")
    if not gov:
        rows.append(Row("cpufreq governor", WARN, f"none: {why.get('cpufreq_governor') or 'no cpufreq policy'}",
                        "none here: the host sets the frequency (on bare metal: a cpufreq driver, then --apply)"))
    else:
        g = gov.get(str(cpu))
        rows.append(Row("cpufreq governor", OK if g == "performance" else WARN, f"cpu{cpu}: {g}",
                        "" if g == "performance" else "opcost env --apply (cpupower frequency-set -g performance)"))

    boost = v.get("cpufreq_boost")
    if boost is None:
        rows.append(Row("turbo/boost", WARN, "not visible: no cpufreq/boost or intel_pstate/no_turbo",
                        "none here: the host decides (on bare metal: disable turbo in the firmware)"))
    else:
        rows.append(Row("turbo/boost", WARN if boost else OK, "on" if boost else "off",
                        "opcost env --apply (echo 0 > /sys/devices/system/cpu/cpufreq/boost)" if boost else ""))

    sib = envmod.cpu_list((v.get("smt_siblings") or {}).get(str(cpu)))
    others = [c for c in sib if c != cpu]
    if not sib:
        rows.append(Row("SMT siblings", WARN, f"cpu{cpu}: no topology in sysfs", "none: the kernel does not say"))
    else:
        rows.append(Row("SMT siblings", WARN if others else OK,
                        f"cpu{cpu} shares its core with cpu{','.join(map(str, others))}" if others
                        else f"cpu{cpu} alone on its core",
                        f"echo 0 > /sys/devices/system/cpu/cpu{others[0]}/online (or smt=off)" if others else ""))

    iso = v.get("isolated_cpus") or {}
    isolated, nohz = envmod.cpu_list(iso.get("isolated")), envmod.cpu_list(iso.get("nohz_full"))
    ok_iso = cpu in isolated and cpu in nohz
    rows.append(Row("isolated CPU", OK if ok_iso else WARN,
                    f"isolcpus={iso.get('isolated') or '-'} nohz_full={iso.get('nohz_full') or '-'}",
                    "" if ok_iso else f"boot with isolcpus={cpu} nohz_full={cpu} rcu_nocbs={cpu}"))

    irq = v.get("irq_affinity")
    if irq is None:
        rows.append(Row("IRQ affinity", WARN, f"not readable: {why.get('irq_affinity')}", "none: /proc/irq not here"))
    else:
        on = (irq.get("per_cpu") or {}).get(str(cpu), 0)
        rest = ",".join(str(c) for c in range(ncpus) if c != cpu) or "0"
        rows.append(Row("IRQ affinity", WARN if on else OK, f"{on} of {irq.get('irqs')} interrupts may land on cpu{cpu}",
                        f"for f in /proc/irq/*/smp_affinity_list; do echo {rest} > $f; done" if on else ""))
    return rows


def _now_rows(now_: dict, ncpus: int) -> list[Row]:
    """What else runs now: the load and the hypervisor's steal."""
    rows = []
    load, steal = now_.get("load1"), now_.get("steal")
    busy = load is not None and load > LOAD_PER_CPU * ncpus
    rows.append(Row("load now", WARN if busy or load is None else OK,
                    "-" if load is None else f"{load:.2f} (1-min average, {ncpus} CPUs)",
                    "wait for the other jobs, or measure elsewhere" if busy else ""))
    stolen = steal is not None and steal > STEAL_SHARE
    rows.append(Row("hypervisor steal", WARN if stolen else OK,
                    "-" if steal is None else f"{steal:.1%} of CPU time ({now_.get('steal_over')})",
                    "a dedicated host or pinned vCPUs" if stolen else ""))
    return rows


def _kernel_rows(v: dict, why: dict) -> list[Row]:
    """The kernel's settings: hugepages, ASLR, perf_event_paranoid, the PMU it offers."""
    rows = []
    thp = v.get("transparent_hugepage")
    rows.append(Row("transparent hugepages", WARN if thp == "always" else OK, thp or "-",
                    "opcost env --apply (echo madvise > /sys/kernel/mm/transparent_hugepage/enabled)"
                    if thp == "always" else ""))

    aslr = v.get("aslr")
    rows.append(Row("ASLR", OK if aslr == 2 else WARN,
                    {0: "off", 1: "partial", 2: "full"}.get(aslr, "-") if aslr is not None else "-",
                    "" if aslr == 2 else "opcost env --apply (sysctl -w kernel.randomize_va_space=2): each process "
                    "its own layout, so no one layout is measured"))

    par = v.get("perf_event_paranoid")
    rows.append(Row("perf_event_paranoid", OK if par is not None and par <= 1 else WARN, "-" if par is None else str(par),
                    "" if par is not None and par <= 1 else
                    "opcost env --apply (sysctl -w kernel.perf_event_paranoid=1: kernel-side counts)"))

    pmu = v.get("pmu") or {}
    rows.append(Row("hardware PMU", OK if pmu.get("core") else WARN, pmu.get("summary") or f"- ({why.get('pmu')})",
                    "" if pmu.get("core") else "none here: cycles/instructions need a PMU the host passes through "
                    "(QEMU -cpu host with KVM, a bare-metal machine); software events still count"))
    return rows


KVM_FIX = ("modprobe kvm_intel (or kvm_amd) and join group kvm; in a VM, nested virtualisation on the host; "
           "without it the vm target runs under TCG (emulated)")


def kvm_line(tools: Tools, width: int) -> str:
    """`opcost env`'s last line (not stored with runs: the stored environment
    is the machine's, KVM is a fact of the tools here): whether the vm target
    can use KVM, and if not why and what to do, as the KVM row of --check."""
    why = tools.kvm()
    text = "usable" if why is None else f"not usable: {why}. What to do: {KVM_FIX}"
    return f"{'kvm:':<{width}} {text}   [/dev/kvm, then QEMU -accel kvm -cpu host started for a moment]"


def _tool_rows(tools: Tools) -> list[Row]:
    """The tools the targets need: KVM, QEMU and its plugins, the cross compilers."""
    rows = []
    kvm = tools.kvm()
    rows.append(Row("KVM", OK if kvm is None else WARN, "usable" if kvm is None else f"not usable: {kvm}",
                    "" if kvm is None else KVM_FIX))

    qemu = tools.which(QEMU)
    if qemu is None:
        rows.append(Row("QEMU", WARN, f"no {QEMU}", "apt-get install qemu-system-x86"))
    else:
        plug = tools.qemu_plugins(qemu) if tools.qemu_plugins else None
        rows.append(Row("QEMU", OK if plug is None else WARN,
                        f"{qemu}; TCG plugins: " + ("-plugin accepted" if plug is None else plug),
                        "" if plug is None else "a QEMU built with --enable-plugins"))

    missing = []
    have = []
    for arch, (cc, pkg, emu) in CROSS.items():
        if tools.which(cc) is None:
            missing.append(pkg)
        elif emu and tools.which(emu) is None and tools.which(emu + "-static") is None:
            missing.append("qemu-user")
        else:
            have.append(arch)
    rows.append(Row("cross compilers, qemu-user", WARN if missing else OK,
                    ("probes for " + ", ".join(have) if have else "none") + (f"; missing {', '.join(dict.fromkeys(missing))}"
                                                                              if missing else ""),
                    f"apt-get install {' '.join(dict.fromkeys(missing))}" if missing else ""))
    return rows


def run_check(root: str | None = None, tools: Tools | None = None, interval: float = 0.5) -> tuple[list[Row], int]:
    """The rows for this machine (or the tree `root`), and the measuring CPU."""
    tree = root not in (None, "/")
    e = envmod.collect(snapshot=envmod.tree_snapshot(root) if tree and root else None)
    cpu = measuring_cpu(e, tree)
    ncpus = len(envmod.cpu_list(e["cpus_online"]["value"])) or os.cpu_count() or 1
    return checks(e, now(root or "/", interval), tools or Tools.here(), cpu, ncpus), cpu


def format_rows(rows: list[Row], cpu: int) -> str:
    table = _table([["check", "status", "here"]] + [[r.check, r.status, r.here] for r in rows], right=set())
    bad = [r for r in rows if r.status == WARN]
    return (f"what this machine offers a measurement on cpu{cpu} (the default measuring CPU: the last allowed)\n\n"
            + table + "\n\n" + (f"{len(bad)} of {len(rows)} warn; the fix of each:\n"
                                + "\n".join(f"  {r.check}: {r.fix}" for r in bad) if bad else
                                f"all {len(rows)} ok"))


def rows_json(rows: list[Row], cpu: int) -> str:
    return json.dumps({"cpu": cpu, "rows": [asdict(r) for r in rows],
                       "ok": all(r.status == OK for r in rows)}, indent=2)


# ---- --apply and --reset ----------------------------------------------------

# The safe, reversible knobs: (name, file glob under the root, the value a
# measurement wants, whether the current value needs it).
KNOBS: tuple[tuple[str, str, str, Callable[[str], bool]], ...] = (
    ("cpufreq governor", "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor", "performance",
     lambda cur: cur != "performance"),
    ("turbo/boost", "/sys/devices/system/cpu/cpufreq/boost", "0", lambda cur: cur != "0"),
    ("turbo/boost", "/sys/devices/system/cpu/intel_pstate/no_turbo", "1", lambda cur: cur != "1"),
    ("transparent hugepages", "/sys/kernel/mm/transparent_hugepage/enabled", "madvise",
     lambda cur: "[always]" in cur),
    ("ASLR", "/proc/sys/kernel/randomize_va_space", "2", lambda cur: cur != "2"),
    ("perf_event_paranoid", "/proc/sys/kernel/perf_event_paranoid", "1", lambda cur: cur.lstrip("-").isdigit()
     and int(cur) > 1),
)


def state_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "opcost" / "env-applied.json"


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise UsageError(f"env {what} writes /sys and /proc/sys: run it as root (sudo opcost env {what})")


def _current(text: str) -> str:
    m = re.search(r"\[(\w+)\]", text)     # THP's "always [madvise] never"
    return m.group(1) if m else text.strip()


def apply(root: str = "/") -> list[str]:
    """Set each knob present that is not as a measurement wants it; the old
    values go to state_path() for reset(). The lines to print."""

    _need_root("--apply")
    base = root.rstrip("/")
    state = state_path()
    if state.exists():
        raise UsageError(f"env --apply: already applied ({state} holds the values to restore); "
                         "run opcost env --reset first")
    saved: dict[str, str] = {}
    lines = []
    for name, pattern, want, needs in KNOBS:
        paths = sorted(glob.glob(base + pattern))
        if not paths:
            if not any(k[0] == name and glob.glob(base + k[1]) for k in KNOBS):
                lines.append(f"{name}: absent here ({pattern.replace('[0-9]*', 'N')}: not in this kernel, "
                             "usual in a VM): nothing set")
            continue
        for p in paths:
            cur = Path(p).read_text().strip()
            if not needs(cur):
                lines.append(f"{name}: {p[len(base):]} is {_current(cur)} already")
                continue
            Path(p).write_text(want + "\n")
            saved[p[len(base):]] = _current(cur)
            lines.append(f"{name}: {p[len(base):]}: {_current(cur)} -> {want}")
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"root": base or "/", "saved": saved}, indent=1))
    lines.append(f"opcost env --reset restores the {len(saved)} value(s) changed ({state})" if saved
                 else "nothing to change")
    if not saved:
        state.unlink()
    return lines


def reset() -> list[str]:
    """Write back what apply() changed."""
    _need_root("--reset")
    state = state_path()
    if not state.exists():
        raise UsageError(f"env --reset: nothing to restore (no {state}: opcost env --apply changed nothing)")
    doc = json.loads(state.read_text())
    base = doc["root"].rstrip("/")
    lines = []
    for path, old in doc["saved"].items():
        try:
            Path(base + path).write_text(old + "\n")
            lines.append(f"{path}: restored {old}")
        except OSError as exc:
            lines.append(f"{path}: not restored: {exc.strerror}")
    state.unlink()
    return lines
