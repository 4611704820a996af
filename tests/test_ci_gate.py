"""Issue 35 item 5: the regression gate (ci/opcost-gate.sh), as GitHub
Actions runs it (ci/github/action.yml, a composite action) and as GitLab CI
does (ci/gitlab/opcost-gate.yml, a job template). No runner here: the
action's `run` steps are run in bash the way a runner runs them (`bash -e -o
pipefail`, its `${{ inputs.* }}` filled in, the GITHUB_* variables a runner
sets), the GitLab job's before_script and script likewise with CI_*.

On the fake clock (nothing depends on this CPU): an injected 3x (spin=401
against spin=1 at 100 ns a operation: +200 ns) fails the job with `slower`
in the summary; an A/A (a program whose head differs from its base by a
comment, through `variants`) passes with `same`; a +2% (spin=5) is
inconclusive: passes with a warning, or fails with undecided: fail. The
summary is valid markdown (tests/mdcheck.py, as the report tests check it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import cli_env
from mdcheck import check_markdown

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "ci" / "github" / "action.yml"
GITLAB = ROOT / "ci" / "gitlab" / "opcost-gate.yml"
FAST = "--fake-clock 100 --cpu 0"
OPCOST = f"{sys.executable} -m opcost"


def run_action(inputs: dict[str, str], cwd: Path, tmp: Path, event: dict | None = None) -> tuple[int, str, dict, str]:
    """The action's steps in bash, as a runner runs them: (exit code of the
    first failing step or 0, the step summary, the step outputs, stderr)."""
    action = yaml.safe_load(ACTION.read_text())
    given = {k: str(v.get("default", "")) for k, v in action["inputs"].items()} | {"install": "false"} | inputs
    summary, output, event_path = tmp / "summary.md", tmp / "output.txt", tmp / "event.json"
    summary.write_text("")
    output.write_text("")
    event_path.write_text(json.dumps(event or {}))
    runner = cli_env(tmp, OPCOST=OPCOST, GITHUB_ACTIONS="true", GITHUB_ACTION_PATH=str(ACTION.parent),
                     GITHUB_STEP_SUMMARY=str(summary), GITHUB_OUTPUT=str(output), GITHUB_WORKSPACE=str(cwd),
                     GITHUB_EVENT_NAME="pull_request", GITHUB_EVENT_PATH=str(event_path), RUNNER_TEMP=str(tmp),
                     GITHUB_SHA="0" * 40, GITHUB_REPOSITORY="user/project")

    def fill(text: str) -> str:
        return re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: given[m.group(1)], text)

    code, err = 0, ""
    for step in action["runs"]["steps"]:
        cond = step.get("if", "")
        if "uses" in step:
            assert step["uses"].startswith("actions/upload-artifact@") and cond == "always()"
            assert fill(step["with"]["path"]) == given["out"]      # what the gate wrote is what is kept
            continue
        if cond:
            m = re.fullmatch(r"inputs\.(\w+) == '(\w+)'", cond)
            assert m, f"a condition this test cannot evaluate: {cond}"
            if given[m.group(1)] != m.group(2):
                continue
        if code:
            continue
        env = runner | {k: fill(str(v)) for k, v in (step.get("env") or {}).items()}
        cp = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", fill(step["run"])], cwd=cwd,
                            env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        code, err = cp.returncode, err + cp.stderr + cp.stdout
    outputs = dict(ln.split("=", 1) for ln in output.read_text().splitlines() if "=" in ln)
    return code, summary.read_text(), outputs, err


def _repo(tmp: Path) -> tuple[Path, str]:
    """A project whose pull request changes prog.c by a comment only: (its
    checkout at the head, the base commit)."""
    repo = tmp / "project"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "prog.c").write_text("#include <stdint.h>\nuint64_t opcost_op(uint64_t x) { return x * 3 + 1; }\n")
    subprocess.run([*git, "add", "prog.c"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    base = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (repo / "prog.c").write_text("#include <stdint.h>\n/* the head: a comment */\n"
                                 "uint64_t opcost_op(uint64_t x) { return x * 3 + 1; }\n")
    subprocess.run([*git, "commit", "-qam", "head"], check=True)
    return repo, base


def test_an_injected_3x_fails_with_slower(tmp_path, probe_bin):
    work = tmp_path / "w"
    work.mkdir()
    code, summary, outputs, err = run_action({"ab": "syscall.null --a spin=1 --b spin=401", "args": FAST}, work, tmp_path)
    assert code == 1, err
    assert outputs["verdict"] == "slower" and "**opcost gate: failed**: 1 benchmark(s) slower" in summary
    row = next(ln for ln in summary.splitlines() if ln.startswith("| syscall.null |"))
    assert row.split("|")[-2].strip(" *") == "slower" and 2.9 < float(row.split("|")[5]) < 3.1, row   # B/A ~ 3
    check_markdown(summary)
    doc = json.loads((work / outputs["json"]).read_text())
    assert doc["schema"] == "opcost.comparison/1" and doc["comparisons"][0]["verdict"] == "slower"
    assert (work / "opcost-gate" / "opcost-gate.md").read_text() in summary     # the artifact's report


def test_an_aa_pull_request_passes_with_same(tmp_path, probe_bin):
    """variants mode: the source at the pull request's base (from the event,
    as GitHub gives it) against the head's, built from one wrapper."""
    repo, base = _repo(tmp_path)
    code, summary, outputs, err = run_action({"source": "prog.c", "args": f"-p 6 {FAST}"}, repo, tmp_path,
                                             event={"pull_request": {"base": {"sha": base}}})
    assert code == 0, err
    assert outputs["verdict"] == "ok" and "**opcost gate: passed**" in summary
    assert re.search(r"^\| -DHEAD \| opcost\\_op call \|.*\| same \|$", summary, re.M), summary
    assert f"prog.c at the base {base[:12]} (-DBASE) against the head (-DHEAD)" in err
    check_markdown(summary)
    worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(worktrees.splitlines()) == 1, worktrees      # the base's checkout is gone


