"""`opcost ab` and `opcost compare` end to end, with the fake clock (spin adds
one fake tick, 0.5 ns, per add on top of the fake per-op cost)."""

import json
import sqlite3

import pytest

FAST = ["-n", "5", "-w", "1", "--target-ms", "1"]
VERDICTS = {"faster", "slower", "same", "negligible", "inconclusive"}


def one_error_line(cp):
    err = cp.stderr.strip().splitlines()
    assert cp.returncode == 2, cp.stderr
    assert len(err) == 1 and err[0].startswith("opcost: ") and "Traceback" not in cp.stderr, err
    assert cp.stdout == ""
    return err[0]


def test_ab_detects_an_injected_slowdown(run_cli, tmp_path):
    out = tmp_path / "cmp.json"
    # A: 100 ns + 1 tick; B: 100 ns + 21 ticks = +10 ns, a 10% slowdown
    cp = run_cli("ab", "syscall.null", "--a", "spin=1", "--b", "spin=21", "--fake-clock", "100", "-p", "8",
                 *FAST, "--json", str(out), "--label", "inject")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "opcost.comparison/1" and doc["kind"] == "ab"
    assert doc["interleaved"] is True and doc["aa"] is False
    (e,) = doc["comparisons"]
    assert e["bench"] == "syscall.null" and e["verdict"] == "slower"
    assert e["ratio"] == pytest.approx(110.5 / 100.5, rel=0.01)
    lo, hi = e["ci95_ratio"]
    assert lo <= e["ratio"] <= hi and lo > 1.05
    assert e["p_value"] < 0.01 and e["p_adjusted"] == pytest.approx(e["p_value"])
    assert e["a"]["params"]["spin"] == "1" and e["b"]["params"]["spin"] == "21"
    # seed 000's table: A, B, difference A-B, improvement (A-B)/A
    sv = e["savings"]
    assert sv["difference"]["elapsed"] == pytest.approx(sv["A"]["elapsed"] - sv["B"]["elapsed"])
    assert sv["improvement"]["elapsed"] == pytest.approx(sv["difference"]["elapsed"] / sv["A"]["elapsed"])
    assert sv["difference"]["elapsed"] < 0  # B is slower: a negative saving
    assert doc["summary"]["counts"]["slower"] == 1
    assert doc["summary"]["geomean_ratio"] == pytest.approx(e["ratio"])
    line = next(ln for ln in cp.stdout.splitlines() if ln.split()[:1] == ["syscall.null"])
    assert line.split()[-1] == "slower"
    assert "saving A-B" in cp.stdout and "(A-B)/A" in cp.stdout and "95% CI" in cp.stdout


def test_ab_runs_interleaved_in_random_order(run_cli, tmp_path):
    cp = run_cli("ab", "syscall.null", "--a", "spin=1", "--b", "spin=2", "--fake-clock", "100", "-p", "8",
                 *FAST, "--label", "order", "--seed", "3")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(run_cli("show", "order", "--json", "-").stdout)
    a, b = doc["results"]
    rounds = {}
    for arm, r in (("A", a), ("B", b)):
        for p in r["processes"]:
            rounds.setdefault(p["round"], []).append((p["seq"], arm))
    assert sorted(rounds) == list(range(8))
    firsts = []
    for rnd, runs in sorted(rounds.items()):
        assert sorted(arm for _, arm in runs) == ["A", "B"]  # one of each per round
        firsts.append(min(runs)[1])
    assert set(firsts) == {"A", "B"}  # the order within a round is randomised
    seqs = sorted(s for runs in rounds.values() for s, _ in runs)
    assert seqs == list(range(1, 17))


