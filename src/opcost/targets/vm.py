"""A virtual machine as the target: every probe process runs in a freshly
booted QEMU guest (`qemu-system-x86_64 -kernel K`), whose whole userland is
an initramfs opcost writes itself: a newc cpio of the static init
(probe/vminit/init.c) and the static probe, with the job (which probe
commands to run) as a file in it. No disk, no network, `-no-reboot`: the
init powers the guest off when its job is done; a panic reboots, which
QEMU turns into its exit.

One boot runs one measured probe process (and, first, `opcost-probe cpuid`,
so every process records the CPUID and XCR0 its guest saw): the boot is the
statistical unit, the per-process figures opcost compares are per-boot
figures, and boot-to-boot variation is part of them (docs/kernels.md).

Nothing of a boot is left on disk: the initramfs is a memfd (QEMU opens
/proc/self/fd/N), the console and the data port are pipes, QMP a socket
pair. QEMU dies with opcost (PR_SET_PDEATHSIG, also on SIGKILL of opcost)
and is killed on every way out of a boot (Ctrl-C, SIGTERM, a time limit).

The guest's data port is ttyS1 (kernel messages stay on ttyS0); every line
the init writes there is framed `@OPC <seq> <crc32> <payload>` so garbage is
detected, never parsed as a result.

Acceleration: `tcg` (emulation: every result flagged `emulated`, no verdict
on cost without --allow-emulated), `kvm` (-cpu host, vCPU threads pinned to
host CPUs through QMP query-cpus-fast, QEMU's other threads kept off them,
guest memory preallocated), `auto` (KVM when a short trial boot under it
works, remembered per kernel image and host; else TCG).

Machine type: `microvm` (no PCI, no firmware tables to speak of: the
fastest boot) where the kernel boots there, else `pc`. Under TCG microvm has
no clock to calibrate the TSC against (no HPET, no PM timer, no kvmclock),
so the kernel is told the TSC's frequency (`tsc_early_khz=`, the host's: TCG's
guest TSC is the host's); `auto` boots microvm first and falls back to pc,
the answer remembered per kernel image, host and accel.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .. import probe
from ..errors import ProbeError, ProbeTimeout, UsageError
from .vm_options import ACCELS, MACHINES

QEMU = "qemu-system-x86_64"
MACHINE_PARAMS = ("kernel", "cmdline")   # variant dimensions this target takes (spec.expand)
BOOT_LIMIT_S = {"tcg": 90.0, "kvm": 30.0}   # from start to the init's first line
KVM_TRIAL_S = 10.0                           # --accel auto: a KVM boot that takes longer does not work here
MICROVM_TRIAL_S = {"tcg": 45.0, "kvm": 10.0}  # --vm-machine auto: a first microvm boot slower than this: pc
BASE_CMDLINE = "console=ttyS0 panic=-1 quiet"
FRAME = re.compile(rb"@OPC (\d+) ([0-9a-f]{8}) (.*)")
CONSOLE_TAIL = 60    # lines of the kernel's console kept for a failed boot


class BootFailed(UsageError):
    """A kernel that did not boot to opcost's init (panic, hang, garbage):
    bad input when found before anything was measured (exit 2); during a
    run the runner gets it as a ProbeError (the boot's failure, exit 1)."""


# ---- input -----------------------------------------------------------------

def check_kernel(path: str, what: str = "--kernel") -> Path:
    """An x86 Linux kernel image (bzImage: the boot protocol's 'HdrS' header),
    or UsageError saying what was given and what would be right."""
    p = Path(path).expanduser()
    right = "give a bzImage/vmlinuz, e.g. arch/x86/boot/bzImage or /boot/vmlinuz-$(uname -r)"
    if not p.is_file():
        raise UsageError(f"{what} {path}: no such file; {right}")
    try:
        with open(p, "rb") as f:
            head = f.read(0x240)
    except OSError as e:
        raise UsageError(f"{what} {path}: cannot be read ({e.strerror}); {right}") from None
    if len(head) < 0x240 or head[0x1FE:0x200] != b"\x55\xaa" or head[0x202:0x206] != b"HdrS":
        raise UsageError(f"{what} {path} is not an x86 Linux kernel image (no bzImage boot header); {right}")
    return p.resolve()


def check_cmdline(text: str, what: str = "--kernel-cmdline") -> str:
    """Kernel parameters as plain words: no quotes (QEMU's -append and the
    kernel's parser treat them differently), no newline or control character."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise UsageError(f"{what} {text!r} contains a newline or control character; write the kernel "
                         "parameters on one line, e.g. mitigations=off nosmt")
    if '"' in text or "'" in text or "\\" in text:
        raise UsageError(f"{what} {text!r} contains a quote or backslash, which would not reach the guest "
                         "kernel as written; write plain key=value words, e.g. mitigations=off")
    return " ".join(text.split())


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---- the initramfs ---------------------------------------------------------

def cpio_newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A newc ("070701") cpio archive of (name, mode, data) entries, as the
    kernel unpacks an initramfs: 110-byte ASCII header, name NUL-terminated,
    both padded to 4 bytes, then the data padded to 4; closed by TRAILER!!!."""
    out = bytearray()
    for ino, (name, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], 1):
        nb = name.encode() + b"\0"
        nlink = 2 if mode & 0o040000 else 1
        fields = (ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(nb), 0)
        out += b"070701" + b"".join(b"%08X" % v for v in fields) + nb
        out += b"\0" * (-len(out) % 4)
        out += data
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def job_text(cmds: list[tuple]) -> bytes:
    """The init's job: per command its arguments and environment, and, as a
    third element, the executable in the guest when it is not the probe
    (`opcost variants`' builds: guest_files)."""
    lines = ["opcost-vminit/1"]
    for argv, env, *exe in cmds:
        for a in argv:
            if "\n" in a:
                raise UsageError(f"argument {a!r} contains a newline; it cannot reach the guest")
            lines.append("arg " + a)
        lines += [f"env {k}={v}" for k, v in env.items()]
        if exe and exe[0]:
            lines.append("exe " + exe[0])
        lines.append("end")
    return ("\n".join(lines) + "\n").encode()


