"""The vm target: targets.base.Target over QEMU guests, one boot per
round and machine (the boot is the statistical unit), and its openers from
the command line (--kernel and the --vm-* options) and from a `vm:` spec."""

from __future__ import annotations

import os
from pathlib import Path
import re
from urllib.parse import parse_qsl, urlsplit

from ... import probe
from ...errors import UsageError
from ...safetext import printable
from ..vm_options import ACCELS, MACHINES, RESTORES
from . import host
from .batch import VmBatch
from .choice import Choice
from .guest import VmGuest
from .image import check_cmdline, check_fits, check_kernel
from .preflight import VmPreflight
from .protocol import Boot, Command
from .qemu import QEMU, Machine, VmConfig, base_cmdline, qemu_for
from .restore import Snapshots
from .supervise import boot, retried, supervised_boot, tally
from .vcpus import AUTO_CPUS, cpus_needed

MACHINE_PARAMS = ("kernel", "cmdline")   # variant dimensions this target takes (spec.expand)
# the longest kernel parameters a machine type adds (clock.machine_cmdline) and a one-CPU guest's
# (vcpus.smp_cmdline), and spaces
MACHINE_PARAMS_MAX = 63


class VmTarget(VmPreflight, VmBatch, VmGuest):
    """targets.base.Target over QEMU guests. `default` is the machine of a
    variant that names no kernel= (from --kernel and --kernel-cmdline).
    Here: which machine a request boots, and this session's boots
    (supervised, retried, recorded); the preflight is VmPreflight's
    (preflight.py), the runs VmBatch's (batch.py), what the guest is
    VmGuest's (guest.py)."""

    machine_params = MACHINE_PARAMS

    def __init__(self, cfg: VmConfig, default: Machine | None = None, default_cmdline: str = ""):
        self.cfg = cfg
        self.default = default
        self.default_cmdline = default.cmdline if default else default_cmdline
        self.name = "vm"
        self._local = None
        self.choice = Choice(cfg, lambda m, accel, limit: boot(cfg, m, [], accel=accel, machine_type="pc",
                                                                boot_limit=limit, timeout=limit + 5))
        self._checks: dict[tuple, Command] = {}
        self.machines: dict[tuple, dict] = {}               # (kernel, cmdline) -> what its preflight boot saw
        self.boots: list[dict] = []                         # every boot of this run: (figures for the docs)
        self.hangs: dict[tuple, int] = {}                   # (sha, accel, machine type) -> hung boots
        self._fits: set[tuple] = set()                      # (kernel, cmdline) whose length was checked
        self._ksyms: dict[str, list] = {}                   # kernel sha -> its text symbols as offsets (counting)
        # counting boots restored from a snapshot of each machine's first (restore.py), unless --vm-restore off
        self.snaps = Snapshots() if cfg.restore == "auto" else None
        if default is not None:
            self.guest_arch_of(default.kernel, "--kernel ")
        if cfg.accel not in ACCELS:
            raise UsageError(f"--accel {cfg.accel}: valid: {', '.join(ACCELS)}")
        if cfg.restore not in RESTORES:
            raise UsageError(f"--vm-restore {cfg.restore}: valid: {', '.join(RESTORES)}")
        if cfg.machine not in MACHINES:
            raise UsageError(f"--vm-machine {cfg.machine}: valid: {', '.join(MACHINES)}")
        if cfg.accel == "kvm":
            why = host.kvm_usable()
            if why:
                raise UsageError(f"--accel kvm: {why}; use --accel tcg (emulated) or --accel auto")
        if not cfg.cpus_auto:
            check_cpus(cfg.cpus, cfg.accel, "--vm-cpus ")

    def fit_cpus(self, reqs: list[probe.ProbeRequest]) -> None:
        """Without --vm-cpus (or cpus=): the guests' CPUs for the whole run,
        before its first boot: one when every process of it (both arms of
        an `ab`) runs on one CPU, else two (vcpus.cpus_needed). Once."""
        if self.cfg.cpus_auto and not self.cfg.cpus_why:
            self.cfg.cpus, why = cpus_needed(reqs)
            try:
                check_cpus(self.cfg.cpus, self.cfg.accel, "--vm-cpus ")
            except UsageError as e:
                raise UsageError(f"{why}, so its guests need {self.cfg.cpus} CPUs: {e}") from None
            self.cfg.cpus_why = why

    def plan_rounds(self, rounds: int) -> None:
        """The most rounds the run plans (its processes per variant): with
        one, each counting boot is its machine's only one, so none is saved
        for a restore (restore.Snapshots.once). A round run again (a hung
        boot, a rerun) boots fresh."""
        if self.snaps is not None:
            self.snaps.once = rounds <= 1

    def check_machine_param(self, key: str, value: str) -> None:
        """kernel=PATH or cmdline=ARGS of a variant (spec.expand): UsageError if wrong."""
        if key == "kernel":
            self.guest_arch_of(check_kernel(value, "kernel="), "kernel=")
        else:
            check_cmdline(value, "cmdline=")

    # -- which machine a request boots --
    def machine_of(self, req: probe.ProbeRequest) -> Machine:
        given = dict(getattr(req, "machine", ()) or ())
        kernel = given.get("kernel")
        if kernel is None:
            if self.default is None:
                raise UsageError("no kernel to boot: give --kernel PATH, or kernel= in the SPEC or in --a/--b")
            m = Machine(self.default.kernel, check_cmdline(given.get("cmdline", self.default.cmdline), "cmdline="))
        else:
            m = Machine(check_kernel(kernel, "kernel="), check_cmdline(given.get("cmdline", self.default_cmdline),
                                                                       "cmdline="))
        if (m.kernel, m.cmdline) not in self._fits:   # before any boot: the kernel would cut a longer one
            self.guest_arch_of(m.kernel, "kernel=" if kernel else "--kernel ")
            check_fits(m.kernel, m.cmdline, len(base_cmdline(m.arch)) + MACHINE_PARAMS_MAX,
                       "cmdline=" if "cmdline" in given else "--kernel-cmdline")
            self._fits.add((m.kernel, m.cmdline))
        return m

    def sha(self, kernel: Path) -> str:
        return self.choice.sha(kernel)

    def counts_by_emulator(self) -> bool:
        """The guest's instructions are counted by QEMU's plugin: its boots run
        under TCG (--accel tcg, or auto where KVM cannot be used), in an
        x86_64 or arm64 guest (the plugin knows their window markers,
        probe/marker.h; it classifies x86 instructions only, so an arm64
        guest's costly classes are not counted, its instructions are)."""
        if self.host_arch() not in ("x86_64", "aarch64"):
            return False
        if self.host_arch() != probe.host_arch():
            return True   # another architecture's guest: always under TCG (KVM runs its host's only)
        return self.cfg.accel == "tcg" or (self.cfg.accel == "auto" and host.kvm_usable() is not None)

    def _boot(self, m: Machine, cmds, timeout: float, on_frame=None, what: str = "",
              files: dict[str, Path] | None = None, cfg: VmConfig | None = None,
              stage: str = "run") -> tuple[Boot, str, str]:
        """A supervised boot (on `cfg`, else the target's), a hung one
        retried (supervise.retried) once this kernel has reached the init in
        this session; told to OPCOST_VM_TALLY (supervise.tally) with its
        `stage` (preflight or run) and whether it ended without a boot."""
        got: list = []
        hangs: list = []

        def once(fixed_limit: bool) -> Boot:
            got[:] = supervised_boot(cfg or self.cfg, self.choice, m, cmds, timeout, on_frame, what, files,
                                     self.boots, fixed_limit, self.snaps)
            return got[0]

        def hung(e: Exception) -> str | None:
            hangs.append(e)
            return self._hung(m, e)

        booted = any(p["kernel"] == str(m.kernel) for p in self.boots)
        try:
            b = retried(once, booted, hung)
        except Exception as e:
            tally(qemu_for((cfg or self.cfg).qemu, m.arch), stage, len(hangs), e)
            raise
        tally(qemu_for((cfg or self.cfg).qemu, m.arch), stage, len(hangs), None, b.boot_s)
        _, accel, machine_type = got
        self.boots.append({"kernel": str(m.kernel), "boot_s": b.boot_s, "wall_s": b.wall_s, "accel": accel,
                           "machine": machine_type, "retries": len(b.retries),
                           "restored": (b.restore or {}).get("way") == "restored"})
        return b, accel, machine_type

    def _hung(self, m: Machine, e: Exception) -> str | None:
        """A boot of `m` hung: counted per machine type; a second hang of
        microvm under --vm-machine auto gives it up for pc for the rest of
        the session (and remembers it). What was given up, or None."""
        key = (self.sha(m.kernel), getattr(e, "accel", ""), getattr(e, "machine_type", ""))
        self.hangs[key] = self.hangs.get(key, 0) + 1
        if key[2] == "microvm" and self.cfg.machine == "auto" and self.hangs[key] >= 2:
            self.choice.machine_found(m, key[1], "pc", "microvm hung twice in one session")
            return "microvm hung twice in this session: pc from now on"
        return None

    def _record(self, m: Machine, b: Boot, accel: str, machine_type: str) -> dict:
        return {"kernel": str(m.kernel), "kernel_sha256": self.sha(m.kernel), "cmdline": m.cmdline, "arch": m.arch,
                "guest": b.facts, "accel": accel, "accel_why": self.choice.accel_for(m)[1], "machine": machine_type,
                "machine_why": self.choice.machine_for(m, accel)[1], "qemu": self.choice.qemu_version(m.arch),
                "qemu_argv": b.argv, "vcpus": {str(k): v for k, v in b.vcpus.items()}, "pinning": b.pinning,
                "boot_s": round(b.boot_s or 0, 3), "wall_s": round(b.wall_s, 3), "retries": b.retries,
                "entry": b.entry, "restore": b.restore, "cpus": self.cfg.cpus, "cpus_why": self.cfg.cpus_said(),
                "host_kernel": os.uname().release, "host_hypervisor": host.hypervisor_flag()}

    # -- the probe's protocol --
    def batch_key(self, req: probe.ProbeRequest) -> tuple:
        """Requests with one key run in one boot (runner: one boot per machine per round)."""
        m = self.machine_of(req)
        return (m.kernel, m.cmdline)


