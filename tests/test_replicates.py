"""replicates.py: the run as the unit when stored runs are compared."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from opcost import abtest, replicates


def test_run_figure_is_the_median_of_process_medians():
    assert replicates.run_figure([3.0, 1.0, 2.0]) == 2.0
    with pytest.raises(ValueError):
        replicates.run_figure([])
    with pytest.raises(ValueError):
        replicates.run_figure([1.0, -1.0])


def test_replicated():
    assert not replicates.replicated(1, 1) and not replicates.replicated(1, 2) and not replicates.replicated(2, 1)
    assert replicates.replicated(2, 2) and replicates.replicated(3, 2)
    # one run against three: Student's pooled t was tried and called 10% of bimodal A/As
    assert not replicates.replicated(1, 3)


def test_welch_and_pooled_agree_with_scipy():
    la, lb = np.log([100.0, 101.5, 99.0]), np.log([104.0, 106.0])
    w = replicates.welch(la, lb)
    ref = sps.ttest_ind(lb, la, equal_var=False)
    assert w["p"] == pytest.approx(ref.pvalue, rel=1e-9) and w["test"] == replicates.TEST_WELCH
    assert w["diff"] == pytest.approx(lb.mean() - la.mean())
    with pytest.raises(ValueError):
        replicates.welch(np.log([100.0]), np.log([104.0, 106.0, 105.0]))
    # the CI is the t interval: diff +- t(df) se
    assert w["ci"][1] - w["diff"] == pytest.approx(sps.t.ppf(0.975, w["df"]) * w["se"])


def test_compare_runs_by_hand():
    ra = [[99.0, 100.0, 101.0], [101.0, 102.0]]
    rb = [[110.0, 111.0], [108.0, 109.0, 130.0]]
    c = replicates.compare_runs(ra, rb)
    fa, fb = [100.0, 101.5], [110.5, 109.0]
    assert c["run_medians_a"] == fa and c["run_medians_b"] == fb
    assert c["ratio"] == pytest.approx(math.sqrt(fb[0] * fb[1]) / math.sqrt(fa[0] * fa[1]))
    assert c["n_a"] == 2 and c["n_processes_b"] == 5 and c["unit"] == "run"
    lo, hi = c["ci95_ratio"]
    assert lo < c["ratio"] < hi
    with pytest.raises(ValueError):
        replicates.compare_runs([[1.0]], [[2.0]])
    (d,) = replicates.decide([c])
    assert d["verdict"] in abtest.VERDICTS and "p_adjusted" in d


def test_aa_with_run_offsets_is_rarely_a_verdict():
    """A/A over stored runs with a 1% run-to-run offset (10 processes a run,
    2% process noise, 3 runs a side): pooling the processes calls about a
    fifth of these slower/faster (validation/compare/stored_runs.py); the
    run-level test must stay under 5%. 400 draws, seeded; the rate is about
    1%, and a false failure (more than 20 of 400 when the true rate is 2%)
    has probability 7.6e-5 even if the true rate were 2% (binomial tail)."""
    rng = np.random.default_rng(7)
    bad = 0
    for _ in range(400):
        sides = [[np.exp(0.02 * rng.standard_normal(10) + 0.01 * rng.standard_normal()) * 100 for _ in range(3)]
                 for _ in range(2)]
        (d,) = replicates.decide([replicates.compare_runs(*sides)])
        bad += d["verdict"] in ("slower", "faster")
    assert bad <= 20
