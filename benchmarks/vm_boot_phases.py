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
  prev   the vmlinux, qemu.TCG_CMDLINE and, on microvm, lpj= (the value a
         first boot of this kernel said, as Choice.lpj_for gives it back):
         issue 39's second session
  now    as opcost boots a run that needs two CPUs today: prev and
         qemu.TCG_CMDLINE_MORE, --cpus vCPUs (default 2)
  one    as opcost boots a run whose benchmarks all run on one CPU (its
         default without --vm-cpus): now with one vCPU and, on x86_64,
         noreplace-smp (vcpus.smp_cmdline: the kernel keeps its SMP code)
  NAME   --try NAME=ARGS: `now` with ARGS: QEMU arguments added last (QEMU
         merges a second -machine into the first), and +P the kernel
         parameter P; e.g. --try 'm256=-m 256M' --try 'dbg=+initcall_debug'

Per machine type and way, two boots each round, each started paused (-S)
and let run with QMP's `cont`, as opcost starts QEMU:
  opcost  opcost's init running `opcost-probe cpuid`, then the probe
          (syscall.null): host seconds from QEMU's start to the init's first
          line (`init`), to the probe's first sample (`sample`: what a run
          waits for) and to QEMU's exit (the guest's power-off included,
          which opcost itself no longer waits for), and the host CPU time
          QEMU used, all its threads (`QEMU CPU s`: what the boot takes from
          a shared host, less sensitive to its load than the wall time)
  kmsg    a bare static init that writes one line (with its TSC), then
          copies the kernel's log (/dev/kmsg, with its timestamps) to the
          console and powers off: the floor of this kernel and these flags
          (`init`), and the phases (the log is read after the boot, so
          printing it costs the boot nothing):
            qemu        QEMU's own start: to QMP's answer to `cont` (the
                        kernel and the initramfs loaded)
            pre+lag     the guest's TSC when the init ran (under TCG the
                        host's TSC ticks since `cont`, read with the TSC
                        frequency opcost gives microvm) minus the kernel's
                        time of `Run /init`: the firmware, decompression where
                        the kernel has one, the kernel before its clock
                        starts, and the lag of the kernel's early clock
                        behind the TSC (until late in the boot its clock is
                        held to the emulated timer's ticks, which lag under a
                        loaded TCG); the phases below are by that clock
            early       kernel clock start to `smp: Bringing up secondary CPUs`
            smp         to `smp: Brought up` (with lpj= no delay-loop
                        calibration on the other CPUs)
            initcalls   device probing and the other initcalls (to the first
                        `Freeing unused`)
            late        freeing init memory, the initramfs, to `Run /init`
            initramfs   unpacking the initramfs (`Trying to unpack rootfs
                        image` to `Freeing initrd memory`; asynchronous, in
                        parallel with the initcalls, waited for before
                        `late`)
          With --initcalls N, the N slowest initcalls of each way whose
          kernel parameters have initcall_debug (median over its boots).
          With --rip MS, vCPU 0's instruction pointer sampled every MS ms
          by QMP until the init runs: the kernel functions the host's time
          went to, by the host's clock (not the kernel's, which lags).

    python3 benchmarks/vm_boot_phases.py [BOOTS] [KERNEL] [--machines microvm,pc] [--ways issue,main,prev,now,one]
                                         [--cpus N] [--cmdline ARGS] [--try NAME=ARGS]... [--initcalls N] [--rip MS]
                                         [--raw FILE]

