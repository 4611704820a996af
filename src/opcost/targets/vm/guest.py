"""What the guest is, as the vm target answers it: its benchmark table,
CPUs and placements from the same static probe it runs, the CPUID its first
boot saw, and the environment every run records (the host's, the guest's
CPU, QEMU and every machine booted)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pathlib import Path

from ... import probe
from ...errors import UsageError
from .kvmsay import accel_line
from . import host
from .arch import DEFAULT_ARCH, GUEST_ARCHES, kernel_arch
from .qemu import check_qemu
from ...env import collect
from ..local import local_target

if TYPE_CHECKING:
    from .choice import Choice
    from .qemu import VmConfig


class VmGuest:
    """The part of VmTarget that describes the guest (targets.base.Target's
    questions other than running the probe). Needs `cfg`, `choice` and
    `machines` (set by VmTarget)."""

    cfg: VmConfig
    choice: Choice
    machines: dict
    arch: str | None = None   # the guests' architecture: the first kernel image's (guest_arch_of)
    _local = None

    # -- what the guest is (answered from the same static probe it runs) --
    @property
    def local(self):
        if self._local is None:
            self._local = local_target()
        return self._local

    def guest_arch_of(self, kernel: Path, what: str) -> str:
        """The architecture of the guest `kernel` boots (read from the image,
        never asked); the run's from its first kernel on. UsageError when a
        kernel of another architecture than the run's is given (their probes,
        and so their benchmarks, differ: one architecture a run), or when its
        QEMU is not installed."""
        arch = kernel_arch(kernel)
        if self.arch is None:
            check_qemu(self.cfg.qemu, arch)
            if self.cfg.accel == "kvm" and GUEST_ARCHES[arch].kvm_host != probe.host_arch():
                raise UsageError(f"--accel kvm: {what}{kernel} is an {arch} kernel and this host is "
                                 f"{probe.host_arch()}: KVM runs its host's architecture only; use --accel tcg "
                                 "(emulated) or --accel auto")
            if GUEST_ARCHES[arch].machine and self.cfg.machine != "auto":
                raise UsageError(f"--vm-machine {self.cfg.machine}: {what}{kernel} is an {arch} kernel, which boots "
                                 f"on QEMU's {GUEST_ARCHES[arch].machine} machine only; leave --vm-machine out (auto)")
            self.arch = arch
        elif arch != self.arch:
            raise UsageError(f"{what}{kernel} is an {arch} kernel and this run's other kernels are {self.arch}: "
                             f"one run boots guests of one architecture; give {self.arch} kernels, or measure the "
                             f"{arch} one in a run of its own")
        return arch

    def host_arch(self) -> str:
        """The guests' architecture (the probe's there): the first kernel's."""
        return self.arch or DEFAULT_ARCH

    def arches(self) -> list[str]:
        return [self.host_arch()]

    def benchmark_table(self, arch: str | None = None) -> dict:
        if arch not in (None, self.host_arch()):
            raise UsageError(f"arch={arch}: the vm target runs the {self.host_arch()} probe only (its guests' "
                             "architecture, read from the kernel image)")
        return self.local.benchmark_table(self.host_arch())

    def placement_of(self, a: int, b: int, arch: str | None = None) -> str:
        # -smp N,sockets=1,cores=N,threads=1: distinct guest CPUs are cores of one socket
        return "same" if a == b else "core"

    def allowed_cpus(self) -> list[int]:
        return list(range(self.cfg.cpus))

    def default_cpu(self) -> int:
        # the last guest CPU; without --vm-cpus CPU 0, the one a guest always has (a run that needs no
        # other then boots one vCPU: VmTarget.fit_cpus)
        return 0 if self.cfg.cpus_auto else self.cfg.cpus - 1

    def pmu_catalog(self):
        raise UsageError("named PMU events are not available in the vm target (the guest has no PMU here); "
                         "count software events, e.g. --counters context-switches,task-clock")

    def cpuid(self, arch: str | None = None) -> dict | None:
        for m in self.machines.values():
            if m.get("cpuid"):
                return m["cpuid"]
        return None

    def probe_version(self, arch: str | None = None) -> str | None:
        return self.local.probe_version(self.host_arch())

    def accel_line(self) -> str | None:
        """Whether KVM is used, and if not why (kvmsay.py): the run's first line, after the preflight."""
        return accel_line(self.machines, self.cfg.allow_emulated)

    def qemu_version(self) -> str | None:
        return self.choice.qemu_version(self.host_arch())

    def env(self) -> dict:
        """The host's environment, the guest's CPUID/XCR0 as its first boot
        saw them, and a `vm` field: QEMU, acceleration, every machine booted."""
        version = self.probe_version()
        info = {"probe_version": version, "compiler": version.split(" ", 3)[-1] if version else None}
        env = collect(self.local.cpuid(), info)
        cpuid = self.cpuid()
        if cpuid is not None:
            env["guest_cpuid"] = {"value": cpuid, "source": "opcost-probe cpuid in the guest (preflight boot)"}
            # compare refuses runs whose guests saw different CPU models (commands/compare.py)
            env["guest_cpu_model"] = {"value": cpuid.get("brand"), "source": "CPUID brand string in the guest"}
        # compare refuses runs whose guests had different CPU counts too: the kernel sizes its per-CPU
        # caches by them (mem.pagefault: docs/kernels.md, "One vCPU")
        env["guest_cpus"] = {"value": self.cfg.cpus,
                             "source": "QEMU -smp: " + self.cfg.cpus_said()}
        env["vm"] = {"value": {"qemu": self.qemu_version(), "guest_arch": self.host_arch(), "cpus": self.cfg.cpus, "mem_mib": self.cfg.mem_mib,
                               "accel_asked": self.cfg.accel, "machine_asked": self.cfg.machine,
                               "cpu_model": self.cfg.cpu_model or f"default ({GUEST_ARCHES[self.host_arch()].cpu['tcg']} under "
                                                                     "TCG, host under KVM)",
                               "allow_emulated": self.cfg.allow_emulated,
                               "host_hypervisor": host.hypervisor_flag(),
                               "machines": [{"kernel": str(k[0]), "cmdline": k[1], **v}
                                            for k, v in self.machines.items()]},
                     "source": "targets/vm: QEMU and the preflight boot of each kernel"}
        return env
