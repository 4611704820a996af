#!/usr/bin/env python3
"""What the vm target costs: per boot, QEMU start to the init's first line
(boot), to the guest's power-off (wall), and the probe process's own wall
time inside; against the same benchmark run locally, the ratio of wall times
per process (the VM path's whole boot against one local probe process).

    python3 benchmarks/vm_boot.py [BOOTS] [KERNEL]

Default: 3 boots of Debian's 6.1.0-50 cloud kernel (tests/kernels.py), TCG,
syscall.null at the default protocol. Report only: the figures depend on
the machine and its load."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def opcost(*args: str) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.json"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "XDG_DATA_HOME": d}
        t0 = time.monotonic()
        cp = subprocess.run([sys.executable, "-m", "opcost", "run", *args, "--no-store", "--no-progress",
                             "--json", str(out)], env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if cp.returncode != 0:
            raise SystemExit(f"vm_boot.py: opcost run {' '.join(args)} failed: {cp.stderr.strip()}")
        return json.loads(out.read_text()), wall


def main(argv: list[str]) -> int:
    import kernels

    boots = int(argv[0]) if argv else 3
    kernel = argv[1] if len(argv) > 1 else str(kernels.fetch(kernels.PACKAGES[0]))
    local, local_total = opcost("syscall.null", "-p", str(boots))
    vm, vm_total = opcost("syscall.null", "-p", str(boots), "--kernel", kernel, "--accel", "tcg", "--vm-cpus", "1")
    lw = [p["wall_s"] for p in local["results"][0]["processes"]]
    procs = vm["results"][0]["processes"]
    boot = [p["header"]["vm"]["boot_s"] for p in procs]
    wall = [p["header"]["vm"]["wall_s"] for p in procs]
    inner = [p["header"]["vm"]["probe_wall_s"] for p in procs]
    print(f"kernel {kernel} ({procs[0]['header']['vm']['guest']['release']}), accel "
          f"{procs[0]['header']['vm']['accel']}, {boots} boots, syscall.null at the default protocol")
    print(f"boot (QEMU start to the init's first line): median {statistics.median(boot):.2f} s "
          f"(min {min(boot):.2f}, max {max(boot):.2f})")
    print(f"boot to result (QEMU start to power-off): median {statistics.median(wall):.2f} s")
    print(f"the probe process inside the guest: median {statistics.median(inner):.2f} s; "
          f"locally: median {statistics.median(lw):.2f} s")
    print(f"VM path per process against local, wall: {statistics.median(wall) / statistics.median(lw):.1f}x "
          f"(whole runs incl. preflight: {vm_total:.1f} s against {local_total:.1f} s, "
          f"{vm_total / local_total:.1f}x); load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
