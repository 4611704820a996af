"""Leak test: start/SIGKILL cycles of the probe over every benchmark of the
table (and variants that create other helpers, processes, threads, memfds or
temp files), 8 per benchmark and at least 200, half killed once measuring
has begun, half anywhere in start-up. Afterwards no process of theirs may be
alive (zombies waiting for a slow PID 1 excepted), the test process holds no
more fds than before, and the temp dir the probe was given is as it was."""

from __future__ import annotations

import os
import random
import select
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from benchtable import benchmarks, quick_args

PROBE_DIR = Path(__file__).resolve().parents[1]
PROBE = PROBE_DIR / "opcost-probe"

# Every benchmark at its defaults (QUICK ones made short), then variants
# whose helpers, children or files differ from the defaults'.
BENCHES = [[b["name"], *quick_args(b["name"])] for b in benchmarks()] + [
    ["ctx.pipe", "-P", "mode=thread"], ["ctx.unix", "-P", "mode=thread"], ["ctx.futex", "-P", "mode=process"],
    ["ctx.eventfd", "-P", "placement=core"], ["proc.exec", "-P", "via=vfork"],
    ["mem.touch", "-P", "size=262144"], ["mem.touch", "-P", "size=262144", "-P", "backing=tmpfile"],
    ["mem.pagefault", "-P", "size=262144"],
    ["msg.hackbench", *quick_args("msg.hackbench"), "-P", "mode=thread", "-P", "ipc=pipe"],
]
CYCLES = max(200, 8 * len(BENCHES))


@pytest.fixture(scope="session", autouse=True)
def built_probe():
    subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)
    return PROBE


def _stat(pid: str) -> tuple[str, int] | None:
    """(state, session id) of a process, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[3])


def live_in(sessions: set[int], name: str) -> list[int]:
    """Non-zombie processes in one of our probes' sessions, or running our
    uniquely named probe copy."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        st = _stat(p.name)
        if st is None or st[0] == "Z":
            continue
        try:
            cmd = (p / "cmdline").read_bytes()
        except OSError:
            continue
        if st[1] in sessions or name.encode() in cmd:
            out.append(int(p.name))
    return out


def fds_of(pids: list[int]) -> int:
    n = 0
    for pid in pids:
        try:
            n += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    return n


def test_start_kill_cycles_leave_nothing_behind(tmp_path):
    name = f"leakprobe-{uuid.uuid4().hex[:8]}"
    exe = tmp_path / name
    shutil.copy2(PROBE, exe)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    sessions: set[int] = set()
    rng = random.Random(1234)

    self_fds = len(os.listdir("/proc/self/fd"))
    before_procs = live_in(sessions, name)
    assert before_procs == []
    t0 = time.monotonic()
    waited_header = 0
    for i in range(CYCLES):
        bench = BENCHES[i // 2 % len(BENCHES)]  # each killed both ways (i % 2, below)
        p = subprocess.Popen([str(exe), "run", *bench, "--target-ms", "1", "--samples", "1000000"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                             env=env, start_new_session=True)
        sessions.add(p.pid)  # a new session's id is its leader's pid
        if i % 2 == 0:
            # until the header (measuring has begun), at most 30 s: on a loaded
            # machine start-up and setup can take seconds, and the count of
            # probes killed while measuring must not depend on the load
            r, _, _ = select.select([p.stdout], [], [], 30.0)
            if r and p.stdout.readline():
                waited_header += 1
        else:
            time.sleep(rng.uniform(0, 0.03))  # anywhere in start-up, setup or measuring
        p.send_signal(signal.SIGKILL)  # the probe only: its helpers must follow by themselves
        p.wait()
        p.stdout.close()
    elapsed = time.monotonic() - t0
    assert waited_header >= CYCLES // 4, "too few probes got as far as their header"

    # helpers die through PR_SET_PDEATHSIG, asynchronously: give them a moment
    deadline = time.monotonic() + 5
    left = live_in(sessions, name)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = live_in(sessions, name)
    desc = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in left if Path(f"/proc/{pid}").exists()}
    assert left == [], f"processes left behind: {desc}"
    assert fds_of(left) == 0
    assert len(os.listdir("/proc/self/fd")) == self_fds, "the test process gained fds"
    assert list(tmpdir.iterdir()) == [], "files left in TMPDIR"
    assert elapsed < 90, f"{CYCLES} cycles took {elapsed:.0f} s"
