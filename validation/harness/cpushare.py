"""How much of the CPU a side got, the validation scripts' sign that another
task disturbed a measurement: one program run to its end with the CPU time
of its whole process tree (run_timed), or opcost's own per-batch rusage
(opcost_share). About 1 when nothing else ran on the CPU."""

from __future__ import annotations

import resource
import subprocess
import time

from validation.harness.script import Failure


def run_timed(argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
              preexec_fn=None) -> tuple[subprocess.CompletedProcess, float, float | None]:
    """Run one program to its end, output captured: (completed, wall seconds,
    CPU share). The scripts run one process at a time, so the change in
    RUSAGE_CHILDREN is this program with all its reaped tasks; CPU share is
    that CPU time over the wall time."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                            timeout=timeout, preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired:
        raise Failure(f"{' '.join(argv)}: no answer within {timeout:g} s") from None
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return cp, wall, (cpu / wall if wall > 0 else None)


def opcost_share(samples: list[dict]) -> float | None:
    """CPU time of the measuring side (+ its helper) over wall time, summed
    over opcost's measured batches (the per-thread CPU clock, run_ns, where
    the probe reports it; else getrusage's user+sys)."""
    cpu = wall = 0
    try:
        for s in samples:
            h = s.get("helper") or {}
            # the thread's CPU clock where the probe gives it: getrusage's
            # user+sys is tick-granular (4 ms at HZ=250), which made a 10 ms
            # batch read 0.7-0.9 of its wall time on a quiet CPU
            cpu += s["run_ns"] if "run_ns" in s else s["user_ns"] + s["sys_ns"]
            cpu += h["run_ns"] if "run_ns" in h else h.get("user_ns", 0) + h.get("sys_ns", 0)
            wall += s["wall_ns"]
    except (KeyError, TypeError):
        return None
    return cpu / wall if wall > 0 else None
