"""How many CPUs a guest gets when neither --vm-cpus nor `vm:...?cpus=`
says: one when every process of the run runs on one CPU, two otherwise;
and the kernel parameter that keeps a one-CPU x86_64 guest's kernel the
SMP kernel it is on real machines (docs/kernels.md, "One vCPU")."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ... import probe

AUTO_CPUS = 2        # the guest CPUs a run may place its processes on before the count is settled
# Benchmarks that spread their own tasks over every CPU they may use, whatever their placement says:
# (parameter, value) that makes them do so (msg.hackbench: workers_on=all, its default, as hackbench)
SPREADS = {"msg.hackbench": ("workers_on", "all")}
# An x86_64 kernel that finds one CPU at boot patches its locks' `lock` prefixes out (SMP alternatives
# -> UP, arch/x86/kernel/alternative.c): the measured code would not be the SMP kernel's. noreplace-smp
# leaves them (the guest then runs the code a 2-CPU guest runs: docs/kernels.md). arm64 has no such patching.
KEEP_SMP = "noreplace-smp"


def cpus_needed(reqs: list[probe.ProbeRequest]) -> tuple[int, str]:
    """1 and why when every request runs on guest CPU 0 alone (the default
    placement of a run whose CPUs are not settled, guest.default_cpu),
    else 2 and the first request that needs a second (the vm target runs
    no --parallel copies)."""
    for r in reqs:
        if r.cpus not in (None, "0", "0,0"):
            return 2, f"{r.bench} runs on guest CPU(s) {r.cpus}"
        if r.params.get("placement", "same") != "same":   # the probe places the helper on another CPU
            return 2, f"{r.bench} placement={r.params['placement']} puts its helper on another CPU"
        key, value = SPREADS.get(r.bench, ("", None))
        if value is not None and r.params.get(key, value) == value:
            return 2, f"{r.bench} {key}={value} spreads its tasks over every CPU"
    return 1, "every benchmark of the run runs on one CPU"


def smp_cmdline(cpus: int, arch: str) -> str:
    """The kernel parameter a guest of `cpus` CPUs needs so that its kernel
    keeps its SMP code (KEEP_SMP), or ""."""
    return KEEP_SMP if cpus == 1 and arch == "x86_64" else ""
