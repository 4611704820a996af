"""Issue 25's verdict rule: paired rounds, the calibrated small-n test, the
Hodges-Lehmann estimates and their exact intervals, checked against brute
force and by hand; the A/A rate of the new tests by seeded simulation (its
false-failure rate stated). No timing of this CPU anywhere."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from opcost import abtest, protocol


def test_signed_rank_and_rank_sum_distributions_by_enumeration():
    for n in (1, 4, 7):
        counts = np.zeros(n * (n + 1) // 2 + 1)
        for signs in itertools.product((0, 1), repeat=n):
            counts[sum((i + 1) * s for i, s in enumerate(signs))] += 1
        assert abtest._signed_rank_cdf(n) == pytest.approx(np.cumsum(counts) / 2 ** n)
    for m, n in ((1, 1), (2, 5), (4, 4), (3, 6)):
        counts = np.zeros(m * n + 1)
        for idx in itertools.combinations(range(m + n), m):
            counts[sum(idx) - m * (m - 1) // 2] += 1
        assert abtest._rank_sum_cdf(m, n) == pytest.approx(np.cumsum(counts) / counts.sum())


def test_paired_hodges_lehmann_by_hand():
    d = [0.01, 0.03, -0.02, 0.05, 0.02, 0.04, 0.00, 0.06, 0.01, 0.03]
    est, ci = abtest.paired_hl(d)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(10) for j in range(i, 10))
    assert est == pytest.approx(float(np.median(walsh)))
    # n = 10: P(T+ <= 8) = 0.0244 <= 0.025 < P(T+ <= 9) = 0.0322, so the 9th
    # smallest and the 9th largest of the 55 Walsh averages
    assert ci == pytest.approx([walsh[8], walsh[55 - 9]])
    # 5 pairs cannot reach 95% (2/32 > 0.05): no interval rather than a wrong one
    assert abtest.paired_hl(d[:5])[1] is None


def test_moses_interval_by_hand():
    la = np.log([100.0, 101.0, 99.0, 102.0, 98.0])
    lb = np.log([103.0, 104.0, 102.5, 105.0, 101.5])
    est, ci = abtest.shift_hl(la, lb)
    diffs = sorted(y - x for x in la for y in lb)
    assert est == pytest.approx(float(np.median(diffs)))
    # m = n = 5: P(U <= 2) = 4/252 = 0.0159 <= 0.025 < P(U <= 3) = 7/252: the 3rd of 25 from each end
    assert ci == pytest.approx([diffs[2], diffs[25 - 3]])
    assert abtest.shift_hl(la[:3], lb[:3])[1] is None   # 3 vs 3: 1/20 > 0.025


def test_calibrated_p_is_exact_by_enumeration():
    a, b = [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]
    p, pu, pk, method = abtest.calibrated_p(a, b)
    # the most extreme of C(8,4) = 70 labellings, two-sided: 2/70, and no floor of twice it
    assert p == pytest.approx(2 / 70) and pu == pytest.approx(2 / 70) and "exact" in method
    assert abtest.p_value(a, b)["p"] > 0.05      # twice the smaller: 0.057, never significant
    # the calibrated p is a p-value: over the labellings of 4 + 5 its distribution is uniform or conservative
    ps = []
    for idx in itertools.combinations(range(9), 4):
        x = [float(i) for i in idx]
        y = [float(i) for i in range(9) if i not in idx]
        ps.append(abtest.calibrated_p(x, y)[0])
    ps = np.array(ps)
    for alpha in (0.05, 0.1, 0.2, 0.5):
        assert np.mean(ps <= alpha) <= alpha + 1e-12


def test_pairs_of_needs_complete_rounds():
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]
    pa, pb = abtest.pairs_of(a, b, ([2, 0, 1], [1, 2, 0]))
    assert list(pa) == [2.0, 3.0, 1.0] and list(pb) == [6.0, 4.0, 5.0]
    assert abtest.pairs_of(a, b, None) is None
    assert abtest.pairs_of(a, b, ([0, 1, 2], [0, 1, 3])) is None      # round 2 has no B
    assert abtest.pairs_of(a, b[:2], ([0, 1, 2], [0, 1])) is None
    assert abtest.pairs_of(a, b, ([0, 0, 1], [0, 1, 2])) is None      # two A in round 0


def test_compare_arms_pairs_interleaved_rounds_from_ten():
    rng = np.random.default_rng(25)
    drift = np.exp(np.linspace(0, 0.1, 12) + 0.02 * rng.standard_normal(12))
    a = 100 * drift * np.exp(0.002 * rng.standard_normal(12))
    b = 102 * drift * np.exp(0.002 * rng.standard_normal(12))
    r = list(range(12))
    # delta 1%: a true 2% whose CI clears 1% is `slower` (the CI must clear delta)
    paired = abtest.compare_arms(a, b, rounds=(r, r), resamples=200, delta=0.01)
    assert paired["paired"] and paired["n_pairs"] == 12 and paired["test"].startswith("paired min-p")
    assert paired["p_value"] == pytest.approx(2 / 2 ** 12)         # every round B > A
    assert paired["ci95_estimate"][0] > 1.01 and paired["estimate"] == pytest.approx(1.02, abs=0.003)
    [d] = abtest.decide([paired])
    assert d["verdict"] == "slower" and d["beyond_delta"]
    # at the default delta (2%) the same CI reaches across delta: not decided
    [d2] = abtest.decide([abtest.compare_arms(a, b, rounds=(r, r), resamples=200)])
    assert d2["verdict"] == "inconclusive"
    # the same processes unpaired (stored runs): the drift swamps the 2%
    [u] = abtest.decide([abtest.compare_arms(a, b, resamples=200, delta=0.01)])
    assert not u["paired"] and u["verdict"] == "inconclusive"
    # fewer than PAIRED_MIN rounds: the unpaired test, chosen from the design,
    # but from 6 rounds the paired interval (the unpaired one ignores the drift's pairing)
    short = abtest.compare_arms(a[:6], b[:6], rounds=(r[:6], r[:6]), resamples=200)
    assert not short["paired"] and protocol.PAIRED_MIN == 10 and short["test"].startswith("permutation min-p")
    d6 = np.log(b[:6] / a[:6])
    # 6 rounds: the signed-rank interval's order index is 1, [min d, max d] at 1 - 2/64 = 96.9%
    assert short["ci95_estimate"] == pytest.approx([math.exp(d6.min()), math.exp(d6.max())])
    assert "per-round" in short["estimator"]
    unp = abtest.compare_arms(a[:6], b[:6], resamples=200)
    assert "Moses" in unp["estimator"]


def test_paired_minp_by_hand():
    # every round B > A by a distinct amount: both statistics at their extreme, only
    # the observed signs and their mirror reach it: p = 2 / 2^n exactly
    la = np.zeros(10)
    lb = 0.01 * np.arange(1, 11)
    p, psr, prs, method = abtest.paired_minp(la, lb)
    assert method == "exact" and p == pytest.approx(2 / 1024) and psr == pytest.approx(2 / 1024)
    # A and B swapped in every round: the same p (two-sided)
    assert abtest.paired_minp(lb, la)[0] == pytest.approx(p)
    # beyond PAIRED_EXACT_MAX rounds: sampled, floor 1 / (1 + B)
    p20, _, _, m20 = abtest.paired_minp(np.zeros(20), 0.01 * np.arange(1, 21))
    assert m20.endswith("sign vectors") and p20 == pytest.approx(1 / (1 + protocol.PAIRED_SAMPLES))
    assert abtest.p_floor(20, 20, paired=True) == pytest.approx(p20) == pytest.approx(protocol.best_p(20))


def test_paired_minp_keeps_power_on_bimodal_rounds():
    """Bimodal processes (70% at 1.0, 30% at 1.24, 0.6% within), a true 2%,
    20 rounds, 200 seeded comparisons: the signed-rank's large ranks go to
    rounds whose A and B landed on different levels; the min-p with the
    within-round rank sum does not lose the shift within a level. Expected
    about 85% against 43% (validation/stats/paired_power.py, the audit);
    the bounds (min-p >= 70%, above the signed-rank by >= 20 points) are
    more than 5 binomial SEs from the expectations: false failure < 1e-6."""
    from scipy import stats as sps
    rng = np.random.default_rng(2511)
    r = list(range(20))
    hit = ref = 0
    for _ in range(200):
        lev = lambda: np.where(rng.random(20) < 0.3, 1.24, 1.0) * np.exp(0.006 * rng.standard_normal(20))  # noqa: E731
        a, b = lev(), 1.02 * lev()
        hit += abtest.test_and_estimate(a, b, (r, r))["p"] < 0.05
        ref += sps.wilcoxon(np.log(b / a)).pvalue < 0.05
    assert hit / 200 >= 0.70 and (hit - ref) / 200 >= 0.20, (hit, ref)


def test_a_true_effect_of_delta_is_not_called_same_or_negligible():
    """The issue's target (<= 5%) on 400 seeded comparisons of a true +2% at
    delta 2%, 20 rounds, CV 2%: expected about 2.5% (the CI's far end short
    of delta); the bound 6% is 3.9 binomial SEs above 2.5%, a false failure
    under 1e-4 for any seed."""
    rng = np.random.default_rng(2025)
    bad = 0
    r = list(range(20))
    for _ in range(400):
        a = np.exp(0.02 * rng.standard_normal(20))
        b = 1.02 * np.exp(0.02 * rng.standard_normal(20))
        te = abtest.test_and_estimate(a, b, (r, r))
        bad += abtest.verdict(te["estimate"], te["ci95_estimate"], te["p"], 0.02) in ("same", "negligible")
    assert bad / 400 <= 0.06


def test_aa_rate_of_the_paired_and_unpaired_tests():
    """p < 0.05 on 1,000 seeded A/A comparisons (10 per arm, log-normal): an
    exact test rejects at most 5%; the bound 7.2% is 3.2 SEs (sd 0.69 pp)
    above 5%, a false failure under 1e-3 for an arbitrary seed, and this one
    is fixed."""
    rng = np.random.default_rng(77)
    r = list(range(10))
    hits = {"paired": 0, "unpaired": 0}
    for _ in range(1000):
        a, b = np.exp(0.02 * rng.standard_normal(10)), np.exp(0.02 * rng.standard_normal(10))
        hits["paired"] += abtest.test_and_estimate(a, b, (r, r))["p"] < 0.05
        hits["unpaired"] += abtest.test_and_estimate(a, b)["p"] < 0.05
    assert hits["paired"] / 1000 <= 0.072 and hits["unpaired"] / 1000 <= 0.072
    assert hits["paired"] > 10 and hits["unpaired"] > 10     # not a test that cannot reject


def test_never_significant_designs():
    assert protocol.best_p(4) == pytest.approx(2 / 70)
    assert protocol.best_p(10) == pytest.approx(2 / 1024)
    assert protocol.never_significant(4) is None
    msg = protocol.never_significant(3)
    assert msg.startswith("-p 3:") and "0.1" in msg and "-p 4 or more" in msg
    assert "no 95% interval" in protocol.never_significant(2)
    assert "-p 5 or more" in protocol.never_significant(4, comparisons=2)   # Holm: 2 x 2/70 > 0.05
    for n in range(2, 12):
        te_floor = abtest.p_floor(n, n, paired=n >= protocol.PAIRED_MIN)
        assert protocol.best_p(n) == pytest.approx(te_floor)


def test_resolvable_and_advice_scale_with_the_ci():
    c = {"n_a": 10, "n_b": 10, "delta": 0.02, "ratio": 1.005, "change": 0.005, "estimate": 1.005,
         "ci95_estimate": [0.985, 1.025], "p_floor": 0.002, "cv_robust": 0.02, "aa_noise": 0.01}
    hw = (math.log(1.025) - math.log(0.985)) / 2
    # the CI must clear delta: delta plus 1.43 half-widths, on the log scale
    assert abtest.resolvable(c) == pytest.approx(math.expm1(math.log1p(0.02) + 1.4294 * hw), rel=1e-3)
    adv = abtest.advice(c)
    # equivalence is the cheaper way: half-width under (log 1.02 - log 1.005) / 1.43
    t = (math.log1p(0.02) - math.log(1.005)) / abtest._RESOLVE
    assert adv["processes_needed"] == math.ceil(10 * (hw / t) ** 2)
    assert abtest.resolvable(dict(c, p_floor=0.1)) is None


def test_signed_rank_p_matches_scipy():
    # the paired min-p's signed-rank marginal over all 2^15 within-round swaps is
    # the exact Wilcoxon p; the min-p is at most twice the smaller marginal p
    # (Bonferroni) and at least the smaller one
    rng = np.random.default_rng(3)
    a, b = np.exp(rng.normal(0, 0.02, 15)), np.exp(rng.normal(0.01, 0.02, 15))
    r = list(range(15))
    p, psr, prs, method = abtest.paired_minp(np.log(a), np.log(b))
    assert method == "exact"
    assert psr == pytest.approx(sps.wilcoxon(np.log(b) - np.log(a), method="exact").pvalue)
    assert min(psr, prs) <= p <= 2 * min(psr, prs)
    assert abtest.test_and_estimate(a, b, (r, r))["p"] == pytest.approx(p)
