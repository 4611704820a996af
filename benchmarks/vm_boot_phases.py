#!/usr/bin/env python3
"""Where a vm-target boot's time goes, per machine type and per way of
booting, the ways interleaved boot by boot (the machine's load falls on
each alike). QEMU is started with opcost's own arguments
(targets/vm/qemu.qemu_argv), TCG.

The ways (--ways, any of):
  issue  the bzImage, without the kernel parameters opcost added for speed
         since (as opcost booted when issue 39 was filed)
  main   the vmlinux at its PVH entry and cryptomgr.notests (issue 39's
         first session), without lpj= and initcall_blacklist=
  now    as opcost boots today: also qemu.TCG_CMDLINE and, on microvm,
         lpj= (the value a first boot of this kernel said, as
         Choice.lpj_for gives it back)

Per machine type and way, two boots each round:
  opcost  opcost's init running `opcost-probe cpuid`, then the probe
          (syscall.null): host seconds from QEMU's start to the init's first
          line (`init`), to the probe's first sample (`sample`: what a run
          waits for) and to QEMU's exit
  kmsg    a bare static init that writes one line, then copies the kernel's
          log (/dev/kmsg, with its timestamps) to the console and powers off:
          the floor of this kernel and these flags (`init`), and the phases
          by the kernel's own clock (the log is read after the boot, so
          printing it costs the boot nothing):
            pre-kernel  QEMU start, firmware or decompression, and the kernel
                        before its clock starts (host time to the init's
                        line minus the kernel's time to `Run /init`)
            early       kernel clock start to `smp: Bringing up secondary CPUs`
            smp         to `smp: Brought up` (with lpj= no delay-loop
                        calibration on the other CPUs)
            initcalls   device probing and the other initcalls (to the first
                        `Freeing unused`)
            late        freeing init memory, the initramfs, to `Run /init`

    python3 benchmarks/vm_boot_phases.py [BOOTS] [KERNEL] [--machines microvm,pc] [--ways issue,main,now]
                                         [--cpus N] [--cmdline ARGS]

Report only: the figures depend on the machine and its load (printed);
compare ways within one run, never across runs."""

from __future__ import annotations

import argparse
import json
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

