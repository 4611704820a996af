"""A run carries its plan as data (issue 24): `show`, `report`, `compare` and
`export` rebuild what a command printed from the stored run alone, so a run
stored, then read by an opcost whose options are called something else (and
whose probe table is out of reach), shows and reports the same; an older
run's plan is recovered once from its stored command line (the options as
they were then, store/recover.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import cli_env
from opcost.model import Plan
from opcost.store.recover import recover_plan

FAST = ["--fake-clock", "100", "-p", "3", "-n", "2", "-w", "0", "--target-ms", "1", "--no-progress"]

# Runs opcost with its options renamed (--a, --b, --delta, --over, --run: dest kept), the local
# probe table out of reach, and first says whether the renamed parser still reads the stored
# command line given as argv[1] (it must not: then the test shows that nothing re-parses it).
RENAMED = r"""
import argparse, json, sys
RENAMED = {"--a": "--arm-a", "--b": "--arm-b", "--delta": "--threshold", "--over": "--along", "--run": "--measure"}
original = argparse._ActionsContainer.add_argument

def add_argument(self, *names, **kw):
    if any(n in RENAMED for n in names):
        kw.setdefault("dest", next(n for n in names if n.startswith("--"))[2:].replace("-", "_"))
        names = tuple(RENAMED.get(n, n) for n in names)
    return original(self, *names, **kw)

argparse._ActionsContainer.add_argument = add_argument
from opcost.targets.local import LocalTarget

def no_table(self, *args, **kw):
    raise AssertionError("the local probe table was asked")

LocalTarget.benchmark_table = no_table
from opcost import commands
from opcost.cli import main
from opcost.errors import UsageError

try:
    commands.build_parser().parse_args(json.loads(sys.argv[1])[1:])
    print("the renamed parser reads the stored command line", file=sys.stderr)
except UsageError:
    print("refused", file=sys.stderr)
