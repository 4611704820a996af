"""The time budget for long iterations (--max-time, budget.py, the probe's
--budget-ms): on the fake clock, whose `--fake-clock 1e9` is a second per
operation, so nothing here depends on this CPU's timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opcost import budget, protocol
from opcost.budget import Budget
from opcost.probe import ProbeRequest, probe_path
from opcost.protocol import Protocol

ROOT = Path(__file__).resolve().parents[1]
# msg.hackbench with 1 group of 2 senders and 2 receivers, 1 loop: 4 messages an iteration,
# so 4 s an iteration on the fake clock at 1e9 ns per operation
LONG = "msg.hackbench:groups=1,fds=2,loops=1"


def opcost(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "XDG_DATA_HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "opcost", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)


def probe_header(*args: str) -> dict:
    out = subprocess.run([str(probe_path()), "run", *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[0])


def test_probe_keeps_the_batches_that_fit():
    # 1 s an iteration, 10 s: the calibration's iteration and 9 batches, measured first
    h = probe_header("syscall.null", "--fake-clock", "1e9", "--budget-ms", "10000")
    assert (h["batch_ms"], h["samples"], h["warmup"]) == (1000, 9, 0)
    assert h["budget"] == {"ms": 10000, "long_iteration_ms": 1000, "min_samples": 3, "long_iteration": True,
                           "asked_samples": 20, "asked_warmup": 3, "fitted": True}
    # room for everything asked and a little warm-up: measured batches first, then warm-up
    h = probe_header("syscall.null", "--fake-clock", "1e9", "--budget-ms", "23000", "--samples", "20")
    assert (h["samples"], h["warmup"], h["budget"]["fitted"]) == (20, 2, True)
    # never fewer than 3 measured batches, however small the budget
    h = probe_header("syscall.null", "--fake-clock", "1e9", "--budget-ms", "1")
    assert (h["samples"], h["warmup"]) == (3, 0)
    # enough budget: nothing changes
    h = probe_header("syscall.null", "--fake-clock", "1e9", "--budget-ms", "1e6")
    assert (h["samples"], h["warmup"], h["budget"]["fitted"]) == (20, 3, False)


def test_probe_never_shapes_short_iterations():
    h = probe_header("syscall.null", "--fake-clock", "100", "--budget-ms", "1")
    assert (h["samples"], h["warmup"], h["budget"]["fitted"], h["budget"]["long_iteration"]) == (20, 3, False, False)
    # long batches of short iterations (--target-ms 2000) are what was asked, not long iterations
    h = probe_header("syscall.null", "--fake-clock", "100", "--target-ms", "2000", "--budget-ms", "1")
    assert (h["batch_ms"], h["samples"], h["budget"]["long_iteration"]) == (2000, 20, False)
    out = subprocess.run([str(probe_path()), "run", "syscall.null", "--fake-clock", "1e9", "--budget-ms", "0"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "--budget-ms 0" in out.stderr and not out.stdout


def test_the_budget_a_protocol_asks_for():
    assert Budget.of(Protocol(), 10, 2).source == "default"
    assert Budget.of(Protocol(), 10, 2).max_time_s == protocol.DEFAULT_MAX_TIME_S
    assert Budget.of(Protocol(max_time=60), 10, 2).source == "--max-time"
    assert Budget.of(Protocol(fake_clock=100.0), 10, 2) is None           # tests of opcost: only a stated one
    assert Budget.of(Protocol(fake_clock=100.0, max_time=60), 10, 2) is not None
    assert Budget.of(Protocol(iters=5), 10, 2) is None                     # --iters: the batches asked
    b = Budget.of(Protocol(max_time=120), 10, 2)
    assert b is not None and b.per_process_ms() == 6000.0
    assert b.minimum == protocol.MIN_PROCESSES and Budget(60, "default", 3, 1).minimum == 3


def test_processes_that_fit():
    b = Budget(120, "--max-time", 10, 2)
    b.costs["a"] = 8.0                       # b not seen yet: costs as a
    assert b.round_cost_s() == 16.0 and b.fitting() == 7
    b.costs["b"] = 12.0
    assert b.round_cost_s() == 20.0 and b.fitting() == 6
    long = {"long_iteration": True}
    assert budget.process_cost_s({"batch_ms": 4000, "warmup": 0, "samples": 3, "budget": long}) == 16.0
    assert budget.process_cost_s({"batch_ms": 10, "warmup": 3, "samples": 20, "budget": long}) is None
    assert budget.process_cost_s({"batch_ms": 4000, "warmup": 0, "samples": 3, "budget": {}}) is None
    assert budget.process_cost_s({"batch_ms": 10, "warmup": 3, "samples": 20, "budget": {}}, long_only=False) == 0.24
    assert budget.process_cost_s({"batch_ms": 4000, "warmup": 0, "samples": 3}) is None
    # the sequential design: a stage fits in what is left, or is not started
    s = Budget(300, "--max-time", 40, 2, stages=(10, 20, 40))
    s.costs.update(a=5.0, b=5.0)
    assert s.stage_fits(10, 1e9)          # nothing shaped: the budget stops nothing
    s.shaped.update(("a", "b"))
    assert s.stage_fits(10, 190.0) and not s.stage_fits(10, 210.0)
    assert "stopped after look 1 (10 processes per arm)" in s.stage_line(1, 10, 10, 210.0)


def test_the_minimum_is_the_tests():
    from opcost import abtest

    assert protocol.MIN_PROCESSES == abtest.MIN_PROCESSES


def test_request_carries_its_share():
    r = ProbeRequest("syscall.null", {}, "x86_64", budget_ms=1500.0)
    assert r.argv()[-2:] == ["--budget-ms", "1500"]
    assert "--budget-ms" not in r.argv(check=True)
    assert "--budget-ms" not in ProbeRequest("syscall.null", {}, "x86_64").argv()


def test_run_fits_the_budget_and_says_so(tmp_path):
    r = opcost("run", LONG, "--fake-clock", "1e9", "--max-time", "120", "--no-store", "--no-progress",
               "--json", "-", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)            # the document alone: the plan line is on stderr
    res = doc["results"][0]
    # 12 s a process: the calibration's 4 s and 2 batches, raised to the 3 measured batches
    # every process keeps; 16 s a process, so 7 of the 10 asked fit in 120 s
    assert len(res["processes"]) == 7
    assert res["summary"]["time_budget"] == {
        "max_time_s": 120.0, "source": "--max-time", "iteration_ms": 4000,
        "asked": {"processes": 10, "warmup": 3, "samples": 20}, "used": {"processes": 7, "warmup": 0, "samples": 3}}
    assert all(p["budget"]["per_process_ms"] == 12000.0 for p in res["processes"])
    assert all(len(p["samples"]) == 3 and not p["warmup"] for p in res["processes"])
    lines = [ln for ln in r.stderr.splitlines() if "one iteration takes" in ln]
    assert lines == [f"opcost: {LONG}: one iteration takes 4 s; within --max-time 120: 0 + 3 batches a process "
                     "(warm-up + measured; asked 3 + 20), 7 processes per variant, about 112 s"]


def test_a_budget_too_small_says_what_would_do(tmp_path):
    r = opcost("run", LONG, "--fake-clock", "1e9", "--max-time", "30", "--no-progress",
               "--store", str(tmp_path / "s.db"), tmp_path=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == (f"opcost: {LONG}: one iteration takes 4 s, so the 6 processes per variant the statistics "
                    "need take about 96 s, more than --max-time 30; give --max-time 106 or more, or lighter "
                    "parameters")
    # and that budget does
    r = opcost("run", LONG, "--fake-clock", "1e9", "--max-time", "106", "--no-store", "--no-progress",
               "--json", "-", tmp_path=tmp_path)
    assert r.returncode == 0 and len(json.loads(r.stdout)["results"][0]["processes"]) == 6


def test_short_iterations_and_no_budget_unchanged(tmp_path):
    r = opcost("run", "syscall.null", "--fake-clock", "100", "--max-time", "1", "-p", "3", "-n", "4", "-w", "1",
               "--target-ms", "1", "--no-store", "--no-progress", "--json", "-", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)["results"][0]
    assert len(res["processes"]) == 3 and "time_budget" not in res["summary"]
    assert all("budget" not in p and len(p["samples"]) == 4 for p in res["processes"])
    assert "one iteration takes" not in r.stderr


@pytest.mark.parametrize("flag", ["0", "-5", "abc", "604801"])
def test_max_time_bounds(flag, tmp_path):
    r = opcost("run", "syscall.null", "--max-time", flag, "--no-store", tmp_path=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--max-time" in r.stderr


def test_sequential_ab_plans_its_first_look(tmp_path):
    r = opcost("ab", "msg.hackbench", "--a", "groups=1,fds=2,loops=1", "--b", "groups=1,fds=2,loops=1",
               "--fake-clock", "1e9", "--max-time", "600", "--no-store", "--no-progress", "--json", "-",
               tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert ("10 processes per variant to the first look, about 5.3 min; up to 40, about 21.3 min, "
            "if the verdict needs them") in r.stderr
    r = opcost("ab", "msg.hackbench", "--a", "groups=1,fds=2,loops=1", "--b", "groups=1,fds=2,loops=1",
               "--fake-clock", "1e9", "--max-time", "100", "--no-store", "--no-progress", tmp_path=tmp_path)
    assert r.returncode == 2 and "(or -p 6, the fixed design)" in r.stderr.splitlines()[-1]


def test_sequential_stage_that_would_pass_the_budget_is_not_started():
    from opcost.runner import RunOptions, Runner
    from opcost.spec import expand
    from opcost.targets import local_target

    t = local_target()
    vs = expand(LONG, t) + expand(LONG.replace("loops=1", "loops=1,size=101"), t)
    looks: list[int] = []
    warnings: list[str] = []

    def go_on(number: int, results: list) -> bool:   # never settled: only the budget stops it
        looks.append(number)
        return True

    # 600 s over 2 x 40 processes: 7.5 s each, so 3 measured batches (the minimum) and the
    # calibration's iteration, 16 s a process, 32 s a round: look 1 (10 rounds, 320 s) fits,
    # 10 more rounds (640 s in all) do not
    opts = RunOptions(protocol=Protocol(processes=10, fake_clock=1e9, max_time=600.0), stages=(10, 20, 40))
    out = Runner(vs, opts, target=t, warn=warnings.append, look=go_on).run()
    assert out.status == "complete" and looks == [1]
    assert [len(vr.processes) for vr in out.results] == [10, 10]
    assert any(w.startswith("stopped after look 1 (10 processes per arm): the next stage (10 more rounds, about "
                            "5.3 min) would pass --max-time 600") for w in warnings), warnings



def test_a_short_variant_beside_a_long_one_counts_what_it_costs():
    # (on the fake clock every variant has the same cost per operation: the mix is arithmetic here)
    b = Budget(120, "--max-time", 10, 2)
    b.costs["long"] = 16.0
    b.shaped.add("long")
    assert b.fitting() == 3                  # the other variant not seen yet: as dear as the long one
    b.costs["short"] = budget.process_cost_s({"batch_ms": 10, "warmup": 3, "samples": 20, "budget": {}},
                                             long_only=False)
    assert b.fitting() == 7                  # seen: its 0.24 s a process
