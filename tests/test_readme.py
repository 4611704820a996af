"""The README's commands, run.

- The quick start is exactly two commands, the ones CI runs: `pip install .
  && opcost run` (test.sh installs opcost with pip from this checkout) and
  `./test.sh` (what .ci/run calls). They are not run here (they install and
  measure the whole suite).
- The tour's blocks are made by tools/readme_tour.py from today's code (real
  runs for the timed parts, the fake clock for the rest); here the script
  makes them again with every measuring command on the fake clock (so
  nothing depends on this CPU's timing), and each README block must be what
  it prints, line for line, the figures aside (numbers, units, dates,
  verdicts of the timed runs, paths, column widths) but not the settings
  (the delta a verdict was reached under). A block taken from an older
  opcost, or trimmed by hand, fails.
- The fleet's block (not made by the script: it needs the tests' hosts) runs
  against the tests' three sshd hosts (tests/sshd_hosts.py) with their
  --ssh-config added, each line shown having a line of the same shape in the
  output; it skips where sshd cannot start, unless OPCOST_REQUIRE_SSHD=1.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli_argv, cli_env

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FAKE = ["--fake-clock", "100"]


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """The fenced code blocks of a markdown text: (info string, lines)."""
    out, cur, info = [], None, ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("```"):
            if cur is None:
                cur, info = [], s[3:].strip()
            else:
                out.append((info, cur))
                cur = None
        elif cur is not None:
            cur.append(line)
    return out


def section(text: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"README has no section '## {title}'"
    return m.group(1)


def commands_of(lines: list[str]) -> list[str]:
    """A sh block's commands, comments and blank lines left out."""
    return [re.sub(r"\s+#.*$", "", l).strip() for l in lines if l.strip() and not l.lstrip().startswith("#")]


def test_quick_start_is_the_two_commands_ci_runs():
    text = README.read_text()
    qs = [b for b in blocks(section(text, "Quick start")) if b[0] == "sh"]
    assert len(qs) == 1, "the quick start is one sh block"
    cmds = commands_of(qs[0][1])
    assert cmds == ["pip install . && opcost run", "./test.sh"], cmds
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "./test.sh" in [l.strip() for l in ci], ".ci/run must call ./test.sh, the README's second command"
    test_sh = (ROOT / "test.sh").read_text()
    assert re.search(r"^python3 -m pip install .*'\.\[test\]'", test_sh, re.M), \
        "test.sh installs opcost from this checkout with pip, as the README's first command does"
    assert len(text.splitlines()) <= 260, "the README is a five-minute read: at most ~250 lines"


def tour() -> list[tuple[list[str], list[list[str]]]]:
    """Per block with `$ opcost` lines: [(argv, shown output lines)]."""
    out = []
    for _, lines in blocks(README.read_text()):
        steps, cur = [], None
        for line in lines:
            if line.startswith("$ opcost "):
                cur = (shlex.split(line[2:])[1:], [])
                steps.append(cur)
            elif line.startswith("$ "):
                raise AssertionError(f"a tour line that is not opcost: {line}")
            elif cur is not None:
                cur[1].append(line)
        if steps:
            out.append(steps)
    return out


MEASURING = ("run", "ab", "variants", "fleet")


def with_fake_clock(argv: list[str]) -> list[str]:
    if argv[0] in MEASURING or (argv[0] == "series" and "--run" in argv):
        return [*argv, *FAKE]
    return argv


_VERDICT = r"\b(slower|faster|same|negligible|inconclusive)\b"


def shape(line: str) -> str:
    """A line with what varies from run to run (numbers, units, dates,
    verdicts, paths, column widths) taken out."""
    s = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "T", line)
    s = re.sub(r"(?<![\w.])/\S+", "P", s)
    s = re.sub(r"[+-]?\d[\d,]*(\.\d+)?(e[+-]?\d+)?", "#", s)
    s = re.sub(r"#\s*(ns|us|ms|s)\b", "#", s)
    s = re.sub(_VERDICT, "V", s)
    # which min-p test a look used (paired or not, exact or sampled) follows the rounds a run
    # reached, as its verdict does (abtest.compare_arms)
    s = re.sub(r"p: (permutation|paired) min-p[^;]*", "p: min-p", s)
    s = re.sub(r"-{2,}", "-", s)
    return re.sub(r"\s+", " ", s).strip()


def check_shape(argv: list[str], shown: list[str], got: str) -> None:
    have = {shape(l) for l in got.splitlines()}
    for line in shown:
        if line.strip() == "notes:":
            break
        if not line.strip() or line.strip() == "...":
            continue
        assert shape(line) in have, (f"`opcost {' '.join(argv)}`: the README shows\n  {line}\n"
                                     f"and no line of the output has its shape:\n{got}")


