"""The harness's prepare() hook (struct bench.prepare), used by msg.hackbench:
every iteration is timed alone after an untimed set-up, as hackbench starts
its clock only after all workers are ready."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest

PROBE_DIR = Path(__file__).resolve().parents[1]
PROBE = Path(os.environ.get("OPCOST_TEST_PROBE", PROBE_DIR / "opcost-probe"))


@pytest.fixture(scope="session", autouse=True)
def built_probe():
    if "OPCOST_TEST_PROBE" not in os.environ:
        subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)
    return PROBE


def run(*args, preexec=None, timeout=60):
    return subprocess.run([str(PROBE), "run", *args], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=preexec)


def parse(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


SMALL = ["msg.hackbench", "-P", "groups=1", "-P", "fds=4", "-P", "loops=3", "-P", "workers_on=pinned"]


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_every_iteration_is_prepared_and_timed_alone(mode):
    r = run(*SMALL, "-P", f"mode={mode}", "--iters", "4", "--samples", "3", "--warmup", "1")
    assert r.returncode == 0, r.stderr
    recs = parse(r.stdout)
    head = recs[0]
    assert "ready" in head["prepare"]
    assert "timed alone" in head["overhead"]["method"]
    samples = [x for x in recs if x["type"] == "sample"]
    assert len(samples) == 4
    for s in samples:
        assert s["iters"] == 4
        assert s["ns_per_op"] > 0
        # ns_per_iter is one whole run: 4*4*3 messages
        assert s["ns_per_iter"] == pytest.approx(s["ns_per_op"] * 4 * 4 * 3, rel=1e-6)
    assert recs[-1] == {"type": "trailer", "status": "ok", "samples": 3, "warmup": 1}


def test_fake_clock_subtracts_one_clock_pair_per_iteration():
    # the fake model adds the clock overhead once per timed segment; if the
    # harness subtracted it once per batch, 8 segments would leave 7 pairs in
    r = run(*SMALL, "--iters", "8", "--samples", "5", "--warmup", "0", "--fake-clock", "50", "--seed", "3")
    assert r.returncode == 0, r.stderr
    for s in (x for x in parse(r.stdout) if x["type"] == "sample"):
        assert s["ns_per_op"] == pytest.approx(50, rel=0.011)


def test_start_failure_is_one_line_exit_1():
    # 20 socketpairs need 40 fds; allow 24
    def few_fds():
        resource.setrlimit(resource.RLIMIT_NOFILE, (24, 24))
    r = run("msg.hackbench", "-P", "groups=1", "-P", "fds=20", "-P", "loops=1", "--samples", "1",
            preexec=few_fds)
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert len(err) == 1, r.stderr
    assert "trial run failed: socketpair" in err[0] and "ulimit -n" in err[0]
