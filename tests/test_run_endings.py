"""How a run ends and what it says: nothing measured is not success; a run
killed outright is shown with summaries computed from what it stored and as
abandoned, never as running; a run says where it was stored; progress lines
when stderr is not a terminal; outlier notes only where they matter, and
rounds slow in most benchmarks said once."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import time

import pytest

from conftest import cli_argv

FAST = ["--fake-clock", "100", "-p", "2", "-n", "3", "-w", "1", "--target-ms", "1"]


def _unsupported_here(probe_bin) -> list[str]:
    """Variants this machine cannot measure (probe --check exit 3)."""
    out = []
    for bench, param in (("ctx.pipe", "placement=smt"), ("ctx.pipe", "placement=numa"),
                         ("xstate.xsave", "state=avx512"), ("ctx.pipe", "fp=parent,fpkind=neon")):
        cp = subprocess.run([str(probe_bin), "run", bench, "-P", param, "--check"], capture_output=True)
        if cp.returncode == 3:
            out.append(f"{bench}:{param}")
    return out


def test_nothing_measured_is_exit_1_and_a_failed_run(run_cli, probe_bin):
    specs = _unsupported_here(probe_bin)
    if not specs:
        pytest.skip("this machine measures every variant we know to be unsupported elsewhere")
    cp = run_cli("run", specs[0], *FAST, "--json", "out.json")
    assert cp.returncode == 1, cp.stderr
    assert "nothing was measured" in cp.stderr and "cannot be measured here" in cp.stderr
    runs = json.loads(run_cli("history", "--json").stdout)
    assert runs[0]["status"] == "failed"
    # one measured variant next to it: exit 0, the other listed as unsupported
    cp = run_cli("run", specs[0], "syscall.null", *FAST)
    assert cp.returncode == 0, cp.stderr
    assert "unsupported" in cp.stdout


def test_killed_run_is_abandoned_and_show_summarizes_what_it_stored(run_cli, cli_environ, tmp_path):
    proc = subprocess.Popen(cli_argv("run", "syscall.null", "--fake-clock", "100", "-p", "400", "-n", "3",
                                     "-w", "1", "--target-ms", "1", "--label", "killed"),
                            env=cli_environ(), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = tmp_path / "opcost" / "opcost.db"
    import sqlite3

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            n = sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(
                "SELECT count(*) FROM processes").fetchone()[0]
        except sqlite3.Error:
            n = 0
        if n >= 5:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    runs = json.loads(run_cli("history", "--json").stdout)
    assert runs[0]["status"] == "abandoned"
    cp = run_cli("history")
    assert "abandoned" in cp.stdout and "running" not in cp.stdout.split("\n\n")[0]
    doc = json.loads(run_cli("show", "killed", "--json", "-").stdout)
    r = doc["results"][0]
    assert r["summary"]["n_processes"] == len(r["processes"]) >= 5
    assert r["summary"]["median_ns"] > 0
    cp = run_cli("history", "clean")
    assert cp.returncode == 0 and "marked 1 abandoned run" in cp.stdout
    assert json.loads(run_cli("history", "--json").stdout)[0]["status"] == "abandoned"
    assert run_cli("history", "clean").stdout.startswith("marked 0")


def test_run_says_where_it_is_stored(run_cli, tmp_path):
    cp = run_cli("run", "syscall.null", *FAST, "--label", "here")
    assert cp.returncode == 0
    assert f"stored as run 1 (here) in {tmp_path / 'opcost' / 'opcost.db'}" in cp.stderr


def test_progress_lines_when_not_a_terminal():
    from opcost.progress import LineProgress

    buf = io.StringIO()
    p = LineProgress(stream=buf, every=0)
    for done in range(1, 5):
        time.sleep(0.01)
        p.round_done(done, 4)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("opcost: round 1/4 done") and "left" in lines[0]
    quiet = io.StringIO()
    p = LineProgress(stream=quiet, every=3600)
    for done in range(1, 5):
        p.round_done(done, 4)
    assert quiet.getvalue() == ""


def _result(name, meds, rounds):
    from opcost import stats

    d = stats.Digest()     # processes as a summary holds them: their facts, without batches
    d.procs = [{"round": r, "header": None} for r in rounds]
    mid = float(sorted(meds)[len(meds) // 2])
    summary = {"process_medians_ns": meds, "median_ns": mid, "n_processes": len(meds), "cv": 0.01}
    return {"bench": name, "key": name, "op": "x", "status": "ok", "processes": [],
            "summary": {**summary, "min_ns": min(meds), "p90_ns": max(meds), "ci95_ns": [mid, mid],
                        "flags": stats.flags(d, summary)}}


def test_outliers_only_where_they_matter_and_disturbed_rounds_once():
    from opcost.tables import format_results

    tight = [100.0, 100.1, 99.9, 100.05, 99.95, 100.0, 100.02, 99.98, 100.01, 101.0]   # #9 is 1% off
    res = [_result("tight", tight, range(10))]
    assert not res[0]["summary"]["flags"]          # 1% off at a 0.05% spread: not noted
    slow = [100.0, 100.1, 99.9, 100.05, 99.95, 100.0, 100.02, 99.98, 100.01, 110.0]   # round 10 is 10% slow
    res = [_result(f"b{i}", slow, range(10)) for i in range(4)] + [_result("calm", tight, range(10))]
    text = format_results(res)
    assert "round 10 was an outlier in 4 of 5 benchmarks: the machine was disturbed" in text
    assert "b0: outliers" not in text
    alone = format_results([_result("b0", slow, range(10)), _result("calm", tight, range(10))])
    assert "b0: outliers: 1 process(es) beyond 3 MADs and 2% off the median: #9 (+10.0%)" in alone