def test_undecided_passes_with_a_warning_or_fails_when_asked(tmp_path, probe_bin):
    work = tmp_path / "w"
    work.mkdir()
    # +1.5 ns of 100 on the fake clock, its CI [1.4%, 1.7%] across a delta of 1.6%: the estimate
    # within delta, the interval not: inconclusive (the 1% graded rule, docs/statistics.md)
    ab = "syscall.null --a spin=1 --b spin=4 --delta 1.6"
    code, summary, outputs, err = run_action({"ab": ab, "args": FAST}, work, tmp_path)
    assert code == 0 and outputs["verdict"] == "undecided", err
    assert "::warning::opcost gate: undecided (1 inconclusive)" in err
    assert "**opcost gate: undecided**" in summary and "| inconclusive |" in summary
    check_markdown(summary)
    code, _, outputs, err = run_action({"ab": ab, "args": FAST, "undecided": "fail", "out": "again"}, work, tmp_path)
    assert code == 1 and outputs["verdict"] == "undecided", err


def test_bad_input_is_one_line_exit_2(tmp_path):
    code, _, _, err = run_action({"ab": "syscall.null --a spin=1 --b spin=2", "source": "x.c"}, tmp_path, tmp_path)
    assert code == 2 and err.strip().splitlines() == [
        "opcost-gate: give OPCOST_GATE_SOURCE (a program, variants) or OPCOST_GATE_AB (opcost ab's arguments), not both"]


def test_the_gitlab_job_runs_the_same_steps(tmp_path, probe_bin):
    """The job template's before_script and script, with the CI_* variables
    of a merge request pipeline: an A/A (ab mode, A and B the same) passes
    with `same`, the report in the artifact's directory."""
    job = yaml.safe_load(GITLAB.read_text())[".opcost-gate"]
    assert job["artifacts"]["paths"] == [job["variables"]["OPCOST_GATE_OUT"] + "/"] and job["artifacts"]["when"] == "always"
    work = tmp_path / "w"
    work.mkdir()
    env = cli_env(tmp_path, **{**job["variables"], "OPCOST_DIR": str(ROOT)}, OPCOST=OPCOST, OPCOST_SRC="unused",
                  CI="true", GITLAB_CI="true", CI_PIPELINE_SOURCE="merge_request_event", CI_PROJECT_DIR=str(work),
                  OPCOST_GATE_AB="syscall.null --a spin=1 --b spin=1", OPCOST_GATE_ARGS=FAST)
    script = "\n".join(job["before_script"] + job["script"])
    cp = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                        timeout=300, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    md = (work / "opcost-gate" / "opcost-gate.md").read_text()
    assert "**opcost gate: passed**" in md and re.search(r"^\| syscall\.null \|.*\| same \|$", md, re.M), md
    check_markdown(md)
