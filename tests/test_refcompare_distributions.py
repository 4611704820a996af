"""The accuracy scripts' comparison of per-process distributions
(validation/harness/distributions.py) against hand-computed values, its
table, and overhead/ref.c's inline system call loop (built and run briefly,
nothing timed)."""

from __future__ import annotations

import math
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from validation.harness import distributions as D  # noqa: E402
from validation.harness import reference  # noqa: E402
from validation.harness.refcompare import distribution_table  # noqa: E402

REF_C = ROOT / "validation" / "overhead" / "ref.c"


def test_quantile_interpolates_between_order_statistics():
    xs = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert D.quantile(xs, 0.5) == 3.0
    assert D.quantile(xs, 0.1) == pytest.approx(1.4)   # (5-1)*0.1 = 0.4 of the way from 1 to 2
    assert D.quantile(xs, 0.9) == pytest.approx(4.6)
    assert D.quantile([7.0], 0.9) == 7.0


def test_levels_split_where_neighbours_are_more_than_the_gap_apart():
    # the hand loop: three levels, 156, ~180, ~220 ns
    lv = D.levels([221, 157, 180, 156, 158, 182, 219])
    assert [(x["n"], x["median"]) for x in lv] == [(3, 157), (2, 181), (2, 220)]
    assert [round(x["share"], 3) for x in lv] == [0.429, 0.286, 0.286]
    assert D.fmt_levels(lv) == "3@157 2@181 2@220"
    # a spread-out level stays one while each step is under 5%
    assert len(D.levels([100, 104, 108, 112, 116])) == 1
    assert D.levels([]) == []


def test_hodges_lehmann_ratio_and_moses_interval_by_hand():
    # log differences of a=[2,4] against b=[1,2]: 0, ln2, ln2, ln4; median ln2.
    # Moses: C = floor(2 - 1.96*sqrt(4*5/12)) < 1, so C = 1: the extremes.
    est, lo, hi = D.hodges_lehmann([2.0, 4.0], [1.0, 2.0])
    assert est == pytest.approx(2.0)
    assert (lo, hi) == (pytest.approx(1.0), pytest.approx(4.0))
    # 10 and 10: C = floor(50 - 1.96*sqrt(100*21/12)) = floor(24.07) = 24: the 24th of 100 differences
    a = [100.0 + k for k in range(10)]
    b = [x / 1.1 for x in a]
    est, lo, hi = D.hodges_lehmann(a, b)
    d = sorted(math.log(x) - math.log(y) for x in a for y in b)
    assert est == pytest.approx(1.1)
    assert lo == pytest.approx(math.exp(d[23])) and hi == pytest.approx(math.exp(d[76]))
    assert lo < 1.1 < hi


def _jitter(base: float, n: int, step: float = 0.001) -> list[float]:
    return [base * (1 + step * (k - n / 2)) for k in range(n)]


def test_a_side_that_never_reaches_the_fast_level_is_slower_at_the_low_quantile():
    # reference: half its processes at 100 ns, half at 120; opcost: all at 120.
    # Medians 110 against 120; the 10% quantile tells the story: 1.2.
    ref = _jitter(100, 6) + _jitter(120, 6)
    opc = _jitter(120, 12)
    got = D.compare(opc, ref, hi=1.03, seed=1)
    q10 = got["quantiles"][0]
    assert q10["q"] == 0.1 and q10["ratio"] == pytest.approx(1.2, abs=0.01)
    assert q10["ci95"][0] > 1.03
    assert 0.1 in got["slower_at"] and 0.9 not in got["slower_at"]
    assert [x["n"] for x in got["opcost_levels"]] == [12]
    assert [x["n"] for x in got["ref_levels"]] == [6, 6]
    assert got["p_anderson"] < 0.05
    assert got == D.compare(opc, ref, hi=1.03, seed=1)   # seeded: the same figures again


def test_the_same_distribution_is_no_slower_anywhere():
    ref = _jitter(100, 6) + _jitter(120, 6)
    opc = [x * 1.001 for x in reversed(ref)]
    got = D.compare(opc, ref, hi=1.03, seed=2)
    assert got["slower_at"] == []
    assert got["hl_ci95"][0] <= 1.001 <= got["hl_ci95"][1]
    assert got["p_mannwhitney"] > 0.5
    assert all(x["ci95"][0] <= x["ratio"] <= x["ci95"][1] for x in got["quantiles"])


def test_the_distribution_table_names_levels_quantiles_and_the_verdict():
    ref = _jitter(100, 6) + _jitter(120, 6)
    rows = [{"operation": "syscall.null inline", "distribution": D.compare(_jitter(120, 12), ref, 1.03, 3)},
            {"operation": "ctx.pipe", "distribution": D.compare(ref, ref, 1.03, 4)}]
    lines = distribution_table(rows).splitlines()
    assert lines[0].split()[:3] == ["operation", "opcost", "levels"]
    assert "12@119.9" in lines[2] and "6@99.95 6@119.9" in lines[2] and lines[2].endswith("slower at 10%")
    assert lines[3].startswith("ctx.pipe") and lines[3].endswith("no slower")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "i686", "i386", "aarch64") or not shutil.which("cc"),
                    reason="the inline system call needs x86 or aarch64 and cc")
def test_reference_inline_getppid_builds_and_runs(tmp_path):
    exe = reference.build_ref(REF_C, tmp_path, "cc", ["-Wall", "-Wextra", "-Werror"])
    cpu = max(os.sched_getaffinity(0))
    for op in ("getppid", "getppid-inline"):
        cp = subprocess.run([str(exe), op, "100", "5", str(cpu)], capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        rows = [float(x) for x in cp.stdout.split()]
        assert len(rows) == 5 and all(x > 0 for x in rows), (op, rows)
    # the loop the compiler made around the inline instruction holds it (nothing timed)
    if platform.machine() == "x86_64" and shutil.which("objdump"):
        dis = subprocess.run(["objdump", "-d", str(exe)], capture_output=True, text=True, check=True).stdout
        assert "\tsyscall" in dis
    cp = subprocess.run([str(exe), "getppid-outline", "10", "1", str(cpu)], capture_output=True, text=True)
    assert cp.returncode == 2 and "unknown OP" in cp.stderr
