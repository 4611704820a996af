"""Statistics against values computed by hand."""

import math

import pytest

from opcost.runner import summarize_variant  # a summary: statistics and the facts of its processes
from opcost import stats


def sample(ns, *, iters=100, user=0.0, sys_=0.0, cpu=1, cpu_after=None, steal=0, helper=None, counters=None):
    s = {"iters": iters, "ns_per_op": ns, "tsc_per_op": ns * 2, "user_ns": user * iters, "sys_ns": sys_ * iters,
         "cpu_before": cpu, "cpu_after": cpu if cpu_after is None else cpu_after, "steal_ticks": steal}
    if helper is not None:
        s["helper"] = {"user_ns": helper[0] * iters, "sys_ns": helper[1] * iters}
    if counters is not None:
        s["counters"] = counters
    return s


def proc(values, cpu=1, **kw):
    return {"header": {"cpus": [cpu], "tsc_hz": 2e9, "iters": 100,
                       "overhead": {"clock_ns": 10.0, "loop_ns_per_iter": 0.25}},
            "samples": [sample(v, cpu=cpu, **kw) for v in values]}


def test_median_percentile_cv_by_hand():
    assert stats.median([4, 1, 3, 2]) == 2.5
    assert stats.median([5, 1, 3]) == 3
    # p90 of 1..10 with linear interpolation: rank 0.9*9 = 8.1 -> 9 + 0.1*(10-9)
    assert stats.percentile(range(1, 11), 90) == pytest.approx(9.1)
    # mean 5, sample variance ((2-5)^2+(4-5)^2+(6-5)^2+(8-5)^2)/3 = 20/3
    assert stats.cv([2, 4, 6, 8]) == pytest.approx(math.sqrt(20 / 3) / 5)
    assert stats.cv([7]) is None


def test_bootstrap_ci_is_reproducible_and_brackets_the_median():
    xs = [100, 101, 99, 102, 98, 100.5, 99.5, 101.5, 98.5, 100]
    a = stats.bootstrap_ci_median(xs)
    assert a == stats.bootstrap_ci_median(xs)  # fixed seed
    assert a[0] <= stats.median(xs) <= a[1]
    assert 98 <= a[0] and a[1] <= 102
    assert stats.bootstrap_ci_median([5.0]) is None
    # identical values: the CI collapses onto them
    assert stats.bootstrap_ci_median([3.0, 3.0, 3.0]) == [3.0, 3.0]


@pytest.mark.parametrize("n", [2, 7, 1001])
def test_the_bootstrap_drawn_in_chunks_is_the_one_drawn_at_once(monkeypatch, n):
    """bootstrap_ci_median draws its resamples BOOTSTRAP_CHUNK values at a
    time (a summary of 1,000 processes held 240 MB of indices): the same
    interval as every resample drawn in one array, as it was drawn before."""
    import numpy as np

    xs = [100.0 + ((i * 7919) % 97) / 10 for i in range(n)]
    rng = np.random.default_rng(stats.BOOTSTRAP_SEED)
    meds = np.median(np.asarray(xs)[rng.integers(0, n, size=(stats.BOOTSTRAP_RESAMPLES, n))], axis=1)
    whole = [float(v) for v in np.percentile(meds, [2.5, 97.5])]
    assert stats.bootstrap_ci_median(xs) == whole
    monkeypatch.setattr(stats, "BOOTSTRAP_CHUNK", 7 * n + 3)     # chunks of 7 resamples, the last shorter
    assert stats.bootstrap_ci_median(xs) == whole


def test_mad_outliers_by_hand():
    # median 10, |dev| = 0,1,1,0,0,90 -> MAD 0.5, scaled 0.7413; 90 > 3*0.7413
    assert stats.mad_outliers([10, 11, 9, 10, 10, 100]) == [5]
    assert stats.mad_outliers([1, 1, 1, 1]) == []


def test_process_stats_sum_cpu_time_over_batches():
    p = stats.process_stats([sample(10, iters=100, user=1, sys_=3), sample(30, iters=300, user=2, sys_=4),
                             sample(20, iters=100, user=1, sys_=3)])
    assert p["median_ns"] == 20
    # user: (1*100 + 2*300 + 1*100) / 500 = 1.6; sys: (300 + 1200 + 300) / 500 = 3.6
    assert p["user_ns_per_op"] == pytest.approx(1.6)
    assert p["sys_ns_per_op"] == pytest.approx(3.6)
    assert p["helper_user_ns_per_op"] is None


def test_summary_over_process_medians():
    procs = [proc([100, 101, 102]), proc([110, 111, 112]), proc([90, 91, 92]), proc([105, 104, 106])]
    s = summarize_variant(procs)
    meds = [101, 111, 91, 105]
    assert s["process_medians_ns"] == meds
    assert s["median_ns"] == 103  # (101 + 105) / 2
    assert s["min_ns"] == 91
    assert s["p90_ns"] == pytest.approx(stats.percentile(meds, 90))
    assert s["median_cycles"] == 206
    assert s["n_processes"] == 4 and s["n_samples"] == 12
    assert s["cv"] == pytest.approx(stats.cv(meds))
    assert s["overhead_ns"] == {"clock": 10.0, "loop_per_iter": 0.25}
    assert s["cpus"] == ["1"]


def test_summary_cpu_time_sums_both_sides():
    procs = [proc([10, 10, 10], user=1, sys_=2, helper=(0.5, 1.5))]
    s = summarize_variant(procs)
    assert s["helper_user_ns_per_op"] == pytest.approx(0.5)
    assert s["cpu_ns_per_op"] == pytest.approx(1 + 2 + 0.5 + 1.5)


def test_flags():
    migrating = proc([100] * 6)
    migrating["samples"][2]["cpu_after"] = 0
    stolen = proc([100] * 6)
    stolen["samples"][0]["steal_ticks"] = 3
    s = summarize_variant([migrating, stolen, proc([100] * 6)])
    names = {f["flag"]: f["detail"] for f in s["flags"]}
    assert names["migrations"] == "1 of 18 batches ran off the pinned CPU"
    assert names["steal"] == "1 of 18 batches saw hypervisor steal time"
    assert "unstable" not in names

    wobbly = summarize_variant([proc([100] * 3), proc([150] * 3), proc([60] * 3)])
    assert any(f["flag"] == "unstable" for f in wobbly["flags"])

    slow_start = summarize_variant([proc([130, 130, 130, 100, 100, 100])] * 3)
    assert any(f["flag"] == "no steady state" for f in slow_start["flags"])


def test_counters_median_and_unsupported_kept():
    ps = [proc([1, 1, 1], counters={"context-switches": v, "cycles": "<not supported>"}) for v in (1.0, 2.0, 4.0)]
    s = summarize_variant(ps)
    assert s["counters"] == {"context-switches": 2.0, "cycles": "<not supported>"}


def test_empty_summary():
    assert summarize_variant([]) == {"n_processes": 0}
