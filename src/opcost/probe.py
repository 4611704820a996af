"""The one module that starts the probe and parses what it prints: the
protocol with a probe process (ProbeRequest, ProcessResult, starting one and
collecting its lines) and where this machine's probes are (find_probe...).
It keeps nothing between calls; `target.LocalTarget` is what the rest of
opcost calls, and keeps the answers worth keeping.

The probe speaks JSON lines (schema `opcost.probe/1`): a header, one line per
batch ("sample"), a trailer; or a single "unsupported" line (exit 3). Anything
else on stdout is a protocol error. Each probe process runs in its own session
so that Ctrl-C and timeouts can take down it and its helpers together.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import selectors
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .arches import ELF_MACHINE, native_arch
from .errors import ProbeError, ProbeTimeout, UsageError
from .protocol import Protocol

PROBE_EXIT_OK, PROBE_EXIT_FAIL, PROBE_EXIT_USAGE, PROBE_EXIT_UNSUPPORTED = 0, 1, 2, 3

def host_arch() -> str:
    """opcost's name for this machine (armv7l is arm; a 32-bit userland on a
    64-bit Arm kernel is arm too: arches.native_arch)."""

    return native_arch(platform.machine(), struct.calcsize("P") * 8)


def _package_probe_dir() -> Path:
    return Path(__file__).resolve().parent / "_probe"


KNOWN_ARCHES = tuple(ELF_MACHINE)   # x86_64, i386, aarch64, arm


def user_probe_dir() -> Path:
    """Where `opcost probe build` puts probes for other architectures."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "opcost" / "probes"


def _dev_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "probe"


def _dev_probe() -> Path | None:
    # Running from a source checkout (tests before install): probe/opcost-probe.
    p = _dev_dir() / "opcost-probe"
    return p if p.is_file() else None


def candidates(arch: str) -> list[tuple[Path, str]]:
    """Where a probe for `arch` may be, in the order they are preferred."""
    out: list[tuple[Path, str]] = []
    env = os.environ.get("OPCOST_PROBE")
    if env and arch == host_arch():
        out.append((Path(env), "OPCOST_PROBE"))
    out.append((_package_probe_dir() / f"opcost-probe-{arch}", "package"))
    out.append((user_probe_dir() / f"opcost-probe-{arch}", "opcost probe build"))
    if arch == host_arch():
        dev = _dev_probe()
        if dev:
            out.append((dev, "source tree"))
    out.append((_dev_dir() / "build" / f"opcost-probe-{arch}", "source tree"))
    return out


def runs_natively(arch: str) -> bool:
    """The kernel runs this architecture's binaries itself: the host's, and
    i386 on an x86_64 kernel (IA32 emulation)."""
    h = host_arch()
    return arch == h or (h == "x86_64" and arch == "i386")


