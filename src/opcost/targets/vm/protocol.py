"""The guest's side of a boot as opcost reads it: the init's framed lines on
the data port (`@OPC <seq> <crc32> <payload>`: garbage is detected, never
parsed as a result), what each command of the job did (Command), what the
boot was (Boot), and the trace of a boot's events (OPCOST_VM_TRACE)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass, field

from ...errors import ProbeError, UsageError

FRAME = re.compile(rb"@OPC (\d+) ([0-9a-f]{8}) (.*)")
CONSOLE_TAIL = 60    # lines of the kernel's console kept for a failed boot


class BootFailed(UsageError):
    """A kernel that did not boot to opcost's init (panic, hang, garbage):
    bad input when found before anything was measured (exit 2); during a
    run the runner gets it as a ProbeError (the boot's failure, exit 1)."""


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
    entry: str = ""                  # what -kernel was (supervise.entry_kernel): the bzImage or its vmlinux, why
    retries: list[dict] = field(default_factory=list)   # boots of this round killed before it (supervise.retried)
    kallsyms: list[bytes] = field(default_factory=list)   # the init's K lines (initramfs: want-kallsyms)
    restore: dict | None = None      # a counting boot through a snapshot (restore.py): restored, or fresh and why



def trace(t: float, event: str) -> None:
    """OPCOST_VM_TRACE=FILE: each boot's events appended there, one a line,
    seconds from QEMU's start: `qemu PID MACHINE ACCEL`, `init` (the init's
    first line), `start I` and `exit I STATUS` (the job's commands; 0 is
    `opcost-probe cpuid`), `done`. Where a boot's time goes; the tests use
    it to interrupt a guest while it measures."""
    path = os.environ.get("OPCOST_VM_TRACE")
    if path:
        with contextlib.suppress(OSError), open(path, "a") as f:
            f.write(f"{t:.3f} {event}\n")


def frame(b: Boot, payload: bytes, t: float, on_frame) -> None:
    kind, _, rest = payload.partition(b" ")
    if kind in (b"B", b"Z", b"C", b"X"):
        trace(t, {b"B": "init", b"Z": "done"}.get(kind) or
               ("start " if kind == b"C" else "exit ") + rest.decode(errors="replace").split(" start")[0])
    if kind == b"B":
        b.facts = json.loads(rest)
        b.boot_s = t
        return
    if kind == b"Z":
        b.done = True
        return
    if kind == b"K":   # the kernel's text symbols, when asked (the counting plugin's functions)
        b.kallsyms.append(rest)
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
