"""validation/compare/ on the fake clock, where the truth is known (spin adds
one fake tick, 0.5 ns, per add on top of the fake per-op cost): power.py's
calibration of the injected cost, and boundary.py and fixed_p.py at tiny
settings (they run and print their tables). The figures themselves come
from real runs (README), never from here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "validation" / "compare"
FAKE = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1"]


def _run(*argv, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def test_power_calibrates_the_injected_cost_on_the_measured_extra(probe_bin):
    # 3% of the fake 100 ns is 3 ns = 6 adds at 0.5 ns. Deterministic: the
    # calibration starts from the adds' fake alone cost (power.py reads the
    # probe header on the run options' fake clock; it once started from this
    # CPU's real cost, and its k0/4 floor made k=7 on an AMD EPYC host), and
    # every run on the fake clock is seeded.
    cp = _run(SCRIPTS / "power.py", "--comparisons", "1", "--targets", "0.03:2", "--cpu", "0",
              "--calibration-processes", "4", "--fixed", "4", "--", *FAKE)
    assert cp.returncode == 0, cp.stderr
    out = cp.stdout
    line = next(x for x in out.splitlines() if x.startswith("injected 3% asked"))
    assert "k=6;" in line, out
    measured = float(re.search(r"calibration \(-p 4\) measured ([+-][0-9.]+)%", line).group(1))
    assert 2.4 <= measured <= 3.6, line     # the fake clock's own noise: +-1% per batch
    assert "refined on the measured extra cost" in line
    assert "time to a verdict, 3% injected: sequential / fixed -p 4" in out


def test_boundary_and_fixed_p_scripts_print_their_tables():
    cp = _run(SCRIPTS / "boundary.py", "--trials", "5", "--noise", "1%,real:syscall.null", "--effects", "0,0.03",
              "--deltas", "2", "--resamples", "50")
    assert cp.returncode == 0, cp.stderr
    assert "pocock" in cp.stdout and "obf" in cp.stdout and "fixed20" in cp.stdout
    assert "per boundary, over the cases of each target" in cp.stdout
    cp = _run(SCRIPTS / "fixed_p.py", "--trials", "20", "--n", "10")
    assert cp.returncode == 0, cp.stderr
    assert "plain min < a" in cp.stdout and "2*min < a" in cp.stdout


def test_coverage_moses_interval_uses_the_exact_mann_whitney_distribution():
    """coverage.py --ci moses (the interval set beside opcost's bootstrap in
    docs/statistics.md): its U distribution is scipy's exact one, and the
    interval holds the Hodges-Lehmann estimate at the right order statistics."""
    import numpy as np
    from scipy import stats
    import importlib.util
    spec = importlib.util.spec_from_file_location("opcost_validation_coverage", SCRIPTS / "coverage.py")
    coverage = importlib.util.module_from_spec(spec)     # by path: coverage.py the package may be imported
    spec.loader.exec_module(coverage)
    rng = np.random.default_rng(5)
    for m, n in ((3, 4), (10, 10), (7, 12)):
        cdf = coverage.u_cdf(m, n)
        for _ in range(20):
            a, b = rng.normal(size=m), rng.normal(size=n)
            u = int(sum(x > y for x in a for y in b))
            p = stats.mannwhitneyu(a, b, alternative="less", method="exact").pvalue
            assert abs(cdf[u] - p) < 1e-12, (m, n, u)
    assert coverage.u_quantile(10, 10, 0.025) == 24     # P(U <= 23) = 0.0216, P(U <= 24) = 0.0262
    a, b = np.exp(rng.normal(size=10)), np.exp(rng.normal(0.5, 1, size=10))
    lo, hi = coverage.moses(a, b)
    d = np.sort((np.log(b)[:, None] - np.log(a)[None, :]).ravel())
    assert (lo, hi) == (float(np.exp(d[24])), float(np.exp(d[75])))
    assert lo < float(np.exp(np.median(d))) < hi


def test_verdict_rule_script_prints_its_tables():
    # tiny settings: it runs opcost's own rule and prints every table (the figures come from the full run)
    cp = _run(SCRIPTS / "verdict_rule.py", "--trials", "4", "--seq-trials", "2", "--small-trials", "3",
              "--ns", "4,10", "--scenarios", "normal,drift")
    assert cp.returncode == 0, cp.stderr
    for head in ("## Fixed design", "## Sequential design", "## Sizing", "## Small-n tests"):
        assert head in cp.stdout
    assert re.search(r"\| normal \| 10 \| paired \| [\d.]+% ", cp.stdout)