KMSG_INIT = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <unistd.h>
int main(void) {
	static char buf[8192], out[8400];
	mount("devtmpfs", "/dev", "devtmpfs", 0, 0);
	int d = open("/dev/ttyS1", O_WRONLY | O_NOCTTY);
	if (d < 0) d = open("/dev/console", O_WRONLY | O_NOCTTY);
	if (d >= 0) { write(d, "init\n", 5); close(d); }
	int k = open("/dev/kmsg", O_RDONLY | O_NONBLOCK), c = open("/dev/console", O_WRONLY | O_NOCTTY);
	for (;;) {
		ssize_t n = read(k, buf, sizeof buf - 1);
		if (n < 0) { if (errno == EPIPE) continue; break; }
		buf[n] = 0;
		char *semi = strchr(buf, ';'), *nl;
		unsigned long long us = 0;
		if (!semi) continue;
		sscanf(buf, "%*u,%*u,%llu", &us);
		if ((nl = strchr(semi + 1, '\n'))) *nl = 0;
		int m = snprintf(out, sizeof out, "<[%5llu.%06llu] %s\n", us / 1000000, us % 1000000, semi + 1);
		write(c, out, m);
	}
	reboot(RB_POWER_OFF); reboot(RB_AUTOBOOT); return 0;
}
"""
STAMP = re.compile(r"<\[\s*(\d+\.\d+)\]\s?(.*)")
MARKS = {"smp_start": "smp: Bringing up secondary CPUs", "smp_end": "smp: Brought up",
         "freeing": "Freeing unused", "run_init": "Run /init as init process"}
LPJ = re.compile(r"Calibrating delay loop.*\(lpj=(\d+)\)")
FRAME = re.compile(rb"@OPC \d+ [0-9a-f]{8} (.*)")


def kmsg_init(d: str) -> Path:
    src, exe = Path(d) / "kmsg.c", Path(d) / "kmsg-init"
    src.write_text(KMSG_INIT)
    subprocess.run(["cc", "-static", "-Os", "-o", str(exe), str(src)], check=True)
    return exe


def one_boot(argv: list[str], image: bytes) -> dict:
    """QEMU with this initramfs: host seconds to the first data line, to the
    probe's first sample (opcost's init) and to exit; the kernel's log marks
    (the kmsg init)."""
    initrd = os.memfd_create("initrd", 0)
    os.write(initrd, image)
    con_r, con_w = os.pipe()
    argv = [a.replace("/proc/self/fd/INITRD", f"/proc/self/fd/{initrd}").replace("/proc/self/fd/CONSOLE",
                                                                                   f"/proc/self/fd/{con_w}")
            for a in argv]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            pass_fds=(initrd, con_w))
    os.close(con_w)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "data")
    sel.register(con_r, selectors.EVENT_READ, "console")
    out: dict = {}
    bufs = {"data": b"", "console": b""}
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
                continue
            now = time.monotonic() - t0
            bufs[key.data] += chunk
            if key.data == "data":
                out.setdefault("init", now)
                if "sample" not in out and b'"type":"sample"' in bufs["data"]:
                    out["sample"] = now
    proc.wait()
    out["exit"] = time.monotonic() - t0
    os.close(con_r)
    os.close(initrd)
    for line in bufs["console"].decode(errors="replace").splitlines():
        m = STAMP.search(line)
        if m:
            for k, text in MARKS.items():
                if text in m.group(2) and k not in out:
                    out[k] = float(m.group(1))
            lpj = LPJ.search(m.group(2))
            if lpj:
                out["lpj"] = lpj.group(1)
    return out


def fmt(xs: list) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):5.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main(argv: list[str]) -> int:
    import kernels
    from opcost import probe
    from opcost.targets.vm.clock import machine_cmdline
    from opcost.targets.vm.initramfs import initramfs, job_text, vminit_path
    from opcost.targets.vm.qemu import BASE_CMDLINE, TCG_CMDLINE, Machine, VmConfig, qemu_argv
    from opcost.targets.vm.supervise import entry_kernel

    ap = argparse.ArgumentParser()
    ap.add_argument("boots", nargs="?", type=int, default=3)
    ap.add_argument("kernel", nargs="?")
    ap.add_argument("--machines", default="microvm,pc")
    ap.add_argument("--ways", default="issue,main,now")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--cmdline", default="", help="kernel parameters added to opcost's")
    a = ap.parse_args(argv)
    kernel = Path(a.kernel or kernels.fetch(kernels.PACKAGES[0]))
    cfg = VmConfig(qemu=os.environ.get("OPCOST_QEMU") or VmConfig.qemu, cpus=a.cpus, accel="tcg")
    vmlinux = entry_kernel(kernel, "tcg")[0]
    lpj: dict[str, str] = {}

    def argv_of(mt: str, way: str) -> list[str]:
        k = kernel if way == "issue" else vmlinux
        params = machine_cmdline(mt, "tcg") + (f" {TCG_CMDLINE}" if way == "now" else "") \
            + (f" lpj={lpj[mt]}" if way == "now" and mt == "microvm" and lpj.get(mt) else "")   # as Choice.lpj_for
        av = qemu_argv(cfg, Machine(k, a.cmdline), "tcg", mt, 0, 0, 0, params.strip())
        av[av.index("-initrd") + 1] = "/proc/self/fd/INITRD"
        av[av.index("file:/proc/self/fd/0")] = "file:/proc/self/fd/CONSOLE"
        j = [n for n, x in enumerate(av) if x.startswith("socket,id=qmp")][0]   # no QMP, no -S: straight on
        av = [x for n, x in enumerate(av) if n not in (j - 1, j, j + 1, j + 2) and x != "-S"]
        if way == "issue":   # nor cryptomgr.notests
            i = av.index("-append") + 1
            av[i] = " ".join(w for w in av[i].split() if w != "cryptomgr.notests")
        return av

    load0 = os.getloadavg()[0]
    rows: dict[tuple, list] = {}
    machines, ways = a.machines.split(","), a.ways.split(",")
    with tempfile.TemporaryDirectory(prefix="opcost-boot-phases-") as d:
        job = job_text([(["cpuid"], {}), (["run", "syscall.null", "--samples", "5"], {})])
        images = {"opcost": initramfs(job, vminit_path(), probe.probe_path(probe.host_arch())),
                  "kmsg": initramfs(b"", kmsg_init(d), probe.probe_path(probe.host_arch()))}
        for mt in machines:   # a first boot, not counted: the lpj this kernel says (what opcost learns so)
            lpj[mt] = one_boot(argv_of(mt, "main"), images["kmsg"]).get("lpj", "")
        for _ in range(a.boots):
            for mt in machines:
                for way in ways:
                    for which, image in images.items():
                        rows.setdefault((mt, way, which), []).append(one_boot(argv_of(mt, way), image))
    print(f"kernel {kernel}; main/now: -kernel {vmlinux.name}; lpj {json.dumps(lpj)}; TCG, {a.cpus} vCPU(s), "
          f"{a.boots} boots each, interleaved; load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at "
          f"the end ({os.cpu_count()} host CPUs); base kernel parameters: {BASE_CMDLINE}")
    print("median (min-max), seconds from QEMU's start; phases by the kernel's log (kmsg boots)")
    print(f"{'machine':8} {'way':5} {'init':6} {'to init':>17} {'to sample':>17} {'to exit':>17} | "
          + " ".join(f"{h:>17}" for h in ("pre-kernel", "early", "smp", "initcalls", "late")))
    for (mt, way, which), bs in rows.items():
        def span(x: str, y: str) -> list:
            return [b[y] - b.get(x, 0.0) for b in bs if y in b and (x in b or x == "")]
        phases = ([b["init"] - b["run_init"] for b in bs if "init" in b and "run_init" in b],
                  span("", "smp_start"), span("smp_start", "smp_end"), span("smp_end", "freeing"),
                  span("freeing", "run_init")) if which == "kmsg" else ([],) * 5
        print(f"{mt:8} {way:5} {which:6} {fmt([b.get('init') for b in bs]):>17} "
              f"{fmt([b.get('sample') for b in bs]):>17} {fmt([b['exit'] for b in bs]):>17} | "
              + " ".join(f"{fmt(p):>17}" for p in phases))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
