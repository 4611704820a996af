#!/usr/bin/env python3
"""A counting boot restored from a snapshot against fresh boots (issue 39,
targets/vm/restore.py): seconds from QEMU's start to the probe's first
sample of `syscall.null`, the ways interleaved round by round (the
machine's load falls on each alike), QEMU started with opcost's own
arguments (targets/vm/qemu.qemu_argv), TCG, microvm:

  issue    the bzImage, without the kernel parameters opcost added for speed
           since (as opcost booted when issue 39 was filed)
  now      a fresh boot as opcost boots today (the vmlinux at its PVH entry,
           qemu.TCG_CMDLINE, lpj=, qemu.TCG_CMDLINE_MORE)
  restore  `now`'s arguments and -incoming defer: the guest loaded from a
           snapshot made once, before the rounds, of a boot whose init waits
           for its job (/opcost/wait), then `cont` and the job sent on the
           data port (what --vm-restore auto does from a counting run's
           second round on)

With --plugin (the default) every way loads opcost's counting plugin
(-plugin, tcg,thread=single), as a counting boot does; the restore way is
for counting boots only. Also said: the snapshot's size and the time to
save it. That a restored guest counts exactly what a fresh boot counts is
tested (tests/test_counts_vm.py), not measured here.

    python3 benchmarks/vm_restore.py [ROUNDS] [KERNEL] [--no-plugin] [--cpus N]

Report only: the figures depend on the machine and its load (printed);
compare ways within one run, never across runs."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from opcost import emucount, probe  # noqa: E402
from opcost.targets.vm.clock import machine_cmdline  # noqa: E402
from opcost.targets.vm.initramfs import initramfs, job_text, vminit_path  # noqa: E402
from opcost.targets.vm.protocol import FRAME  # noqa: E402
from opcost.targets.vm.qemu import TCG_CMDLINE, TCG_CMDLINE_MORE, Machine, VmConfig, qemu_argv  # noqa: E402
from opcost.targets.vm.qmp import Qmp  # noqa: E402
from opcost.targets.vm.restore import Resume, load, save  # noqa: E402
from opcost.targets.vm.supervise import entry_kernel  # noqa: E402

MT = "microvm"


class Guest:
    """One QEMU: started paused, let run (or restored first), its data port read."""

    def __init__(self, argv: list[str], image: bytes, restore_from: str | None = None):
        self.initrd = os.memfd_create("initrd", 0)
        os.write(self.initrd, image)
        self.con_r, con_w = os.pipe()
        ours, theirs = socket.socketpair()
        argv = [a.replace("/proc/self/fd/INITRD", f"/proc/self/fd/{self.initrd}")
                .replace("/proc/self/fd/CONSOLE", f"/proc/self/fd/{con_w}").replace("fd=QMP", f"fd={theirs.fileno()}")
                for a in argv] + (["-incoming", "defer"] if restore_from else [])
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     pass_fds=(self.initrd, con_w, theirs.fileno()))
        os.close(con_w)
        theirs.close()
        self.qmp = Qmp(ours)
        self.sock = ours
        self.buf = b""
        if restore_from:
            load(self.qmp, Resume(b"", restore_from=restore_from), 60)
        self.qmp.cmd("cont")

    def until(self, pred) -> tuple[float, bytes]:
        """Seconds from QEMU's start to the first frame `pred` accepts."""
        while True:
            while b"\n" not in self.buf:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise RuntimeError("QEMU ended before the frame looked for")
                self.buf += chunk
            line, _, self.buf = self.buf.partition(b"\n")
            m = FRAME.fullmatch(line.rstrip(b"\r"))
            if m and pred(m.group(3)):
                return time.monotonic() - self.t0, m.group(3)

    def send(self, job: bytes) -> None:
        self.proc.stdin.write(job)
        self.proc.stdin.flush()

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()
        self.sock.close()
        os.close(self.con_r)
        os.close(self.initrd)


def first_sample(p: bytes) -> bool:
    return p.startswith(b"O 1 ") and b'"type":"sample"' in p


