"""A probe that keeps making progress is never killed; one that says nothing
for a generous multiple of its calibrated batch (or of its longest silence so
far) is stuck: exit 124. `--timeout` stays a hard limit. And the front end
keeps off the CPUs a probe measures on: pinned elsewhere when it can, the
probe holding its samples when it cannot."""

from __future__ import annotations

import json
import math
import os
import time

import pytest

from opcost import probe
from opcost.errors import ProbeTimeout
from opcost.protocol import Protocol
from opcost.targets.local import LocalTarget


@pytest.fixture
def short_stalls(monkeypatch, probe_bin):
    monkeypatch.setattr(probe, "MIN_STALL_S", 1.0)
    monkeypatch.setattr(probe, "STALL_BATCHES", 3)


def test_silence_longer_than_the_stall_limit_is_stuck(short_stalls, tmp_path):
    """A probe that prints its header (1 ms batches) and then says nothing."""
    fake = tmp_path / "silent-probe"
    fake.write_text('#!/bin/sh\necho \'{"type":"header","bench":"syscall.null","batch_ms":1}\'\nexec sleep 30\n')
    fake.chmod(0o755)
    req = probe.ProbeRequest("syscall.null", {}, probe.host_arch(), Protocol(samples=2, warmup=0), exe=str(fake))
    t0 = time.monotonic()
    with pytest.raises(ProbeTimeout, match="no progress"):
        probe.run_process(req, float("inf"))
    assert time.monotonic() - t0 < 10          # not the 30 s of its sleep


def test_a_long_program_run_is_not_stuck(short_stalls):
    """variants' program mode: a sample comes after a whole run (seed 004's
    libgcc build runs 52 s on a Cortex-A7), longer than the stall limit (1 s
    here): the runner's hard limit bounds it, not silence."""
    req = probe.ProbeRequest("program", {}, probe.host_arch(), Protocol(samples=1, warmup=0),
                             program=("/bin/sleep", "3"))
    res = probe.run_process(req, 60.0)
    assert len(res.samples) == 1 and res.samples[0]["ns_per_op"] > 2.5e9


def test_a_probe_that_keeps_making_progress_is_never_killed(short_stalls):
    """3 s of held batches, progress about once a second, the stall limit at
    3 x max(batch, longest silence): alive all along."""
    req = probe.ProbeRequest("syscall.null", {}, probe.host_arch(), Protocol(samples=300, warmup=0, target_ms=10),
                             cpus="0", hold=True)
    res = probe.run_process(req, float("inf"))
    assert len(res.samples) == 300 and res.progress == 300 and res.header["output"] == "held"


def test_timeout_is_a_hard_limit(probe_bin):
    req = probe.ProbeRequest("syscall.null", {}, probe.host_arch(), Protocol(samples=500, warmup=0, target_ms=10),
                             cpus="0")
    with pytest.raises(ProbeTimeout, match="--timeout"):
        probe.run_process(req, 1.5)


def test_stall_limit_follows_the_calibrated_batch():
    res = probe.ProcessResult(header={"batch_ms": 6700.0})     # a whole hackbench run per batch
    assert probe.stall_limit(res, 0.0) == pytest.approx(probe.STALL_BATCHES * 6.7)
    assert probe.stall_limit(probe.ProcessResult(header={"batch_ms": 10.0}), 0.0) == probe.MIN_STALL_S
    assert probe.stall_limit(probe.ProcessResult(), 0.0) == probe.STARTUP_STALL_S
    # a whole program's run (variants) is bounded by the runner's limit from its check run, not by silence
    assert probe.stall_limit(probe.ProcessResult(header={"bench": "program", "batch_ms": 0}), 0.0) == math.inf


needs_two_cpus = pytest.mark.skipif(not {0, 1} <= os.sched_getaffinity(0), reason="needs CPUs 0 and 1")


@needs_two_cpus
def test_front_end_pinned_off_the_measuring_cpu_or_the_probe_holds(probe_bin, monkeypatch):
    monkeypatch.delenv("OPCOST_QUIET", raising=False)
    t = LocalTarget()
    seen = []

    def on_line(d):
        if d["type"] == "sample":
            seen.append(sorted(os.sched_getaffinity(0)))

    one = probe.ProbeRequest("syscall.null", {}, probe.host_arch(), Protocol(samples=3, warmup=0, target_ms=1), cpus="1")
    res = t.run_process(one, float("inf"), on_line)
    assert res.front_end == "pinned to CPU 0" and seen and all(s == [0] for s in seen)
    assert sorted(os.sched_getaffinity(0)) == sorted(t._own)          # given back
    both = probe.ProbeRequest("ctx.pipe", {"mode": "process", "placement": "core"}, probe.host_arch(),
                              Protocol(samples=3, warmup=0, target_ms=1), cpus="0,1")
    res = t.run_process(both, float("inf"))
    assert res.header["output"] == "held" and "held" in res.front_end and len(res.samples) == 3
    monkeypatch.setenv("OPCOST_QUIET", "0")
    res = t.run_process(one, float("inf"))
    assert "OPCOST_QUIET=0" in res.front_end and "output" not in res.header


def test_the_front_end_is_recorded_with_each_process(run_cli, tmp_path):
    cp = run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "2", "-n", "3", "-w", "1", "--target-ms", "1",
                 "--json", "out.json")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    assert all(p["front_end"] for p in doc["results"][0]["processes"])