def vminit_path() -> Path | None:
    """The static init: shipped in the package beside the probe, or built in
    the source tree (`make -C probe`)."""
    arch = probe.host_arch()
    here = Path(__file__).resolve().parents[1]
    for p in (here / "_probe" / f"opcost-vminit-{arch}", here.parents[1] / "probe" / "opcost-probe-vminit",
              here.parents[1] / "probe" / "build" / f"opcost-probe-{arch}-vminit"):
        if p.is_file():
            return p
    return None


_STRIPPED: dict[tuple, bytes] = {}


def stripped(exe: Path) -> bytes:
    """The binary without its debug information (`strip`, binutils) when
    strip is there: a smaller initramfs unpacks sooner, under TCG a second
    of every boot. Made once per binary and process, in a private temporary
    directory removed at once."""
    import tempfile

    st = exe.stat()
    key = (str(exe), st.st_mtime_ns, st.st_size)
    if key not in _STRIPPED:
        data = exe.read_bytes()
        tool = shutil.which("strip")
        if tool:
            with tempfile.TemporaryDirectory(prefix="opcost-strip-") as d:
                out = os.path.join(d, "exe")
                cp = subprocess.run([tool, "-o", out, str(exe)], capture_output=True)
                if cp.returncode == 0:
                    data = Path(out).read_bytes()
        _STRIPPED[key] = data
    return _STRIPPED[key]


def initramfs(job: bytes, init: Path, probe_exe: Path, files: dict[str, Path] | None = None) -> bytes:
    """`files`: more executables, guest path (/opcost/NAME) -> host path."""
    extra = [(g.lstrip("/"), 0o100755, stripped(h)) for g, h in (files or {}).items()]
    return cpio_newc([("opcost", 0o040755, b""), ("dev", 0o040755, b""), ("proc", 0o040555, b""),
                      ("sys", 0o040555, b""), ("tmp", 0o041777, b""),
                      ("init", 0o100755, stripped(init)), ("opcost/probe", 0o100755, stripped(probe_exe)),
                      *extra, ("opcost/job", 0o100644, job)])


def guest_files(reqs: list[probe.ProbeRequest]) -> tuple[list[tuple], dict[str, Path]]:
    """What `opcost variants` built for each request, carried into the
    guest: per request (the request as it runs there, the executable in the
    guest or None for the probe), and the files the initramfs holds
    (/opcost/build-N -> host path). A probe with the user's operation linked
    in (exe) runs instead of the probe; a whole program runs under the
    guest's probe (`time -- /opcost/build-N`), so it must be static (the
    guest has no libc). A build for another architecture never gets here
    (UsageError: the guest runs x86_64)."""
    import dataclasses

    files: dict[str, Path] = {}
    names: dict[str, str] = {}

    def into(path: str) -> str:
        if path not in names:
            names[path] = f"/opcost/build-{len(names) + 1}"
            files[names[path]] = Path(path)
        return names[path]

    out: list[tuple[probe.ProbeRequest, str | None]] = []
    for r in reqs:
        if r.emulator:
            raise UsageError(f"{r.exe or (r.program or ('?',))[-1]} is built for another architecture (it runs under "
                             f"{os.path.basename(r.emulator)}); the guest runs x86_64 builds only")
        if r.exe:
            out.append((dataclasses.replace(r, exe=None), into(r.exe)))
        elif r.program:
            out.append((dataclasses.replace(r, program=(into(r.program[0]), *r.program[1:])), None))
        else:
            out.append((r, None))
    return out, files


# ---- one boot ----------------------------------------------------------------

@dataclass
class Command:
    """What one command of the job did in the guest."""
    stdout: list[bytes] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    status: int | None = None        # exit status, -signal; None: never ended
    started_s: float | None = None   # host monotonic seconds from QEMU's start
    ended_s: float | None = None


@dataclass
class Boot:
    facts: dict | None = None        # the init's "B" line: uname, /proc/version, clocksource...
    commands: list[Command] = field(default_factory=list)
    done: bool = False               # the init's "Z" line: every command ran
    boot_s: float | None = None      # QEMU start to the init's first line
    wall_s: float = 0.0              # QEMU start to its exit
    console: list[str] = field(default_factory=list)   # the kernel's console, last lines
    argv: list[str] = field(default_factory=list)
    vcpus: dict[int, dict] = field(default_factory=dict)   # guest CPU -> {"thread": tid, "host_cpu": n}
    exit_status: int | None = None
    pinning: str = ""                # how the vCPU threads were placed, or why they were not


def _pdeathsig() -> None:
    """In the QEMU child, before exec: SIGKILL when opcost (its parent) dies,
    however it dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
    except Exception:
        pass


class _Qmp:
    """QEMU's machine protocol over a socket pair: one JSON object a line."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""
        sock.settimeout(10)
        self._read()   # the greeting
        self.cmd("qmp_capabilities")

    def _read(self) -> dict:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ProbeError("QEMU closed its QMP connection")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def cmd(self, name: str, **args) -> object:
        self.sock.sendall(json.dumps({"execute": name, **({"arguments": args} if args else {})}).encode() + b"\n")
        while True:
            d = self._read()
            if "return" in d:
                return d["return"]
            if "error" in d:
                raise ProbeError(f"QEMU QMP {name}: {d['error'].get('desc')}")


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def place_vcpus(qmp: _Qmp, pid: int, host_cpus: list[int] | None) -> dict[int, dict]:
    """vCPU -> host thread (QMP query-cpus-fast); with `host_cpus`, vCPU i
    pinned to host_cpus[i] and every other QEMU thread kept off them."""
    out: dict[int, dict] = {}
    cpus: list = qmp.cmd("query-cpus-fast") or []   # type: ignore[assignment]
    for c in cpus:
        out[int(c["cpu-index"])] = {"thread": int(c["thread-id"])}
    if host_cpus is None:
        return out
    if len(host_cpus) < len(out):
        raise UsageError(f"--vm-cpus {len(out)}: only {len(host_cpus)} host CPU(s) to pin them to")
    for i, d in out.items():
        os.sched_setaffinity(d["thread"], {host_cpus[i]})
        d["host_cpu"] = host_cpus[i]
    rest = set(os.sched_getaffinity(0)) - {host_cpus[i] for i in out}
    if rest:
        vcpu_threads = {d["thread"] for d in out.values()}
        for t in _threads(pid):
            if t not in vcpu_threads:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(t, rest)
    return out