def emulator(arch: str) -> str | None:
    """qemu user-mode emulator for an architecture the host cannot run (found
    on PATH), or None. Emulated timings mean nothing; correctness does."""
    if runs_natively(arch):
        return None
    for name in (f"qemu-{arch}", f"qemu-{arch}-static"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass(frozen=True)
class ProbeInfo:
    arch: str
    path: Path
    source: str               # package, opcost probe build, source tree, OPCOST_PROBE
    emulator: str | None      # run through this (qemu), or None: native


def find_probe(arch: str) -> ProbeInfo | None:
    for path, source in candidates(arch):
        if path.is_file() and os.access(path, os.X_OK):
            emu = emulator(arch)
            if not runs_natively(arch) and emu is None:
                continue
            return ProbeInfo(arch, path, source, emu)
    return None


def installed_arches() -> list[str]:
    """Architectures whose probe can run here: shipped in the package, built
    with `opcost probe build`, or in the source tree (natively, or under a
    qemu user-mode emulator for another architecture)."""
    return sorted(a for a in {host_arch(), *KNOWN_ARCHES} if find_probe(a))


def probe_path(arch: str | None = None) -> Path:
    return _probe_info(arch).path


def probe_command(arch: str | None = None) -> list[str]:
    """argv prefix that starts the probe for `arch` (with its emulator, if any)."""
    info = _probe_info(arch)
    return [info.emulator, str(info.path)] if info.emulator else [str(info.path)]


def _probe_info(arch: str | None) -> ProbeInfo:
    arch = arch or host_arch()
    info = find_probe(arch)
    if info:
        return info
    have = ", ".join(installed_arches()) or "none"
    if arch not in KNOWN_ARCHES:
        raise UsageError(f"arch={arch} is not an architecture opcost knows; valid: {', '.join(KNOWN_ARCHES)}")
    hint = (f"build it with `opcost probe build --arch {arch}`" if runs_natively(arch)
            else f"build it with `opcost probe build --arch {arch}` and install qemu-user to run it")
    raise UsageError(f"no probe for arch={arch} that runs here; available: {have} ({hint})")


def _run_simple(args: list[str], arch: str | None = None, timeout: float = 30) -> str:
    cmd = probe_command(arch)
    exe = cmd[-1]
    try:
        cp = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise ProbeTimeout(f"probe {' '.join(args)} did not answer within {timeout:.0f} s") from e
    except OSError as e:
        raise ProbeError(f"cannot start probe {exe}: {e.strerror}") from e
    if cp.returncode != 0:
        msg = cp.stderr.strip().splitlines()[-1:] or [f"exit {cp.returncode}"]
        raise ProbeError(f"probe {' '.join(args)} failed: {msg[0]}")
    return cp.stdout


def benchmark_table(arch: str | None = None) -> dict:
    """`opcost-probe list --json`: benchmarks, their parameters, counter names.
    Runs the probe every time: LocalTarget keeps the answer."""
    out = _run_simple(["list", "--json"], arch)
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        raise ProbeError(f"probe list printed invalid JSON: {e}") from e


def placement_of(a: int, b: int, arch: str | None = None) -> str:
    """The placement class (same|smt|core|llc|numa) of a CPU pair, as the
    probe reads it from sysfs (`opcost-probe placement A B`). Runs the probe
    every time: LocalTarget keeps the answer."""
    try:
        return json.loads(_run_simple(["placement", str(a), str(b)], arch))["name"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ProbeError(f"probe placement printed an unexpected answer: {e}") from e


def cpuid(arch: str | None = None) -> dict | None:
    """What only native code can learn (CPUID, XCR0...); None if unavailable."""
    try:
        return json.loads(_run_simple(["cpuid"], arch))
    except (ProbeError, ProbeTimeout, UsageError, json.JSONDecodeError):
        return None


def probe_version(arch: str | None = None) -> str | None:
    try:
        return _run_simple(["version"], arch).strip()
    except (ProbeError, ProbeTimeout, UsageError):
        return None


@dataclass
class ProbeRequest:
    """One probe process: which benchmark (or build) with which parameters,
    where, and the protocol it follows."""
    bench: str
    params: dict[str, str]          # benchmark parameters (not cpu/arch)
    arch: str
    protocol: Protocol = field(default_factory=Protocol)
    cpus: str | None = None         # "A" or "A,B"
    counters: str | None = None
    seed: int = 0                   # this process's seed (fake clock)
    pad_bytes: int = 0              # setup randomisation: env padding length
    spin: int = 0                   # injected cost per operation
    hold: bool = False              # --hold: samples after the batches (no CPU is free for the front end)
    exe: str | None = None          # a probe built for this request (variants --mode op)
    program: tuple | None = None    # `opcost-probe time -- PROGRAM...` instead of `run` (variants)
    emulator: str | None = None     # exe, or the program, is for another architecture: run under this qemu
    ops: int = 0                    # program: operations in one run (`time --ops N`); 0: the run is the op
    machine: tuple = ()             # the vm target: (("kernel", PATH), ("cmdline", ARGS)) this process boots
    budget_ms: float | None = None  # --budget-ms: this process's share of the run's time budget (budget.py)
    emulated: tuple = ()            # events counted by QEMU's opcount plugin (emucount.py), not by the probe

    def argv(self, check: bool = False) -> list[str]:
        p = self.protocol
        fake = ["--fake-clock", f"{p.fake_clock:g}", "--seed", str(self.seed)] if p.fake_clock else []
        cpus = ["--cpu", self.cpus] if self.cpus is not None else []
        if self.program:
            ops = ["--ops", str(self.ops)] if self.ops else []
            return (["time", "--samples", str(p.samples), "--warmup", str(p.warmup), *cpus, *ops, *fake]
                    + (["--check"] if check else []) + ["--", *self.program])
        a = ["run", self.bench]
        for k, v in self.params.items():
            a += ["-P", f"{k}={v}"]
        a += ["--samples", str(p.samples), "--warmup", str(p.warmup), "--target-ms", f"{p.target_ms:g}"]
        if p.iters:
            a += ["--iters", str(p.iters)]
        a += cpus
        if self.counters:
            a += ["--counters", self.counters]
        if self.spin:
            a += ["--spin", str(self.spin)]
        if self.hold and not check:
            a += ["--hold"]
        if self.budget_ms and not check:
            a += ["--budget-ms", f"{self.budget_ms:.6g}"]
        return a + fake + (["--check"] if check else [])

    def command(self) -> list[str]:
        """argv prefix that starts this request's probe: its own build (exe,
        under its emulator when it is for another architecture), the host's
        probe for a program (which starts the program, itself under its
        emulator: `program` begins with it), or the architecture's probe, with
        its emulator if it needs one."""
        if self.exe:
            return [self.emulator, str(self.exe)] if self.emulator else [str(self.exe)]
        return probe_command(None if self.program else self.arch)


@dataclass
class ProcessResult:
    header: dict | None = None
    samples: list[dict] = field(default_factory=list)
    warmup: list[dict] = field(default_factory=list)
    trailer: dict | None = None
    unsupported: str | None = None  # reason, when the probe said it cannot measure this here
    pad_bytes: int = 0
    wall_s: float = 0.0
    emulator: str | None = None     # qemu-ARCH when the probe ran emulated
    progress: int = 0               # batches done, from --hold's progress lines
    front_end: str = ""             # where the front end was while the probe measured (LocalTarget)
    first_line_s: float | None = None   # when the header arrived (calibration done), from t_ref
    last_line_s: float | None = None    # when the last line arrived
    # per measured sample: (previous line's arrival, its own arrival), seconds from t_ref: the
    # batch ran inside this span (give or take the pipe latency)
    sample_spans: list = field(default_factory=list)
    count_file: str | None = None   # the opcount plugin's windows (req.emulated), read once the probe exits
    count_qemu: str = ""            # the QEMU that ran it with the plugin


def _failure(rc: int, last_err: str) -> str:
    """Why a probe exited non-zero: its own last stderr line, else the signal
    or the exit status."""
    if last_err:
        return last_err.removeprefix("opcost-probe: ")
    return f"killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"


def check(req: ProbeRequest, timeout: float = 30, launch=None, wrap=None) -> str | None:
    """Preflight one variant: the probe validates parameters and CPUs and runs
    setup/teardown without measuring. None if it can run here, the reason if
    it cannot be measured on this machine; UsageError if the input is wrong.
    `launch(req, argv)`, when given, is the command line that starts the
    probe with these arguments somewhere else (targets/ssh.py); `wrap(argv)`,
    the local command line around it (a target wrapping LocalTarget)."""
    cmd = req.command() if launch is None else launch(req, req.argv(check=True))
    exe = cmd[-1] if launch is None else "over ssh"
    # remotely, stdin stays open (a pipe nobody writes to) until the check ends: its closing is
    # what kills the remote probe
    hold_r, hold_w = os.pipe() if launch is not None else (None, None)
    try:
        cp = subprocess.run(cmd if launch is not None else (wrap or list)([*cmd, *req.argv(check=True)]),
                            capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL if hold_r is None else hold_r, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        if req.program:
            raise ProbeTimeout(f"the program's untimed check run did not finish within {timeout:.0f} s "
                               "(--timeout SEC allows longer)") from e
        raise ProbeTimeout(f"{req.bench}: probe setup did not finish within {timeout:.0f} s") from e
    except OSError as e:
        raise ProbeError(f"cannot start probe {exe}: {e.strerror}") from e
    finally:
        for fd in (hold_r, hold_w):
            if fd is not None:
                os.close(fd)
    last_err = (cp.stderr.strip().splitlines() or [""])[-1]
    if cp.returncode == PROBE_EXIT_OK:
        return None
    if cp.returncode == PROBE_EXIT_UNSUPPORTED:
        try:
            return json.loads(cp.stdout.splitlines()[0]).get("reason") or "unsupported on this machine"
        except (IndexError, json.JSONDecodeError):
            raise ProbeError(f"{req.bench}: probe said unsupported without a reason") from None
    if cp.returncode == PROBE_EXIT_USAGE:
        raise UsageError(_failure(cp.returncode, last_err) if last_err else f"{req.bench}: probe rejected its arguments")
    raise ProbeError(f"{req.bench}: probe setup failed: {_failure(cp.returncode, last_err)}")


def pad_length(rng: random.Random) -> int:
    return rng.randrange(0, 4097)


def run_process(req: ProbeRequest, timeout: float, on_line=None, after_start=None, launch=None,
                on_proc=None, wrap=None) -> ProcessResult:
    """Run one probe process to completion. Raises ProbeError (crash, bad
    output), ProbeTimeout, UsageError (the probe refused its input), and lets
    KeyboardInterrupt through after killing the probe's process group.
    ProbeError and ProbeTimeout messages do not name the benchmark: the caller
    prefixes the variant (bench and parameters), which it alone knows.
    `after_start()` is called once the process exists (the caller may then
    move itself off the CPUs it measures on: a child started after that
    would inherit the narrower affinity). `launch(req, argv)`: the command
    line that starts the probe elsewhere (targets/ssh.py); its stdin is then
    a pipe held open until the process ends (the remote side kills the probe
    when it closes). `on_proc(proc)` is told of the process once it exists.
    `wrap(argv)`: the local command line around the probe's (LocalTarget.wrap)."""
    proc, res, t0 = _start(req, launch, wrap)
    try:
        if on_proc:
            on_proc(proc)
        if after_start:
            after_start()
        return _collect(req, proc, res, t0, timeout, on_line)
    except BaseException:
        _kill_group(proc)
        raise


def run_concurrent(reqs: list[ProbeRequest], timeout: float, on_line=None, after_start=None, launch=None,
                   on_proc=None, wrap=None) -> list:
    """Start every request at once (one Popen after the other, no waiting in
    between) and collect them side by side, one thread per process. Returns,
    in order, a ProcessResult or the ProbeError/ProbeTimeout/UsageError of each.
    The probes calibrate on their own, so they reach their measured batches a
    few ms apart; `res.first_line_s`/`last_line_s` (seconds since the start of
    all) let the caller measure that skew. Ctrl-C kills every process group."""

    procs: list = []
    out: list = [None] * len(reqs)
    try:
        t_all = time.monotonic()
        for r in reqs:
            procs.append(_start(r, launch, wrap))
            if on_proc:
                on_proc(procs[-1][0])
        if after_start:
            after_start()

        def work(i: int) -> None:
            proc, res, t0 = procs[i]
            try:
                out[i] = _collect(reqs[i], proc, res, t0, timeout, on_line, t_all)
            except (ProbeError, ProbeTimeout, UsageError) as e:
                _kill_group(proc)
                out[i] = e

        threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(reqs))]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException:
        for proc, _, _ in procs:
            _kill_group(proc)
        raise
    return out


def _start(req: ProbeRequest, launch=None, wrap=None):
    cmd = req.command() if launch is None else []
    exe = cmd[-1] if cmd else "over ssh"
    env = dict(os.environ)
    env["OPCOST_PAD"] = "x" * req.pad_bytes
    count_file = None
    if req.emulated and cmd:
        env["OPCOST_COUNTING"] = "1"   # the probe's first window: the fixed part (emucount.inject_windows)
        # the probe under qemu-ARCH with the counting plugin (emucount.py): its timings are qemu's
        from . import emucount   # --help must not load it

        fd, count_file = tempfile.mkstemp(prefix="opcost-count-", suffix=".jsonl")
        os.close(fd)
        try:
            cmd = emucount.prefix(req.arch or host_arch(), count_file,
                                  emulator=cmd[0] if len(cmd) > 1 else None) + [cmd[-1]]
        except BaseException:
            os.unlink(count_file)
            raise
    emu = req.emulator or (cmd[0] if len(cmd) > 1 else None)
    res = ProcessResult(pad_bytes=req.pad_bytes, emulator=os.path.basename(emu) if emu else None,
                        count_file=count_file, count_qemu=cmd[0] if count_file else "")
    t0 = time.monotonic()
    try:
        argv = (wrap or list)([*cmd, *req.argv()]) if launch is None else launch(req, req.argv())
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL if launch is None else subprocess.PIPE,
                                env=env, start_new_session=True)
    except OSError as e:
        raise ProbeError(f"cannot start probe {exe}: {e.strerror}") from e
    return proc, res, t0