def run_steps(steps, tmp_path: Path, extra: dict[str, list[str]] | None = None) -> None:
    for argv, shown in steps:
        args = with_fake_clock(argv)
        for cmd, more in (extra or {}).items():       # `fleet run` -> `fleet run --ssh-config F`
            n = len(cmd.split())
            if args[:n] == cmd.split():
                args = [*args[:n], *more, *args[n:]]
        cp = subprocess.run(cli_argv(*args), env=cli_env(tmp_path), cwd=ROOT, capture_output=True,
                            text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert cp.returncode == 0, f"opcost {' '.join(args)}: exit {cp.returncode}\n{cp.stderr}"
        check_shape(argv, shown, cp.stdout + cp.stderr)


def test_tour_has_the_main_tasks():
    ran = {argv[0] if argv[0] != "fleet" else "fleet" for steps in tour() for argv, _ in steps}
    assert {"run", "ab", "series", "report", "fleet", "variants"} <= ran, ran


def _delta(line: str) -> str | None:
    """The delta of an ab or variants table row (a setting, not a figure)."""
    m = re.search(r"\s(\d+\.\d%)\s+(?:slower|faster|same|negligible|inconclusive)\s*$", line)
    return m.group(1) if m else None


def block_differences(shown: list[str], made: list[str]) -> list[str]:
    """Where a README block differs from what tools/readme_tour.py made, the
    figures aside: a line of another shape, another delta, a line more or less."""
    out = []
    for i in range(max(len(shown), len(made))):
        a = shown[i] if i < len(shown) else "(nothing)"
        b = made[i] if i < len(made) else "(nothing)"
        if shape(a) != shape(b) or _delta(a) != _delta(b):
            out.append(f"line {i + 1}:\n  README:  {a}\n  today:   {b}")
    return out


def test_tour_is_what_todays_code_prints(tmp_path, probe_bin):
    """Every block the script makes, made again on the fake clock, equals
    the README's, line for line, figures aside."""
    import readme_tour

    shown = {b[2][0]: b[2] for b in readme_tour.readme_blocks(README.read_text())}
    made = readme_tour.tour(fake=True, data_home=tmp_path)
    assert len(shown) == len(made) == len(readme_tour.TOUR), sorted(shown)
    wrong = {b[0]: block_differences(shown[b[0]], b) for b in made}
    wrong = {k: v for k, v in wrong.items() if v}
    assert not wrong, "README blocks not what today's code prints (python3 tools/readme_tour.py --write):\n" + \
        "\n".join(f"{k}\n" + "\n".join(v) for k, v in wrong.items())


# The README's variants block as it was (issue 35): a 4.7x speed-up called
# `negligible` under a delta "raised by the noise", a rule since retired.
OLD_VARIANTS = """$ opcost variants docs/examples/div.c -D DIV -D SHIFT -p 6
...
benchmark          op               median  95% CI                  min      p90     CV  cycles  user/op  sys/op  cpus  n
-----------------  --------------  -------  ------------------  -------  -------  -----  ------  -------  ------  ----  -
-DDIV              opcost_op call  22.6 ns  [11.7 ns, 34.2 ns]  11.0 ns  34.2 ns  51.4%      57   5.5 ns  0.0 ns  1     6
-DSHIFT            opcost_op call   4.8 ns  [4.4 ns, 6.6 ns]     4.2 ns   6.6 ns  20.1%      12   1.7 ns  0.0 ns  1     6
(empty opcost_op)  opcost_op call   5.1 ns  [4.3 ns, 6.6 ns]     4.2 ns   6.6 ns  22.5%      13   1.8 ns  0.0 ns  1     6
...
benchmark  op                    A       B     B/A  95% CI            p (Holm)  delta  verdict
---------  --------------  -------  ------  ------  ----------------  --------  -----  ----------
-DSHIFT    opcost_op call  22.6 ns  4.8 ns  0.2115  [0.1379, 0.4957]    0.0043  90.8%  negligible
...""".splitlines()


def test_the_old_variants_block_is_told_apart():
    """The check can fail: the old block against today's output (its shape
    on the fake clock) differs in its delta, the figures alike aside."""
    today = [ln.replace("90.8%  negligible", "2.0%   same") for ln in OLD_VARIANTS]
    assert block_differences(today, today) == []
    diff = block_differences(OLD_VARIANTS, today)
    assert len(diff) == 1 and "90.8%" in diff[0], diff
    assert block_differences(OLD_VARIANTS[:-1], OLD_VARIANTS)      # a line less
    assert block_differences([*OLD_VARIANTS[:4], "notes:", *OLD_VARIANTS[5:]], OLD_VARIANTS)


@pytest.mark.xdist_group("sshd-hosts")   # beside test_fleet's hosts, never at once (conftest.py)
def test_tour_fleet(tmp_path, probe_bin):
    import sshd_hosts

    steps = [s for b in tour() if any(a[0] == "fleet" for a, _ in b) for s in b]
    assert steps
    d = tmp_path / "hosts"
    d.mkdir()
    hosts = sshd_hosts.start_or_skip(d)
    try:
        run_steps(steps, tmp_path, {"fleet run": ["--ssh-config", str(hosts.ssh_config)],
                                    "fleet ab": ["--ssh-config", str(hosts.ssh_config)]})
    finally:
        hosts.stop()


def test_shape_tells_a_different_table_apart():
    """The check can fail: another column, another word, a lost line."""
    shown = ["benchmark     op           median  95% CI", "syscall.null  system call  336.8 ns  [93.1 ns, 442.0 ns]"]
    check_shape(["run"], shown, "benchmark  op  median  95% CI\nsyscall.null  system call  100.0 us  [99.0 ns, 101 ns]\n")
    for got in ("benchmark  op  median  CV\nsyscall.null  system call  1 ns  [1 ns, 2 ns]\n",
                "benchmark  op  median  95% CI\nsyscall.read  system call  1 ns  [1 ns, 2 ns]\n",
                "benchmark  op  median  95% CI\n"):
        with pytest.raises(AssertionError):
            check_shape(["run"], shown, got)
