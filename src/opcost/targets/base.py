"""The interface of a machine the probe runs on. Everything above it (spec,
runner, session, the commands) asks the target, never this process's own
machine: over SSH the table, the CPUs and the environment are the remote
one's, and so is every probe process.

Another target (the fleet's SSH one) is a class with these methods; it
needs no base class. The probe's protocol (`probe.ProbeRequest` in,
`probe.ProcessResult` out, errors as ProbeError, ProbeTimeout, UsageError,
KeyboardInterrupt let through) is the same wherever it runs.
"""

from __future__ import annotations

from typing import Callable, Optional, Protocol, runtime_checkable

from ..probe import ProbeRequest, ProcessResult

OnLine = Optional[Callable[[dict], None]]


@runtime_checkable
class Target(Protocol):
    name: str                      # how it is shown: "local", a host name

    def host_arch(self) -> str:
        """Its own architecture: what arch= defaults to."""
        ...

    def arches(self) -> list[str]:
        """Architectures with a probe that runs there (arch= choices)."""
        ...

    def benchmark_table(self, arch: str | None = None) -> dict:
        """`opcost-probe list --json` of the probe for `arch` (default: host_arch)."""
        ...

    def placement_of(self, a: int, b: int, arch: str | None = None) -> str:
        """The placement class (same|smt|core|llc|numa) of a CPU pair there."""
        ...

    def allowed_cpus(self) -> list[int]:
        """The CPUs a probe may be pinned to, ascending."""
        ...

    def default_cpu(self) -> int:
        """Where a variant that names no CPU runs."""
        ...

    def pmu_catalog(self):
        """Its named PMU events (pmu.Catalog: sysfs PMUs, perf list), for
        `--counters ls_dispatch.ld_dispatch`: the names and encodings are the
        measuring machine's, never this process's."""
        ...

    def cpuid(self, arch: str | None = None) -> dict | None:
        """`opcost-probe cpuid` (CPUID, XCR0...), or None when it cannot be had."""
        ...

    def probe_version(self, arch: str | None = None) -> str | None:
        ...

    def env(self) -> dict:
        """The environment document stored with a run (env.collect's form)."""
        ...

    def check(self, req: ProbeRequest, timeout: float = 30) -> str | None:
        """Preflight: None if `req` can run there, the reason if it cannot
        be measured there; UsageError if the input is wrong."""
        ...

    def run_process(self, req: ProbeRequest, timeout: float, on_line: OnLine = None) -> ProcessResult:
        """One probe process to its end; `on_line` sees every line."""
        ...

    def run_concurrent(self, reqs: list[ProbeRequest], timeout: float, on_line: OnLine = None) -> list:
        """Every request at once: per request, in order, a ProcessResult or
        the ProbeError/ProbeTimeout/UsageError it ended with."""
        ...