def check_cpus(cpus: int, accel: str, name: str) -> None:
    """Under TCG (asked, or auto without KVM) no more guest CPUs than opcost
    may use: each is a host thread that must run for the guest to boot (64
    on 2 host CPUs hang the boot). UsageError naming the option as given."""
    host_cpus = len(os.sched_getaffinity(0))
    if cpus > host_cpus and (accel == "tcg" or (accel == "auto" and host.kvm_usable())):
        raise UsageError(f"{name}{cpus}: opcost may use {host_cpus} host CPU(s) here, and under TCG each guest CPU "
                         f"is a host thread that must run for the guest to boot; give {name}{host_cpus} or fewer")


def open_vm(kernel: str | None = None, cmdline: str = "", cpus: int | None = None, mem_mib: int | None = None,
            procs: int | None = None, accel: str = "auto", allow_emulated: bool = False,
            machine: str = "auto", cpu_model: str = "", restore: str = "auto") -> VmTarget:
    """The vm target (targets.open_target's opener, from --kernel and the
    --vm-* options, vm_options.from_args, or from a vm: spec): `kernel` is
    the machine of a variant that names no kernel= (None: every variant names
    one). None for a number: its default."""
    cmdline = check_cmdline(cmdline or "")
    default = Machine(check_kernel(kernel), cmdline) if kernel else None
    cfg = VmConfig(qemu=os.environ.get("OPCOST_QEMU") or QEMU, cpus=cpus or AUTO_CPUS, cpus_auto=not cpus,
                   mem_mib=mem_mib or 512, accel=accel, allow_emulated=allow_emulated, procs=procs or 1, machine=machine,
                   cpu_model=check_cpu_model(cpu_model), restore=restore)
    return VmTarget(cfg, default, cmdline)


