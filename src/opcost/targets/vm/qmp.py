"""QEMU's machine protocol (QMP) over a socket pair, and what opcost does
with it: find the vCPU threads and pin them to host CPUs, the rest of
QEMU's threads and opcost itself kept off those."""

from __future__ import annotations

import contextlib
import json
import os
import socket

from ...errors import ProbeError, UsageError


class Qmp:
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


def threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def place_vcpus(qmp: Qmp, pid: int, host_cpus: list[int] | None) -> dict[int, dict]:
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
        for t in threads(pid):
            if t not in vcpu_threads:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(t, rest)
    return out


def pin_threads(cpus: set[int]) -> None:
    """Every thread of this process onto `cpus`."""
    for t in threads(os.getpid()):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(t, cpus)