def qemu_version(qemu: str) -> str | None:
    try:
        cp = subprocess.run([qemu, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return cp.stdout.splitlines()[0].strip() if cp.returncode == 0 and cp.stdout else None


@dataclass
class Machine:
    """What one guest boots: its kernel and the user's kernel parameters."""
    kernel: Path
    cmdline: str = ""


@dataclass
class VmConfig:
    qemu: str = QEMU
    cpus: int = 2
    mem_mib: int = 512
    accel: str = "auto"
    allow_emulated: bool = False
    procs: int = 1              # probe processes of each variant per boot (--vm-procs)
    machine: str = "auto"       # QEMU machine type: microvm, pc or auto (--vm-machine)


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


def host_tsc_invariant() -> bool:
    """The host's TSC runs at a constant rate, also in deep C-states."""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return {"constant_tsc", "nonstop_tsc"} <= flags
    return False


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


def qemu_argv(cfg: VmConfig, m: Machine, accel: str, machine_type: str, initrd_fd: int, console_fd: int,
              qmp_fd: int) -> list[str]:
    cmdline = " ".join(x for x in (BASE_CMDLINE, machine_cmdline(machine_type, accel), m.cmdline) if x)
    # the data port is the second serial port (ttyS1); microvm makes only the first from -serial
    data = (["-serial", "stdio"] if machine_type != "microvm" else
            ["-chardev", "stdio,id=data", "-device", "isa-serial,chardev=data,index=1"])
    argv = [cfg.qemu, "-machine", machine_type, "-accel", accel,
            "-cpu", "host" if accel == "kvm" else "max", "-smp", f"{cfg.cpus},sockets=1,cores={cfg.cpus},threads=1",
            "-kernel", str(m.kernel), "-initrd", f"/proc/self/fd/{initrd_fd}", "-append", cmdline,
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-nic", "none",
            "-serial", f"file:/proc/self/fd/{console_fd}", *data,
            "-chardev", f"socket,id=qmp,fd={qmp_fd}", "-mon", "chardev=qmp,mode=control", "-S"]
    if accel == "kvm":   # guest memory allocated and touched before the guest runs
        argv += ["-object", f"memory-backend-ram,id=mem0,size={cfg.mem_mib}M,prealloc=on",
                 "-machine", "memory-backend=mem0", "-m", f"{cfg.mem_mib}M"]
    else:
        argv += ["-m", f"{cfg.mem_mib}M"]
    return argv


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def boot(cfg: VmConfig, m: Machine, cmds: list[tuple[list[str], dict[str, str]]], *, accel: str,
         machine_type: str, boot_limit: float, timeout: float, host_cpus: list[int] | None = None,
         on_frame=None, stall_s: float = probe.STARTUP_STALL_S, files: dict[str, Path] | None = None) -> Boot:
    """Boot `m`, run `cmds` in the guest, return what they did. Raises
    BootFailed (no init line within `boot_limit`: the kernel did not boot),
    ProbeTimeout (`timeout`, or nothing said for `stall_s` after the boot),
    ProbeError (garbled data port, QEMU failing). QEMU never outlives this
    call. `on_frame(cmd_index, kind, payload)` sees every framed line.
    `files`: executables the job runs besides the probe (guest_files)."""
    init = vminit_path()
    if init is None:
        raise UsageError("the VM init is not built; run `make -C probe` (it builds probe/opcost-probe-vminit)")
    exe = probe.probe_path(probe.host_arch())
    image = initramfs(job_text(cmds), init, exe, files)
    initrd = os.memfd_create("opcost-initramfs", 0)
    con_r, con_w = os.pipe()
    ours, theirs = socket.socketpair()
    b = Boot()
    proc = None
    try:
        os.write(initrd, image)
        argv = qemu_argv(cfg, m, accel, machine_type, initrd, con_w, theirs.fileno())
        b.argv = [a if not a.startswith("/proc/self/fd/") else "<initramfs: memfd>" if a.endswith(f"/{initrd}")
                  else a for a in argv]
        b.argv = [re.sub(r"file:/proc/self/fd/\d+", "file:<console pipe>", a) for a in b.argv]
        b.argv = [re.sub(r"fd=\d+", "fd=<qmp socket>", a) for a in b.argv]
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, pass_fds=(initrd, con_w, theirs.fileno()),
                                    preexec_fn=_pdeathsig, start_new_session=True)
        except FileNotFoundError:
            raise UsageError(f"{cfg.qemu} is not installed; install QEMU (Debian: apt-get install "
                             "qemu-system-x86) or set OPCOST_QEMU=PATH") from None
        except OSError as e:
            raise ProbeError(f"cannot start {cfg.qemu}: {e.strerror}") from None
        _trace(0.0, f"qemu {proc.pid} {machine_type} {accel}")
        os.close(con_w)
        con_w = -1
        theirs.close()
        try:
            qmp = _Qmp(ours)
            b.vcpus = place_vcpus(qmp, proc.pid, host_cpus)
            qmp.cmd("cont")
        except (OSError, ValueError, ProbeError) as e:
            err = _stderr_tail(proc)
            raise ProbeError(f"QEMU did not start: {err or e}") from None
        _pump(proc, con_r, b, t0, boot_limit, timeout, stall_s, on_frame)
        b.wall_s = time.monotonic() - t0
        return b
    except BaseException as e:
        if proc is not None:
            _kill(proc)
        if isinstance(e, (ProbeError, ProbeTimeout, UsageError)):
            setattr(e, "console", b.console)
            setattr(e, "reached_init", b.facts is not None)
        raise
    finally:
        if proc is not None and proc.poll() is None:
            _kill(proc)
        for fd in (initrd, con_r, con_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        ours.close()
        with contextlib.suppress(OSError):
            theirs.close()
        if proc is not None:
            for s in (proc.stdout, proc.stderr):
                if s:
                    s.close()


def _stderr_tail(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        _kill(proc)
    try:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    except OSError:
        err = ""
    return (err.strip().splitlines() or [""])[-1]


def _pump(proc, con_r: int, b: Boot, t0: float, boot_limit: float, timeout: float, stall_s: float,
          on_frame) -> None:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "data")
    sel.register(con_r, selectors.EVENT_READ, "console")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    bufs = {"data": b"", "console": b"", "err": b""}
    err_lines: list[str] = []
    seq = 0
    last = t0
    open_n = 3
    while open_n:
        now = time.monotonic()
        if b.facts is None and now - t0 > boot_limit:
            raise BootFailed(f"the guest did not reach opcost's init within {boot_limit:g} s "
                             "(the kernel hung, panicked or has no console on ttyS0)")
        if now - t0 > timeout:
            raise ProbeTimeout(f"the virtual machine did not finish within {timeout:g} s (--timeout; killed)")
        if b.facts is not None and now - last > stall_s:
            raise ProbeTimeout(f"the guest said nothing for {now - last:.0f} s: stuck, killed")
        for key, _ in sel.select(timeout=0.5):
            fd = key.fd
            chunk = os.read(fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_n -= 1
                continue
            bufs[key.data] += chunk
            *lines, bufs[key.data] = bufs[key.data].split(b"\n")
            if key.data == "console":
                b.console = (b.console + [ln.decode(errors="replace").rstrip("\r") for ln in lines])[-CONSOLE_TAIL:]
                continue
            if key.data == "err":
                err_lines += [ln.decode(errors="replace") for ln in lines]
                continue
            for ln in lines:
                ln = ln.rstrip(b"\r")
                if not ln:
                    continue
                mt = FRAME.fullmatch(ln)
                if mt is None or int(mt.group(1)) != seq or int(mt.group(2), 16) != zlib.crc32(mt.group(3)):
                    raise ProbeError(f"the guest's data port printed a garbled line ({ln[:60]!r}): "
                                     + ("out of sequence" if mt and int(mt.group(1)) != seq else "not a frame"
                                        if mt is None else "checksum mismatch"))
                seq += 1
                last = time.monotonic()
                _frame(b, mt.group(3), last - t0, on_frame)
    proc.wait()
    b.exit_status = proc.returncode
    b.console += [ln for ln in [bufs["console"].decode(errors="replace")] if ln]
    if b.facts is None:
        tail = (err_lines[-1] if err_lines else "") or (b.console[-1] if b.console else "no console output")
        raise BootFailed(f"the guest stopped before opcost's init ran (QEMU exit {proc.returncode}): {tail}")
    if not b.done:
        raise ProbeError("the guest stopped before its job was done (the kernel panicked or the init failed: "
                         + (b.console[-1] if b.console else "no console output") + ")")


def _trace(t: float, event: str) -> None:
    """OPCOST_VM_TRACE=FILE: each boot's events appended there, one a line,
    seconds from QEMU's start: `qemu PID MACHINE ACCEL`, `init` (the init's
    first line), `start I` and `exit I STATUS` (the job's commands; 0 is
    `opcost-probe cpuid`), `done`. Where a boot's time goes; the tests use
    it to interrupt a guest while it measures."""
    path = os.environ.get("OPCOST_VM_TRACE")
    if path:
        with contextlib.suppress(OSError), open(path, "a") as f:
            f.write(f"{t:.3f} {event}\n")


def _frame(b: Boot, payload: bytes, t: float, on_frame) -> None:
    kind, _, rest = payload.partition(b" ")
    if kind in (b"B", b"Z", b"C", b"X"):
        _trace(t, {b"B": "init", b"Z": "done"}.get(kind) or
               ("start " if kind == b"C" else "exit ") + rest.decode(errors="replace").split(" start")[0])
    if kind == b"B":
        b.facts = json.loads(rest)
        b.boot_s = t
        return
    if kind == b"Z":
        b.done = True
        return
    if kind == b"F":
        raise ProbeError(f"opcost's init in the guest failed: {rest.decode(errors='replace')}")
    idx_s, _, text = rest.partition(b" ")
    i = int(idx_s)
    while len(b.commands) <= i:
        b.commands.append(Command())
    c = b.commands[i]
    if kind == b"C":
        c.started_s = t
    elif kind == b"O":
        c.stdout.append(text)
        if on_frame:
            on_frame(i, "O", text)
    elif kind == b"E":
        c.stderr.append(text.decode(errors="replace"))
    elif kind == b"X":
        c.status, c.ended_s = int(text), t
    else:
        raise ProbeError(f"opcost's init printed an unknown line kind {kind!r}")


# ---- acceleration ----------------------------------------------------------

def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "opcost"


def console_dir() -> Path:
    """Where the console of a failed boot is kept."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "opcost" / "vm-console"


def save_console(b_console: list[str], what: str) -> Path | None:
    try:
        d = console_dir()
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.log"
        p.write_text(f"# {what}\n" + "\n".join(b_console) + "\n")
        return p
    except OSError:
        return None


def kvm_usable() -> str | None:
    """None when /dev/kvm opens read-write, else why not."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return f"/dev/kvm cannot be opened ({e.strerror})"
    os.close(fd)
    return None


def host_key(qemu_ver: str | None) -> str:
    u = os.uname()
    model = ""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{u.nodename}|{u.release}|{model}|{qemu_ver}"


# ---- the target ------------------------------------------------------------

class VmTarget:
    """targets.base.Target over QEMU guests. `default` is the machine of a
    variant that names no kernel= (from --kernel and --kernel-cmdline)."""

    machine_params = MACHINE_PARAMS

    def __init__(self, cfg: VmConfig, default: Machine | None = None, default_cmdline: str = ""):
        self.cfg = cfg
        self.default = default
        self.default_cmdline = default.cmdline if default else default_cmdline
        self.name = "vm"
        self._local = None
        self._qemu_version: str | None = None
        self._sha: dict[Path, str] = {}
        self._accel: dict[str, tuple[str, str]] = {}       # sha -> (accel, why)
        self._machine: dict[tuple, tuple[str, str]] = {}   # (sha, accel) -> (machine type, why)
        self._checks: dict[tuple, Command] = {}
        self.machines: dict[tuple, dict] = {}               # (kernel, cmdline) -> what its preflight boot saw
        self.boots: list[dict] = []                         # every boot of this run: (figures for the docs)
        if shutil.which(cfg.qemu) is None and not os.path.isfile(cfg.qemu):
            raise UsageError(f"{cfg.qemu} is not installed; install QEMU (Debian: apt-get install "
                             "qemu-system-x86) to boot kernels")
        if cfg.accel not in ACCELS:
            raise UsageError(f"--accel {cfg.accel}: valid: {', '.join(ACCELS)}")
        if cfg.machine not in MACHINES:
            raise UsageError(f"--vm-machine {cfg.machine}: valid: {', '.join(MACHINES)}")
        if cfg.accel == "kvm":
            why = kvm_usable()
            if why:
                raise UsageError(f"--accel kvm: {why}; use --accel tcg (emulated) or --accel auto")
        if probe.host_arch() != "x86_64":
            raise UsageError(f"the vm target boots x86_64 guests; this machine is {probe.host_arch()}")

    # -- what the guest is (answered from the same static probe it runs) --
    @property
    def local(self):
        if self._local is None:
            from .local import local_target

            self._local = local_target()
        return self._local

    def host_arch(self) -> str:
        return "x86_64"

    def arches(self) -> list[str]:
        return ["x86_64"]

    def benchmark_table(self, arch: str | None = None) -> dict:
        if arch not in (None, "x86_64"):
            raise UsageError(f"arch={arch}: the vm target runs the x86_64 probe only")
        return self.local.benchmark_table("x86_64")

    def placement_of(self, a: int, b: int, arch: str | None = None) -> str:
        # -smp N,sockets=1,cores=N,threads=1: distinct guest CPUs are cores of one socket
        return "same" if a == b else "core"

    def allowed_cpus(self) -> list[int]:
        return list(range(self.cfg.cpus))

    def default_cpu(self) -> int:
        return self.cfg.cpus - 1

    def pmu_catalog(self):
        raise UsageError("named PMU events are not available in the vm target (the guest has no PMU here); "
                         "count software events, e.g. --counters context-switches,task-clock")

    def cpuid(self, arch: str | None = None) -> dict | None:
        for m in self.machines.values():
            if m.get("cpuid"):
                return m["cpuid"]
        return None

    def probe_version(self, arch: str | None = None) -> str | None:
        return self.local.probe_version("x86_64")

    def qemu_version(self) -> str | None:
        if self._qemu_version is None:
            self._qemu_version = qemu_version(self.cfg.qemu)
        return self._qemu_version

    def env(self) -> dict:
        """The host's environment, the guest's CPUID/XCR0 as its first boot
        saw them, and a `vm` field: QEMU, acceleration, every machine booted."""
        from ..env import collect

        version = self.probe_version()
        info = {"probe_version": version, "compiler": version.split(" ", 3)[-1] if version else None}
        env = collect(self.local.cpuid(), info)
        cpuid = self.cpuid()
        if cpuid is not None:
            env["guest_cpuid"] = {"value": cpuid, "source": "opcost-probe cpuid in the guest (preflight boot)"}
            # compare refuses runs whose guests saw different CPU models (commands/compare.py)
            env["guest_cpu_model"] = {"value": cpuid.get("brand"), "source": "CPUID brand string in the guest"}
        env["vm"] = {"value": {"qemu": self.qemu_version(), "cpus": self.cfg.cpus, "mem_mib": self.cfg.mem_mib,
                               "accel_asked": self.cfg.accel, "machine_asked": self.cfg.machine,
                               "allow_emulated": self.cfg.allow_emulated,
                               "host_hypervisor": _hypervisor_flag(),
                               "machines": [{"kernel": str(k[0]), "cmdline": k[1], **v}
                                            for k, v in self.machines.items()]},
                     "source": "targets/vm.py: QEMU and the preflight boot of each kernel"}
        return env

    def check_machine_param(self, key: str, value: str) -> None:
        """kernel=PATH or cmdline=ARGS of a variant (spec.expand): UsageError if wrong."""
        if key == "kernel":
            check_kernel(value, "kernel=")
        else:
            check_cmdline(value, "cmdline=")

    # -- which machine a request boots --
    def machine_of(self, req: probe.ProbeRequest) -> Machine:
        given = dict(getattr(req, "machine", ()) or ())
        kernel = given.get("kernel")
        if kernel is None:
            if self.default is None:
                raise UsageError("no kernel to boot: give --kernel PATH, or kernel= in the SPEC or in --a/--b")
            m = self.default
            return Machine(m.kernel, check_cmdline(given.get("cmdline", m.cmdline), "cmdline="))
        return Machine(check_kernel(kernel, "kernel="), check_cmdline(given.get("cmdline", self.default_cmdline),
                                                                      "cmdline="))

    def sha(self, kernel: Path) -> str:
        if kernel not in self._sha:
            self._sha[kernel] = sha256_of(kernel)
        return self._sha[kernel]

    def accel_for(self, m: Machine) -> tuple[str, str]:
        """(kvm|tcg, why) for this kernel: --accel as asked, or auto's answer
        (a short trial boot under KVM, remembered per image and host)."""
        if self.cfg.accel != "auto":
            return self.cfg.accel, "asked (--accel)"
        sha = self.sha(m.kernel)
        if sha in self._accel:
            return self._accel[sha]
        why = kvm_usable()
        if why:
            self._accel[sha] = ("tcg", why)
            return self._accel[sha]
        path = cache_dir() / "vm-accel.json"
        key = f"{sha}|{host_key(self.qemu_version())}"
        known = _read_json(path)
        if key in known:
            self._accel[sha] = (known[key]["accel"], known[key]["why"] + " (remembered)")
            return self._accel[sha]
        try:
            boot(self.cfg, Machine(m.kernel, m.cmdline), [], accel="kvm", machine_type="pc",
                 boot_limit=KVM_TRIAL_S, timeout=KVM_TRIAL_S + 5)
            answer = ("kvm", "a trial boot under KVM reached the init")
        except (BootFailed, ProbeError, ProbeTimeout) as e:
            answer = ("tcg", f"a trial boot under KVM failed ({e})")
        _remember(path, key, {"accel": answer[0], "why": answer[1]})
        self._accel[sha] = answer
        return answer

    def machine_for(self, m: Machine, accel: str) -> tuple[str | None, str]:
        """(microvm|pc, why) for this kernel under `accel`: --vm-machine as
        asked, or auto's remembered answer; (None, ...) when auto has not
        tried this kernel, host and accel yet (the next boot tries microvm)."""
        if self.cfg.machine != "auto":
            return self.cfg.machine, "asked (--vm-machine)"
        key = (self.sha(m.kernel), accel)
        if key not in self._machine:
            known = _read_json(cache_dir() / "vm-machine.json").get(self._machine_key(m, accel))
            if not known:
                return None, "not tried yet"
            self._machine[key] = (known["machine"], known["why"] + " (remembered)")
        return self._machine[key]

    def _machine_key(self, m: Machine, accel: str) -> str:
        return f"{self.sha(m.kernel)}|{accel}|{host_key(self.qemu_version())}"

    def _machine_found(self, m: Machine, accel: str, machine_type: str, why: str) -> None:
        self._machine[(self.sha(m.kernel), accel)] = (machine_type, why)
        _remember(cache_dir() / "vm-machine.json", self._machine_key(m, accel), {"machine": machine_type, "why": why})

    def _boot(self, m: Machine, cmds, timeout: float, on_frame=None, what: str = "",
              files: dict[str, Path] | None = None) -> tuple[Boot, str, str]:
        accel, why = self.accel_for(m)
        machine_type, _ = self.machine_for(m, accel)
        host_cpus = None
        pinning = "not pinned: under TCG QEMU's threads run where the host schedules them"
        if accel == "kvm" or os.environ.get("OPCOST_VM_PIN") == "1":   # (=1: the tests pin under TCG too)
            own = sorted(os.sched_getaffinity(0))
            host_cpus = own[-self.cfg.cpus:] if len(own) > self.cfg.cpus else None
            pinning = (f"vCPU 0..{len(host_cpus) - 1} on host CPUs {', '.join(map(str, host_cpus))}, one each; "
                       f"QEMU's other threads and opcost on the other {len(own) - len(host_cpus)}" if host_cpus else
                       f"not pinned: --vm-cpus {self.cfg.cpus} leaves none of the {len(own)} host CPU(s) opcost "
                       "may use for QEMU's other threads and opcost itself; give fewer guest CPUs")
        limit = BOOT_LIMIT_S[accel]
        with contextlib.suppress(ValueError):
            limit = float(os.environ.get("OPCOST_VM_BOOT_LIMIT") or limit)
        own_cpus = set(os.sched_getaffinity(0))
        try:
            if host_cpus:   # the front end (and QEMU's other threads, which inherit it) off the vCPUs' CPUs
                _pin_threads(own_cpus - set(host_cpus))
            b = None
            if machine_type is None:   # auto, not tried: this boot tries microvm, briefly; else pc
                try:
                    b = boot(self.cfg, m, cmds, accel=accel, machine_type="microvm",
                             boot_limit=min(limit, MICROVM_TRIAL_S[accel]), timeout=timeout, host_cpus=host_cpus,
                             on_frame=on_frame, files=files)
                    machine_type = "microvm"
                    self._machine_found(m, accel, "microvm", "a first boot on microvm reached the init")
                except (BootFailed, ProbeError, ProbeTimeout) as e:
                    if getattr(e, "reached_init", True):
                        raise   # it booted: whatever failed after, it is not the machine type
                    machine_type = "pc"
                    microvm_failed = f"a first boot on microvm did not reach the init ({e})"
                    b = boot(self.cfg, m, cmds, accel=accel, machine_type="pc", boot_limit=limit, timeout=timeout,
                             host_cpus=host_cpus, on_frame=on_frame, files=files)
                    self._machine_found(m, accel, "pc", microvm_failed)   # pc booted: remembered
            if b is None:
                b = boot(self.cfg, m, cmds, accel=accel, machine_type=machine_type, boot_limit=limit,
                         timeout=timeout, host_cpus=host_cpus, on_frame=on_frame, files=files)
        except (BootFailed, ProbeError, ProbeTimeout) as e:
            tail = getattr(e, "console", None)
            saved = save_console(tail or [], f"{what}: {e}") if tail is not None else None
            raise type(e)(f"{e}" + (f"; the console's last lines are in {saved}" if saved else "")) from None
        finally:
            if host_cpus:
                _pin_threads(own_cpus)
        b.pinning = pinning
        self.boots.append({"kernel": str(m.kernel), "boot_s": b.boot_s, "wall_s": b.wall_s, "accel": accel,
                           "machine": machine_type})
        return b, accel, machine_type

    def _record(self, m: Machine, b: Boot, accel: str, machine_type: str) -> dict:
        return {"kernel": str(m.kernel), "kernel_sha256": self.sha(m.kernel), "cmdline": m.cmdline,
                "guest": b.facts, "accel": accel, "accel_why": self.accel_for(m)[1], "machine": machine_type,
                "machine_why": self.machine_for(m, accel)[1], "qemu": self.qemu_version(),
                "qemu_argv": b.argv, "vcpus": {str(k): v for k, v in b.vcpus.items()}, "pinning": b.pinning,
                "boot_s": round(b.boot_s or 0, 3), "wall_s": round(b.wall_s, 3),
                "host_kernel": os.uname().release, "host_hypervisor": _hypervisor_flag()}

    # -- the probe's protocol --
    def batch_key(self, req: probe.ProbeRequest) -> tuple:
        """Requests with one key run in one boot (runner: one boot per machine per round)."""
        m = self.machine_of(req)
        return (m.kernel, m.cmdline)

    def prepare(self, reqs: list[probe.ProbeRequest]) -> None:
        """The preflight: each machine booted once, running every request's
        check there (and `opcost-probe cpuid`); check() then answers from it.
        A kernel that does not boot is bad input: BootFailed (exit 2), its
        console kept."""
        groups: dict[tuple, dict] = {}
        for r in reqs:
            ck = self._check_key(r)
            if ck not in self._checks:
                groups.setdefault(self.batch_key(r), {}).setdefault(ck, r)
        for (kernel, cmdline), pending in groups.items():
            m = Machine(kernel, cmdline)
            runs, files = guest_files(list(pending.values()))
            b, accel, mt = self._boot_checked(m, [(["cpuid"], {})] + [(g.argv(check=True), {}, exe)
                                                                     for g, exe in runs],
                                              f"preflight boot of {kernel}", files)
            cmds = b.commands + [Command() for _ in range(len(pending) + 1 - len(b.commands))]
            rec = self._record(m, b, accel, mt)
            with contextlib.suppress(ValueError, IndexError):
                rec["cpuid"] = json.loads(cmds[0].stdout[0])
            self.machines.setdefault((kernel, cmdline), rec)
            for ck, c in zip(pending, cmds[1:]):
                self._checks[ck] = c

    def _check_key(self, req: probe.ProbeRequest) -> tuple:
        """One preflight per machine and command (a build of `opcost variants`
        is its own command: its argv may be another build's)."""
        return (*self.batch_key(req), req.exe, req.program, tuple(req.argv(check=True)))

    def check(self, req: probe.ProbeRequest, timeout: float = 30) -> str | None:
        """Preflight in the guest: the machine boots (else BootFailed, exit 2,
        its console kept), the probe accepts the request there."""
        key = self._check_key(req)
        if key not in self._checks:
            self.prepare([req])
        chk = self._checks[key]
        last_err = (chk.stderr or [""])[-1].removeprefix("opcost-probe: ")
        if chk.status == probe.PROBE_EXIT_OK:
            return None
        if chk.status == probe.PROBE_EXIT_UNSUPPORTED:
            try:
                return json.loads(chk.stdout[0]).get("reason") or "unsupported in the guest"
            except (IndexError, ValueError):
                raise ProbeError(f"{req.bench}: probe said unsupported without a reason") from None
        if chk.status == probe.PROBE_EXIT_USAGE:
            raise UsageError(last_err or f"{req.bench}: probe rejected its arguments")
        raise ProbeError(f"{req.bench}: probe setup failed in the guest: {last_err or chk.status}")

    def _boot_checked(self, m: Machine, cmds, what: str, files: dict[str, Path] | None = None):
        try:
            return self._boot(m, cmds, 600.0, what=what, files=files)
        except BootFailed as e:
            raise BootFailed(f"kernel {m.kernel} did not boot: {e}") from None
        except (ProbeTimeout, ProbeError) as e:   # a guest that hangs or prints garbage: bad input here too
            raise BootFailed(f"kernel {m.kernel}: {e}") from None

    def run_process(self, req: probe.ProbeRequest, timeout: float, on_line=None) -> probe.ProcessResult:
        (res,) = self.run_batch([req], timeout, on_line)
        if isinstance(res, Exception):
            raise res
        return res

    def run_batch(self, reqs: list[probe.ProbeRequest], timeout: float, on_line=None) -> list:
        """One boot of the requests' machine (one machine: the runner groups
        them by batch_key): `opcost-probe cpuid`, then `--vm-procs` probe
        processes of each request, interleaved (A B A B...: drift within the
        boot spreads over them), each with its own seed and padding. Per
        request, a ProcessResult (its processes' samples pooled: the per-boot
        figure) or the ProbeError/ProbeTimeout/UsageError it ended with; a
        boot that fails fails them all (ProbeError: during a run that is the
        boot's failure, exit 1, its console kept)."""
        import dataclasses

        m = self.machine_of(reqs[0])
        per = max(1, self.cfg.procs)
        subs = [(ri, dataclasses.replace(r, seed=r.seed if j == 0 else r.seed * 7919 + j,
                                         pad_bytes=(r.pad_bytes + 1237 * j) % 4097))
                for j in range(per) for ri, r in enumerate(reqs)]
        results = [probe.ProcessResult(pad_bytes=r.pad_bytes) for _, r in subs]

        def on_frame(i: int, kind: str, text: bytes) -> None:
            if 1 <= i <= len(subs) and kind == "O" and text.strip():
                probe._accept(results[i - 1], text, on_line)

        runs, files = guest_files([r for _, r in subs])
        cmds: list[tuple] = [(["cpuid"], {})]
        cmds += [(g.argv(), {"OPCOST_PAD": "x" * r.pad_bytes}, exe) for (_, r), (g, exe) in zip(subs, runs)]
        try:
            b, accel, mt = self._boot(m, cmds, timeout, on_frame, what=f"{', '.join(r.bench for r in reqs)} on {m.kernel}",
                                      files=files)
        except BootFailed as e:
            err: Exception = ProbeError(f"kernel {m.kernel} did not boot: {e}")
            return [err for _ in reqs]
        except (ProbeError, ProbeTimeout) as e:
            return [e for _ in reqs]
        except json.JSONDecodeError as e:
            return [ProbeError(f"probe printed a line that is not JSON in the guest: {e}") for _ in reqs]
        cmd = b.commands + [Command() for _ in range(len(subs) + 1 - len(b.commands))]
        rec = self._record(m, b, accel, mt)
        with contextlib.suppress(ValueError, IndexError):
            rec["cpuid"] = json.loads(cmd[0].stdout[0])
        rec["processes_in_boot"] = len(subs)
        done: list[list] = [[] for _ in reqs]
        for k, ((ri, r), res, c) in enumerate(zip(subs, results, cmd[1:])):
            done[ri].append(self._finish(r, res, c, dict(rec, position_in_boot=k), accel))
        return [_pooled(parts) for parts in done]

    def _finish(self, req: probe.ProbeRequest, res: probe.ProcessResult, c: Command, rec: dict, accel: str):
        res.wall_s = (c.ended_s or 0) - (c.started_s or 0)
        res.front_end = f"outside the guest ({accel})"
        rc = c.status
        last_err = (c.stderr or [""])[-1].removeprefix("opcost-probe: ")
        if rc == probe.PROBE_EXIT_UNSUPPORTED and res.unsupported is not None:
            return res
        if rc == probe.PROBE_EXIT_USAGE:
            return UsageError(last_err or f"{req.bench}: probe rejected its arguments")
        if rc != 0:
            return ProbeError(f"probe failed in the guest: {last_err or f'exit status {rc}'}")
        if res.header is None or res.trailer is None:
            return ProbeError("probe output ended early in the guest (header or trailer missing)")
        rec["probe_wall_s"] = round(res.wall_s, 3)
        res.header["vm"] = rec
        if accel == "tcg":
            res.header["emulator"] = f"{os.path.basename(self.cfg.qemu)} (TCG)"
            res.emulator = res.header["emulator"]
        return res

    def run_concurrent(self, reqs: list[probe.ProbeRequest], timeout: float, on_line=None) -> list:
        raise UsageError("--parallel is not supported on the vm target (one probe process per boot)")


def _pooled(parts: list):
    """The processes of one variant in one boot as one figure: an error or
    unsupported if any ended so; else the first's header, every measured and
    warm-up batch of all of them (renumbered), and each process's own facts
    (its median among them) under header.vm.processes."""
    for p in parts:
        if isinstance(p, Exception) or p.unsupported is not None:
            return p
    first = parts[0]
    if len(parts) == 1:
        return first
    vm = dict(first.header["vm"])
    from ..model import process_median

    # each process's own figure: the within-boot spread against the between-boot one (stats.boot_spread)
    vm["processes"] = [{"pid": p.header.get("pid"), "position_in_boot": p.header["vm"]["position_in_boot"],
                        "pad_bytes": p.pad_bytes, "samples": len(p.samples), "wall_s": round(p.wall_s, 3),
                        "median_ns": process_median(p.samples, p.header) if p.samples else None}
                       for p in parts]
    vm.pop("position_in_boot", None)
    first.header = dict(first.header, vm=vm)
    first.samples = [dict(s, i=n) for n, s in enumerate(s for p in parts for s in p.samples)]
    first.warmup = [dict(s, i=n) for n, s in enumerate(s for p in parts for s in p.warmup)]
    first.trailer = dict(first.trailer or {}, samples=len(first.samples), warmup=len(first.warmup))
    first.wall_s = sum(p.wall_s for p in parts)
    return first


def _read_json(path: Path) -> dict:
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def _remember(path: Path, key: str, value: dict) -> None:
    """One answer added to a small JSON cache (written whole, atomically)."""
    known = _read_json(path)
    known[key] = value
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1))
        os.replace(tmp, path)


def _pin_threads(cpus: set[int]) -> None:
    """Every thread of this process onto `cpus`."""
    for t in _threads(os.getpid()):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(t, cpus)


def _hypervisor_flag() -> bool | None:
    """The host's CPUID hypervisor bit as /proc/cpuinfo shows it: a nested guest says so."""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return " hypervisor" in line or line.rstrip().endswith("hypervisor")
    return None


# ---- the command line ------------------------------------------------------

def open_vm(kernel: str | None = None, cmdline: str = "", cpus: int | None = None, mem_mib: int | None = None,
            procs: int | None = None, accel: str = "auto", allow_emulated: bool = False,
            machine: str = "auto") -> VmTarget:
    """The vm target (targets.open_target's opener, from --kernel and the
    --vm-* options, vm_options.from_args, or from a vm: spec): `kernel` is
    the machine of a variant that names no kernel= (None: every variant names
    one). None for a number: its default."""
    cmdline = check_cmdline(cmdline or "")
    default = Machine(check_kernel(kernel), cmdline) if kernel else None
    cfg = VmConfig(qemu=os.environ.get("OPCOST_QEMU") or QEMU, cpus=cpus or 2, mem_mib=mem_mib or 512,
                   accel=accel, allow_emulated=allow_emulated, procs=procs or 1, machine=machine)
    return VmTarget(cfg, default, cmdline)


WITHHELD = "emulated (QEMU TCG): the timings are the emulator's, so no verdict on cost; --allow-emulated gives one"


def tcg_emulated(flags) -> bool:
    """Summary flags that say the figures came from a guest emulated by QEMU's TCG."""
    return any(isinstance(f, dict) and f.get("flag") == "emulated" and "(TCG)" in str(f.get("detail", ""))
               for f in flags or [])


def withhold_emulated(doc: dict, allow: bool) -> dict:
    """No verdict on cost from a guest emulated by QEMU's TCG unless
    --allow-emulated: each such comparison keeps its figures, its verdict
    becomes None with the reason under `withheld`, and the summary's counts
    leave it out (its geometric mean still covers every ratio)."""
    if allow:
        return doc
    changed = False
    for e in doc.get("comparisons") or []:
        if e.get("verdict") is not None and tcg_emulated(e.get("flags")):
            e["withheld"] = WITHHELD
            e["verdict"] = None
            changed = True
    summary = doc.get("summary")   # the comparison's counts of each verdict
    counts = summary.get("counts") if isinstance(summary, dict) else None
    if changed and counts is not None:
        for k in counts:
            counts[k] = sum(1 for e in doc["comparisons"] if e.get("verdict") == k)
    return doc


def withhold_emulated_series(doc: dict, allow: bool) -> dict:
    """A series, as withhold_emulated does a comparison: every label whose
    figures a TCG guest gave is `emulated: true` (always); unless
    --allow-emulated, a series with such a label gives no change point: they
    move, figures kept, to `withheld_change_points`, no label is marked, and
    `withheld` says why and what to do."""
    emulated = [lb for lb in doc.get("labels") or [] if tcg_emulated(lb.get("flags"))]
    for lb in doc.get("labels") or []:
        lb["emulated"] = lb in emulated
    doc["allow_emulated"] = bool(allow)
    if allow or not emulated:
        return doc
    doc["withheld"] = (f"{len(emulated)} of {len(doc['labels'])} labels emulated (QEMU TCG): the timings are the "
                       "emulator's, so no change point is given on cost; --allow-emulated gives them")
    doc["withheld_change_points"] = doc.get("change_points") or []
    doc["change_points"] = []
    for lb in doc["labels"]:
        lb["change_point"] = False
    return doc


def open_vm_spec(spec: str) -> VmTarget:
    """A vm target from a target spec, for open_target's registry:
    `vm:PATH[?cpus=N&mem=MiB&accel=kvm|tcg|auto&machine=microvm|pc|auto&cmdline=ARGS]` (the cmdline
    URL-encoded). UsageError when a part is wrong."""
    from urllib.parse import parse_qs, urlsplit

    u = urlsplit(spec)
    if u.scheme != "vm" or not u.path:
        raise UsageError(f"target {spec!r}: write "
                         "vm:PATH[?cpus=N&mem=MiB&accel=kvm|tcg|auto&machine=microvm|pc|auto&cmdline=ARGS]")
    q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
    unknown = set(q) - {"cpus", "mem", "accel", "machine", "cmdline"}
    if unknown:
        raise UsageError(f"target {spec!r}: unknown {', '.join(sorted(unknown))}; "
                         "valid: cpus, mem, accel, machine, cmdline")
    try:
        cpus, mem = int(q.get("cpus", 2)), int(q.get("mem", 512))
    except ValueError:
        raise UsageError(f"target {spec!r}: cpus and mem are integers") from None
    check_kernel(u.path, "vm:")
    return open_vm(u.path, check_cmdline(q.get("cmdline", ""), "cmdline="), cpus, mem, accel=q.get("accel", "auto"),
                   machine=q.get("machine", "auto"))