def main(argv: list[str]) -> int:
    import kernels

    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="?", type=int, default=3)
    ap.add_argument("kernel", nargs="?")
    ap.add_argument("--no-plugin", action="store_true", help="boots without opcost's counting plugin")
    ap.add_argument("--cpus", type=int, default=2)
    a = ap.parse_args(argv)
    kernel = Path(a.kernel or kernels.fetch(kernels.PACKAGES[0]))
    vmlinux = entry_kernel(kernel, "tcg")[0]
    plugin = None if a.no_plugin else emucount.plugin_path()
    counting = {"OPCOST_QUIESCE": "1", "OPCOST_COUNTING": "1"} if plugin else {}
    cmds = [(["cpuid"], {}), (["run", "syscall.null", "--samples", "5", "--target-ms", "1"], counting)]
    job = job_text(cmds)
    init, probe_exe = vminit_path(), probe.probe_path(probe.host_arch())
    lpj = ""

    with tempfile.TemporaryDirectory(prefix="opcost-vm-restore-") as d:
        out_n = [0]

        def argv_of(way: str) -> tuple[list[str], str | None]:
            out = None
            cfg = VmConfig(cpus=a.cpus, accel="tcg")
            if plugin:
                out_n[0] += 1
                out = f"{d}/count-{out_n[0]}.jsonl"
                cfg.plugin = f"{plugin},out={out},blocks=on"
            params = [machine_cmdline(MT, "tcg")] + ([] if way == "issue" else
                                                     [TCG_CMDLINE, f"lpj={lpj}" if lpj else "", TCG_CMDLINE_MORE])
            av = qemu_argv(cfg, Machine(kernel if way == "issue" else vmlinux, ""), "tcg", MT, 0, 0, 0,
                           " ".join(x for x in params if x))
            av[av.index("-initrd") + 1] = "/proc/self/fd/INITRD"
            av[av.index("file:/proc/self/fd/0")] = "file:/proc/self/fd/CONSOLE"
            av[[n for n, x in enumerate(av) if x.startswith("socket,id=qmp")][0]] = "socket,id=qmp,fd=QMP"
            if way == "issue":
                i = av.index("-append") + 1
                av[i] = " ".join(w for w in av[i].split() if w != "cryptomgr.notests")
            return av, out

        plain = initramfs(job, init, probe_exe)
        wait = Path(d) / "wait"
        wait.touch()
        waiting = initramfs(job_text([]), init, probe_exe, {"/opcost/wait": wait})
        # a first boot, not counted: the lpj this kernel says (what opcost learns so)
        g = Guest(argv_of("now")[0], plain)
        _, facts = g.until(lambda p: p.startswith(b"B "))
        lpj = json.loads(facts[2:]).get("lpj") or ""
        g.close()
        # the snapshot, made once: a boot whose init waits for its job
        snap = f"{d}/snap.qemu"
        restore_argv = argv_of("now")[0]
        g = Guest(restore_argv, waiting)
        g.until(lambda p: p == b"R ready")
        r = Resume(b"", save_to=snap)
        save(g.qmp, r, 60)
        g.close()
        if r.save_error:
            print(f"saving failed: {r.save_error}")
            return 1
        print(f"kernel {kernel}, {a.cpus} vCPU(s), microvm, TCG, plugin {'loaded' if plugin else 'not loaded'}; "
              f"snapshot {os.path.getsize(snap) / 2**20:.1f} MiB, saved in {r.save_s:.2f} s")
        rows: dict[str, list] = {"issue": [], "now": [], "restore": []}
        loads = [os.getloadavg()[0]]
        for n in range(a.rounds):
            for way in rows:
                av, out = argv_of(way)
                if way == "restore":   # the plugin's output file is the only argument that differs
                    g = Guest([x if ",out=" not in x else x.split(",out=")[0] + f",out={out},blocks=on"
                               for x in restore_argv], waiting, restore_from=snap)
                    g.send(job + b"want text\ngo\n")
                else:
                    g = Guest(av, plain)
                t, _ = g.until(first_sample)
                g.until(lambda p: p.startswith(b"Z"))
                g.close()
                rows[way].append(t)
            loads.append(os.getloadavg()[0])
            print(f"round {n + 1}: " + ", ".join(f"{w} {rows[w][-1]:.2f} s" for w in rows) + f"; load {loads[-1]:.1f}")
        print(f"\nQEMU's start to the first sample, {a.rounds} boots per way, interleaved "
              f"(load {min(loads):.1f}-{max(loads):.1f}): median (range), ratio of medians to the issue's way")
        for w, xs in rows.items():
            print(f"  {w:8s} {statistics.median(xs):5.2f} ({min(xs):.2f}-{max(xs):.2f})  "
                  f"{statistics.median(xs) / statistics.median(rows['issue']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
