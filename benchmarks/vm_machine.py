#!/usr/bin/env python3
"""Boot time by QEMU machine type: the same kernel booted on `microvm` and
on `pc`, interleaved in a random order within each pair (so drift and the
machine's load fall on both), each boot running only `opcost-probe cpuid`.
Reports per machine the median boot time (QEMU start to the init's first
line) and to power-off, and their ratio microvm/pc from the same run.

    python3 benchmarks/vm_machine.py [PAIRS] [KERNEL] [--accel tcg|kvm] [--cpus N]

Default: 4 pairs, Debian's 6.1.0-50 cloud kernel (tests/kernels.py), TCG,
2 guest CPUs. Report only: the figures depend on the machine and its load."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))


def main(argv: list[str]) -> int:
    import kernels
    from opcost.targets import vm

    ap = argparse.ArgumentParser()
    ap.add_argument("pairs", nargs="?", type=int, default=4)
    ap.add_argument("kernel", nargs="?")
    ap.add_argument("--accel", default="tcg", choices=("tcg", "kvm"))
    ap.add_argument("--cpus", type=int, default=2)
    a = ap.parse_args(argv)
    kernel = Path(a.kernel or kernels.fetch(kernels.PACKAGES[0]))
    cfg = vm.VmConfig(cpus=a.cpus, mem_mib=256, accel=a.accel)
    m = vm.Machine(kernel)
    rng = random.Random(1)
    got: dict[str, list[tuple[float, float]]] = {"microvm": [], "pc": []}
    for _ in range(a.pairs):
        order = ["microvm", "pc"]
        rng.shuffle(order)
        for mt in order:
            b = vm.boot(cfg, m, [(["cpuid"], {})], accel=a.accel, machine_type=mt, boot_limit=120, timeout=180)
            got[mt].append((b.boot_s or 0.0, b.wall_s))
            print(f"{mt:8s} boot {b.boot_s:6.2f} s  to power-off {b.wall_s:6.2f} s  "
                  f"(clocksource {b.facts.get('clocksource')}, CPUs {b.facts.get('cpus_online')})", flush=True)
    med = {mt: (statistics.median(x for x, _ in v), statistics.median(y for _, y in v)) for mt, v in got.items()}
    print(f"kernel {kernel}, accel {a.accel}, {a.cpus} guest CPUs, {a.pairs} pairs, "
          f"load average {os.getloadavg()[0]:.1f}")
    for mt, (bt, wt) in med.items():
        print(f"{mt:8s} median boot {bt:.2f} s, to power-off {wt:.2f} s")
    print(f"microvm/pc: boot {med['microvm'][0] / med['pc'][0]:.2f}, to power-off "
          f"{med['microvm'][1] / med['pc'][1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