def _collect(req: ProbeRequest, proc, res: ProcessResult, t0: float, timeout: float, on_line,
             t_ref: float | None = None) -> ProcessResult:
    try:
        return _collect_probe(req, proc, res, t0, timeout, on_line, t_ref)
    finally:
        if res.count_file:
            try:
                os.unlink(res.count_file)
            except OSError:
                pass


def _collect_probe(req: ProbeRequest, proc, res: ProcessResult, t0: float, timeout: float, on_line,
                   t_ref: float | None) -> ProcessResult:
    stderr_chunks: list[bytes] = []
    _pump(proc, res, timeout, t0, stderr_chunks, on_line, t0 if t_ref is None else t_ref)
    res.wall_s = time.monotonic() - t0
    err = b"".join(stderr_chunks).decode(errors="replace").strip()
    last_err = err.splitlines()[-1] if err else ""
    rc = proc.returncode
    if res.count_file and rc != 0:
        from . import emucount   # --help must not load it

        refused = emucount.load_failure(err, res.count_qemu)
        if refused:
            raise UsageError(refused)
    if rc == PROBE_EXIT_UNSUPPORTED and res.unsupported is not None:
        return res
    if res.header is not None and res.emulator:
        res.header["emulator"] = res.emulator
    if rc == PROBE_EXIT_USAGE:
        raise UsageError(_failure(rc, last_err) if last_err else f"{req.bench}: probe rejected its arguments")
    if rc != 0:
        raise ProbeError(f"probe failed: {_failure(rc, last_err)}")
    if res.header is None or res.trailer is None:
        raise ProbeError("probe output ended early (header or trailer missing)")
    if res.count_file:
        from . import emucount   # --help must not load it

        emucount.inject(res.header, res.warmup, res.samples, list(req.emulated), res.count_file,
                        os.path.basename(res.count_qemu), exe=req.command()[-1])
    return res