Report only: the figures depend on the machine and its load (printed);
compare ways within one run, never across runs."""

from __future__ import annotations

import argparse
import bisect
import contextlib
import dataclasses
import json
import os
import re
import resource
import selectors
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from opcost.errors import ProbeError  # noqa: E402  (from src/, put on the path above)
from opcost.targets.vm.qmp import Qmp  # noqa: E402

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
	unsigned lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));   /* under TCG: the host's TSC ticks since QEMU's `cont` */
	if (d >= 0) {
		char t[40];
		write(d, t, snprintf(t, sizeof t, "init %llu\n", ((unsigned long long)hi << 32) | lo));
		close(d);
	}
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
         "unpack": "Trying to unpack rootfs image", "unpacked": "Freeing initrd memory",
         "freeing": "Freeing unused", "run_init": "Run /init as init process"}
LPJ = re.compile(r"Calibrating delay loop.*\(lpj=(\d+)\)")
FRAME = re.compile(rb"@OPC \d+ [0-9a-f]{8} (.*)")
RIP = re.compile(r"RIP=([0-9a-f]+)")
INITCALL = re.compile(r"initcall (\S+) returned -?\d+ after (\d+) usecs")


def kmsg_init(d: str) -> Path:
    src, exe = Path(d) / "kmsg.c", Path(d) / "kmsg-init"
    src.write_text(KMSG_INIT)
    subprocess.run(["cc", "-static", "-Os", "-o", str(exe), str(src)], check=True)
    return exe


def sample_rip(qmp: Qmp, t0: float, out: dict, every: float) -> None:
    """Until the init's line (or QEMU's end): vCPU 0's instruction pointer
    every `every` s by QMP (HMP `info registers`), with the host's seconds
    since QEMU's start: where the boot's host time goes."""
    rips = out.setdefault("rips", [])
    while "init" not in out:
        try:
            r = qmp.cmd("human-monitor-command", **{"command-line": "info registers"})
        except (OSError, ValueError, ProbeError):
            return
        m = RIP.search(str(r))
        if m:
            rips.append((time.monotonic() - t0, int(m.group(1), 16)))
        time.sleep(every)


def one_boot(argv: list[str], image: bytes, rip_every: float = 0.0) -> dict:
    """QEMU with this initramfs, started paused (-S) and let run by QMP's
    `cont` as opcost does: host seconds to QMP's answer (`qemu`: QEMU's own
    start, the kernel and initramfs loaded), to the first data line, to the
    probe's first sample (opcost's init) and to exit; the kernel's log marks
    (the kmsg init)."""
    initrd = os.memfd_create("initrd", 0)
    os.write(initrd, image)
    con_r, con_w = os.pipe()
    ours, theirs = socket.socketpair()
    argv = [a.replace("/proc/self/fd/INITRD", f"/proc/self/fd/{initrd}").replace("/proc/self/fd/CONSOLE",
                                                                                   f"/proc/self/fd/{con_w}")
            .replace("fd=QMP", f"fd={theirs.fileno()}") for a in argv]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            pass_fds=(initrd, con_w, theirs.fileno()))
    os.close(con_w)
    theirs.close()
    out: dict = {}
    sampler = None
    with contextlib.suppress(OSError, ValueError, ProbeError):
        qmp = Qmp(ours)
        qmp.cmd("cont")
        out["qemu"] = time.monotonic() - t0
        if rip_every:
            sampler = threading.Thread(target=sample_rip, args=(qmp, t0, out, rip_every), daemon=True)
            sampler.start()
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "data")
    sel.register(con_r, selectors.EVENT_READ, "console")
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
                tsc = re.search(rb"init (\d+)\r?\n", bufs["data"])
                if tsc and "tsc" not in out:
                    out["tsc"] = int(tsc.group(1))
                if "sample" not in out and b'"type":"sample"' in bufs["data"]:
                    out["sample"] = now
    proc.wait()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)   # QEMU's CPU time, all its threads (the only child meanwhile)
    out["cpu"] = ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime
    out["exit"] = time.monotonic() - t0
    if sampler:
        sampler.join()
    ours.close()
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
            if "blacklisted" in m.group(2):
                out.setdefault("blacklisted", []).append(m.group(2).split()[1])
            ic = INITCALL.search(m.group(2))
            if ic:
                out.setdefault("initcalls", []).append((ic.group(1), int(ic.group(2))))
    return out


def fmt(xs: list) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):5.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main(argv: list[str]) -> int:
    import kernels
    from opcost import probe
    from opcost.targets.vm.clock import host_tsc_khz, machine_cmdline
    from opcost.targets.vm.initramfs import initramfs, job_text, vminit_path
    from opcost.targets.vm.qemu import BASE_CMDLINE, TCG_CMDLINE, TCG_CMDLINE_MORE, Machine, VmConfig, qemu_argv
    from opcost.targets.vm.counting import cached_offsets
    from opcost.targets.vm.image import sha256_of
    from opcost.targets.vm.supervise import entry_kernel
    from opcost.targets.vm.vcpus import smp_cmdline

    ap = argparse.ArgumentParser()
    ap.add_argument("boots", nargs="?", type=int, default=3)
    ap.add_argument("kernel", nargs="?")
    ap.add_argument("--machines", default="microvm,pc")
    ap.add_argument("--ways", default="issue,main,now,one")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--cmdline", default="", help="kernel parameters added to opcost's")
    ap.add_argument("--try", dest="tries", action="append", default=[], metavar="NAME=ARGS",
                    help="one more way: `now` with ARGS (QEMU arguments, added last; a word +P adds the kernel "
                         "parameter P), e.g. 'm256=-m 256M' or 'dbg=+initcall_debug'")
    ap.add_argument("--initcalls", type=int, default=0, metavar="N",
                    help="rank the N slowest initcalls of the kmsg boots of each way that has +initcall_debug")
    ap.add_argument("--rip", type=float, default=0.0, metavar="MS",
                    help="sample vCPU 0's instruction pointer every MS ms until the init runs, in the kmsg boots, "
                         "and say where the host's time went by kernel function (the kernel's symbols as a "
                         "counting run cached them; QMP's sampling slows the guest a little)")
    ap.add_argument("--raw", metavar="FILE", help="also write every boot's figures there (JSON: machine, way, "
                    "image, round and its figures), e.g. for ratios of ways paired by round")
    a = ap.parse_args(argv)
    tries = {}
    for t in a.tries:
        name, _, args = t.partition("=")
        words = shlex.split(args)
        tries[name] = ([w for w in words if not w.startswith("+")], [w[1:] for w in words if w.startswith("+")])
    kernel = Path(a.kernel or kernels.fetch(kernels.PACKAGES[0]))
    cfg = VmConfig(qemu=os.environ.get("OPCOST_QEMU") or VmConfig.qemu, cpus=a.cpus, accel="tcg")
    vmlinux = entry_kernel(kernel, "tcg")[0]
    lpj: dict[str, str] = {}

    def argv_of(mt: str, way: str) -> list[str]:
        k = kernel if way == "issue" else vmlinux
        now = way not in ("issue", "main")
        qemu_args, params = tries.get(way, ([], []))
        conf = dataclasses.replace(cfg, cpus=1) if way == "one" else cfg
        params = [machine_cmdline(mt, "tcg"), smp_cmdline(conf.cpus, "x86_64")] + ([TCG_CMDLINE] if now else []) \
            + ([f"lpj={lpj[mt]}"] if now and mt == "microvm" and lpj.get(mt) else []) \
            + ([TCG_CMDLINE_MORE] if now and way != "prev" else []) + params   # in supervise.speed_params' order
        av = qemu_argv(conf, Machine(k, a.cmdline), "tcg", mt, 0, 0, 0, " ".join(x for x in params if x))
        av[av.index("-initrd") + 1] = "/proc/self/fd/INITRD"
        av[av.index("file:/proc/self/fd/0")] = "file:/proc/self/fd/CONSOLE"
        av[[n for n, x in enumerate(av) if x.startswith("socket,id=qmp")][0]] = "socket,id=qmp,fd=QMP"
        if way == "issue":   # nor cryptomgr.notests
            i = av.index("-append") + 1
            av[i] = " ".join(w for w in av[i].split() if w != "cryptomgr.notests")
        return av + qemu_args

    khz = host_tsc_khz()
    load0 = os.getloadavg()[0]
    rows: dict[tuple, list] = {}
    machines, ways = a.machines.split(","), [w for w in a.ways.split(",") if w] + list(tries)
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
                        rows.setdefault((mt, way, which), []).append(
                            one_boot(argv_of(mt, way), image, a.rip / 1000 if which == "kmsg" else 0.0))
    print(f"kernel {kernel}; main/now: -kernel {vmlinux.name}; lpj {json.dumps(lpj)}; TCG, {a.cpus} vCPU(s) (one: 1), "
          f"{a.boots} boots each, interleaved; load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at "
          f"the end ({os.cpu_count()} host CPUs); base kernel parameters: {BASE_CMDLINE}")
    print("median (min-max), seconds from QEMU's start; phases by the kernel's log (kmsg boots)")
    for name, (qemu_args, params) in tries.items():
        print(f"way {name}: now, and QEMU {shlex.join(qemu_args) or '-'}, kernel parameters {' '.join(params) or '-'}")
    print(f"{'machine':8} {'way':5} {'init':6} {'to init':>17} {'to sample':>17} {'to exit':>17} {'QEMU CPU s':>17} | "
          + " ".join(f"{h:>17}" for h in ("qemu", "pre+lag", "early", "smp", "initcalls", "late", "initramfs")))
    for (mt, way, which), bs in rows.items():
        def span(x: str, y: str) -> list:
            return [b[y] - b.get(x, 0.0) for b in bs if y in b and (x in b or x == "")]
        phases = ([b["qemu"] for b in bs if "qemu" in b],
                  [b["tsc"] / khz / 1000 - b["run_init"] for b in bs if "tsc" in b and "run_init" in b and khz],
                  span("", "smp_start"), span("smp_start", "smp_end"), span("smp_end", "freeing"),
                  span("freeing", "run_init"), span("unpack", "unpacked")) if which == "kmsg" else ([],) * 7
        print(f"{mt:8} {way:5} {which:6} {fmt([b.get('init') for b in bs]):>17} "
              f"{fmt([b.get('sample') for b in bs]):>17} {fmt([b['exit'] for b in bs]):>17} "
              f"{fmt([b.get('cpu') for b in bs]):>17} | "
              + " ".join(f"{fmt(p):>17}" for p in phases))
    for (mt, way, which), bs in rows.items():
        calls: dict[str, list[int]] = {}
        for b in bs:
            for name, us in b.get("initcalls", []):
                calls.setdefault(name, []).append(us)
        if a.initcalls and calls:
            top = sorted(calls.items(), key=lambda kv: -statistics.median(kv[1]))[:a.initcalls]
            total = sum(statistics.median(v) for v in calls.values()) / 1e6
            print(f"{mt} {way}: the {len(top)} slowest of {len(calls)} initcalls (median ms; all: {total:.2f} s)")
            for name, us in top:
                print(f"  {statistics.median(us) / 1000:8.1f}  {name}")
    if a.rip:
        where_time_went(rows, cached_offsets(sha256_of(kernel)))
    if a.raw:
        Path(a.raw).write_text(json.dumps([{"machine": mt, "way": way, "image": which, "round": i,
                                            **{k: v for k, v in b.items() if k not in ("rips", "initcalls")}}
                                           for (mt, way, which), bs in rows.items() for i, b in enumerate(bs)]))
    return 0


def where_time_went(rows: dict, offsets: list | None) -> None:
    """The --rip samples of each way's kmsg boots: the kernel functions that
    took the most of them, and per 0.2 s of host time the leading one."""
    if not offsets:
        print("--rip: no symbols for this kernel (a counting run caches them: opcost run syscall.null "
              "--kernel K --counters instructions:u --accel tcg)")
        return
    addrs = [o for o, _ in offsets]

    def name(rip: int) -> str:
        off = rip - 0xFFFFFFFF81000000 if rip >= 0xFFFFFFFF81000000 else rip - 0x1000000   # before paging: physical
        i = bisect.bisect_right(addrs, off) - 1
        return offsets[i][1] if 0 <= off < addrs[-1] + 65536 and i >= 0 else "(firmware or not the kernel's text)"

    for (mt, way, which), bs in rows.items():
        samples = [(t, name(r)) for b in bs for t, r in b.get("rips", [])]
        if not samples:
            continue
        total = Counter(n for _, n in samples)
        print(f"{mt} {way}: {len(samples)} samples of vCPU 0 over {len(bs)} boots, the most frequent functions:")
        for n, c in total.most_common(15):
            print(f"  {c / len(samples):6.1%}  {n}")
        print("  by host time (s since QEMU's start: the leading function of each 0.2 s, all boots):")
        buckets: dict[int, Counter] = {}
        for t, n in samples:
            buckets.setdefault(int(t / 0.2), Counter())[n] += 1
        for k in sorted(buckets):
            print(f"  {k * 0.2:4.1f}  " + ", ".join(f"{n} {c}" for n, c in buckets[k].most_common(3)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
