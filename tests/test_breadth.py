"""Python side of the OS-primitive benchmarks: operations per iteration in
the statistics and the report, sleep overshoot, the placement of an explicit
CPU pair decided by the probe's topology, and bad input through the CLI."""

from __future__ import annotations

import json
import os

import pytest

from opcost.runner import summarize_variant  # a summary: statistics and the facts of its processes
from opcost import spec, stats
from opcost.errors import UsageError
from opcost.tables import format_results
from opcost.targets.replay import ReplayTarget

FAST = ["--fake-clock", "100", "-p", "2", "-n", "3", "-w", "1", "--target-ms", "1", "--no-store"]
TWO_CPUS = {0, 1} <= os.sched_getaffinity(0)


def _sample(ns_per_op, iters, opi=None, user=0, sys_=0):
    s = {"ns_per_op": ns_per_op, "tsc_per_op": ns_per_op * 2, "iters": iters, "user_ns": user, "sys_ns": sys_,
         "cpu_before": 0, "cpu_after": 0}
    if opi:
        s["ops_per_iter"] = opi
    return s


def _header(**kw):
    h = {"tsc_hz": 2e9, "overhead": {"clock_ns": 20, "loop_ns_per_iter": 0.5}, "iters": 4, "cpus": [0]}
    h.update(kw)
    return h


def test_cpu_time_is_per_operation_when_an_iteration_holds_many():
    samples = [_sample(10.0, 4, opi=1000, sys_=40000), _sample(10.0, 4, opi=1000, sys_=40000)]
    st = stats.process_stats(samples)
    assert st["sys_ns_per_op"] == pytest.approx(10.0)  # 80000 ns over 8000 operations, not 8 iterations


def test_summary_carries_time_per_iteration_and_overshoot():
    procs = [{"header": _header(ops_per_iter=1000, iteration="one whole hackbench run"),
              "samples": [_sample(v, 4, opi=1000) for v in (10.0, 11.0, 12.0)]}]
    s = summarize_variant(procs)
    assert s["ops_per_iter"] == 1000 and s["median_ns_per_iter"] == pytest.approx(11000.0)
    out = format_results([{"bench": "msg.hackbench", "params": {}, "op": "message delivered", "status": "ok",
                           "summary": s}])
    assert "one iteration (one whole hackbench run) = 1000 ops: 11.000 us per iteration" in out

    procs = [{"header": _header(nominal_ns_per_op=1000.0), "samples": [_sample(v, 4) for v in (60e3, 61e3, 62e3)]}]
    s = summarize_variant(procs)
    assert s["nominal_ns"] == 1000.0 and s["overshoot_ns"] == pytest.approx(60e3)
    out = format_results([{"bench": "timer.nanosleep", "params": {}, "op": "nanosleep", "status": "ok",
                           "summary": s}])
    assert "requested 1.000 us, overshoot 60.000 us per op" in out


TABLE = {"benchmarks": [{"name": "ctx.unix", "op": "round trip", "helper": True, "params": [
    {"name": "placement", "type": "enum", "default": "same", "choices": ["same", "smt", "core", "llc", "numa"]}]}]}


@pytest.mark.skipif(not TWO_CPUS, reason="needs CPUs 0 and 1")
def test_explicit_cpu_pair_takes_its_placement_from_the_topology():
    asked = []

    class Target(ReplayTarget):
        def placement_of(self, a, b, arch=None):
            asked.append((a, b, arch))
            return "smt"

    target = Target(TABLE, arch="x86_64")
    (v,) = spec.expand("ctx.unix:cpu=0,1", target)
    assert v.params["placement"] == "smt" and asked == [(0, 1, "x86_64")]
    with pytest.raises(UsageError, match=r"cpu=0,1 means placement=smt, but placement=core was asked"):
        spec.expand("ctx.unix:cpu=0,1,placement=core", target)
    (v,) = spec.expand("ctx.unix:cpu=1,1", target)
    assert v.params["placement"] == "same" and len(asked) == 2  # one CPU needs no topology


@pytest.mark.parametrize("spec_text,needle", [
    ("msg.hackbench:groups=0", "msg.hackbench: groups=0 must be an integer in [1, 1000]"),
    ("msg.hackbench:size=100000", "msg.hackbench: size=100000 must be an integer in [1, 65536]"),
    ("ctx.unix:placement=mars", "placement=mars"),
    ("ctx.futex:placement=far", "placement=far"),
])
def test_cli_rejects_bad_input(run_cli, spec_text, needle):
    cp = run_cli("run", spec_text, *FAST)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    err = cp.stderr.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "Traceback" not in cp.stderr


def test_cli_hackbench_shows_the_time_per_run(run_cli, tmp_path):
    out = tmp_path / "h.json"
    cp = run_cli("run", "msg.hackbench:groups=1,fds=2,loops=5", *FAST, "--json", out)
    assert cp.returncode == 0, cp.stderr
    (r,) = json.loads(out.read_text())["results"]
    s = r["summary"]
    assert s["ops_per_iter"] == 20 and s["median_ns"] == pytest.approx(100, rel=0.02)
    assert s["median_ns_per_iter"] == pytest.approx(2000, rel=0.02)
    assert "= 20 ops: " in cp.stdout and "per iteration" in cp.stdout


@pytest.mark.skipif(not TWO_CPUS, reason="needs CPUs 0 and 1")
def test_cli_cpu_pair_placement_agrees_with_the_probe(run_cli, tmp_path, probe_bin):
    import subprocess
    real = json.loads(subprocess.run([str(probe_bin), "placement", "0", "1"], capture_output=True,
                                     text=True).stdout)["name"]
    out = tmp_path / "p.json"
    cp = run_cli("run", "ctx.eventfd:cpu=0,1", *FAST, "--json", out)
    assert cp.returncode == 0, cp.stderr
    (r,) = json.loads(out.read_text())["results"]
    assert r["params"]["placement"] == real
    assert r["summary"]["placement"] == [real]
