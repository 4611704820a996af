"""Issue 17 item 4: a shared CPU must not pass silently. The probe reports,
per batch, the time the measuring thread (and a helper) spent runnable but
not running (schedstat run delay) and the involuntary switches; a variant
that lost more than 1% of the time in more than 10% of its batches is
flagged `contended` with the share lost, in the flags and the table notes.

The live test starts its own CPU hog, pinned to the measuring CPU, bounded
in time and killed in `finally`. This machine is shared, so the run without
the hog is not asserted to be quiet: only that the hog's loss is large and
flagged, far larger than without it when that run was itself quiet, and
that the run without it is flagged exactly when its own measured delays
say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from opcost import stats


def _sample(wall=10_000_000, delay=0, run=None, helper=None, nivcsw=0):
    s = {"iters": 1000, "ns_per_op": wall / 1000, "tsc_per_op": wall / 500, "user_ns": 0, "sys_ns": wall,
         "cpu_before": 0, "cpu_after": 0, "wall_ns": wall, "nvcsw": 0, "nivcsw": nivcsw}
    if delay is not None:
        s["run_delay_ns"] = delay
        s["run_ns"] = wall - delay if run is None else run
    if helper is not None:
        s["helper"] = {"cpu": 1, "user_ns": 0, "sys_ns": 0, "nvcsw": 0, "nivcsw": 0, **helper}
    return s


def _proc(samples, cpus=(0,)):
    return {"header": {"cpus": list(cpus)}, "samples": samples}


def _flag(summary, name="contended"):
    return next((f for f in summary["flags"] if f["flag"] == name), None)


def test_flagged_when_more_than_a_tenth_of_the_batches_lost_over_one_percent():
    # 3 of 20 batches lost 5%: 15% of the batches > 10%
    s = stats.summarize([_proc([_sample(delay=500_000) if i < 3 else _sample() for i in range(20)])])
    c = s["contention"]
    assert c["batches"] == 20 and c["batches_over"] == 3
    assert c["lost_share"] == pytest.approx(3 * 500_000 / (20 * 10_000_000))
    f = _flag(s)
    assert f and f["lost_share"] == pytest.approx(c["lost_share"])
    assert "3 of 20 batches" in f["detail"] and "0.8%" in f["detail"]


def test_not_flagged_at_a_tenth_or_below_one_percent():
    two = stats.summarize([_proc([_sample(delay=500_000) if i < 2 else _sample() for i in range(20)])])
    assert two["contention"]["batches_over"] == 2 and _flag(two) is None   # 10%: not more than
    small = stats.summarize([_proc([_sample(delay=90_000) for _ in range(20)])])  # 0.9% every batch
    assert small["contention"]["batches_over"] == 0 and _flag(small) is None


def test_helper_on_the_same_cpu_waits_by_design_so_only_what_neither_ran_counts():
    # ping-pong on one CPU: each thread waits while the other runs (a large run
    # delay), but the two ran the whole batch between them
    pair = [_sample(delay=4_000_000, run=5_000_000, helper={"run_ns": 5_000_000, "run_delay_ns": 4_000_000})
            for _ in range(10)]
    s = stats.summarize([_proc(pair, cpus=(0, 0))])
    assert s["contention"]["lost_share"] == 0 and _flag(s) is None
    # a third task took 30% of the CPU
    hog = [_sample(delay=6_000_000, run=3_500_000, helper={"run_ns": 3_500_000, "run_delay_ns": 6_000_000})
           for _ in range(10)]
    s = stats.summarize([_proc(hog, cpus=(0, 0))])
    assert s["contention"]["lost_share"] == pytest.approx(0.3) and _flag(s)


def test_helper_on_its_own_cpu_adds_its_run_delay():
    s = stats.summarize([_proc([_sample(delay=0, helper={"run_ns": 1_000_000, "run_delay_ns": 2_000_000})
                                for _ in range(10)], cpus=(0, 1))])
    assert s["contention"]["lost_share"] == pytest.approx(0.2) and _flag(s)


def test_without_run_delay_there_is_no_contention_figure():
    s = stats.summarize([_proc([_sample(delay=None) for _ in range(10)])])
    assert "contention" not in s and _flag(s) is None


def _run(tmp_path, name, cpu, env, target_ms=5):
    out = tmp_path / f"{name}.json"
    cp = subprocess.run([sys.executable, "-m", "opcost", "run", "signal.catch", "-p", "2", "-n", "8", "-w", "1",
                         "--target-ms", str(target_ms), "--cpu", str(cpu), "--no-store", "--json", str(out)],
                        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                        stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    res = json.loads(out.read_text())["results"][0]
    return res["summary"], cp.stdout


HOG = ("import os, sys, time\n"
       "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
       "print('spinning', flush=True)\n"
       "end = time.monotonic() + float(sys.argv[2])\n"
       "while time.monotonic() < end:\n"
       "    pass\n")


def test_a_hog_on_the_measuring_cpu_is_flagged(tmp_path, cli_environ):
    cpu = min(os.sched_getaffinity(0))
    env = cli_environ()
    quiet, _ = _run(tmp_path, "quiet", cpu, env)
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(cpu), "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "spinning"  # pinned, then measured
        # Two CPU-bound tasks on one CPU: the fair share is half, and alone
        # with the hog the probe loses 0.39-0.47 of its 18 batches of 20 ms
        # (8 runs, 2026-11-28). A run beside other work can lose less: with
        # the suite on both CPUs (pytest-xdist) one run of 18 batches of 5 ms
        # lost 0.215, the scheduler's placement of a new task over so short a
        # window (the first whole-suite run on two workers). So 20 ms batches,
        # and up to four runs, each a fresh one: the check fails only if none
        # of them loses a quarter. Even if one run in 20 fell short beside the
        # suite (more than seen), four in a row would be 6 in a million
        # (0.05^4), assuming the runs fall short independently.
        for attempt in range(4):
            loaded, text = _run(tmp_path, f"hog{attempt}", cpu, env, target_ms=20)
            if "contention" not in loaded or loaded["contention"]["lost_share"] > 0.25:
                break
    finally:
        hog.kill()
        hog.wait()
    if "contention" not in loaded:
        pytest.skip("run delay is not readable here (no schedstat): the probe's header says so")
    lost = loaded["contention"]["lost_share"]
    assert lost > 0.25, loaded["contention"]
    f = _flag(loaded)
    assert f and f["lost_share"] == lost
    assert "contended:" in text and f"{lost:.1%} of the measured time lost" in text
    # the run without the hog: its own measurements decide its flag. Other
    # work on this shared box can take the CPU too (a "quiet" run here has
    # lost 67%), so the hog's effect is compared only when that run was quiet.
    qc = quiet["contention"]
    if qc["lost_share"] < 0.05:
        assert lost > qc["lost_share"] + 0.2, (loaded["contention"], qc)
    assert (_flag(quiet) is not None) == (qc["batches_over"] > stats.CONTENDED_BATCHES * qc["batches"])