def test_aa_run_is_allowed_and_says_so(run_cli, tmp_path):
    out = tmp_path / "aa.json"
    cp = run_cli("ab", "syscall.null", "signal.install", "--a", "via=libc", "--b", "via=libc",
                 "--fake-clock", "100", "-p", "6", *FAST, "--json", str(out), "--no-store")
    # signal.install has no `via`: a parameter unknown to the benchmark is bad input
    one_error_line(cp)
    cp = run_cli("ab", "syscall.null", "signal.install", "--a", "", "--b", "", "--fake-clock", "100",
                 "-p", "6", *FAST, "--json", str(out), "--no-store")
    assert cp.returncode == 0, cp.stderr
    assert "A/A run" in cp.stdout
    doc = json.loads(out.read_text())
    assert doc["aa"] is True
    assert [e["bench"] for e in doc["comparisons"]] == ["syscall.null", "signal.install"]
    for e in doc["comparisons"]:
        assert e["verdict"] in VERDICTS - {"slower", "faster"}
        assert 0.98 < e["ratio"] < 1.02
    # Holm across the two benchmarks: adjusted p never below the raw p
    assert all(e["p_adjusted"] >= e["p_value"] for e in doc["comparisons"])


def test_inconclusive_says_how_many_processes_would_decide(run_cli, tmp_path):
    out = tmp_path / "c.json"
    # 3 vs 3 processes cannot reach p < 0.05 with Mann-Whitney, and a 0.5% delta is inside the noise
    cp = run_cli("ab", "syscall.null", "--a", "spin=1", "--b", "spin=3", "--fake-clock", "100", "-p", "3",
                 *FAST, "--delta", "0.5", "--json", str(out), "--no-store")
    assert cp.returncode == 0, cp.stderr
    (e,) = json.loads(out.read_text())["comparisons"]
    assert e["verdict"] == "inconclusive"
    assert e["processes_needed"] >= 6
    assert "processes per arm would likely decide it" in cp.stdout


def test_counters_and_ctx_savings_per_switch(run_cli, tmp_path):
    out = tmp_path / "c.json"
    cp = run_cli("ab", "ctx.pipe", "--a", "mode=process", "--b", "mode=thread", "--fake-clock", "1000",
                 "-p", "4", *FAST, "--json", str(out), "--no-store")
    assert cp.returncode == 0, cp.stderr
    (e,) = json.loads(out.read_text())["comparisons"]
    sv = e["savings"]
    assert sv["A"]["elapsed per switch"] == pytest.approx(sv["A"]["elapsed"] / 2)
    assert sv["A"]["cycles per switch"] == pytest.approx(sv["A"]["cycles"] / 2)
    assert "whole system" in sv["A"]  # both sides' user+system
    assert "(2 switches)" in cp.stdout


@pytest.mark.parametrize("args,needle", [
    (["ab", "syscall.null", "--a", "nope=1", "--b", ""], "has no parameter 'nope'"),
    (["ab", "syscall.null", "--a", "via=libc|inline", "--b", ""], "one variant per arm"),
    (["ab", "syscall.null", "--a", "", "--b", "", "--delta", "0"], "--delta 0: give a percentage"),
    (["ab", "syscall.null", "--a", "", "--b", "", "--delta", "abc"], "--delta abc: give a percentage"),
    (["ab", "syscall.null:via=libc", "--a", "", "--b", ""], "is a benchmark name"),
    (["ab", "nosuch", "--a", "", "--b", ""], "unknown benchmark 'nosuch'"),
    (["ab", "syscall.null", "--a", "spin=5000", "--b", ""], "spin=5000 must be an integer in [0, 1024]"),
    (["ab", "syscall.null", "--a", ""], "the following arguments are required: --b"),
    (["compare", "1", "2"], "no stored run with id or label '1'"),
])
def test_bad_input(run_cli, args, needle):
    assert needle in one_error_line(run_cli(*args, *FAST) if args[0] == "ab" else run_cli(*args))


def _stored(run_cli, label, fake, *specs):
    cp = run_cli("run", *specs, "--fake-clock", str(fake), "-p", "6", *FAST, "--label", label)
    assert cp.returncode == 0, cp.stderr


