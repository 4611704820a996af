"""This machine: its probes (probe.find_probe), its affinity mask, its /sys
(env.collect). The probe's table and the placements of CPU pairs are asked
once per target (`session.local_target()` makes one per process).

While a probe measures, the front end keeps off its CPUs: when this
process may run on CPUs the measurement does not use, all its threads are
pinned to those for the duration; when it may not (one CPU, or a two-party
benchmark spanning every CPU), the probe holds its samples until its batches
are done (`--hold`) and the front end is woken about once a second at most.
OPCOST_QUIET=0 turns both off (the validation compares with and without)."""

from __future__ import annotations

import contextlib
import functools
import dataclasses
import os
from typing import Iterator

from .. import probe
from .. import pmu
from ..env import collect


def _tids() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def _pin_all(cpus: set[int]) -> None:
    for tid in _tids():
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass   # a thread that just ended


def _cpus_of(req: probe.ProbeRequest) -> set[int]:
    return {int(c) for c in (req.cpus or "").split(",") if c.strip().isdigit()}


class LocalTarget:
    name = "local"

    def __init__(self) -> None:
        self._tables: dict[str, dict] = {}
        self._placements: dict[tuple, str] = {}
        self._own = set(os.sched_getaffinity(0))   # where this process may run

    @contextlib.contextmanager
    def _quiet(self, reqs: list[probe.ProbeRequest]) -> Iterator[tuple[bool, str, object]]:
        """(hold the samples?, what the front end did, what to call once the
        probes exist) while these requests run; the front end's own CPUs are
        given back after."""
        if os.environ.get("OPCOST_QUIET", "1") == "0":
            yield False, "not kept off the measuring CPUs (OPCOST_QUIET=0)", None
            return
        measuring = set().union(*(_cpus_of(r) for r in reqs))
        spare = self._own - measuring
        if not spare or not measuring:
            yield True, "samples held by the probe (no CPU free of the measurement)", None
            return
        try:
            yield False, "pinned to CPU " + ",".join(map(str, sorted(spare))), lambda: _pin_all(spare)
        finally:
            _pin_all(self._own)

    def front_end_apart(self, reqs: list[probe.ProbeRequest]) -> bool:
        """Whether the front end keeps off every CPU these requests measure
        on (so work of its own, a background import, cannot disturb them)."""
        measuring = set().union(*(_cpus_of(r) for r in reqs))
        return os.environ.get("OPCOST_QUIET", "1") != "0" and bool(measuring) and bool(self._own - measuring)

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

    def pmu_catalog(self):
        """This machine's named PMU events (sysfs, perf list), read once."""
        if not hasattr(self, "_catalog"):
            self._catalog = pmu.load_local()
        return self._catalog

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

    def wrap(self, argv: list[str]) -> list[str]:
        """The command line that starts one local probe process, given the
        probe's own: a target that runs the probe here under something
        (nice, taskset, a container) subclasses LocalTarget and overrides
        this alone; check, run_process and run_concurrent go through it."""
        return argv

    def check(self, req: probe.ProbeRequest, timeout: float = 30) -> str | None:
        return probe.check(req, timeout, wrap=self.wrap)

    def run_process(self, req: probe.ProbeRequest, timeout: float, on_line=None) -> probe.ProcessResult:
        with self._quiet([req]) as (hold, how, pin):
            res = probe.run_process(dataclasses.replace(req, hold=hold and not req.program), timeout, on_line,
                                    after_start=pin, wrap=self.wrap)
        res.front_end = how
        return res

    def run_concurrent(self, reqs: list[probe.ProbeRequest], timeout: float, on_line=None) -> list:
        with self._quiet(reqs) as (hold, how, pin):
            out = probe.run_concurrent([dataclasses.replace(r, hold=hold and not r.program) for r in reqs],
                                       timeout, on_line, after_start=pin, wrap=self.wrap)
        for r in out:
            if isinstance(r, probe.ProcessResult):
                r.front_end = how
        return out


@functools.cache
def local_target() -> LocalTarget:
    """This machine, one per process, so its probe's table and CPU
    placements are asked once (targets.local_target)."""
    return LocalTarget()
