"""This machine: its probes (probe.find_probe), its affinity mask, its /sys
(env.collect). The probe's table and the placements of CPU pairs are asked
once per target (`session.local_target()` makes one per process)."""

from __future__ import annotations

import os

from .. import probe
from ..env import collect


class LocalTarget:
    name = "local"

    def __init__(self) -> None:
        self._tables: dict[str, dict] = {}
        self._placements: dict[tuple, str] = {}

    def host_arch(self) -> str:
        return probe.host_arch()

    def arches(self) -> list[str]:
        return probe.installed_arches()

    def benchmark_table(self, arch: str | None = None) -> dict:
        arch = arch or probe.host_arch()
        if arch not in self._tables:
            self._tables[arch] = probe.benchmark_table(arch)
        return self._tables[arch]

    def placement_of(self, a: int, b: int, arch: str | None = None) -> str:
        key = (arch or probe.host_arch(), a, b)
        if key not in self._placements:
            self._placements[key] = probe.placement_of(a, b, arch)
        return self._placements[key]

    def allowed_cpus(self) -> list[int]:
        return sorted(os.sched_getaffinity(0))

    def default_cpu(self) -> int:
        # The last CPU: CPU 0 usually takes more interrupts and housekeeping.
        return self.allowed_cpus()[-1]

    def cpuid(self, arch: str | None = None) -> dict | None:
        return probe.cpuid(arch)

    def probe_version(self, arch: str | None = None) -> str | None:
        return probe.probe_version(arch)

    def env(self) -> dict:
        """This machine, with what only its probe can tell (CPUID, XCR0, version)."""
        version = self.probe_version()
        info = {"probe_version": version, "compiler": version.split(" ", 3)[-1] if version else None}
        return collect(self.cpuid(), info)

    def check(self, req: probe.ProbeRequest, timeout: float = 30) -> str | None:
        return probe.check(req, timeout)

    def run_process(self, req: probe.ProbeRequest, timeout: float, on_line=None) -> probe.ProcessResult:
        return probe.run_process(req, timeout, on_line)

    def run_concurrent(self, reqs: list[probe.ProbeRequest], timeout: float, on_line=None) -> list:
        return probe.run_concurrent(reqs, timeout, on_line)
