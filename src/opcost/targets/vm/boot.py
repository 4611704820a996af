"""One boot: QEMU started with the initramfs in a memfd, the console and
the data port on pipes, QMP on a socket pair; the guest's lines read until
its job is done (the init's `Z` frame: QEMU is then killed at once, since
the guest's own power-off under TCG costs 1-4 s and leaves nothing to keep),
or until it powers off; QEMU never outlives the call (PR_SET_PDEATHSIG, also
on SIGKILL of opcost, and killed on every way out)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import selectors
import shlex
import signal
import socket
import subprocess
import time
import zlib

from ... import probe
from ...errors import ProbeError, ProbeTimeout, UsageError
from .arch import DEFAULT_ARCH, GUEST_ARCHES
from .protocol import CONSOLE_TAIL, FRAME, Boot, BootFailed, frame, trace
from .qemu import Machine, VmConfig, qemu_argv
from .qmp import Qmp, place_vcpus
from .restore import Resume, load, save


def _pdeathsig() -> None:
    """In the QEMU child, before exec: SIGKILL when opcost (its parent) dies,
    however it dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
    except Exception:
        pass


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def run_guest(cfg: VmConfig, m: Machine, image: bytes, *, accel: str, machine_type: str, boot_limit: float,
              timeout: float, machine_params: str = "", host_cpus: list[int] | None = None, on_frame=None,
              stall_s: float = probe.STARTUP_STALL_S, resume: Resume | None = None) -> Boot:
    """Boot `m` with the initramfs `image` (initramfs.py), return what its
    job's commands did. Raises BootFailed (no init line within `boot_limit`:
    the kernel did not boot), ProbeTimeout (`timeout`, or nothing said for
    `stall_s` after the boot), ProbeError (garbled data port, QEMU failing).
    QEMU never outlives this call. `on_frame(cmd_index, kind, payload)` sees
    every framed line. `machine_params`: the kernel parameters the machine
    type needs (clock.machine_cmdline). `resume`: a counting boot through a
    snapshot (restore.py): restored from one, or saving one when the guest
    waits for its job; the job is then sent on the data port."""
    initrd = os.memfd_create("opcost-initramfs", 0)
    con_r, con_w = os.pipe()
    ours, theirs = socket.socketpair()
    b = Boot()
    proc = None
    try:
        os.write(initrd, image)
        argv = qemu_argv(cfg, m, accel, machine_type, initrd, con_w, theirs.fileno(), machine_params)
        if resume and resume.restore_from:
            argv += ["-incoming", "defer"]
        b.argv = [a if not a.startswith("/proc/self/fd/") else "<initramfs: memfd>" if a.endswith(f"/{initrd}")
                  else a for a in argv]
        b.argv = [re.sub(r"file:/proc/self/fd/\d+", "file:<console pipe>", a) for a in b.argv]
        b.argv = [re.sub(r"fd=\d+", "fd=<qmp socket>", a) for a in b.argv]
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if resume else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, pass_fds=(initrd, con_w, theirs.fileno()),
                                    preexec_fn=_pdeathsig, start_new_session=True)
        except FileNotFoundError:
            raise UsageError(f"{cfg.qemu} is not installed; install QEMU (Debian: apt-get install "
                             f"{GUEST_ARCHES[DEFAULT_ARCH].qemu_package}) or set OPCOST_QEMU=PATH") from None
        except OSError as e:
            raise ProbeError(f"cannot start {cfg.qemu}: {e.strerror}") from None
        trace(0.0, f"qemu {proc.pid} {machine_type} {accel}")
        trace(0.0, "argv " + shlex.join(b.argv))
        os.close(con_w)
        con_w = -1
        theirs.close()
        try:
            qmp = Qmp(ours)
            b.vcpus = place_vcpus(qmp, proc.pid, host_cpus)
            if resume and resume.restore_from:
                load(qmp, resume, boot_limit)
            qmp.cmd("cont")
        except (OSError, ValueError, ProbeError, ProbeTimeout) as e:
            err = _stderr_tail(proc)
            raise ProbeError(f"QEMU did not {'restore the guest' if resume and resume.restore_from else 'start'}: "
                             f"{err or e}") from None
        _pump(proc, con_r, b, t0, boot_limit, timeout, stall_s, on_frame, _Sender(proc, qmp, resume, boot_limit))
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
            for s in (proc.stdin, proc.stdout, proc.stderr):
                if s:
                    with contextlib.suppress(OSError):
                        s.close()


def _stderr_tail(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        _kill(proc)
    try:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    except OSError:
        err = ""
    return (err.strip().splitlines() or [""])[-1]


class _Sender:
    """A boot through a snapshot: its job written to QEMU's stdin (the data
    port) as the pipe takes it, once the guest waits for it (restored: at
    once; else after its "R ready" frame, the snapshot saved first)."""

    def __init__(self, proc, qmp: Qmp, resume: Resume | None, limit: float):
        self.proc, self.qmp, self.resume, self.limit = proc, qmp, resume, limit
        self.pending = resume.job if resume and resume.restore_from else b""
        if resume:
            os.set_blocking(proc.stdin.fileno(), False)

    def ready(self) -> None:
        if self.resume is None or self.pending:
            raise ProbeError("the guest said it waits for its job, which this boot sends in its initramfs")
        if self.resume.save_to:
            save(self.qmp, self.resume, self.limit)
        self.pending = self.resume.job

    def send(self) -> None:
        with contextlib.suppress(BlockingIOError):
            n = os.write(self.proc.stdin.fileno(), self.pending)
            self.pending = self.pending[n:]


def _pump(proc, con_r: int, b: Boot, t0: float, boot_limit: float, timeout: float, stall_s: float,
          on_frame, sender: _Sender) -> None:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "data")
    sel.register(con_r, selectors.EVENT_READ, "console")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    bufs = {"data": b"", "console": b"", "err": b""}
    err_lines: list[str] = []
    seq = 0
    last = t0
    open_n = 3
    while open_n and not b.done:
        if sender.pending:
            sender.send()
        now = time.monotonic()
        if b.facts is None and now - t0 > boot_limit:
            e = BootFailed(f"the guest did not reach opcost's init within {boot_limit:g} s "
                           "(the kernel hung, panicked or has no console on ttyS0)")
            setattr(e, "hung", True)   # killed at the limit: a retry may boot (supervise.retried)
            raise e
        if now - t0 > timeout:
            raise ProbeTimeout(f"the virtual machine did not finish within {timeout:g} s (--timeout; killed)")
        if b.facts is not None and now - last > stall_s:
            raise ProbeTimeout(f"the guest said nothing for {now - last:.0f} s: stuck, killed")
        for key, _ in sel.select(timeout=0.02 if sender.pending else 0.5):
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
                if mt.group(3) == b"R ready":   # waits for its job: the frames after it count from 0
                    sender.ready()
                    seq = 0
                    continue
                frame(b, mt.group(3), last - t0, on_frame)
    if b.done:   # the job is over: nothing the guest does after its Z frame is read
        _kill(proc)
    else:
        proc.wait()
    b.exit_status = proc.returncode
    b.console += [ln for ln in [bufs["console"].decode(errors="replace")] if ln]
    if b.facts is None:
        tail = (err_lines[-1] if err_lines else "") or (b.console[-1] if b.console else "no console output")
        raise BootFailed(f"the guest stopped before opcost's init ran (QEMU exit {proc.returncode}): {tail}")
    if not b.done:
        raise ProbeError("the guest stopped before its job was done (the kernel panicked or the init failed: "
                         + (b.console[-1] if b.console else "no console output") + ")")
