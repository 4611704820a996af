"""`opcost-probe time -- PROGRAM`: one JSON sample per program run, elapsed
from the probe's clock, user/sys from wait4; a failing program is exit 1
with its status; the program dies with the probe."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

PROBE_DIR = Path(__file__).resolve().parents[1]
PROBE = PROBE_DIR / "opcost-probe"


@pytest.fixture(scope="module", autouse=True)
def built_probe():
    subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)


def probe(*args, timeout=60):
    return subprocess.run([str(PROBE), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def lines(out: str) -> list[dict]:
    return [json.loads(ln) for ln in out.splitlines()]


BURN = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"


def test_one_sample_per_run_with_the_programs_cpu_time():
    cp = probe("time", "--samples", "3", "--warmup", "1", "--", "sh", "-c", BURN)
    assert cp.returncode == 0, cp.stderr
    head, *samples, trailer = lines(cp.stdout)
    assert head["type"] == "header" and head["schema"] == "opcost.probe/1" and head["op"] == "program run"
    assert head["iters"] == 1 and head["tsc_hz"] > 1e6 and head["fake_clock"] is False
    assert trailer == {"type": "trailer", "status": "ok", "samples": 3, "warmup": 1}
    assert [s["warmup"] for s in samples] == [True, False, False, False]
    for s in samples:
        assert s["iters"] == 1 and s["ns_per_op"] == s["wall_ns"] > 0
        # the shell loop burns user time in the child, which wait4 reports;
        # elapsed covers it (rusage is tick-granular: allow one tick)
        assert s["user_ns"] > 0 and s["user_ns"] + s["sys_ns"] <= s["wall_ns"] + 4_000_000
        assert s["tsc_per_op"] == pytest.approx(s["wall_ns"] * head["tsc_hz"] / 1e9, rel=0.05)


def test_program_output_does_not_reach_the_json_stream():
    cp = probe("time", "--", "sh", "-c", "echo noise; echo more >&2")
    assert cp.returncode == 0, cp.stderr
    assert [d["type"] for d in lines(cp.stdout)] == ["header", "sample", "trailer"]
    assert cp.stderr == ""


def test_failing_program_exit_status_and_stderr():
    cp = probe("time", "--samples", "2", "--", "sh", "-c", "echo 'cannot open foo' >&2; exit 3")
    assert cp.returncode == 1
    assert cp.stderr.strip() == "opcost-probe: program sh exited with status 3; its stderr ends: cannot open foo"
    cp = probe("time", "--check", "--", "sh", "-c", "kill -SEGV $$")
    assert cp.returncode == 1 and "killed by signal 11" in cp.stderr and cp.stdout == ""
    cp = probe("time", "--", "/nonexistent/prog")
    assert cp.returncode == 1 and "cannot run /nonexistent/prog: No such file" in cp.stderr


def test_check_runs_once_untimed():
    cp = probe("time", "--check", "--", "true")
    assert cp.returncode == 0 and lines(cp.stdout) == [{"type": "check", "status": "ok"}]


@pytest.mark.parametrize("args,want", [
    ([], "which program"),
    (["--samples", "0", "--", "true"], "--samples"),
    (["--bogus", "1", "--", "true"], "unexpected argument"),
    (["--fake-clock", "-1", "--", "true"], "--fake-clock"),
])
def test_bad_input(args, want):
    cp = probe("time", *args)
    assert cp.returncode == 2 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and want in cp.stderr


def test_fake_clock_is_deterministic():
    a = probe("time", "--samples", "4", "--fake-clock", "1e6", "--seed", "5", "--", "true")
    b = probe("time", "--samples", "4", "--fake-clock", "1e6", "--seed", "5", "--", "true")
    sa = [s["ns_per_op"] for s in lines(a.stdout)[1:-1]]
    assert sa == [s["ns_per_op"] for s in lines(b.stdout)[1:-1]]
    assert all(0.99e6 <= x <= 1.01e6 for x in sa)


def test_program_dies_with_the_probe(tmp_path):
    marker = tmp_path / "alive"
    p = subprocess.Popen([str(PROBE), "time", "--", "sh", "-c", f"echo $$ > {marker}; exec sleep 60"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not (marker.exists() and marker.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(marker.read_text())
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        # a zombie reparented to init counts as gone once reaped
        if Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.02)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the timed program outlived the probe")
