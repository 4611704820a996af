"""Parsers: the text of one anchor run -> ns per operation (perf bench,
rt-tests hackbench, lmbench). Pure functions: tests/test_anchors_script.py
feeds them captured outputs."""

from __future__ import annotations

import re

_NUM = r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"


class NoFigure(ValueError):
    """The tool ran and says it has no figure this time (not a format the
    parser does not know): its own subtraction came out at or below zero."""


def parse_perf_bench(text: str) -> dict:
    """perf bench (sched pipe, syscall basic|fork|execve), default format:
    '# Executed N <what>' ... 'X usecs/op'. Returns ns_per_op and count."""
    m = re.search(r"^\s*" + _NUM + r"\s+usecs/op\s*$", text, re.M)
    if not m:
        raise ValueError("no 'usecs/op' line in perf bench output")
    n = re.search(r"#\s*Executed\s+([0-9]+)\s+(.*?)\s*$", text, re.M)
    return {"ns_per_op": float(m.group(1)) * 1000.0,
            "count": int(n.group(1)) if n else None,
            "what": n.group(2) if n else None}


def parse_perf_bench_list(text: str) -> list[str]:
    """`perf bench syscall` with no benchmark lists '<name>: <summary>' lines."""
    return [m.group(1) for m in re.finditer(r"^\s+([a-z0-9_-]+):\s", text, re.M) if m.group(1) != "all"]


def parse_hackbench(text: str) -> dict:
    """rt-tests hackbench: 'Running in process mode with G groups using 2F file
    descriptors each (== T tasks)', 'Each sender will pass L messages of S
    bytes', 'Time: SECONDS'. Messages delivered = G*F*F*L (each of the F
    senders in a group sends L messages to each of its F receivers)."""
    t = re.search(r"^Time:\s*" + _NUM, text, re.M)
    if not t:
        raise ValueError("no 'Time:' line in hackbench output")
    h = re.search(r"Running in (\w+) mode with ([0-9]+) groups using ([0-9]+) file descriptors", text)
    e = re.search(r"Each sender will pass ([0-9]+) messages of ([0-9]+) bytes", text)
    if not (h and e):
        raise ValueError("no 'Running in ... mode with G groups using N file descriptors' / "
                         "'Each sender will pass L messages of S bytes' lines in hackbench output")
    groups, fds2, loops, size = int(h.group(2)), int(h.group(3)), int(e.group(1)), int(e.group(2))
    if fds2 % 2:
        raise ValueError(f"hackbench reports {fds2} file descriptors per group, expected an even number")
    fds = fds2 // 2
    messages = groups * fds * fds * loops
    seconds = float(t.group(1))
    return {"ns_per_op": seconds * 1e9 / messages, "seconds": seconds, "messages": messages,
            "mode": h.group(1), "groups": groups, "fds": fds, "loops": loops, "size": size}


def parse_lmbench(text: str) -> dict:
    """lmbench lat_*: '<what>: X microseconds' (on stderr)."""
    m = re.search(r"^(.*?):\s*" + _NUM + r"\s+microseconds\s*$", text, re.M)
    if not m:
        raise ValueError("no '<what>: X microseconds' line in lmbench output")
    return {"ns_per_op": float(m.group(2)) * 1000.0, "what": m.group(1).strip()}


def parse_lat_ctx(text: str) -> dict:
    """lmbench lat_ctx -s K N: '"size=Kk ovr=O' (a pipe write+read in one
    process, us) then 'N T' (one context switch, us: the ring's round trip / N
    less O; no line when that comes out <= 0). ns_per_op is the ring's round
    trip rebuilt from them, N x (T + O): what ctx.pipe measures for N = 2."""
    o = re.search(r"size=([0-9]+)k\s+ovr=" + _NUM, text)
    t = re.search(r"^\s*([0-9]+)\s+" + _NUM + r"\s*$", text, re.M)
    if not o:
        raise ValueError("no 'size=Kk ovr=O' line in lat_ctx output")
    if not t:
        raise NoFigure("no 'PROCS TIME' line in lat_ctx output (it prints none when the switch comes out <= 0)")
    procs, switch_us, ovr_us = int(t.group(1)), float(t.group(2)), float(o.group(2))
    return {"ns_per_op": procs * (switch_us + ovr_us) * 1000.0, "switch_ns": switch_us * 1000.0,
            "ovr_ns": ovr_us * 1000.0, "procs": procs, "size_kb": int(o.group(1))}


def parse_lat_mmap(text: str) -> dict:
    """lmbench lat_mmap SIZE FILE: 'MB US' (the size in MB, then one
    mmap + touches + munmap in microseconds; 3 decimals below 10 us)."""
    m = re.search(r"^\s*" + _NUM + r"\s+" + _NUM + r"\s*$", text, re.M)
    if not m:
        raise ValueError("no 'SIZE_MB MICROSECONDS' line in lat_mmap output")
    return {"ns_per_op": float(m.group(2)) * 1000.0, "size_mb": float(m.group(1))}
