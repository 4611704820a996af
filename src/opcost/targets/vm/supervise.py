"""A boot as the target asks for it: the limit on reaching the init (fixed
before this session's first boot, then learned from its boots), a hung boot
killed and retried, the machine type tried (`auto`: microvm first, pc if it
does not boot, or hangs twice), the vCPUs pinned under KVM, and a failed
boot's console kept on disk."""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import subprocess
import time
from pathlib import Path

from ... import probe
from ...errors import ProbeError, ProbeTimeout, UsageError
from .boot import run_guest
from .choice import MICROVM_TRIAL_S, Choice, cache_dir
from .clock import machine_cmdline
from .image import cmdline_size, pvh_vmlinux, sha256_of
from .initramfs import guest_probe, initramfs, job_text, vminit_path
from .protocol import Boot, BootFailed
from .qemu import TCG_CMDLINE, TCG_CMDLINE_MORE, Machine, VmConfig, base_cmdline, qemu_for
from .restore import Snapshots
from .qmp import pin_threads
from .vcpus import smp_cmdline

BOOT_LIMIT_S = {"tcg": 90.0, "kvm": 30.0}   # from start to the init's first line, before any boot reached it
BOOT_FLOOR_S = {"tcg": 15.0, "kvm": 5.0}    # the learned limit is never below this (nor above the fixed one)
BOOT_FACTOR = 4.0                           # the learned limit: this times the median boot so far
RETRIES = 2                                 # a hung boot is retried this many times in its round