sys.exit(main(sys.argv[2:]))
"""


def ok(cp) -> str:
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def test_a_stored_run_shows_and_reports_the_same_after_its_options_are_renamed(run_cli, tmp_path):
    measured_ab = ok(run_cli("ab", "syscall.null", "ctx.pipe", "--a", "", "--b", "spin=4", *FAST, "--delta", "5",
                             "--label", "ab-run"))
    measured_series = ok(run_cli("series", "--run", "syscall.null", "--over", "spin=1|1|8|8", *FAST, "--delta", "4",
                                 "--label", "ser"))
    ok(run_cli("run", "ctx.pipe:mode=thread", *FAST, "--label", "c1"))
    ok(run_cli("run", "ctx.pipe:mode=thread", *FAST[:1], "130", *FAST[2:], "--label", "c2"))
    stored = {ref: json.loads(ok(run_cli("show", ref, "--json", "-"))) for ref in ("ab-run", "ser", "c1")}
    assert stored["ab-run"]["plan"] == {
        "kind": "ab", "specs": ["syscall.null", "ctx.pipe"], "a": "", "b": "spin=4", "delta": 0.05, "alpha": 0.05,
        "over": None, "boundary": None, "stages": [], "switches": {"ctx.pipe": 2}, "ops": None, "target": "local",
        "seed": 0}   # the fake clock's seed (issue 37: a real run records the fresh one it drew)
    assert stored["ser"]["plan"]["over"] == {"param": "spin", "values": ["1", "1", "8", "8"]}
    readers = [("show", "ab-run"), ("show", "ser"), ("show", "c1"), ("report", "ab-run", "-f", "markdown"),
               ("report", "ab-run"), ("compare", "c1", "c2"), ("report", "--compare", "c1", "c2", "-f", "markdown"),
               ("show", "ab-run", "--json", "-")]
    for argv in readers:
        want = ok(run_cli(*argv))
        ref = "c1" if argv[0] == "compare" or "--compare" in argv else argv[1]
        cp = subprocess.run([sys.executable, "-c", RENAMED, json.dumps(stored[ref]["argv"]), *argv],
                            env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
        assert cp.returncode == 0, (argv, cp.stderr)
        if ref != "c1":   # the old way (re-parse the stored argv) would have lost the comparison
            assert cp.stderr.splitlines()[0] == "refused", argv
        assert cp.stdout == want, argv
    shown = ok(run_cli("show", "ab-run"))
    assert shown.partition("\n")[2].strip() == measured_ab.strip()
    assert "5.0%" in shown and "verdict" in shown                        # the comparison, at its --delta 5
    assert ok(run_cli("show", "ser")).partition("\n")[2].strip() == measured_series.strip()   # the series, rebuilt
    assert "per switch" in ok(run_cli("compare", "c1", "c2"))            # ctx.pipe's 2 switches, from the plans


def test_the_plan_is_recovered_from_the_options_of_then():
    argv = ["opcost", "ab", "ctx.pipe", "syscall.null", "--a", "mode=process", "--b=mode=thread", "--del", "5%",
            "-p3", "--label", "x", "--fake-clock", "100"]
    results = [{"bench": "ctx.pipe", "processes": [{"round": 0}]}, {"bench": "syscall.null", "processes": []}]
    plan = recover_plan(argv, "ab", results)
    assert plan == Plan(kind="ab", specs=["ctx.pipe", "syscall.null"], a="mode=process", b="mode=thread",
                        delta=0.05, switches={"ctx.pipe": 2}, target="local", recovered=True)
    assert plan.to_dict()["recovered"] is True and Plan.from_dict(plan.to_dict()) == plan
    seq = recover_plan(["opcost", "ab", "x", "--a", "", "--b", "spin=1"], "ab",
                       [{"bench": "x", "processes": [{"stage": 1}]}])
    assert seq is not None and seq.stages == [10, 20, 40] and seq.boundary == "obf"   # staged, before a choice
    assert seq.delta == 0.02                                                         # --delta's default
    over = recover_plan(["opcost", "series", "--run", "s:a=1", "--over", "spin=1|2|3"], "series")
    assert over is not None and over.over == {"param": "spin", "values": ["1", "2", "3"]} and over.specs == ["s:a=1"]
    assert recover_plan(["opcost", "variants", "p.c", "-DA", "-DB", "--ops", "1000"], "variants").ops == 1000
    assert recover_plan(["opcost", "run", "a", "b"], "run").specs == ["a", "b"]
    # nothing to tell: another kind, a command line that does not parse, a value out of range
    assert recover_plan(["opcost", "run", "x"], "ab") is None
    assert recover_plan(["opcost", "ab", "x", "--a", "", "--b", "y", "--no-such-option"], "ab") is None
    assert recover_plan(["opcost", "ab", "x", "--a", "", "--b", "y", "--delta", "200"], "ab") is None
    assert recover_plan(["opcost", "ab", "x", "--a", ""], "ab") is None
    assert recover_plan(["opcost", "series", "s", "--by", "commit"], "series") is None   # a stored series
    assert recover_plan([], None) is None


def test_the_run_order_seed_is_fresh_by_default_and_recorded_in_the_plan(run_cli, tmp_path):
    """Issue 37: without --seed every run gets a seed from the system's
    entropy, recorded in its plan; --seed N is kept (and repeats the order);
    --fake-clock keeps 0 (its output is meant to repeat)."""
    import argparse

    from opcost.protocol import Protocol

    seeds = {Protocol.from_args(argparse.Namespace()).seed for _ in range(8)}
    assert len(seeds) > 1 and all(0 <= s < 2**32 for s in seeds)   # 8 draws of 32 bits: all alike 8 in 2^224
    assert Protocol.from_args(argparse.Namespace(seed=7)).seed == 7
    assert Protocol.from_args(argparse.Namespace(fake_clock=100.0)).seed == 0
    assert Plan.from_dict(Plan(seed=12345).to_dict()).seed == 12345 and "seed" not in Plan().to_dict()
    # a real run (no fake clock): its plan carries the seed it drew; --seed N is recorded as given
    real = ["run", "syscall.null", "-p", "1", "-n", "1", "-w", "0", "--target-ms", "1", "--no-progress", "--no-store",
            "--json", "-"]
    got = []
    for extra in ([], [], ["--seed", "42"]):
        cp = run_cli(*real, *extra)
        assert cp.returncode == 0, cp.stderr
        got.append(json.loads(cp.stdout[:cp.stdout.rindex("}") + 1])["plan"]["seed"])
    assert got[0] != got[1] and got[2] == 42
