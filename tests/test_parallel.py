"""`opcost run --parallel N`: N concurrent pinned copies, per-copy and total
throughput, scaling efficiency against one copy alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import cli_argv, cli_env
from opcost.parallel import common_window, overlap, place

FAKE = ["--fake-clock", "100", "-p", "2", "-n", "3", "-w", "1", "--target-ms", "1", "--no-store"]


def one_line(cp) -> str:
    assert cp.returncode == 2, (cp.returncode, cp.stdout, cp.stderr)
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in cp.stderr, cp.stderr
    return lines[0]


def test_placement_wraps_over_the_allowed_cpus():
    assert place(3, [0, 1]) == ([0, 1, 0], True)
    assert place(2, [2, 5]) == ([2, 5], False)
    assert place(1, [7]) == ([7], False)


def test_common_window_and_overlap():
    class R:
        def __init__(self, starts):
            self.samples = [{"start_raw_ns": int(a * 1e9), "wall_ns": int(1e9)} for a in starts]
            self.sample_spans = []
    a, b = R([0, 1, 2]), R([1.5, 2.5, 3.5])      # a: 0..3 s, b: 1.5..4.5 s
    assert common_window([a, b]) == (1.5, 3.0)
    assert overlap([{"start_s": 0, "end_s": 3}, {"start_s": 1.5, "end_s": 4.5}]) == pytest.approx(1.5 / 4.5)
    assert common_window([R([0]), R([5])]) is None


@pytest.mark.parametrize("value,needle", [("0", "--parallel 0"), ("-3", "--parallel -3"),
                                          ("two", "--parallel two: give the number of concurrent copies, a whole number"),
                                          ("1.5", "--parallel 1.5: give"), ("1025", "from 1 to 1024")])
def test_bad_parallel_is_one_line_exit_2(run_cli, value, needle):
    assert needle in one_line(run_cli("run", "syscall.null", *FAKE, "--parallel", value))


def test_parallel_conflicts_with_explicit_cpus(run_cli):
    assert "drop --cpu" in one_line(run_cli("run", "syscall.null", *FAKE, "--parallel", "2", "--cpu", "0"))
    assert "drop cpu=" in one_line(run_cli("run", "syscall.null:cpu=0", *FAKE, "--parallel", "2"))


def test_parallel_result_document_and_store(run_cli, tmp_path):
    out = tmp_path / "p.json"
    args = [a for a in FAKE if a != "--no-store"]
    cp = run_cli("run", "syscall.null", *args, "--parallel", "3", "--json", out, "--label", "par")
    assert cp.returncode == 0, cp.stderr
    r = json.loads(out.read_text())["results"][0]
    p = r["parallel"]
    cpus = sorted(os.sched_getaffinity(0))
    assert p["copies"] == 3 and p["cpus"] == [cpus[i % len(cpus)] for i in range(3)]
    assert p["wrapped"] == (len(cpus) < 3)
    assert p["n_rounds"] == 2 and all(len(rd["copies"]) == 3 for rd in p["rounds"])
    # single processes are the result's own processes, one per round
    assert len(r["processes"]) == 2
    assert {rd["single_process"] for rd in p["rounds"]} == {0, 1}
    # fake clock: 100 ns per op everywhere (+-1% jitter), so 10 Mops/s per copy and efficiency 1
    assert p["per_copy_ops_per_s"] == pytest.approx(1e7, rel=0.03)
    assert p["total_ops_per_s"] == pytest.approx(3e7, rel=0.03)
    assert p["efficiency"] == pytest.approx(1.0, abs=0.03)
    assert "parallel copies" in cp.stdout and "efficiency" in cp.stdout
    shown = json.loads(run_cli("show", "par", "--json", "-").stdout)["results"][0]
    assert shown["summary"]["parallel"]["copies"] == 3


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset")
def test_two_copies_on_one_cpu_halve_the_per_copy_throughput(tmp_path, probe_bin):
    """Restricted to one CPU, both copies land on it and time-share it: per
    copy they get about half of what one copy alone gets. Were the copies not
    pinned as placed (or not concurrent), efficiency would be near 1."""
    # A real-timing check: up to 8 independent attempts, any one in the band
    # passes. Efficiency is wall-clock throughput, so other work on that CPU
    # pushes it towards 1 (with k other runnable tasks there one copy alone
    # gets 1/(k+1) of it, each of two 1/(k+2)), and the single process's
    # rate, measured alone in each round, swings with it (1.1-6.2 M ops/s in
    # one run at load 6-9). With 3 rounds of 10 batches an attempt fell in the
    # band 0 of 5 times in a whole-suite run at load 9-12 beside three
    # engineers' work; with 5 rounds of 30 batches 3 of 4 attempts did at load
    # 5-8 (0.52-0.82). If an attempt misses with probability 1/2 under such
    # load, all 8 miss with probability 0.4%; far less on a quiet machine.
    cpu = str(sorted(os.sched_getaffinity(0))[0])
    seen = []
    for attempt in range(8):
        out = tmp_path / f"p{attempt}.json"
        cp = subprocess.run(["taskset", "-c", cpu, *cli_argv("run", "syscall.null", "-p", "5", "-n", "30", "-w", "2",
                                                             "--parallel", "2", "--json", out, "--no-store")],
                            env=cli_env(tmp_path), capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert cp.returncode == 0, cp.stderr
        assert "copies share CPUs" in cp.stderr
        p = json.loads(out.read_text())["results"][0]["parallel"]
        assert p["cpus"] == [int(cpu), int(cpu)] and p["wrapped"]
        seen.append(p["efficiency"])
        if 0.2 < p["efficiency"] < 0.8:
            break
    assert 0.2 < seen[-1] < 0.8, seen
