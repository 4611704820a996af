"""`opcost completion bash|zsh`: the scripts are exercised in a real shell.

bash: the script is sourced, COMP_WORDS/COMP_LINE are set as bash sets them
on TAB (the line split at blanks, then at COMP_WORDBREAKS' `=`, `:`, `|`),
and what `_opcost` leaves in COMPREPLY is compared. zsh: an interactive zsh
in a pseudo-terminal completes the line with the script installed in its
fpath (tests/data/zsh_capture.zsh prints what compadd was given). zsh is
installed by test.sh; elsewhere its tests skip, unless
OPCOST_REQUIRE_TOOLS names zsh.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
REQUIRED = set(filter(None, os.environ.get("OPCOST_REQUIRE_TOOLS", "").split(",")))

# Split LINE the way bash does for completion (blanks, then runs of the
# word-break characters `=`, `:`, `|` as words of their own), set the
# completion variables and print COMPREPLY, one entry a line.
BASH_DRIVER = r'''
source "$1"
line=$2
COMP_WORDS=()
rest=$line
while [[ -n $rest ]]; do
  rest=${rest#"${rest%%[![:space:]]*}"}
  [[ -z $rest ]] && break
  if [[ $rest =~ ^[=:|]+ ]] || [[ $rest =~ ^[^[:space:]=:|]+ ]]; then
    COMP_WORDS+=("${BASH_REMATCH[0]}")
    rest=${rest:${#BASH_REMATCH[0]}}
  fi
done
[[ $line =~ [[:space:]]$ ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE=$line
COMP_POINT=${#line}
COMPREPLY=()
_opcost
printf '%s\n' "${COMPREPLY[@]}"
'''


@pytest.fixture(scope="module")
def scripts(tmp_path_factory, probe_bin):
    """The bash and zsh scripts of this checkout, and the probe's table."""
    from conftest import cli_argv, cli_env

    d = tmp_path_factory.mktemp("completion")
    out = {}
    for shell in ("bash", "zsh"):
        cp = subprocess.run(cli_argv("completion", shell), env=cli_env(d), capture_output=True, text=True,
                            timeout=60)
        assert cp.returncode == 0, cp.stderr
        assert cp.stderr == ""
        out[shell] = cp.stdout
    table = json.loads(subprocess.run(cli_argv("list", "--json"), env=cli_env(d), capture_output=True,
                                      text=True, timeout=60, check=True).stdout)
    (d / "opcost.bash").write_text(out["bash"])
    (d / "zsh").mkdir()
    (d / "zsh" / "_opcost").write_text(out["zsh"])
    return d, table


def bash_complete(scripts, line: str) -> list[str]:
    d, _ = scripts
    cp = subprocess.run(["bash", "-c", BASH_DRIVER, "driver", str(d / "opcost.bash"), line],
                        capture_output=True, text=True, timeout=30, cwd=d)
    assert cp.returncode == 0, cp.stderr
    return [x for x in cp.stdout.splitlines() if x]


def test_bash_subcommands_options_and_choices(scripts):
    assert bash_complete(scripts, "opcost r") == ["run", "report"]
    assert bash_complete(scripts, "opcost com") == ["compare", "completion"]
    assert bash_complete(scripts, "opcost run --ti") == ["--timeout"]
    assert bash_complete(scripts, "opcost ab syscall.null --bou") == ["--boundary"]
    assert bash_complete(scripts, "opcost ab syscall.null --boundary ") == ["pocock", "obf"]
    assert bash_complete(scripts, "opcost completion ") == ["bash", "zsh"]
    assert bash_complete(scripts, "opcost report -f mark") == ["markdown"]
    assert bash_complete(scripts, "opcost run --export ht") == ["html:"]
    assert bash_complete(scripts, "opcost probe build --arch a") == ["aarch64", "arm"]


def test_bash_benchmark_names_come_from_the_probe_table(scripts):
    _, table = scripts
    names = sorted(b["name"] for b in table["benchmarks"])
    assert sorted(bash_complete(scripts, "opcost run ")) == names
    assert sorted(bash_complete(scripts, "opcost ab ")) == names
    assert bash_complete(scripts, "opcost run ctx.p") == ["ctx.pipe"]
    assert bash_complete(scripts, "opcost history --bench syscall.n") == ["syscall.null"]
    assert bash_complete(scripts, "opcost fleet run signal.ca") == ["signal.catch"]


def test_bash_parameters_and_values(scripts):
    _, table = scripts
    pipe = next(b for b in table["benchmarks"] if b["name"] == "ctx.pipe")
    # bash replaces only the word after the last `:`: the answers start there
    assert sorted(bash_complete(scripts, "opcost run ctx.pipe:")) == sorted(
        f":{p}=" for p in [*(q["name"] for q in pipe["params"]), "cpu", "arch", "spin"])
    assert bash_complete(scripts, "opcost run ctx.pipe:mo") == ["mode="]
    mode = next(p for p in pipe["params"] if p["name"] == "mode")
    assert bash_complete(scripts, "opcost run ctx.pipe:mode=") == sorted(f"={c}" for c in mode["choices"])
    assert bash_complete(scripts, "opcost run ctx.pipe:mode=th") == ["thread"]
    assert bash_complete(scripts, "opcost run ctx.pipe:mode=thread,fp=pa") == ["parent"]
    assert bash_complete(scripts, "opcost run syscall.null:via=libc|in") == ["inline"]
    assert bash_complete(scripts, "opcost series --run signal.catch:st") == ["state="]
    # ab's --a/--b: the parameters of the benchmarks named on the line
    assert bash_complete(scripts, "opcost ab signal.catch --b sta") == ["state="]
    assert bash_complete(scripts, "opcost ab syscall.null --a via=") == ["=inline", "=libc"]
    assert "software" in bash_complete(scripts, "opcost run --counters soft")


def zsh_complete(scripts, line: str) -> list[str]:
    d, _ = scripts
    cp = subprocess.run(["zsh", "-f", str(DATA / "zsh_capture.zsh"), str(d / "zsh"), line],
                        capture_output=True, text=True, timeout=60, cwd=d)
    assert cp.returncode == 0, cp.stderr
    return sorted(set(x.strip() for x in cp.stdout.splitlines() if x.strip()))


@pytest.fixture
def zsh():
    if shutil.which("zsh") is None:
        if "zsh" in REQUIRED:
            pytest.fail("zsh missing but OPCOST_REQUIRE_TOOLS names it (test.sh installs it)")
        pytest.skip("zsh is not installed")


def test_zsh(scripts, zsh):
    assert zsh_complete(scripts, "opcost r") == ["report", "run"]
    assert zsh_complete(scripts, "opcost run --ti") == ["--timeout"]
    assert zsh_complete(scripts, "opcost run ctx.p") == ["ctx.pipe"]
    assert "ctx.pipe:mode=" in zsh_complete(scripts, "opcost run ctx.pipe:")
    assert zsh_complete(scripts, "opcost run ctx.pipe:mode=th") == ["ctx.pipe:mode=thread"]
    assert zsh_complete(scripts, "opcost ab signal.catch --b sta") == ["state="]
    assert zsh_complete(scripts, "opcost run --export ht") == ["html:"]


def test_bad_shell_is_one_line(run_cli):
    cp = run_cli("completion", "fish")
    assert cp.returncode == 2
    assert cp.stderr.count("\n") == 1 and "invalid choice: 'fish'" in cp.stderr