def console_dir() -> Path:
    """Where the console of a failed boot is kept."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "opcost" / "vm-console"


def save_console(b_console: list[str], what: str) -> Path | None:
    try:
        d = console_dir()
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.log"
        p.write_text(f"# {what}\n" + "\n".join(b_console) + "\n")
        return p
    except OSError:
        return None


def tally(qemu: str, stage: str, retried: int, error: Exception | None, boot_s: float | None = None) -> None:
    """OPCOST_VM_TALLY=FILE: each boot the target asked for (a round's, or a
    preflight's) appended there as one JSON line: the QEMU program's name,
    the stage, how many of its boots hung and were retried, and whether it
    ended without a boot (`lost`, with the cause). The test suite sums them
    over a session (tests/conftest.py): its real boots, retries and lost
    rounds."""
    path = os.environ.get("OPCOST_VM_TALLY")
    if not path:
        return
    rec = {"qemu": os.path.basename(qemu), "stage": stage, "retried": retried, "lost": error is not None,
           "cause": str(error)[:300] if error is not None else None, "boot_s": round(boot_s or 0, 3)}
    with contextlib.suppress(OSError), open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def boot(cfg: VmConfig, m: Machine, cmds: list[tuple], *, accel: str, machine_type: str, boot_limit: float,
         timeout: float, host_cpus: list[int] | None = None, on_frame=None, stall_s: float = probe.STARTUP_STALL_S,
         files: dict[str, Path] | None = None, choice: Choice | None = None, snaps: Snapshots | None = None) -> Boot:
    """Boot `m` and run `cmds` in the guest (boot.run_guest, with the
    initramfs of the init, the probe, `files` and the job, and the kernel
    parameters the machine type needs, and what `choice` learned of this
    kernel's earlier boots: lpj=); what they did. A counting boot under TCG
    with `snaps` (--vm-restore auto) goes through a snapshot of this machine
    (restore.py): its record in the boot's `restore`."""
    init = vminit_path(m.arch)
    if init is None:
        raise UsageError(f"the {m.arch} VM init is not built; run `make -C probe` (it builds probe/opcost-probe-vminit)"
                         if m.arch == probe.host_arch() else f"the {m.arch} VM init is not built; run "
                         f"`make -C probe CC={m.arch}-linux-gnu-gcc OUT=build/opcost-probe-{m.arch}`")
    kernel, entry = entry_kernel(m.kernel, accel) if m.arch == "x86_64" else (m.kernel, f"the {m.arch} Image")
    must = " ".join(x for x in (machine_cmdline(machine_type, accel), smp_cmdline(cfg.cpus, m.arch)) if x)
    params = " ".join(x for x in (must, speed_params(m, accel, machine_type, choice, must)) if x)
    guest = Machine(kernel, m.cmdline, m.arch)
    run = dict(accel=accel, machine_type=machine_type, boot_limit=boot_limit, timeout=timeout, machine_params=params,
               host_cpus=host_cpus, on_frame=on_frame, stall_s=stall_s)
    plan = None
    if snaps is not None and cfg.plugin and accel == "tcg":   # the machine, as its QEMU arguments say it
        plan = snaps.plan((qemu_for(cfg.qemu, m.arch), str(kernel), m.cmdline, m.arch, machine_type, params, cfg.cpus,
                           cfg.mem_mib, cfg.cpu_model, re.sub(r",out=[^,]*", "", cfg.plugin), str(init),
                           *_stat(init), str(guest_probe(m.arch)), *_stat(guest_probe(m.arch))), job_text(cmds), files)
    if plan is None:
        b = run_guest(cfg, guest, initramfs(job_text(cmds), init, guest_probe(m.arch), files), **run)
        if cfg.plugin and accel == "tcg":
            b.restore = {"way": "fresh", "why": "--vm-restore off" if snaps is None else
                         "one round: no later boot to restore" if snaps.once else "its snapshot failed"}
    else:
        b, b.restore = snaps.boot(plan, lambda image, r: run_guest(cfg, guest, image, resume=r, **run),   # type: ignore
                                  lambda fs: initramfs(job_text([]), init, guest_probe(m.arch), fs))
    b.entry = entry
    if choice:
        choice.lpj_found(m, accel, machine_type, b.facts)
    return b


def _stat(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_size, st.st_mtime_ns


def speed_params(m: Machine, accel: str, machine_type: str, choice: Choice | None, must: str | None = None) -> str:
    """Kernel parameters that only make a boot under TCG faster (none under
    KVM): qemu.TCG_CMDLINE (initcalls skipped), the lpj= a first boot of
    this kernel said (Choice.lpj_for) and qemu.TCG_CMDLINE_MORE (more
    initcalls), in that order of worth. Each only where it still fits the
    kernel's command line (its header's cmdline_size) after what opcost must
    give (`must`: by default the machine type's) and the user's: never at the
    cost of the user's parameters."""
    if accel != "tcg":
        return ""
    room = (cmdline_size(m.kernel) or 2048) - 1 - len(base_cmdline(m.arch)) - len(m.cmdline) - 2 \
        - len(machine_cmdline(machine_type, accel) if must is None else must)
    out = []
    for p in (TCG_CMDLINE, choice.lpj_for(m, accel, machine_type) if choice else "", TCG_CMDLINE_MORE):
        if p and len(p) + 1 <= room:
            out.append(p)
            room -= len(p) + 1
    return " ".join(out)


_ENTRY: dict[tuple, tuple[Path, str]] = {}


def entry_kernel(kernel: Path, accel: str) -> tuple[Path, str]:
    """What QEMU's -kernel is given, and why. Under TCG, the bzImage's own
    vmlinux at its PVH entry when it has one (image.pvh_vmlinux): the guest
    then does not decompress its kernel, under TCG seconds of every boot;
    the kernel's text is not randomised then (KASLR is the decompressor's),
    which under TCG, whose timings are the emulator's, changes no figure
    that counts. Under KVM, or OPCOST_VM_PVH=0: the bzImage."""
    if accel != "tcg" or os.environ.get("OPCOST_VM_PVH") == "0":
        return kernel, "the bzImage" + (" (OPCOST_VM_PVH=0)" if accel == "tcg" else
                                        " (under KVM: its decompressor randomises the kernel's text, KASLR)")
    try:
        st = kernel.stat()
    except OSError:
        return kernel, "the bzImage"
    key = (str(kernel), st.st_mtime_ns, st.st_size)
    if key not in _ENTRY:
        try:
            vmlinux, why = pvh_vmlinux(kernel, sha256_of(kernel), cache_dir())
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            vmlinux, why = None, f"its vmlinux could not be extracted ({e})"
        _ENTRY[key] = (vmlinux, why) if vmlinux else (kernel, f"the bzImage: {why}")
    return _ENTRY[key]


def host_cpus_for(cfg: VmConfig, accel: str) -> tuple[list[int] | None, str]:
    """The host CPUs the vCPUs are pinned to (under KVM, or OPCOST_VM_PIN=1:
    the tests pin under TCG too), and how the vCPUs are placed, said."""
    if not (accel == "kvm" or os.environ.get("OPCOST_VM_PIN") == "1"):
        return None, "not pinned: under TCG QEMU's threads run where the host schedules them"
    own = sorted(os.sched_getaffinity(0))
    host_cpus = own[-cfg.cpus:] if len(own) > cfg.cpus else None
    return host_cpus, (f"vCPU 0..{len(host_cpus) - 1} on host CPUs {', '.join(map(str, host_cpus))}, one each; "
                       f"QEMU's other threads and opcost on the other {len(own) - len(host_cpus)}" if host_cpus else
                       f"not pinned: --vm-cpus {cfg.cpus} leaves none of the {len(own)} host CPU(s) opcost "
                       "may use for QEMU's other threads and opcost itself; give fewer guest CPUs")


def boot_limit(accel: str) -> float:
    """Seconds from QEMU's start to the init's first line (OPCOST_VM_BOOT_LIMIT overrides)."""
    limit = BOOT_LIMIT_S[accel]
    with contextlib.suppress(ValueError):
        limit = float(os.environ.get("OPCOST_VM_BOOT_LIMIT") or limit)
    return limit


def learned_limit(accel: str, machine_type: str, past: list[dict]) -> float:
    """The limit on reaching the init: the fixed one (boot_limit) until a
    boot of this session on this accelerator and machine type reached the
    init; then BOOT_FACTOR times the median of those boots (restores from a
    snapshot not counted: they skip the kernel's start), at least
    BOOT_FLOOR_S, at most the fixed limit."""
    fixed = boot_limit(accel)
    seen = [b["boot_s"] for b in past if b.get("accel") == accel and b.get("machine") == machine_type
            and b.get("boot_s") and not b.get("restored")]
    if not seen:
        return fixed
    return round(min(fixed, max(BOOT_FLOOR_S[accel], BOOT_FACTOR * statistics.median(seen))), 1)


def supervised_boot(cfg: VmConfig, choice: Choice, m: Machine, cmds, timeout: float, on_frame=None,
                    what: str = "", files: dict[str, Path] | None = None,
                    past: list[dict] | None = None, fixed_limit: bool = False,
                    snaps: Snapshots | None = None) -> tuple[Boot, str, str]:
    """One boot of `m` running `cmds`, on the accelerator and machine type
    `choice` gives (auto, not tried yet: microvm first, pc if it does not
    reach the init), within the limit learned from the boots `past`; a failed
    boot's console saved, its path in the error (which keeps `hung`,
    `reached_init`, `accel`, `machine_type` and `limit` as attributes).
    Returns the boot, its accelerator and its machine type."""
    accel, _ = choice.accel_for(m)
    machine_type, _ = choice.machine_for(m, accel)
    host_cpus, pinning = host_cpus_for(cfg, accel)
    limit = learned_limit(accel, machine_type, past or []) if machine_type and not fixed_limit else boot_limit(accel)
    own_cpus = set(os.sched_getaffinity(0))
    try:
        if host_cpus:   # the front end (and QEMU's other threads, which inherit it) off the vCPUs' CPUs
            pin_threads(own_cpus - set(host_cpus))
        run = dict(accel=accel, timeout=timeout, host_cpus=host_cpus, on_frame=on_frame, files=files, choice=choice,
                   snaps=snaps)
        if machine_type is None:   # auto, not tried: this boot tries microvm, briefly; else pc
            b, machine_type = _first_boot(cfg, choice, m, cmds, limit, run)
        else:
            b = boot(cfg, m, cmds, machine_type=machine_type, boot_limit=limit, **run)
    except (BootFailed, ProbeError, ProbeTimeout) as e:
        tail = getattr(e, "console", None)
        saved = save_console(tail or [], f"{what}: {e}") if tail is not None else None
        kvm = (f"under KVM (--accel {cfg.accel}): " if accel == "kvm" and getattr(e, "hung", False) else "")
        err = type(e)(f"{kvm}{e}" + ("; KVM may not work for this guest here: try --accel tcg" if kvm else "")
                      + (f"; the console's last lines are in {saved}" if saved else ""))
        for k, v in (("hung", getattr(e, "hung", False)), ("reached_init", getattr(e, "reached_init", None)),
                     ("accel", accel), ("machine_type", machine_type or "microvm"), ("limit", limit)):
            setattr(err, k, v)
        raise err from None
    finally:
        if host_cpus:
            pin_threads(own_cpus)
    b.pinning = pinning
    return b, accel, machine_type


def _first_boot(cfg: VmConfig, choice: Choice, m: Machine, cmds, limit: float, run: dict) -> tuple[Boot, str]:
    """--vm-machine auto's first boot of a kernel: microvm, within its trial
    limit; pc if that did not reach the init. The answer is remembered."""
    accel = run["accel"]
    try:
        b = boot(cfg, m, cmds, machine_type="microvm", boot_limit=min(limit, MICROVM_TRIAL_S[accel]), **run)
        choice.machine_found(m, accel, "microvm", "a first boot on microvm reached the init")
        return b, "microvm"
    except (BootFailed, ProbeError, ProbeTimeout) as e:
        if getattr(e, "reached_init", True):
            raise   # it booted: whatever failed after, it is not the machine type
        microvm_failed = f"a first boot on microvm did not reach the init ({e})"
    b = boot(cfg, m, cmds, machine_type="pc", boot_limit=limit, **run)
    choice.machine_found(m, accel, "pc", microvm_failed)   # pc booted: remembered
    return b, "pc"


def retried(boot_once, booted_before: bool, on_hang) -> Boot:
    """`boot_once()` (a supervised_boot), and when it hung before the init
    (killed at its limit) in a session where this machine has reached the
    init before, again, up to RETRIES times: a transient hang on a shared
    host costs a boot, not the round. A kernel's first boot is not retried
    (a kernel that never boots is said at once). `on_hang(error)` is told of
    each hang that is retried (the target gives the machine type up for pc
    there). The last retry waits the fixed limit (boot_limit): a machine
    slowed down by other work is not taken for a kernel that hangs. The
    boot's `retries`: each retried boot's cause, machine type and limit."""
    retries: list[dict] = []
    while True:
        try:
            b = boot_once(len(retries) == RETRIES)
        except (BootFailed, ProbeError, ProbeTimeout) as e:
            if not (getattr(e, "hung", False) and booted_before and len(retries) < RETRIES):
                if retries:
                    raise type(e)(f"{e} (after {len(retries)} retried boot(s) of this round hung the same way)") \
                        from None
                raise
            retries.append({"cause": str(e), "machine": getattr(e, "machine_type", None),
                            "accel": getattr(e, "accel", None), "limit_s": getattr(e, "limit", None),
                            "gave_up": on_hang(e)})
            continue
        b.retries = retries
        return b
