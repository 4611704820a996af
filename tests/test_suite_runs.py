"""tools/suite_runs.py (issue 26: the suite N times from fresh clones, once
beside a CPU hog), on a tiny repository of its own whose test.sh runs pytest
on three tests (one passes, one fails, one skips): the lines it prints, its
exit status, the hog started and ended, and bad arguments refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "suite_runs.py"

def spinner(out: Path) -> str:
    """The tool's hog for --out `out` (its command line ends with it): not
    the hog of another run of the tool (this test run by one, beside a hog)."""
    return f"^[^ ]*python[^ ]* -c while True: pass {out}$"


TESTS = """
import os, pytest
def test_passes(): pass
def test_fails(): assert os.environ.get("SUITE_RUNS_FAIL") != "1"
def test_skips(): pytest.skip("here")
"""


def tool(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def repo(tmp_path) -> Path:
    """The tiny repository; its runs' output goes to tmp_path/out."""
    r = tmp_path / "repo"
    (r / "tests").mkdir(parents=True)
    (r / "tests" / "test_x.py").write_text(TESTS)
    # the hog's spinner, seen from inside the run (in the run's log): where it is pinned
    (r / "test.sh").write_text('#!/usr/bin/env bash\nfor p in $(pgrep -f "%s"); do taskset -pc "$p"; done\n'
                               'exec python3 -m pytest -q -p no:cacheprovider "$@"\n' % spinner(tmp_path / "out"))
    os.chmod(r / "test.sh", 0o755)
    git = ["git", "-C", str(r), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tiny"], check=True)
    return r


def test_runs_from_fresh_clones_one_line_each(repo, tmp_path):
    cp = tool("2", "--repo", str(repo), "--out", str(tmp_path / "out"), "--pytest-args", "-k 'passes or skips'")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    lines = cp.stdout.splitlines()
    assert len(lines) == 3 and "2 run(s) of ./test.sh" in lines[0], cp.stdout
    for i, line in enumerate(lines[1:], 1):
        assert line.startswith(f"run {i}/2: 1 passed, 0 failed, 1 skipped; pytest "), line
        assert "failed:" not in line
    assert "2 passed" not in (tmp_path / "out" / "run2.log").read_text()   # each run's own output
    assert "1 passed, 1 skipped" in (tmp_path / "out" / "run2.log").read_text()
    assert "affinity" not in (tmp_path / "out" / "run1.log").read_text()   # no hog asked, none there


def test_failures_are_named_and_exit_1_and_the_hog_goes(repo, tmp_path):
    cpu = sorted(os.sched_getaffinity(0))[0]
    env_fail = {**os.environ, "SUITE_RUNS_FAIL": "1"}
    cp = subprocess.run([sys.executable, str(TOOL), "1", "--repo", str(repo), "--out", str(tmp_path / "out"),
                         "--hog", str(cpu)], capture_output=True, text=True, timeout=120, env=env_fail,
                        stdin=subprocess.DEVNULL)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    line = cp.stdout.splitlines()[1]
    assert line.startswith("run 1/1: 1 passed, 1 failed, 1 skipped;") and "exit 1" in line, line
    assert line.endswith("failed: tests/test_x.py::test_fails"), line
    assert f"a CPU hog on CPU {cpu}" in cp.stdout
    # the hog was there during the run, pinned on that CPU, and is gone after it
    log = (tmp_path / "out" / "run1.log").read_text()
    assert f"current affinity list: {cpu}\n" in log, log
    gone = subprocess.run(["pgrep", "-f", spinner(tmp_path / "out")], capture_output=True, text=True)
    assert gone.stdout.strip() == "", gone.stdout


@pytest.mark.parametrize("args,says", [
    (["0"], "N 0: give at least 1 run"),
    (["1", "--hog", "4096"], "--hog 4096: not a CPU this process may use"),
    (["1", "--timeout", "0"], "--timeout 0: give a positive number of seconds"),
    (["1", "--pytest-args", "'unclosed"], "--pytest-args:"),
    (["1", "--repo", "/nonexistent"], "--repo /nonexistent: not a git checkout"),
])
def test_bad_arguments_are_one_line_exit_2(args, says):
    cp = tool(*args)
    assert cp.returncode == 2 and cp.stdout == "", (cp.returncode, cp.stdout)
    assert cp.stderr.count("\n") == 1 and says in cp.stderr, cp.stderr
