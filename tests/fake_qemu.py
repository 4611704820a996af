#!/usr/bin/env python3
"""A stand-in for qemu-system-x86_64 in the vm target's tests of bad guests
and interruptions (OPCOST_QEMU points at it): it speaks QMP on the socket
opcost passes (`-chardev socket,id=qmp,fd=N`), reads the job from the
initramfs opcost passes (`-initrd /proc/self/fd/N`), and then behaves as
FAKE_QEMU_MODE says:

  ok       runs the job with the real probe on this machine, framed as the
           init frames it (a boot in a few ms: the plumbing, not a kernel)
  garbage  prints lines that are not frames (and one with a bad checksum)
  panic    writes a kernel panic to the console and exits, as -no-reboot does
  hang     says nothing, forever (a kernel that hangs)
  garbage_run  passes the preflight; a measuring boot prints garbage
  stall    passes the preflight; in a measuring boot starts the job, then
           hangs (interrupted while measuring)

FAKE_QEMU_PIDFILE: a file it appends its pid to (the tests check it died).
FAKE_QEMU_ARGV: a file it appends its argv to, one JSON list a line.
FAKE_QEMU_HANG_BOOTS: boots (counted from 1, in FAKE_QEMU_COUNTER, a file)
that hang whatever the mode (a transient hang), e.g. `3,7`; `N-`: boot N
and every one after (a kernel that boots once, then never again); with
FAKE_QEMU_HANG_KERNEL=PATH only boots of that -kernel.
Its facts' boot_mitigations are the lines a kernel logs for its -append
(pti=on, mitigations=off), as the init reads them from the kernel log.
A counting boot through a snapshot (targets/vm/restore.py): with
/opcost/wait in the initramfs it says "R ready", answers QMP's `stop`,
`migrate` (running the exec: URI's shell command with a few bytes on its
stdin: the snapshot) and `cont`, then reads its job from stdin up to "go";
with `-incoming defer` it answers `migrate-incoming` (reading the file) and
reads its job from stdin after `cont`. FAKE_QEMU_RESTORE: fail (the
restore's migration fails) or hang (restored, then says nothing).
FAKE_QEMU_MICROVM: hang or panic: how it behaves as `-machine microvm`
(a kernel that does not boot there); else as FAKE_QEMU_MODE says.

Like QEMU it has one thread per vCPU (`-smp N`; query-cpus-fast names
them) and another thread of its own; its first line (the init's facts)
says where each thread may run once opcost let it `cont`, and where opcost
itself (its parent) may run then.

The builds of `opcost variants` (/opcost/build-N in the initramfs: a job's
`exe` line, or a program after `time --`) are unpacked from the initramfs
into memfds and run from there (/proc/PID/fd/N): nothing on disk, also when
this stand-in is killed.
"""

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "probe", "opcost-probe")


