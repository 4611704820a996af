#!/usr/bin/env python3
"""Where a vm-target boot's time goes, per machine type: QEMU started with
opcost's own arguments (targets/vm/qemu.qemu_argv), once with a bare init
(a static program that powers off at once: the floor of this kernel and
these QEMU flags) and once with opcost's init running an empty job (its
first line is what a run waits for before the first sample).

Two ways, interleaved boot by boot (the machine's load falls on both):
`before`, the bzImage without the parameters opcost adds for speed (as
opcost booted before issue 39), and `now`, as opcost boots today.

Per boot, host side: QEMU start to the init's first data-port line
(`init`, opcost's init only) and to QEMU's exit (`exit`). Kernel side, from
the console's printk timestamps (the boot is made with `quiet` dropped, so
these boots are a little slower than opcost's; the host figures of the
quiet boots are the ones to compare):

  pre-kernel  firmware, the bzImage's decompression (host time to the
              init minus the kernel's own time to `Run /init`)
  early       kernel start to `smp: Bringing up secondary CPUs`
  smp         SMP bring-up (to `smp: Brought up`)
  initcalls   device probing and the other initcalls (to `Run /init`)

    python3 benchmarks/vm_boot_phases.py [BOOTS] [KERNEL] [--machines microvm,pc] [--cpus N]


Report only: the figures depend on the machine and its load (printed)."""

from __future__ import annotations

import argparse
import os
import re
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

BARE_INIT = r"""
#include <sys/reboot.h>
#include <unistd.h>
int main(void) { write(1, "", 0); reboot(RB_POWER_OFF); reboot(RB_AUTOBOOT); return 0; }
"""
STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)")
MARKS = {"smp_start": "smp: Bringing up secondary CPUs", "smp_end": "smp: Brought up",
         "run_init": "Run /init as init process"}


def bare_init(d: str) -> Path:
    src, exe = Path(d) / "bare.c", Path(d) / "bare-init"
    src.write_text(BARE_INIT)
    subprocess.run(["cc", "-static", "-Os", "-o", str(exe), str(src)], check=True)
    return exe


def one_boot(argv_of, image: bytes, verbose: bool) -> dict:
    """QEMU with this initramfs: host seconds to the first data line and to
    exit; the console's printk marks when `verbose`."""
    initrd = os.memfd_create("initrd", 0)
    os.write(initrd, image)
    con_r, con_w = os.pipe()
    argv = argv_of(initrd, con_w, verbose)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            pass_fds=(initrd, con_w))
    os.close(con_w)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "data")
    sel.register(con_r, selectors.EVENT_READ, "console")
    out: dict = {}
    console = b""
    open_n = 2
    while open_n:
        if time.monotonic() - t0 > 300:
            proc.kill()
            out["hung"] = True
            break
        for key, _ in sel.select(timeout=1):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_n -= 1
            elif key.data == "data" and "init" not in out:
                out["init"] = time.monotonic() - t0
            elif key.data == "console":
                console += chunk
    proc.wait()
    out["exit"] = time.monotonic() - t0
    os.close(con_r)
    os.close(initrd)
    for line in console.decode(errors="replace").splitlines():
        m = STAMP.match(line.strip("\r"))
        if m:
            for k, text in MARKS.items():
                if text in m.group(2) and k not in out:
                    out[k] = float(m.group(1))
    return out


def fmt(xs: list) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):6.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main(argv: list[str]) -> int:
    import kernels
    from opcost import probe
    from opcost.targets.vm.clock import machine_cmdline
    from opcost.targets.vm.initramfs import initramfs, job_text, vminit_path
    from opcost.targets.vm.qemu import Machine, VmConfig, qemu_argv
    from opcost.targets.vm.supervise import entry_kernel

    ap = argparse.ArgumentParser()
    ap.add_argument("boots", nargs="?", type=int, default=3)
    ap.add_argument("kernel", nargs="?")
    ap.add_argument("--machines", default="microvm,pc")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--cmdline", default="", help="kernel parameters added to opcost's")
    a = ap.parse_args(argv)
    kernel = Path(a.kernel or kernels.fetch(kernels.PACKAGES[0]))
    cfg = VmConfig(qemu=os.environ.get("OPCOST_QEMU") or VmConfig.qemu, cpus=a.cpus, accel="tcg")
    # before: the bzImage, without the parameters opcost added for speed; now: as opcost boots today
    ways = {"before": (kernel, ("cryptomgr.notests",)), "now": (entry_kernel(kernel, "tcg")[0], ())}
    load0 = os.getloadavg()[0]
    rows: dict[tuple, tuple[list, list]] = {}
    with tempfile.TemporaryDirectory(prefix="opcost-boot-phases-") as d:
        images = {"bare": initramfs(b"", bare_init(d), probe.probe_path(probe.host_arch())),
                  "opcost": initramfs(job_text([]), vminit_path(), probe.probe_path(probe.host_arch()))}
        for _ in range(a.boots):   # interleaved: the machine's load falls on every configuration alike
            for mt in a.machines.split(","):
                for way, (k, drop) in ways.items():
                    def argv_of(initrd: int, con: int, verbose: bool, mt: str = mt, k: Path = k,
                                drop: tuple = drop) -> list[str]:
                        av = qemu_argv(cfg, Machine(k, a.cmdline), "tcg", mt, initrd, con, 0,
                                       machine_cmdline(mt, "tcg"))
                        j = [n for n, x in enumerate(av) if x.startswith("socket,id=qmp")][0]   # no QMP, no -S
                        av = [x for n, x in enumerate(av) if n not in (j - 1, j, j + 1, j + 2) and x != "-S"]
                        i = av.index("-append") + 1
                        av[i] = " ".join(w for w in av[i].split() if w not in drop)
                        if verbose:
                            av[i] = av[i].replace(" quiet", "") + " printk.time=1"
                        return av

                    for which, image in images.items():
                        q, loud = rows.setdefault((mt, way, which), ([], []))
                        q.append(one_boot(argv_of, image, False))
                        loud.append(one_boot(argv_of, image, True))
    print(f"kernel {kernel}; now: -kernel {entry_kernel(kernel, 'tcg')[1]}; TCG, {a.cpus} vCPU(s), {a.boots} boots "
          f"each, interleaved; load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
          f"({os.cpu_count()} host CPUs)")
    print("median (min-max), seconds")
    print(f"{'machine':8} {'':6} {'init':7} {'to init':>18} {'to exit':>18} | {'pre-kernel':>18} {'early':>18} "
          f"{'smp':>18} {'initcalls':>18}")
    for (mt, way, which), (quiet, loud) in rows.items():
        end = "exit" if which == "bare" else "init"   # the bare init has no data line: QEMU's exit is its end
        pre = [q[end] - lo["run_init"] for q, lo in zip(quiet, loud) if end in q and "run_init" in lo]
        early = [lo.get("smp_start") for lo in loud]
        smp = [lo["smp_end"] - lo["smp_start"] for lo in loud if "smp_end" in lo and "smp_start" in lo]
        ic = [lo["run_init"] - lo.get("smp_end", 0) for lo in loud if "run_init" in lo]
        print(f"{mt:8} {way:6} {which:7} {fmt([q.get('init') for q in quiet]):>18} "
              f"{fmt([q['exit'] for q in quiet]):>18} | {fmt(pre):>18} {fmt(early):>18} {fmt(smp):>18} "
              f"{fmt(ic):>18}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
