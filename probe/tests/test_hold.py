"""`run --hold`: the samples are written after the measured batches (the
front end is not woken between batches), with a progress line at most once a
second and after the last batch; on SIGTERM or SIGINT the samples so far are
written and the probe exits 128 + the signal. The samples are the same lines
as without --hold."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[1] / "opcost-probe"


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-C", str(PROBE.parent), "-s"], check=True)


def lines(text: str) -> list[dict]:
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


def test_held_samples_come_after_the_batches_with_progress():
    args = ["run", "syscall.null", "--samples", "6", "--warmup", "2", "--fake-clock", "100", "--seed", "3"]
    plain = lines(subprocess.run([str(PROBE), *args], capture_output=True, text=True, check=True).stdout)
    held = lines(subprocess.run([str(PROBE), *args, "--hold"], capture_output=True, text=True, check=True).stdout)
    types = [d["type"] for d in held]
    assert types[0] == "header" and held[0]["output"] == "held"
    assert types[-1] == "trailer"
    # Progress lines (at most one a second: more than the last one only when
    # the machine is so slow that the 8 batches outlast a second), the last
    # batch's among them, all before the first sample.
    first_sample = types.index("sample")
    progress = [d for d in held if d["type"] == "progress"]
    assert set(types[1:first_sample]) == {"progress"} and "progress" not in types[first_sample:]
    assert progress[-1] == {"type": "progress", "batches": 8, "of": 8}
    assert [d["batches"] for d in progress] == sorted({d["batches"] for d in progress})
    # What the fake clock does not fix: the process's own accounting, and the
    # CPU the scheduler ran it on (the two runs are not pinned: a quiet 2-CPU
    # machine put one on CPU 0 and the other on CPU 1).
    strip = ("pid", "start_raw_ns", "wall_ns", "user_ns", "sys_ns", "user_ns_per_op", "sys_ns_per_op",
             "nvcsw", "nivcsw", "steal_ticks", "cpu_before", "cpu_after")
    same = [{k: v for k, v in d.items() if k not in strip} for d in plain if d["type"] == "sample"]
    assert same == [{k: v for k, v in d.items() if k not in strip} for d in held if d["type"] == "sample"]
    assert "output" not in plain[0] and plain[0]["batch_ms"] == held[0]["batch_ms"] == 10


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_writes_what_was_measured(sig):
    p = subprocess.Popen([str(PROBE), "run", "syscall.null", "--samples", "400", "--warmup", "1", "--target-ms", "10",
                          "--hold"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline()                    # the header: calibration is done
    assert json.loads(first)["type"] == "header"
    second = json.loads(p.stdout.readline())       # a progress line: a second of batches is held
    assert second["type"] == "progress" and 1 <= second["batches"] < 401
    p.send_signal(sig)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 128 + sig
    got = lines(out)
    samples = [d for d in got if d["type"] == "sample"]
    assert second["batches"] <= len(samples) < 401 and not [d for d in got if d["type"] == "trailer"]
    assert [d["i"] for d in samples if not d["warmup"]] == list(range(len(samples) - 1))
    assert all(d["of"] == 401 for d in got if d["type"] == "progress")


def test_batch_ms_says_when_one_iteration_outlasts_a_batch():
    """A batch is sized to --target-ms; when one iteration alone takes longer
    (a whole hackbench run; here a 5 ms nanosleep), batch_ms is that iteration's time."""
    h = lines(subprocess.run([str(PROBE), "run", "timer.nanosleep", "-P", "ns=5000000", "--samples", "1",
                              "--warmup", "0", "--target-ms", "1"], capture_output=True, text=True, check=True).stdout)[0]
    assert h["iters"] == 1 and 4.5 < h["batch_ms"] < 100