def arg(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def main(argv):
    if "--version" in argv:
        print("QEMU emulator version 0.0.0 (opcost's tests: fake_qemu.py)")
        return 0
    if os.environ.get("FAKE_QEMU_PIDFILE"):
        with open(os.environ["FAKE_QEMU_PIDFILE"], "a") as f:
            f.write(f"{os.getpid()}\n")
    if os.environ.get("FAKE_QEMU_ARGV"):
        with open(os.environ["FAKE_QEMU_ARGV"], "a") as f:
            f.write(json.dumps(argv) + "\n")
    mode = os.environ.get("FAKE_QEMU_MODE", "ok")
    if os.environ.get("FAKE_QEMU_HANG_BOOTS"):
        with open(os.environ["FAKE_QEMU_COUNTER"], "a+") as f:
            f.seek(0)
            n = len(f.read()) + 1
            f.write("b")
        which = os.environ["FAKE_QEMU_HANG_BOOTS"].split(",")
        kernel = os.environ.get("FAKE_QEMU_HANG_KERNEL")
        if (str(n) in which or any(w.endswith("-") and n >= int(w[:-1]) for w in which)) and (
                kernel is None or arg(argv, "-kernel")[0] == kernel):
            mode = "hang"
    if arg(argv, "-machine")[0].split(",")[0] == "microvm" and os.environ.get("FAKE_QEMU_MICROVM"):
        mode = os.environ["FAKE_QEMU_MICROVM"]
    ncpus = int(arg(argv, "-smp")[0].split(",")[0])
    stop = threading.Event()
    vcpus = [threading.Thread(target=stop.wait, daemon=True) for _ in range(ncpus)]
    worker = threading.Thread(target=stop.wait, daemon=True)   # QEMU's other threads (RCU, I/O...)
    for t in [*vcpus, worker]:
        t.start()
    qmp_fd = int(re.search(r"fd=(\d+)", [a for a in arg(argv, "-chardev") if "id=qmp" in a][0]).group(1))
    console = [a for a in arg(argv, "-serial") if a.startswith("file:")][0][5:]
    initrd = open(arg(argv, "-initrd")[0], "rb").read()
    job = initrd[initrd.rindex(b"opcost-vminit/1\n"):].split(b"\0")[0].decode()
    s = socket.socket(fileno=qmp_fd)
    s.sendall(b'{"QMP": {"version": {}, "capabilities": []}}\n')
    f = s.makefile("rb")
    restored = "-incoming" in argv
    qmp_until_cont(s, f, vcpus)
    out = sys.stdout.buffer
    seq = [0]
    if restored and os.environ.get("FAKE_QEMU_RESTORE") == "hang":
        time.sleep(3600)
    if restored or "opcost/wait" in unpack(initrd):
        if not restored:
            out.write(b"@OPC 0 %08x R ready\n" % zlib.crc32(b"R ready"))
            out.flush()
            qmp_until_cont(s, f, vcpus)
        job = ""
        for line in iter(sys.stdin.readline, ""):
            if line == "go\n":
                break
            if not line.startswith("want "):
                job += line

    def frame(payload: str):
        p = payload.encode()
        out.write(b"@OPC %d %08x " % (seq[0], zlib.crc32(p)) + p + b"\n")
        out.flush()
        seq[0] += 1

    if mode == "hang":
        time.sleep(3600)
    if mode == "panic":
        with open(console, "w") as c:
            c.write("[    0.500000] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n")
        return 0
    if mode == "garbage":
        frame('B {"release": "fake"}')
        out.write(b"\x1b[2J garbage \xff\xfe\n@OPC 1 00000000 C 0 start\n")
        out.flush()
        return 0
    # where opcost pinned each thread; then every CPU again for this one, for the host probe
    threads = {int(t): sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
    facts = {"release": "fake", "clocksource": "tsc", "affinity": threads[vcpus[0].native_id],
             "threads": threads, "vcpu_threads": [t.native_id for t in vcpus],
             "frontend_affinity": sorted(os.sched_getaffinity(os.getppid())),
             "cmdline": (arg(argv, "-append") or [""])[0], "boot_mitigations": boot_log(argv)}
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
    frame('B ' + json.dumps(facts))
    cmds, cur, exes = [], None, []
    for line in job.splitlines()[1:]:
        if cur is None:
            cur = ([], {})
        if line == "end":
            cmds.append(cur)
            cur = None
        elif line.startswith("exe "):
            exes.append((len(cmds), line[4:]))
        elif line.startswith("arg "):
            cur[0].append(line[4:])
        elif line.startswith("env "):
            k, _, v = line[4:].partition("=")
            cur[1][k] = v
    measuring = any("--check" not in c[0] and c[0] and c[0][0] in ("run", "time") for c in cmds)
    if mode == "garbage_run" and measuring:
        out.write(b"@OPC 1 00000000 C 0 start\n")
        out.flush()
        return 0
    exe = dict(exes)
    builds = {}
    for name, (_, body) in (unpack(initrd).items() if "/opcost/build-" in job else ()):
        if name.startswith("opcost/build-"):
            fd = os.memfd_create(name.split("/")[1], 0)   # inherited: the probe's `time` may exec it
            os.write(fd, body)
            builds["/" + name] = f"/proc/{os.getpid()}/fd/{fd}"

    def here(a: str) -> str:
        return builds.get(a, a)

    for i, (a, env) in enumerate(cmds):
        frame(f"C {i} start")
        if mode == "stall" and measuring and i >= 1:
            time.sleep(3600)
        cp = subprocess.run([here(exe.get(i, PROBE)), *map(here, a)], capture_output=True, env={**os.environ, **env},
                            pass_fds=[int(p.rsplit("/", 1)[1]) for p in builds.values()])
        for ln in cp.stdout.decode().splitlines():
            frame(f"O {i} {ln}")
        for ln in cp.stderr.decode().splitlines():
            frame(f"E {i} {ln}")
        frame(f"X {i} {cp.returncode}")
    frame(f"Z {len(cmds)}")
    return 0


def qmp_until_cont(s, f, vcpus) -> None:
    """QMP's commands answered until `cont`; a migration out runs its exec:
    URI's command with the snapshot's bytes, one in reads its file."""
    status = "completed"
    while True:
        d = json.loads(f.readline())
        cmd, args = d["execute"], d.get("arguments") or {}
        if cmd == "query-cpus-fast":
            s.sendall(json.dumps({"return": [{"cpu-index": i, "thread-id": t.native_id}
                                             for i, t in enumerate(vcpus)]}).encode() + b"\n")
            continue
        if cmd == "migrate":
            subprocess.run(["sh", "-c", args["uri"][len("exec:"):]], input=b"fake snapshot\n", check=True)
        elif cmd == "migrate-incoming":
            cp = subprocess.run(["sh", "-c", args["uri"][len("exec:"):]], capture_output=True)
            ok = cp.stdout == b"fake snapshot\n" and os.environ.get("FAKE_QEMU_RESTORE") != "fail"
            status = "completed" if ok else "failed"
        if cmd == "query-migrate":
            s.sendall(json.dumps({"return": {"status": status, "error-desc": "fake: cannot load"}}).encode() + b"\n")
            continue
        s.sendall(b'{"return": {}}\n')
        if cmd == "cont":
            return


def boot_log(argv) -> list[str]:
    """The mitigation lines a 6.1 kernel logs, as its parameters decide them
    (pti=on: page table isolation forced on; mitigations=off: none)."""
    params = (arg(argv, "-append") or [""])[0].split()
    if "mitigations=off" in params:
        return ["Spectre V2 : Vulnerable"]
    lines = ["Spectre V1 : Mitigation: usercopy/swapgs barriers and __user pointer sanitization",
             "Spectre V2 : Mitigation: Retpolines"]
    if "pti=on" in params:
        lines += ["Kernel/User page tables isolation: force enabled on command line.",
                  "Kernel/User page tables isolation: enabled"]
    return lines


def unpack(data: bytes) -> dict:
    """The initramfs (newc cpio): name -> (mode, data)."""
    out, i = {}, 0
    while data[i:i + 6] == b"070701":
        f = [int(data[i + 6 + 8 * k:i + 14 + 8 * k], 16) for k in range(13)]
        name = data[i + 110:i + 110 + f[11] - 1].decode()
        i += 110 + f[11]
        i += -i % 4
        out[name] = (f[1], data[i:i + f[6]])
        i += f[6]
        i += -i % 4
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
