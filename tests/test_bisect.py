"""`opcost ab ... --bisect` drives a real `git bisect run`: a 12-commit
repository whose commits set the cost of a benchmark (the fake clock and an
injected spin=, so the answer does not depend on this CPU), the cost raised
at one commit; bisect must name that commit. The exit codes themselves:
0 good, 1 bad, 125 skip."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

BAD_AT = 7   # the commit (1-based) that makes the operation 10% dearer


def git(repo, *args, **kw):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, **kw)


def test_git_bisect_run_finds_the_injected_commit(tmp_path, probe_bin):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "t")
    commits = []
    for n in range(1, 13):
        # the "build": what this commit's operation costs, as injected spin (one fake tick per add)
        (repo / "spin").write_text("21\n" if n >= BAD_AT else "1\n")
        (repo / "log").write_text(f"commit {n}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {n}")
        commits.append(git(repo, "rev-parse", "HEAD").stdout.strip())
    # The known-good build (commit 1) is measured again, interleaved, at every step.
    script = tmp_path / "step.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'exec {sys.executable} -m opcost ab syscall.null --a spin=1 --b spin=$(cat spin) '
        "--fake-clock 100 -p 8 -n 5 -w 1 --target-ms 1 --no-store --no-progress --bisect\n")
    script.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "XDG_DATA_HOME": str(tmp_path / "data")}
    git(repo, "bisect", "start", commits[-1], commits[0])
    cp = subprocess.run(["git", "-C", str(repo), "bisect", "run", str(script)], capture_output=True, text=True,
                        env=env, timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert f"{commits[BAD_AT - 1]} is the first bad commit" in cp.stdout, cp.stdout
    steps = cp.stdout.count("running")
    assert 2 <= steps <= 5, cp.stdout   # log2(11) steps, no skips


@pytest.mark.parametrize("b, code", [("spin=1", 0), ("spin=21", 1), ("spin=9", 125)])
def test_bisect_exit_codes(run_cli, b, code):
    # spin=9 (+4 ns of 100) with 2 processes per arm: no test on 2 against 2 reaches p < 0.05, and the CI
    # lies beyond +-delta: inconclusive, whatever the fake clock's jitter
    p = ["-p", "2"] if code == 125 else ["-p", "8"]
    cp = run_cli("ab", "syscall.null", "--a", "spin=1", "--b", b, "--fake-clock", "100", *p, "-n", "5", "-w", "1",
                 "--target-ms", "1", "--no-store", "--bisect")
    assert cp.returncode == code, cp.stdout + cp.stderr


def test_bisect_skips_a_kernel_that_does_not_boot_and_stops_on_bad_input(run_cli, tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from test_vm import FAKE, fake_kernel

    k = fake_kernel(tmp_path / "k")
    args = ["--fake-clock", "10", "-n", "3", "-w", "1", "-p", "2", "--accel", "tcg", "--no-store", "--bisect"]
    cp = run_cli("ab", "syscall.null", "--a", f"kernel={k}", "--b", f"kernel={k}", *args,
                 env={"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_MODE": "panic"})
    assert cp.returncode == 125 and "did not boot" in cp.stderr, cp.stderr
    cp = run_cli("ab", "syscall.null", "--a", "kernel=/nonexistent", "--b", f"kernel={k}", *args)
    assert cp.returncode == 128 and "no such file" in cp.stderr, cp.stderr
