"""Who runs a run: the host, pid and the pid's start time stored with it
(schema 3 on), so that a run left "running" by an opcost that is gone (killed
-9, the machine restarted) reads as "abandoned". The same for every backend."""

from __future__ import annotations

import os
import socket
from typing import Any


def _start_ticks(pid: int) -> int | None:
    """A process's start time (clock ticks since boot, /proc/PID/stat field 22):
    with the pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat.rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def owner_here() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": _start_ticks(pid)}


def owner_alive(owner: dict[str, Any] | None) -> bool | None:
    """True/False when we can tell (the owner ran on this host), None otherwise."""
    if not owner or owner.get("host") != socket.gethostname():
        return None
    return owner.get("start") is not None and _start_ticks(int(owner["pid"])) == owner["start"]


def shown_status(status: str, owner: dict[str, Any] | None) -> str:
    """A stored "running" whose owner is gone is "abandoned", never running."""
    if status == "running" and owner_alive(owner) is False:
        return "abandoned"
    return status