# A probe is stuck, not slow, when it says nothing for this long: before its
# header (set-up and calibration: a 1 GiB parent is written, hackbench's
# workers start), and after it a multiple of one batch as calibrated (the
# header's batch_ms) or of the longest gap between its lines so far. A probe
# that keeps making progress is never killed; --timeout is a hard limit.
STARTUP_STALL_S = 120.0
MIN_STALL_S = 30.0
STALL_BATCHES = 20


PROGRESS_S = 1.0   # a probe holding its samples says it is alive about this often


def stall_limit(res: ProcessResult, longest_gap: float) -> float:
    if res.header is None:
        return STARTUP_STALL_S
    if res.header.get("bench") == "program":
        # `time`: a sample comes after a whole run of the user's program, which
        # may take minutes (seed 004's libgcc build: 52 s on a Cortex-A7); the
        # runner's hard limit, from the untimed check run, bounds it instead
        return math.inf
    batch_s = (res.header.get("batch_ms") or 0) / 1000.0
    if res.header.get("output") == "held":
        batch_s = max(batch_s, PROGRESS_S)
    return max(MIN_STALL_S, STALL_BATCHES * max(batch_s, longest_gap))


def _pump(proc, res: ProcessResult, timeout: float, t0: float, stderr_chunks, on_line, t_ref: float) -> None:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    buf = b""
    prev_s = 0.0
    open_streams = 2
    last = t0           # when the probe last said something on stdout
    longest_gap = 0.0   # the longest silence between two of its lines after the header
    while open_streams:
        now = time.monotonic()
        left = timeout - (now - t0)
        if left <= 0:
            _kill_group(proc)
            raise ProbeTimeout(f"probe did not finish within {timeout:g} s (--timeout; killed)")
        stall = stall_limit(res, longest_gap)
        if now - last > stall:
            _kill_group(proc)
            raise ProbeTimeout(f"probe made no progress for {now - last:.0f} s (no line within {stall:.0f} s"
                               + (", before its header" if res.header is None else "")
                               + "): stuck, killed; --timeout SEC sets a hard limit instead")
        for key, _ in sel.select(timeout=max(0.01, min(left, stall - (now - last), 0.5))):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            if key.data == "err":
                stderr_chunks.append(chunk)
                continue
            buf += chunk
            *lines, buf = buf.split(b"\n")
            if lines:
                t = time.monotonic()
                if res.header is not None:
                    longest_gap = max(longest_gap, t - last)
                last = t
            for line in lines:
                if line.strip():
                    d = _accept(res, line, on_line)
                    res.last_line_s = time.monotonic() - t_ref
                    if res.first_line_s is None:
                        res.first_line_s = res.last_line_s
                    if d.get("type") == "sample" and not d.get("warmup"):
                        res.sample_spans.append((prev_s, res.last_line_s))
                    prev_s = res.last_line_s
    if buf.strip():
        raise ProbeError("probe printed a partial line at exit")
    _close_stdin(proc)
    try:
        proc.wait(timeout=max(1.0, min(timeout - (time.monotonic() - t0), MIN_STALL_S)))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ProbeTimeout("probe closed its output but did not exit (killed)") from None


def _accept(res: ProcessResult, line: bytes, on_line) -> dict:
    try:
        d = json.loads(line)
    except json.JSONDecodeError as e:
        raise ProbeError(f"probe printed a line that is not JSON: {line[:80]!r} ({e})") from e
    kind = d.get("type")
    if kind == "header":
        res.header = d
    elif kind == "sample":
        for k in ("iters", "ns_per_op", "tsc_per_op"):
            v = d.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ProbeError(f"probe printed a sample with {k}={json.dumps(v)}, not a finite number")
        (res.warmup if d.get("warmup") else res.samples).append(d)
    elif kind == "trailer":
        res.trailer = d
    elif kind == "unsupported":
        res.unsupported = d.get("reason") or "unsupported on this machine"
    elif kind == "progress":   # --hold: alive, so many batches done (the samples come at the end)
        res.progress = int(d.get("batches", 0))
    else:
        raise ProbeError(f"probe printed an unknown line type {kind!r}")
    if on_line:
        on_line(d)
    return d


def _close_stdin(proc: subprocess.Popen) -> None:
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass


def _kill_group(proc: subprocess.Popen) -> None:
    _close_stdin(proc)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
