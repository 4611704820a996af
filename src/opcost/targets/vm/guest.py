"""What the guest is, as the vm target answers it: its benchmark table,
CPUs and placements from the same static probe it runs, the CPUID its first
boot saw, and the environment every run records (the host's, the guest's
CPU, QEMU and every machine booted)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import UsageError
from .kvmsay import accel_line
from . import host

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
    _local = None

    # -- what the guest is (answered from the same static probe it runs) --
    @property
    def local(self):
        if self._local is None:
            from ..local import local_target

            self._local = local_target()
        return self._local

    def host_arch(self) -> str:
        return "x86_64"

    def arches(self) -> list[str]:
        return ["x86_64"]

    def benchmark_table(self, arch: str | None = None) -> dict:
        if arch not in (None, "x86_64"):
            raise UsageError(f"arch={arch}: the vm target runs the x86_64 probe only")
        return self.local.benchmark_table("x86_64")

    def placement_of(self, a: int, b: int, arch: str | None = None) -> str:
        # -smp N,sockets=1,cores=N,threads=1: distinct guest CPUs are cores of one socket
        return "same" if a == b else "core"

    def allowed_cpus(self) -> list[int]:
        return list(range(self.cfg.cpus))

    def default_cpu(self) -> int:
        return self.cfg.cpus - 1

    def pmu_catalog(self):
        raise UsageError("named PMU events are not available in the vm target (the guest has no PMU here); "
                         "count software events, e.g. --counters context-switches,task-clock")

    def cpuid(self, arch: str | None = None) -> dict | None:
        for m in self.machines.values():
            if m.get("cpuid"):
                return m["cpuid"]
        return None

    def probe_version(self, arch: str | None = None) -> str | None:
        return self.local.probe_version("x86_64")

    def accel_line(self) -> str | None:
        """Whether KVM is used, and if not why (kvmsay.py): the run's first line, after the preflight."""
        return accel_line(self.machines, self.cfg.allow_emulated)

    def qemu_version(self) -> str | None:
        return self.choice.qemu_version()

    def env(self) -> dict:
        """The host's environment, the guest's CPUID/XCR0 as its first boot
        saw them, and a `vm` field: QEMU, acceleration, every machine booted."""
        from ...env import collect

        version = self.probe_version()
        info = {"probe_version": version, "compiler": version.split(" ", 3)[-1] if version else None}
        env = collect(self.local.cpuid(), info)
        cpuid = self.cpuid()
        if cpuid is not None:
            env["guest_cpuid"] = {"value": cpuid, "source": "opcost-probe cpuid in the guest (preflight boot)"}
            # compare refuses runs whose guests saw different CPU models (commands/compare.py)
            env["guest_cpu_model"] = {"value": cpuid.get("brand"), "source": "CPUID brand string in the guest"}
        env["vm"] = {"value": {"qemu": self.qemu_version(), "cpus": self.cfg.cpus, "mem_mib": self.cfg.mem_mib,
                               "accel_asked": self.cfg.accel, "machine_asked": self.cfg.machine,
                               "cpu_model": self.cfg.cpu_model or "default (max under TCG, host under KVM)",
                               "allow_emulated": self.cfg.allow_emulated,
                               "host_hypervisor": host.hypervisor_flag(),
                               "machines": [{"kernel": str(k[0]), "cmdline": k[1], **v}
                                            for k, v in self.machines.items()]},
                     "source": "targets/vm: QEMU and the preflight boot of each kernel"}
        return env
