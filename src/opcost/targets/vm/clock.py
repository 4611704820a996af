"""The guest's clock under TCG on microvm: no HPET, PM timer or kvmclock
there, so the kernel is told the TSC's frequency, the host's as the static
probe calibrates it."""

from __future__ import annotations

import contextlib
import json
import subprocess

from ... import probe
from ...errors import ProbeError, UsageError
from .host import host_tsc_invariant

_TSC_KHZ: list[int | None] = []


def host_tsc_khz() -> int | None:
    """The host's TSC frequency in kHz as the static probe calibrates it
    (against CLOCK_MONOTONIC_RAW, 20 ms; once per opcost process), or None."""
    if not _TSC_KHZ:
        hz = None
        with contextlib.suppress(OSError, ValueError, IndexError, subprocess.TimeoutExpired, ProbeError, UsageError):
            cp = subprocess.run([str(probe.probe_path(probe.host_arch())), "run", "insn.chain", "--samples", "1",
                                 "--warmup", "0", "--iters", "1"], capture_output=True, text=True, timeout=30)
            hz = float(json.loads(cp.stdout.splitlines()[0]).get("tsc_hz") or 0)
        _TSC_KHZ.append(round(hz / 1000) if hz and hz > 1e6 else None)
    return _TSC_KHZ[0]


def machine_cmdline(machine_type: str, accel: str) -> str:
    """Kernel parameters the machine type needs: microvm under TCG has no
    reference clock (no HPET, PM timer or kvmclock), so the kernel is given
    the TSC's frequency, which under TCG is the host's (QEMU reads the host's
    TSC for the guest's). With an invariant host TSC also `tsc=reliable`:
    the kernel's only other clock there is jiffies from the emulated timer,
    which lags whenever QEMU does, and its watchdog would mark the TSC
    unstable for that and fall back to jiffies (4 ms resolution)."""
    if machine_type == "microvm" and accel == "tcg":
        khz = host_tsc_khz()
        if not khz:
            return ""
        return f"tsc_early_khz={khz}" + (" tsc=reliable" if host_tsc_invariant() else "")
    return ""