def test_compare_stored_runs(run_cli, tmp_path):
    _stored(run_cli, "k1", 100, "syscall.null", "signal.install")
    _stored(run_cli, "k2", 110, "syscall.null", "signal.install", "syscall.read")
    out = tmp_path / "c.json"
    cp = run_cli("compare", "k1", "k2", "--json", str(out))
    assert cp.returncode == 0, cp.stderr
    assert "not interleaved" in cp.stdout
    doc = json.loads(out.read_text())
    assert doc["kind"] == "compare" and doc["interleaved"] is False
    assert [e["bench"] for e in doc["comparisons"]] == ["syscall.null", "signal.install"]
    for e in doc["comparisons"]:
        # one run a side: the ratio and its CI within the runs, no verdict (the run is the unit)
        assert e["verdict"] is None and e["ratio"] == pytest.approx(1.10, rel=0.01)
        assert "one run a side" in e["withheld"] and e["ci95_ratio"][0] > 1.05
    assert doc["summary"]["counts"]["slower"] == 0 and doc["replicates"]["unit"] == "run"
    assert "no verdict: one run a side" in cp.stdout and "2-3 runs a side" in cp.stdout
    assert doc["unmatched"] == ["syscall.read"]
    assert doc["env_differences"] == []  # same machine
    assert "environment differences:\n  none" in cp.stdout
    # reversed: B is faster than A
    back = run_cli("compare", "k2", "k1")
    assert back.returncode == 0
    rows = [ln.split() for ln in back.stdout.splitlines() if ln.split()[:1] == ["syscall.null"]]
    assert rows and all(r[-1] == "-" and float(r[-6]) < 0.95 for r in rows)


def test_compare_runs_as_replicates(run_cli, tmp_path):
    """Several runs a side: the runs are the sample (replicates.py). The fake
    clock gives each run its own offset (99, 100, 101: +-1%, as between
    boots); a 10% change is `slower` over three runs a side, an A/A with the
    same offsets is not (its ratio 1.0, well inside delta), and two runs
    against one get no verdict."""
    for label, fake in (("a1", 100), ("a2", 101), ("a3", 99), ("b1", 110), ("b2", 111), ("b3", 109),
                        ("c1", 101), ("c2", 99), ("c3", 100)):
        _stored(run_cli, label, fake, "syscall.null")
    out = tmp_path / "c.json"
    cp = run_cli("compare", "a1,a2,a3", "b1,b2,b3", "--json", str(out))
    assert cp.returncode == 0, cp.stderr
    (e,) = json.loads(out.read_text())["comparisons"]
    assert e["unit"] == "run" and e["n_a"] == 3 and e["n_b"] == 3 and e["verdict"] == "slower"
    assert e["ratio"] == pytest.approx(1.10, rel=0.01) and e["ci95_ratio"][0] > 1.05
    assert len(e["a"]["summary"]["run_medians_ns"]) == 3 and e["a"]["summary"]["n_processes"] == 18
    assert "the run is the unit" in cp.stdout and "Welch" in cp.stdout
    cp = run_cli("compare", "--a", "a1", "--a", "a2", "--a", "a3", "--b", "c1", "--b", "c2", "--b", "c3",
                 "--json", "-")
    doc = json.loads(cp.stdout[:cp.stdout.rindex("}") + 1])
    (e,) = doc["comparisons"]
    assert e["verdict"] not in ("slower", "faster") and abs(e["ratio"] - 1) < 0.01
    assert [r["run_id"] for r in doc["a"]["runs"]] == [1, 2, 3]
    cp = run_cli("compare", "a1,a2", "b1", "--json", str(out))
    (e,) = json.loads(out.read_text())["comparisons"]
    assert e["verdict"] is None and "2 run(s) against 1" in e["withheld"]
    # 1 against k uses every run (issue 37), and its CI and p are marked as not a verdict's
    assert e["runs_pooled"] == [2, 1] and (e["n_a"], e["n_b"]) == (12, 6) and "not a verdict's" in e["ci_scope"]
    assert "within the runs, not a verdict's" in cp.stdout
    assert "on both sides" in one_error_line(run_cli("compare", "a1,a2", "a2,b1"))
    assert "named twice" in one_error_line(run_cli("compare", "a1,a1", "b1"))
    assert "not both" in one_error_line(run_cli("compare", "a1", "b1", "--a", "a2"))
    assert "--b RUN is missing" in one_error_line(run_cli("compare", "--a", "a1"))
    assert "no stored run" in one_error_line(run_cli("compare", "a1,nosuch", "b1"))


