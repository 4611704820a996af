"""The one module that starts the probe and parses what it prints.

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
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ProbeError, ProbeTimeout, UsageError

PROBE_EXIT_OK, PROBE_EXIT_FAIL, PROBE_EXIT_USAGE, PROBE_EXIT_UNSUPPORTED = 0, 1, 2, 3

_ARCH_ALIASES = {"amd64": "x86_64", "x86_64": "x86_64", "i386": "i386", "i686": "i386",
                 "aarch64": "aarch64", "arm64": "aarch64"}


def host_arch() -> str:
    m = platform.machine()
    return _ARCH_ALIASES.get(m.lower(), m)


def _package_probe_dir() -> Path:
    return Path(__file__).resolve().parent / "_probe"


def installed_arches() -> list[str]:
    """Architectures with a probe binary shipped in the package (or given by
    OPCOST_PROBE, which stands for the host architecture)."""
    arches = set()
    if os.environ.get("OPCOST_PROBE"):
        arches.add(host_arch())
    d = _package_probe_dir()
    if d.is_dir():
        for p in d.glob("opcost-probe-*"):
            arches.add(p.name[len("opcost-probe-"):])
    dev = _dev_probe()
    if dev:
        arches.add(host_arch())
    return sorted(arches)


def _dev_probe() -> Path | None:
    # Running from a source checkout (tests before install): probe/opcost-probe.
    p = Path(__file__).resolve().parents[2] / "probe" / "opcost-probe"
    return p if p.is_file() else None


def probe_path(arch: str | None = None) -> Path:
    arch = arch or host_arch()
    env = os.environ.get("OPCOST_PROBE")
    if env and arch == host_arch():
        return Path(env)
    p = _package_probe_dir() / f"opcost-probe-{arch}"
    if p.is_file():
        return p
    if arch == host_arch():
        dev = _dev_probe()
        if dev:
            return dev
    have = ", ".join(installed_arches()) or "none"
    raise UsageError(f"no probe for arch={arch} in this installation; available: {have} "
                     f"(reinstall with `pip install .` to build the host probe)")


def _run_simple(args: list[str], arch: str | None = None, timeout: float = 30) -> str:
    exe = probe_path(arch)
    try:
        cp = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise ProbeTimeout(f"probe {' '.join(args)} did not answer within {timeout:.0f} s") from e
    except OSError as e:
        raise ProbeError(f"cannot start probe {exe}: {e.strerror}") from e
    if cp.returncode != 0:
        msg = cp.stderr.strip().splitlines()[-1:] or [f"exit {cp.returncode}"]
        raise ProbeError(f"probe {' '.join(args)} failed: {msg[0]}")
    return cp.stdout


_LIST_CACHE: dict[str, dict] = {}


def benchmark_table(arch: str | None = None) -> dict:
    """`opcost-probe list --json`: benchmarks, their parameters, counter names."""
    arch = arch or host_arch()
    if arch not in _LIST_CACHE:
        out = _run_simple(["list", "--json"], arch)
        try:
            _LIST_CACHE[arch] = json.loads(out)
        except json.JSONDecodeError as e:
            raise ProbeError(f"probe list printed invalid JSON: {e}") from e
    return _LIST_CACHE[arch]


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
    bench: str
    params: dict[str, str]          # benchmark parameters (not cpu/arch)
    arch: str
    cpus: str | None = None         # "A" or "A,B"
    samples: int = 20
    warmup: int = 3
    target_ms: float = 10.0
    iters: int | None = None
    counters: str | None = None
    fake_clock: float | None = None
    seed: int = 0
    pad_bytes: int = 0              # setup randomisation: env padding length
    spin: int = 0                   # injected cost per operation
    exe: str | None = None          # a probe built for this request (variants --mode op)
    program: tuple | None = None    # `opcost-probe time -- PROGRAM...` instead of `run` (variants)

    def argv(self, check: bool = False) -> list[str]:
        if self.program:
            a = ["time", "--samples", str(self.samples), "--warmup", str(self.warmup)]
            if self.cpus is not None:
                a += ["--cpu", self.cpus]
            if self.fake_clock:
                a += ["--fake-clock", f"{self.fake_clock:g}", "--seed", str(self.seed)]
            return a + (["--check"] if check else []) + ["--", *self.program]
        a = ["run", self.bench]
        for k, v in self.params.items():
            a += ["-P", f"{k}={v}"]
        a += ["--samples", str(self.samples), "--warmup", str(self.warmup),
              "--target-ms", f"{self.target_ms:g}"]
        if self.iters:
            a += ["--iters", str(self.iters)]
        if self.cpus is not None:
            a += ["--cpu", self.cpus]
        if self.counters:
            a += ["--counters", self.counters]
        if self.spin:
            a += ["--spin", str(self.spin)]
        if self.fake_clock:
            a += ["--fake-clock", f"{self.fake_clock:g}", "--seed", str(self.seed)]
        return a + (["--check"] if check else [])

    def exe_path(self) -> Path:
        return Path(self.exe) if self.exe else probe_path(self.arch)


@dataclass
class ProcessResult:
    header: dict | None = None
    samples: list[dict] = field(default_factory=list)
    warmup: list[dict] = field(default_factory=list)
    trailer: dict | None = None
    unsupported: str | None = None  # reason, when the probe said it cannot measure this here
    pad_bytes: int = 0
    wall_s: float = 0.0


def _failure(rc: int, last_err: str) -> str:
    """Why a probe exited non-zero: its own last stderr line, else the signal
    or the exit status."""
    if last_err:
        return last_err.removeprefix("opcost-probe: ")
    return f"killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"


def check(req: ProbeRequest, timeout: float = 30) -> str | None:
    """Preflight one variant: the probe validates parameters and CPUs and runs
    setup/teardown without measuring. None if it can run here, the reason if
    it cannot be measured on this machine; UsageError if the input is wrong."""
    exe = req.exe_path()
    try:
        cp = subprocess.run([str(exe), *req.argv(check=True)], capture_output=True, text=True,
                            timeout=timeout, stdin=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        raise ProbeTimeout(f"{req.bench}: probe setup did not finish within {timeout:.0f} s") from e
    except OSError as e:
        raise ProbeError(f"cannot start probe {exe}: {e.strerror}") from e
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


def run_process(req: ProbeRequest, timeout: float, on_line=None) -> ProcessResult:
    """Run one probe process to completion. Raises ProbeError (crash, bad
    output), ProbeTimeout, UsageError (the probe refused its input), and lets
    KeyboardInterrupt through after killing the probe's process group.
    ProbeError and ProbeTimeout messages do not name the benchmark: the caller
    prefixes the variant (bench and parameters), which it alone knows."""
    exe = req.exe_path()
    env = dict(os.environ)
    env["OPCOST_PAD"] = "x" * req.pad_bytes
    res = ProcessResult(pad_bytes=req.pad_bytes)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen([str(exe), *req.argv()], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    except OSError as e:
        raise ProbeError(f"cannot start probe {exe}: {e.strerror}") from e
    stderr_chunks: list[bytes] = []
    try:
        _pump(proc, res, timeout, t0, stderr_chunks, on_line)
    except BaseException:
        _kill_group(proc)
        raise
    res.wall_s = time.monotonic() - t0
    err = b"".join(stderr_chunks).decode(errors="replace").strip()
    last_err = err.splitlines()[-1] if err else ""
    rc = proc.returncode
    if rc == PROBE_EXIT_UNSUPPORTED and res.unsupported is not None:
        return res
    if rc == PROBE_EXIT_USAGE:
        raise UsageError(_failure(rc, last_err) if last_err else f"{req.bench}: probe rejected its arguments")
    if rc != 0:
        raise ProbeError(f"probe failed: {_failure(rc, last_err)}")
    if res.header is None or res.trailer is None:
        raise ProbeError("probe output ended early (header or trailer missing)")
    return res


def _pump(proc, res: ProcessResult, timeout: float, t0: float, stderr_chunks, on_line) -> None:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    buf = b""
    open_streams = 2
    while open_streams:
        left = timeout - (time.monotonic() - t0)
        if left <= 0:
            _kill_group(proc)
            raise ProbeTimeout(f"probe did not finish within {timeout:g} s (killed); "
                               "raise --timeout if it is just slow")
        for key, _ in sel.select(timeout=min(left, 0.5)):
            chunk = os.read(key.fileobj.fileno(), 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            if key.data == "err":
                stderr_chunks.append(chunk)
                continue
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    _accept(res, line, on_line)
    if buf.strip():
        raise ProbeError("probe printed a partial line at exit")
    try:
        proc.wait(timeout=max(1.0, timeout - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ProbeTimeout(f"probe did not exit within {timeout:g} s (killed)") from None


def _accept(res: ProcessResult, line: bytes, on_line) -> None:
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
    else:
        raise ProbeError(f"probe printed an unknown line type {kind!r}")
    if on_line:
        on_line(d)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