def check_cpu_model(model: str) -> str:
    """--vm-cpu MODEL: a QEMU CPU model name (letters, digits, - _ . and
    QEMU's ,feature=on|off / ,+feature forms); "" is the default."""
    if model and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*(,[A-Za-z0-9_.\-+=]+)*", model):
        raise UsageError(f"--vm-cpu {printable(model)!r}: not a QEMU CPU model; give a name such as Skylake-Server, "
                         "EPYC, max (TCG) or host (KVM); `qemu-system-x86_64 -cpu help` lists them")
    return model


def open_vm_spec(spec: str) -> VmTarget:
    """A vm target from a target spec, for open_target's registry:
    `vm:PATH[?cpus=N&mem=MiB&accel=kvm|tcg|auto&machine=microvm|pc|auto&cmdline=ARGS]` (the cmdline
    URL-encoded). UsageError when a part is wrong."""
    valid = ("cpus", "mem", "accel", "machine", "cmdline")
    u = urlsplit(spec)
    if u.scheme != "vm" or not u.path:
        raise UsageError(f"target {spec!r}: write "
                         "vm:PATH[?cpus=N&mem=MiB&accel=kvm|tcg|auto&machine=microvm|pc|auto&cmdline=ARGS]")
    pairs = parse_qsl(u.query, keep_blank_values=True)
    keys = [k for k, _ in pairs]
    unknown = set(keys) - set(valid)
    if unknown:
        raise UsageError(f"target {spec!r}: unknown {printable(', '.join(sorted(unknown)))}; "
                         f"valid: {', '.join(valid)}")
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise UsageError(f"target {spec!r}: {', '.join(twice)} given more than once; give each key once")
    q = dict(pairs)
    try:
        cpus, mem = int(q.get("cpus", 0)), int(q.get("mem", 512))
    except ValueError:
        raise UsageError(f"target {spec!r}: cpus and mem are integers") from None
    if "cpus" in q and cpus < 1:
        raise UsageError(f"target {spec!r}: cpus={cpus}: a guest has at least one CPU; give cpus=1 or more, "
                         "or leave cpus= out (one CPU when every benchmark runs on one, else two)")
    for key, valid_values in (("accel", ACCELS), ("machine", MACHINES)):
        if key in q and q[key] not in valid_values:
            raise UsageError(f"target {spec!r}: {key}={printable(q[key])}: valid: {', '.join(valid_values)}")
    check_kernel(u.path, "vm:")
    if "cpus" in q:
        check_cpus(cpus, q.get("accel", "auto"), f"target {spec!r}: cpus=")
    return open_vm(u.path, check_cmdline(q.get("cmdline", ""), "cmdline="), cpus or None, mem,
                   accel=q.get("accel", "auto"), machine=q.get("machine", "auto"))