def test_compare_refuses_itself_and_mismatched_runs(run_cli):
    _stored(run_cli, "k1", 100, "syscall.null")
    _stored(run_cli, "other", 100, "signal.install")
    assert "are the same stored run" in one_error_line(run_cli("compare", "k1", "k1"))
    assert "share no benchmark variant" in one_error_line(run_cli("compare", "k1", "other"))


def test_compare_refuses_another_cpu_model_unless_forced(run_cli, tmp_path):
    _stored(run_cli, "here", 100, "syscall.null")
    _stored(run_cli, "there", 100, "syscall.null")
    db = tmp_path / "opcost" / "opcost.db"
    con = sqlite3.connect(db)
    (env,) = con.execute("SELECT env FROM runs WHERE label='there'").fetchone()
    env = json.loads(env)
    env["cpu_model_name"]["value"] = "Imaginary CPU 9000"
    env["kernel_release"]["value"] = "9.9.9-test"
    con.execute("UPDATE runs SET env=? WHERE label='there'", (json.dumps(env),))
    con.commit()
    con.close()
    err = one_error_line(run_cli("compare", "here", "there"))
    assert "ran on different machines" in err and "Imaginary CPU 9000" in err and "--force" in err
    cp = run_cli("compare", "here", "there", "--force")
    assert cp.returncode == 0, cp.stderr
    assert "kernel_release:" in cp.stdout and "9.9.9-test" in cp.stdout
    assert "cpu_model_name:" in cp.stdout


def test_ks_of_near_identical_arms_warns_nothing():
    """Two arms whose ECDFs differ by the least two untied samples can (an
    A/A run with tied process medians: seed 001's counters A/A): the KS p is
    1 exactly. scipy's exact routine computed it as 1 plus a rounding error,
    rejected it and fell back with a RuntimeWarning that leaked into ab's
    output; here, with warnings as errors, nothing is raised and p is 1."""
    import warnings

    from opcost import abtest

    a, b = [2.0, 2.0, 3.0, 3.0, 2.0], [3.0, 1.0, 2.0, 3.0, 3.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = abtest.p_value(a, b)
        assert q["ks"] == 1.0
        abtest.compare_arms(a, b)
        assert abtest.ks_p(abtest.np.array([1.0] * 6 + [2.0]), abtest.np.array([1.0] * 7)) == 1.0
    # not a p of 1 for everything: a real difference keeps scipy's exact p
    assert abtest.ks_p(abtest.np.array([1.0, 2, 3, 4, 5, 6]), abtest.np.array([7.0, 8, 9, 10, 11, 12])) < 0.01


def test_counters_aa_of_ctx_yield_with_warnings_as_errors(tmp_path, probe_bin):
    """The seed 001 counters A/A, with RuntimeWarning (scipy's and numpy's
    numerical warnings) an error: exit 0, no warning text (a warning would be
    a traceback here)."""
    import subprocess
    import sys

    from conftest import cli_env

    cp = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "opcost", "ab", "ctx.yield", "--a", "", "--b", "",
                         "--counters", "task-clock,context-switches", "-p", "6", "--fake-clock", "100", *FAST,
                         "--no-progress", "--no-store"], env=cli_env(tmp_path), cwd=tmp_path, capture_output=True,
                        text=True, timeout=180)
    assert cp.returncode == 0, cp.stderr
    assert "RuntimeWarning" not in cp.stdout + cp.stderr and "counters per op, B against A" in cp.stdout
