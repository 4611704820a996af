#!/usr/bin/env python3
"""The statistical audit of issue 25, re-runnable: opcost's own decision
functions on simulated per-process medians where the truth is known.

Scenarios (validation/stats/scenarios.py): normal, log-normal, bimodal 70/30,
the real A/A pool resampled, interleaved drift, and stored runs with
run-to-run offsets of 0.5/1/2%. Rules run on them (every call into opcost
is in the ADAPTERS section below, the only place that knows opcost's
interfaces): the fixed design (abtest.compare_arms + abtest.decide), the
sequential design (sequential.decide over the schedule 10/20/40), compare of
stored runs (the statistics under comparison.compare_stored) and series
change points (changepoint.analyse).

Printed, each rate with its Monte-Carlo standard error, and PASS/FAIL
against the issue's targets, every target judged alike with its
Monte-Carlo error (judge(): FAIL only when beyond the target's bound by
more than 2 standard errors, the SE taken at the bound; a cell outside a
target by less is simulated again, 3x its repetitions up to --topups
times, and pooled; still outside within 2 SE: PASS~, listed apart):
- A/A false `slower`/`faster` (target <= 5% in every scenario, stored runs
  included);
- coverage of the 95% CI the verdict rests on (the rule's `estimate`
  interval where it reports one, else the ratio's; target 93-97%; the
  sequential design's repeated confidence interval, >= 95% by
  construction, 93-99%);
- `same`/`negligible` at a true effect of exactly delta (target <= 5%);
- power for a true 2% at 20 processes per arm, interleaved, delta 1%:
  opcost's test (p < 0.05, B the more costly) against a Wilcoxon
  signed-rank test on the per-round log ratios at 0.05 (target: at least
  the reference, less two standard errors of the paired difference); the
  rate called `slower` (which also needs the CI to clear delta, issue 25's
  rule) and the reference gated on its estimate are printed beside it;
  judged on the paired difference and its SE;
- false change points per flat series (target <= 0.05), including bimodal
  labels and labels from stored runs with offsets;
- information without a target: the ratio of medians more than 5% off in
  A/A, the robust CV opcost reads against the true CV, `slower` at a true
  delta (an unbiased rule sized for it says 50%; the sequential design's
  against the fixed design's is Pocock's stop bias), a one-label
  disturbance at an end of a series against one inside, and the smallest p
  the test can reach at 3-6 processes per arm.

Seeded: the same seed gives the same output whatever the number of workers.
--quick (100 repetitions a cell, 40 for the sequential and series cells:
about a minute) for the test suite; the full mode (600 and 300) is about
160 s of CPU per worker, 15 minutes on a shared 2-CPU machine at a load
of 10. Run it with `nice -n 10`; --workers 2 at most on a shared machine.
--src DIR audits another checkout's opcost (e.g. main's, the "before");
--only SECTIONS runs some of fixed, sequential, stored, series (each cell
keeps its seed, so a section's figures are those of the full run).
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import contextlib
import io
import inspect
import math
import multiprocessing
import os
import sys
import time
import warnings
import zlib
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from scipy import stats as sps  # noqa: E402

HERE = Path(__file__).resolve().parent


def _src() -> Path:
    """The opcost source tree audited: this checkout's src/, or --src DIR
    (another checkout's, e.g. main's for the "before"). Read before the
    import below, which the adapters need."""
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg == "--src" and i + 1 < len(argv):
            return Path(argv[i + 1]).resolve()
        if arg.startswith("--src="):
            return Path(arg.split("=", 1)[1]).resolve()
    return HERE.parents[1] / "src"


def _fail(msg: str) -> None:
    """Bad input: one line, exit 2, nothing run."""
    print(f"audit: {msg}", file=sys.stderr)
    raise SystemExit(2)


SRC = _src()
if not (SRC / "opcost" / "abtest.py").is_file():
    _fail(f"{SRC} holds no opcost package (opcost/abtest.py); give --src an opcost checkout's src directory")
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(SRC))
import scenarios  # noqa: E402

# ---------------------------------------------------------------------------
# ADAPTERS: every call into opcost. The rules' interfaces are changing
# (paired rounds, runs as replicates, a bimodal flag); each adapter detects
# what the installed code offers and uses it, so the same audit runs before
# and after. Each returns plain values:
#   {"verdict": str | None, "ratio": float | None, "ci": [lo, hi] | None, "p": float | None, ...}
# verdict None: the rule declined to give one (e.g. one stored run per side).
# ---------------------------------------------------------------------------
from opcost import abtest, changepoint, sequential  # noqa: E402

try:  # runs as replicates (stored runs): a newer module
    from opcost import replicates as _replicates  # type: ignore[attr-defined]
except ImportError:
    _replicates = None


def _params(fn) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


_COMPARE_ARGS = _params(abtest.compare_arms)
_SERIES_ARGS = _params(changepoint.analyse)


def _ci_of(c: dict):
    """The interval the verdict rests on and its estimate: a newer rule's
    `estimate` with `ci95_estimate` (e.g. a Hodges-Lehmann ratio), else the
    ratio of medians and its 95% CI."""
    est = c.get("estimate")
    if isinstance(est, dict):
        est = est.get("ratio", est.get("value"))
    if isinstance(est, (int, float)) and "ci95_estimate" in c:
        return c.get("ci95_estimate"), float(est)
    return c.get("ci95_ratio"), c.get("ratio")


def _out(c: dict) -> dict:
    ci, est = _ci_of(c)
    return {"verdict": c.get("verdict"), "ratio": c.get("ratio"), "estimate": est, "ci": ci,
            "p": c.get("p_adjusted", c.get("p_value")), "flags": c.get("flags") or []}


def _compare(a, b, rounds_a, rounds_b, delta: float, resamples: int) -> dict:
    kw: dict = {"delta": delta, "resamples": resamples}
    # Paired rounds: passed only where compare_arms accepts them.
    if "rounds" in _COMPARE_ARGS:
        kw["rounds"] = (list(map(int, rounds_a)), list(map(int, rounds_b)))
    elif "rounds_a" in _COMPARE_ARGS and "rounds_b" in _COMPARE_ARGS:
        kw["rounds_a"], kw["rounds_b"] = list(map(int, rounds_a)), list(map(int, rounds_b))
    return abtest.compare_arms(list(a), list(b), **kw)


def fixed_rule(a, b, rounds, delta: float, resamples: int) -> dict:
    """`ab -p N`: one look, the fixed design."""
    [c] = abtest.decide([_compare(a, b, rounds, rounds, delta, resamples)])
    return _out(c)


def sequential_rule(a, b, rounds, delta: float, resamples: int) -> dict:
    """`ab` without -p: sequential.decide replaying the looks of a run of
    len(rounds) rounds (the schedule's last stage), as ab does."""
    r = [int(x) for x in rounds]
    (c,), _ = sequential.decide([(r, list(a), r, list(b))], delta=delta, rounds=len(r), final=True,
                                resamples=resamples)
    o = _out(c)
    o["n"] = (c.get("sequential") or {}).get("processes_per_arm", len(r))
    return o


def sequential_many(arms: list, delta: float, resamples: int) -> list[dict]:
    """`ab` of several benchmarks without -p: sequential.decide over all of
    them at once (Holm across them), each entry with the look it settled at."""
    got, _ = sequential.decide([([int(x) for x in r], list(a), [int(x) for x in r], list(b)) for a, b, r in arms],
                               delta=delta, rounds=max(len(r) for _, _, r in arms), final=True, resamples=resamples)
    return [dict(_out(c), look=(c.get("sequential") or {}).get("look"), settled=(c.get("sequential") or {}).get(
        "settled")) for c in got]


def two_levels(xs) -> bool:
    """The `bimodal` flag of one arm's process medians (stats.levels)."""
    from opcost import stats

    return stats.levels(list(xs)) is not None


def default_seed() -> int:
    """The seed of the run order a run gets without --seed: Protocol.from_args
    over no options (before issue 37: 0; after: a fresh one each run)."""
    from opcost import protocol

    return int(protocol.Protocol.from_args(argparse.Namespace()).seed)


def default_seed_is_fresh() -> bool:
    """Whether runs without --seed get a fresh seed each (the audit then
    draws those seeds from its own stream, so its output stays seeded)."""
    return len({default_seed() for _ in range(4)}) > 1


def round_orders(seed: int, rounds: int, variants: int = 2) -> list[list[int]]:
    """The order of each round as the runner draws it (runner.py: one
    random.Random(seed), shuffled once per round over the variants)."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        order = list(range(variants))
        rng.shuffle(order)
        out.append(order)
    return out


def fixed_test(a, b, rounds) -> dict:
    """The estimate and test of one look (abtest.test_and_estimate) at 95%."""
    r = [int(x) for x in rounds]
    te = abtest.test_and_estimate(list(a), list(b), (r, r))
    return {"estimate": te["estimate"], "ci": te["ci95_estimate"], "p": te["p"]}


def _stored_fn():
    """replicates.compare_runs (runs per side) if this opcost has it."""
    fn = getattr(_replicates, "compare_runs", None) if _replicates is not None else None
    return fn if callable(fn) else None


def stored_rule(runs_a: list, runs_b: list, delta: float, resamples: int) -> dict:
    """`compare` of stored runs, each run its per-process medians.

    With opcost.replicates: the runs are the replicates (compare_runs, then
    replicates.decide); where it declines (too few runs to estimate a
    run-to-run spread) the verdict is None, as `compare` then gives none.
    Before: every process of one side's runs pooled into one arm and
    compared as independent, the statistics of comparison.entry + finish
    (one run per side is exactly `opcost compare RUN_A RUN_B`; several are
    what `series` did with runs of one label)."""
    fn = _stored_fn()
    if fn is not None:
        replicated = getattr(_replicates, "replicated", None)
        if callable(replicated) and not replicated(len(runs_a), len(runs_b)):
            return {"verdict": None, "ratio": None, "estimate": None, "ci": None, "p": None, "flags": []}
        kw: dict = {"delta": delta}
        if "resamples" in _params(fn):
            kw["resamples"] = resamples
        c = fn([list(r) for r in runs_a], [list(r) for r in runs_b], **kw)
        decide = getattr(_replicates, "decide", abtest.decide)
        [c] = decide([c])
        return _out(c)
    a, b = np.concatenate(runs_a), np.concatenate(runs_b)
    [c] = abtest.decide([abtest.compare_arms(list(a), list(b), delta=delta, resamples=resamples)])
    return _out(c)


def _end_rule():
    """series.unconfirmed (a change point at an end of the series is
    `unconfirmed`), where this opcost has it."""
    try:
        from opcost import series
    except ImportError:
        return None
    fn = getattr(series, "unconfirmed", None)
    return fn if callable(fn) else None


def series_rule(labels: list, delta: float, interleaved: bool) -> dict:
    """`series`: the change points of changepoint.analyse, those a newer
    opcost marks `unconfirmed` (series.unconfirmed: at an end of the
    series) apart. Labels from stored runs (interleaved False) go in as one
    run each where analyse takes `runs` (the run as the unit)."""
    kw: dict = {"delta": delta, "resamples": 200, "table": False}
    if "interleaved" in _SERIES_ARGS:
        kw["interleaved"] = interleaved
    if "runs" in _SERIES_ARGS and not interleaved:
        kw["runs"] = [[list(x)] for x in labels]
    res = changepoint.analyse([list(x) for x in labels], **kw)
    cps = res.get("change_points") or []
    end_rule = _end_rule()
    named = [type("Label", (), {"value": str(i), "runs": [i]})() for i in range(len(labels))]

    def unconfirmed(cp: dict) -> bool:
        if cp.get("unconfirmed") is True or cp.get("status") == "unconfirmed":
            return True
        return bool(end_rule is not None and end_rule(cp["index"], named, interleaved).get("unconfirmed"))

    return {"confirmed": [cp["index"] for cp in cps if not unconfirmed(cp)],
            "unconfirmed": [cp["index"] for cp in cps if unconfirmed(cp)]}


def read_cv(a, b) -> float:
    """The noise opcost reads off the two arms (what sizes its delta)."""
    return abtest.robust_cv(list(a), list(b))


def smallest_p(n: int) -> float:
    """The smallest p the fixed design's test can give at n per arm: arms
    that do not overlap at all."""
    a = np.linspace(1.0, 1.01, n)
    out = fixed_rule(a, a * 1.5, np.arange(n), 0.02, 200)
    return float(out["p"]) if out["p"] is not None else float("nan")


def describe_rules() -> str:
    bits = [f"compare_arms({', '.join(sorted(_COMPARE_ARGS))})"]
    bits.append("stored runs: opcost.replicates." + fn.__name__ if (fn := _stored_fn()) is not None
                else "stored runs: processes pooled (no opcost.replicates)")
    bits.append("series: analyse(" + ", ".join(sorted(_SERIES_ARGS)) + ")"
                + ("; ends unconfirmed (series.unconfirmed)" if _end_rule() is not None else ""))
    return "; ".join(bits)

# ---------------------------------------------------------------------------
# END OF ADAPTERS
# ---------------------------------------------------------------------------


DELTA = 0.02
POWER_EFFECT, POWER_DELTA, POWER_N = 0.02, 0.01, 20
FIXED_NS = (6, 10, 20, 40)
SEQ_ROUNDS = 40
STORED = [(off, runs, per) for off in scenarios.OFFSETS for runs in (1, 3) for per in (10, 20)]
SERIES_LABELS, SERIES_PER_LABEL = 10, 5
SERIES_FLAT = ("normal", "lognormal", "bimodal", "pool", *(f"offset:{o}" for o in scenarios.OFFSETS))
DISTURBANCE = 0.03

_NOISE: scenarios.Noise | None = None


def _noise(pool: str) -> scenarios.Noise:
    global _NOISE
    if _NOISE is None:
        _NOISE = scenarios.Noise(scenarios.load_pool(pool))
    return _NOISE


def _rng(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def _covers(out: dict, truth: float) -> bool | None:
    ci = out["ci"]
    return None if ci is None else bool(ci[0] <= truth <= ci[1])


def _signed_rank(a, b, gate: float) -> tuple[bool, bool]:
    """The reference: Wilcoxon signed-rank on the per-round log ratios,
    two-sided at 0.05; (significant, significant and its Hodges-Lehmann
    estimate beyond the gate)."""
    d = np.log(np.asarray(b) / np.asarray(a))
    p = float(sps.wilcoxon(d, alternative="two-sided").pvalue)
    walsh = (d[:, None] + d[None, :])[np.triu_indices(d.size)] / 2
    hl = float(np.median(walsh))
    return p < 0.05, p < 0.05 and hl >= math.log1p(gate)


def cell_fixed(key: str, name: str, n: int, reps: int, seed: int, resamples: int, pool: str) -> dict:
    rng, nz = _rng(seed, key), _noise(pool)
    r: dict = {k: 0 for k in ("slower", "faster", "cov", "cov_n", "off5", "at_same", "at_slower",
                              "pw", "pw_p", "ref", "ref_gated")}
    r["cv"], r["pw_diff"] = [], []
    for _ in range(reps):
        a, b, rd = nz.interleaved(name, rng, n, 0.0)
        o = fixed_rule(a, b, rd, DELTA, resamples)
        r["slower"] += o["verdict"] == "slower"
        r["faster"] += o["verdict"] == "faster"
        r["off5"] += o["ratio"] is not None and abs(o["ratio"] - 1) > 0.05
        r["cv"].append(read_cv(a, b))
        if (c := _covers(o, 1.0)) is not None:
            r["cov"] += c
            r["cov_n"] += 1
        a, b, rd = nz.interleaved(name, rng, n, DELTA)
        o = fixed_rule(a, b, rd, DELTA, resamples)
        r["at_same"] += o["verdict"] in ("same", "negligible")
        r["at_slower"] += o["verdict"] == "slower"
        if (c := _covers(o, 1 + DELTA)) is not None:
            r["cov"] += c
            r["cov_n"] += 1
        if n == POWER_N:
            a, b, rd = nz.interleaved(name, rng, n, POWER_EFFECT)
            o = fixed_rule(a, b, rd, POWER_DELTA, resamples)
            hit = o["verdict"] == "slower"
            sig, gated = _signed_rank(a, b, POWER_DELTA)
            # the test's power: significant at 0.05 with B found the more costly
            found = o["p"] is not None and o["p"] < 0.05 and (o["estimate"] or 1.0) > 1
            r["pw"] += hit
            r["pw_p"] += found
            r["ref"] += sig
            r["ref_gated"] += gated
            r["pw_diff"].append(int(found) - int(sig))
    r["reps"] = reps
    return r


def cell_sequential(key: str, name: str, reps: int, seed: int, resamples: int, pool: str) -> dict:
    rng, nz = _rng(seed, key), _noise(pool)
    r: dict = {k: 0 for k in ("slower", "faster", "cov", "cov_n", "at_same", "at_slower")}
    r["n_aa"], r["n_at"], r["est_at"] = [], [], []
    for _ in range(reps):
        a, b, rd = nz.interleaved(name, rng, SEQ_ROUNDS, 0.0)
        o = sequential_rule(a, b, rd, DELTA, resamples)
        r["slower"] += o["verdict"] == "slower"
        r["faster"] += o["verdict"] == "faster"
        r["n_aa"].append(o["n"])
        if (c := _covers(o, 1.0)) is not None:
            r["cov"] += c
            r["cov_n"] += 1
        a, b, rd = nz.interleaved(name, rng, SEQ_ROUNDS, DELTA)
        o = sequential_rule(a, b, rd, DELTA, resamples)
        r["at_same"] += o["verdict"] in ("same", "negligible")
        r["at_slower"] += o["verdict"] == "slower"
        r["n_at"].append(o["n"])
        if o["estimate"] is not None:
            r["est_at"].append(math.log(o["estimate"]))
        if (c := _covers(o, 1 + DELTA)) is not None:
            r["cov"] += c
            r["cov_n"] += 1
    r["reps"] = reps
    return r


# --- issue 37: power of the sequential default, the order effect, look 1 ---

# (model, true effect): models at delta 2%, normal and log-normal of CV 2%
# and 3%, and bimodal processes (30% of them on a level at 0.75x)
PW_MODELS = ("normal2", "normal3", "lognormal2", "lognormal3", "bimodal75")
PW_CELLS = [(m, e) for m in PW_MODELS for e in (0.0, 0.03)] + [("bimodal75", 0.05)]
# one process of the default protocol: 3 warm-up + 20 batches of 10 ms, and
# its start (~20 ms): what a process per arm costs in wall time
PROCESS_S = 0.25
ORDER_COST = 0.02       # the first process of a round costs 2% more
ORDER_ROUNDS = 40
LOOK1_BENCHES, LOOK1_EFFECT, LOOK1_CV = 16, 0.10, 0.01


def _pw_arm(model: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if model.startswith("normal"):
        return 1 + float(model[6:]) / 100 * rng.standard_normal(n)
    if model.startswith("lognormal"):
        return np.exp(float(model[9:]) / 100 * rng.standard_normal(n))
    if model == "bimodal75":
        low = rng.random(n) < 0.30
        return np.where(low, 0.75, 1.0) * np.exp(0.01 * rng.standard_normal(n))
    raise ValueError(model)


def cell_power(key: str, model: str, effect: float, reps: int, seed: int, resamples: int) -> dict:
    rng = _rng(seed, key)
    r: dict = {k: 0 for k in ("slower", "faster", "same", "cov", "cov_n", "beyond")}
    r["n"] = []
    for _ in range(reps):
        a, b = _pw_arm(model, rng, SEQ_ROUNDS), _pw_arm(model, rng, SEQ_ROUNDS) * (1 + effect)
        o = sequential_rule(a, b, np.arange(SEQ_ROUNDS), DELTA, resamples)
        r["slower"] += o["verdict"] == "slower"
        r["faster"] += o["verdict"] == "faster"
        r["same"] += o["verdict"] in ("same", "negligible")
        r["n"].append(o["n"])
        if (c := _covers(o, 1 + effect)) is not None:
            r["cov"] += c
            r["cov_n"] += 1
    r["reps"] = reps
    return r


def cell_order(key: str, which: str, reps: int, seed: int) -> dict:
    """A/A with a first-in-round cost: 'default' seeds (default_seed(): the
    code's own), 'seed0' (every run seed 0, as before issue 37)."""
    rng = _rng(seed, key)
    r: dict = {"reject": 0, "cov": 0, "cov_n": 0, "bias": []}
    fresh = which == "default" and default_seed_is_fresh()
    fixed = default_seed() if which == "default" and not fresh else 0
    for _ in range(reps):
        s = int(rng.integers(2**32)) if fresh else fixed
        a, b = _pw_arm("lognormal2", rng, ORDER_ROUNDS), _pw_arm("lognormal2", rng, ORDER_ROUNDS)
        first = np.array([o[0] for o in round_orders(s, ORDER_ROUNDS)])
        a = a * np.where(first == 0, 1 + ORDER_COST, 1.0)
        b = b * np.where(first == 1, 1 + ORDER_COST, 1.0)
        o = fixed_test(a, b, np.arange(ORDER_ROUNDS))
        r["reject"] += o["p"] < 0.05
        r["bias"].append(math.log(o["estimate"]))
        if o["ci"] is not None:
            r["cov"] += o["ci"][0] <= 1 <= o["ci"][1]
            r["cov_n"] += 1
    r["reps"] = reps
    return r


LV_SHAPES = ("normal", "tail", "flat", "two")
LV_NS = (10, 20, 40, 80)


def _lv_arm(shape: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """One arm: one level (normal CV 3%; right-tailed: log-normal 2% with 15%
    of processes slowed by an exponential 15%; flat: uniform +/-5%), or two
    (70/30 at 0.75x, 1% within)."""
    if shape == "normal":
        return 1 + 0.03 * rng.standard_normal(n)
    if shape == "tail":
        slow = rng.random(n) < 0.15
        return np.exp(0.02 * rng.standard_normal(n)) * (1 + np.where(slow, rng.exponential(0.15, n), 0.0))
    if shape == "flat":
        return rng.uniform(0.95, 1.05, n)
    return np.where(rng.random(n) < 0.30, 0.75, 1.0) * np.exp(0.01 * rng.standard_normal(n))


def cell_levels(key: str, shape: str, n: int, reps: int, seed: int) -> dict:
    rng = _rng(seed, key)
    return {"flagged": sum(two_levels(_lv_arm(shape, rng, n)) for _ in range(reps)), "reps": reps}


def cell_look1(key: str, reps: int, seed: int, resamples: int) -> dict:
    rng = _rng(seed, key)
    r: dict = {"all1": 0, "settled1": 0, "slower": 0, "benches": 0}
    for _ in range(reps):
        arms = []
        for _ in range(LOOK1_BENCHES):
            a = 1 + LOOK1_CV * rng.standard_normal(SEQ_ROUNDS)
            b = (1 + LOOK1_CV * rng.standard_normal(SEQ_ROUNDS)) * (1 + LOOK1_EFFECT)
            arms.append((a, b, np.arange(SEQ_ROUNDS)))
        got = sequential_many(arms, DELTA, resamples)
        at1 = [g["look"] == 1 and g["settled"] not in (None, "last look", "the run ended here") for g in got]
        r["all1"] += all(at1)
        r["settled1"] += sum(at1)
        r["slower"] += sum(g["verdict"] == "slower" for g in got)
        r["benches"] += len(got)
    r["reps"] = reps
    return r


def cell_stored(key: str, off: float, runs: int, per: int, reps: int, seed: int, resamples: int, pool: str) -> dict:
    rng, nz = _rng(seed, key), _noise(pool)
    r: dict = {k: 0 for k in ("slower", "faster", "none", "cov", "cov_n", "at_same", "at_slower")}
    for _ in range(reps):
        ra, rb = nz.stored(off, rng, runs, per, 0.0)
        o = stored_rule(ra, rb, DELTA, resamples)
        r["slower"] += o["verdict"] == "slower"
        r["faster"] += o["verdict"] == "faster"
        r["none"] += o["verdict"] is None
        if (c := _covers(o, 1.0)) is not None:
            r["cov"] += c
            r["cov_n"] += 1
        ra, rb = nz.stored(off, rng, runs, per, DELTA)
        o = stored_rule(ra, rb, DELTA, resamples)
        r["at_same"] += o["verdict"] in ("same", "negligible")
        r["at_slower"] += o["verdict"] == "slower"
        if (c := _covers(o, 1 + DELTA)) is not None:
            r["cov"] += c
            r["cov_n"] += 1
    r["reps"] = reps
    return r


def cell_series(key: str, name: str, where: str, reps: int, seed: int, pool: str) -> dict:
    """where: "flat", or "end"/"inside" for a one-label disturbance."""
    rng, nz = _rng(seed, key), _noise(pool)
    r: dict = {"cps": [], "unconf": [], "any": 0}
    for _ in range(reps):
        disturb = None
        if where == "end":
            disturb = (0 if rng.random() < 0.5 else SERIES_LABELS - 1, DISTURBANCE)
        elif where == "inside":
            disturb = (int(rng.integers(1, SERIES_LABELS - 1)), DISTURBANCE)
        labels = nz.series(name, rng, SERIES_LABELS, SERIES_PER_LABEL, disturb)
        o = series_rule(labels, DELTA, interleaved=not name.startswith("offset:"))
        r["cps"].append(len(o["confirmed"]))
        r["unconf"].append(len(o["unconfirmed"]))
        r["any"] += bool(o["confirmed"])
    r["reps"] = reps
    return r


# --cache DIR: each cell's figures kept as it completes, keyed by the cell's
# arguments and the audited opcost's source, so an interrupted run resumes.
_CACHE: Path | None = None
_DIGEST = ""


def _source_digest() -> str:
    h = hashlib.sha256()
    for f in sorted((SRC / "opcost").rglob("*.py")):
        h.update(f.relative_to(SRC).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _run(task):
    kind, args = task
    path = None
    if _CACHE is not None:
        path = _CACHE / (hashlib.sha256(repr((task, _DIGEST)).encode()).hexdigest()[:24] + ".pkl")
        if path.is_file():
            return pickle.loads(path.read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = {"fixed": cell_fixed, "seq": cell_sequential, "stored": cell_stored, "series": cell_series,
               "pw": cell_power, "order": cell_order, "look1": cell_look1, "lv": cell_levels}[kind](*args)
    if path is not None:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(out))
        tmp.replace(path)
    return out


# --- printing --------------------------------------------------------------

def _rate(k: int, n: int) -> str:
    if n == 0:
        return "   n/a        "
    p = k / n
    return f"{p:6.1%} ±{math.sqrt(p * (1 - p) / n):4.1%}"


def _mean(xs) -> str:
    if not xs:
        return "  n/a        "
    m = float(np.mean(xs))
    se = float(np.std(xs, ddof=1) / math.sqrt(len(xs))) if len(xs) > 1 else 0.0
    return f"{m:5.3f} ±{se:5.3f}"


# Every target is judged with its Monte-Carlo error, the same way for all:
# a rate (or mean) is evidence against its target only when it lies beyond
# the target's bound by more than 2 standard errors, the SE taken at the
# bound (so a rate of 0 or 100% still has one); inside the range it holds;
# outside but within 2 SE the cell cannot decide, and main() re-simulates it
# (TOPUP_FACTOR times its repetitions again, up to --topups times, each top-up
# its own seed) and judges the pooled figure. A cell still undecided after
# that is printed PASS~ and listed under the targets: not evidence of a
# failure, not a clean pass.
Z_MC = 2.0
TOPUP_FACTOR = 3


def judge(k: float, n: int, lo: float | None, hi: float | None) -> str:
    """PASS, PASS~ (outside [lo, hi] within Z_MC standard errors: undecided)
    or FAIL, for k successes in n trials."""
    if n == 0:
        return "-"
    p = k / n
    for bound, outside in ((lo, lo is not None and p < lo), (hi, hi is not None and p > hi)):
        if outside:
            assert bound is not None
            se = math.sqrt(bound * (1 - bound) / n)
            return "PASS~" if abs(p - bound) <= Z_MC * se else "FAIL"
    return "PASS"


def judge_mean(xs, hi: float) -> str:
    """The same for a mean count per series (at most hi): its SE the larger
    of the sample's and a Poisson count's at the bound, sqrt(hi / n)."""
    n = len(xs)
    m = float(np.mean(xs))
    if m <= hi:
        return "PASS"
    se = max(float(np.std(xs, ddof=1)) / math.sqrt(n) if n > 1 else 0.0, math.sqrt(hi / n))
    return "PASS~" if m - hi <= Z_MC * se else "FAIL"


def judge_paired(diffs, at_least: float = 0.0) -> str:
    """A paired difference (test minus reference) at least `at_least`:
    PASS~ when short of it by at most Z_MC SEs of the mean difference."""
    d = np.asarray(diffs, dtype=float)
    m = float(d.mean()) if d.size else 0.0
    if m >= at_least:
        return "PASS"
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0
    return "PASS~" if at_least - m <= Z_MC * se else "FAIL"


class Verdicts:
    def __init__(self):
        self.rows: list[tuple[str, str, str, tuple | None]] = []

    def check(self, what: str, status: str, detail: str, cell: tuple | None = None) -> str:
        if status != "-":
            self.rows.append((what, detail, status, cell))
        return status


def _cov(r: dict, hi: float = 0.97) -> str:
    return judge(r["cov"], r["cov_n"], 0.93, hi)


def _detail(k: int, n: int) -> str:
    p = k / n if n else float("nan")
    return f"{p:.1%} ±{math.sqrt(p * (1 - p) / n) if n else 0:.1%} ({n})"


def _mark(status: str) -> str:
    return f"{'  -' if status == '-' else status:<5}"


def report(results: dict, args, v: Verdicts) -> None:
    se_note = "each rate ± its Monte-Carlo standard error"
    if ("fixed", scenarios.INTERLEAVED[0], FIXED_NS[0]) in results:
        _report_fixed(results, args, v, se_note)
    if ("seq", scenarios.INTERLEAVED[0]) in results:
        _report_sequential(results, args, v)
    if ("stored",) + STORED[0] in results:
        _report_stored(results, args, v)
    if ("series", SERIES_FLAT[0], "flat") in results:
        _report_series(results, args, v)
    if ("pw",) + PW_CELLS[0] in results or ("lv", LV_SHAPES[0], LV_NS[0]) in results:
        _report_power(results, args, v)
    print("\n== The smallest p the fixed design's test can reach (arms that do not overlap at all)")
    print("  " + "; ".join(f"n={n}: {p:.3f}" + (" (never significant)" if p >= 0.05 else "")
                           for n, p in results["floor"]))


def _report_fixed(results: dict, args, v: Verdicts, se_note: str) -> None:
    print(f"\n== Fixed design (ab -p N): interleaved, delta {DELTA:.0%}, {args.reps} repetitions a cell; {se_note}")
    print(f"{'scenario':<10} {'n':>3}  {'A/A slower+faster':>17} {'A/A':>4}  {'coverage':>14} {'':>4}  "
          f"{'same/negl @delta':>16} {'':>4}  {'slower @delta':>14}  {'A/A |r-1|>5%':>14}  {'robust CV (true)':>17}")
    for name in scenarios.INTERLEAVED:
        for n in FIXED_NS:
            r = results[("fixed", name, n)]
            aa = r["slower"] + r["faster"]
            cell = ("fixed", name, n)
            ok_aa = judge(aa, r["reps"], None, 0.05)
            ok_cov = _cov(r)
            ok_same = judge(r["at_same"], r["reps"], None, 0.05)
            v.check(f"fixed {name} n={n}: A/A <= 5%", ok_aa, _detail(aa, r["reps"]), cell)
            v.check(f"fixed {name} n={n}: coverage 93-97%", ok_cov, _detail(r["cov"], r["cov_n"]), cell)
            v.check(f"fixed {name} n={n}: same/negligible at delta <= 5%", ok_same, _detail(r["at_same"], r["reps"]),
                    cell)
            cv = float(np.median(r["cv"]))
            print(f"{name:<10} {n:>3}  {_rate(aa, r['reps']):>17} {_mark(ok_aa)} {_rate(r['cov'], r['cov_n'])} "
                  f"{_mark(ok_cov)} {_rate(r['at_same'], r['reps']):>16} {_mark(ok_same)} "
                  f"{_rate(r['at_slower'], r['reps'])}  {_rate(r['off5'], r['reps'])}  "
                  f"{cv:6.1%} ({scenarios.true_cv(name, _noise(args.pool).pool):5.1%})", flush=True)
    print(f"\n== Power: a true {POWER_EFFECT:.0%} at n={POWER_N} per arm, interleaved, delta {POWER_DELTA:.0%}: "
          f"opcost's test against a Wilcoxon signed-rank on the per-round log ratios (`slower` also needs the CI to clear delta)")
    print(f"{'scenario':<10}  {'opcost slower':>14}  {'opcost p<0.05':>14}  {'signed-rank p<.05':>17}  "
          f"{'s-r, est>=delta':>15}  target: p<0.05 >= signed-rank p<.05 - 2 SE(paired diff)")
    for name in scenarios.INTERLEAVED:
        r = results[("fixed", name, POWER_N)]
        n = r["reps"]
        d = np.asarray(r["pw_diff"], dtype=float)
        se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0
        ok = judge_paired(r["pw_diff"])
        v.check(f"power {name}: test >= signed-rank reference", ok,
                f"{r['pw_p'] / n:.1%} vs {r['ref'] / n:.1%}, diff {(r['pw_p'] - r['ref']) / n:+.1%} ±{se:.1%} "
                f"(slower, the CI clearing delta: {r['pw'] / n:.1%}; {n} runs)", ("fixed", name, POWER_N))
        print(f"{name:<10}  {_rate(r['pw'], n)}  {_rate(r['pw_p'], n)}  {_rate(r['ref'], n):>17}  "
              f"{_rate(r['ref_gated'], n)}  {_mark(ok)} (diff {(r['pw_p'] - r['ref']) / n:+.1%} ±{se:.1%})")


def _report_sequential(results: dict, args, v: Verdicts) -> None:
    print(f"\n== Sequential design (ab): looks at 10/20/40 rounds, delta {DELTA:.0%}, {args.seq_reps} repetitions a cell; "
          "coverage of the CI reported after stopping (target 93-99%: a repeated CI is >= 95% by construction); "
          "A/A target: not above 5% by more than 2 SE (the design spends exactly 5%)")
    print(f"{'scenario':<10}  {'A/A slower+faster':>17} {'':>4}  {'coverage':>14} {'':>4}  {'same/negl @delta':>16} "
          f"{'':>4}  {'slower @delta (fixed 20)':>26}  {'mean est/truth @delta':>21}  {'mean n A/A, @delta':>18}")
    for name in scenarios.INTERLEAVED:
        r = results[("seq", name)]
        n = r["reps"]
        aa = r["slower"] + r["faster"]
        cell = ("seq", name)
        ok_aa, ok_cov = judge(aa, n, None, 0.05), judge(r["cov"], r["cov_n"], 0.95, None)
        ok_same = judge(r["at_same"], n, None, 0.05)
        v.check(f"sequential {name}: A/A <= 5%", ok_aa, _detail(aa, n), cell)
        v.check(f"sequential {name}: coverage >= 95% (repeated CI)", ok_cov, _detail(r["cov"], r["cov_n"]), cell)
        v.check(f"sequential {name}: same/negligible at delta <= 5%", ok_same, _detail(r["at_same"], n), cell)
        f20 = results.get(("fixed", name, 20))
        fixed20 = f"{f20['at_slower'] / f20['reps']:5.1%}" if f20 else "  n/a"
        bias = math.exp(float(np.mean(r["est_at"]))) / (1 + DELTA) if r["est_at"] else float("nan")
        print(f"{name:<10}  {_rate(aa, n):>17} {_mark(ok_aa)} {_rate(r['cov'], r['cov_n'])} {_mark(ok_cov)} "
              f"{_rate(r['at_same'], n):>16} {_mark(ok_same)} {_rate(r['at_slower'], n)} ({fixed20})"
              f"  {bias:21.4f}  {np.mean(r['n_aa']):8.1f}, {np.mean(r['n_at']):8.1f}")


def _report_stored(results: dict, args, v: Verdicts) -> None:
    print(f"\n== Stored runs (compare): runs per side x processes per run, each run shifted by its own offset; "
          f"{args.reps} repetitions a cell")
    print(f"{'offset':>6} {'runs x procs':>12}  {'A/A slower+faster':>17} {'':>4}  {'no verdict':>14}  "
          f"{'coverage':>14} {'':>4}  {'same/negl @delta':>16} {'':>4}  {'slower @delta':>14}")
    for off, runs, per in STORED:
        r = results[("stored", off, runs, per)]
        n = r["reps"]
        aa = r["slower"] + r["faster"]
        cell = ("stored", off, runs, per)
        ok_aa, ok_cov, ok_same = judge(aa, n, None, 0.05), _cov(r), judge(r["at_same"], n, None, 0.05)
        what = f"stored offset {off:.1%} {runs}x{per}"
        v.check(f"{what}: A/A <= 5%", ok_aa, _detail(aa, n), cell)
        v.check(f"{what}: coverage 93-97%", ok_cov, _detail(r["cov"], r["cov_n"]), cell)
        v.check(f"{what}: same/negligible at delta <= 5%", ok_same, _detail(r["at_same"], n), cell)
        print(f"{off:>6.1%} {f'{runs} x {per}':>12}  {_rate(aa, n):>17} {_mark(ok_aa)} {_rate(r['none'], n)}  "
              f"{_rate(r['cov'], r['cov_n'])} {_mark(ok_cov)} {_rate(r['at_same'], n):>16} {_mark(ok_same)} "
              f"{_rate(r['at_slower'], n)}")


def _report_series(results: dict, args, v: Verdicts) -> None:
    print(f"\n== Series (series): {SERIES_LABELS} labels x {SERIES_PER_LABEL} processes, delta {DELTA:.0%}, "
          f"{args.series_reps} series a cell")
    print(f"{'labels':<13} {'case':<22}  {'change points / series':>22} {'':>4}  {'series with one':>15}  "
          f"{'unconfirmed / series':>20}")
    for name in SERIES_FLAT:
        r = results[("series", name, "flat")]
        ok = judge_mean(r["cps"], 0.05)
        v.check(f"series flat {name}: false change points <= 0.05", ok,
                f"{_mean(r['cps']).strip()} ({r['reps']} series)", ("series", name, "flat"))
        print(f"{name:<13} {'flat':<22}  {_mean(r['cps']):>22} {_mark(ok)} {_rate(r['any'], r['reps'])}  "
              f"{_mean(r['unconf']):>20}")
    for where in ("end", "inside"):
        r = results[("series", "offset:0.01", where)]
        print(f"{'offset:0.01':<13} {f'+{DISTURBANCE:.0%} one label, {where}':<22}  {_mean(r['cps']):>22} {'':>4}  "
              f"{_rate(r['any'], r['reps'])}  {_mean(r['unconf']):>20}")


def _report_power(results: dict, args, v: Verdicts) -> None:
    if ("pw",) + PW_CELLS[0] in results:
        print(f"\n== Issue 37: the sequential default (ab), delta {DELTA:.0%}, looks 10/20/40, {args.pw_reps} runs a cell; "
              f"targets: true 3% (normal, log-normal) and true 5% (bimodal 30% at 0.75x) `slower` >= 80%, A/A "
              f"slower+faster <= 1%, `same`/`negligible` at a true 3% <= 1%, the repeated CI covers >= 95%; wall time: "
              f"2 x the mean processes per arm x {PROCESS_S} s (a default process), per benchmark")
        print(f"{'model':<11} {'truth':>6}  {'slower':>14} {'':>5} {'faster':>14}  {'same/negl':>14} {'':>5} "
              f"{'coverage':>14} {'':>5} {'mean n/arm':>10}  {'wall s':>6}")
        for model, eff in PW_CELLS:
            cell = ("pw", model, eff)
            r = results[cell]
            n = r["reps"]
            name = f"power {model} {eff:.0%}"
            if eff == 0:
                ok_s = v.check(f"{name}: A/A slower+faster <= 1%", judge(r["slower"] + r["faster"], n, None, 0.01),
                               _detail(r["slower"] + r["faster"], n), cell)
                ok_same = "-"
            else:
                target = model != "bimodal75" or eff >= 0.05
                ok_s = v.check(f"{name}: slower >= 80%", judge(r["slower"], n, 0.80, None) if target else "-",
                               _detail(r["slower"], n), cell)
                ok_same = v.check(f"{name}: same/negligible <= 1%", judge(r["same"], n, None, 0.01),
                                  _detail(r["same"], n), cell)
            ok_cov = v.check(f"{name}: repeated CI covers >= 95%", judge(r["cov"], r["cov_n"], 0.95, None),
                             _detail(r["cov"], r["cov_n"]), cell)
            mn = float(np.mean(r["n"]))
            print(f"{model:<11} {eff:>6.0%}  {_rate(r['slower'], n)} {_mark(ok_s)} {_rate(r['faster'], n)}  "
                  f"{_rate(r['same'], n)} {_mark(ok_same)} {_rate(r['cov'], r['cov_n'])} {_mark(ok_cov)} "
                  f"{mn:6.1f} ±{float(np.std(r['n'], ddof=1)) / math.sqrt(n):3.1f}  {2 * mn * PROCESS_S:6.1f}")
    if ("order", "default") in results:
        print(f"\n== Issue 37: an order effect (the first process of a round costs {ORDER_COST:.0%} more), A/A, "
              f"log-normal 2%, {ORDER_ROUNDS} paired rounds, the round orders a run's default seed draws (runner: one "
              f"random.Random(seed) shuffled each round); targets with default seeds: |bias| <= 0.1%, p < 0.05 <= 5.5%")
        for which in ("default", "seed0"):
            cell = ("order", which)
            if cell not in results:
                continue
            r = results[cell]
            n = r["reps"]
            b = np.asarray(r["bias"])
            bias, se = float(np.expm1(b.mean())), float(b.std(ddof=1) / math.sqrt(n))
            if which == "default":
                ok_b = "PASS" if abs(bias) <= 0.001 else ("PASS~" if abs(bias) - 0.001 <= Z_MC * se else "FAIL")
                v.check("order effect, default seeds: |bias| <= 0.1%", ok_b, f"{bias:+.3%} ±{se:.3%} ({n})", cell)
                ok_r = v.check("order effect, default seeds: rejection <= 5.5%", judge(r["reject"], n, None, 0.055),
                               _detail(r["reject"], n), cell)
            else:
                ok_b = ok_r = "-"
            label = "default seed" if which == "default" else "seed 0 always"
            print(f"{label:<14} bias {bias:+.3%} ±{se:.3%} {_mark(ok_b)}  p < 0.05 {_rate(r['reject'], n)} {_mark(ok_r)}  "
                  f"95% CI covers {_rate(r['cov'], r['cov_n'])}")
    if ("lv", LV_SHAPES[0], LV_NS[0]) in results:   # --only levels
        print("\n== Issue 37: the `bimodal` flag (stats.levels) per arm; one level (normal CV 3%; right-tailed: "
              "log-normal 2% x 15% of processes slowed by an exponential 15%; flat: uniform +/-5%), target <= 2%; "
              "two levels (70/30 at 0.75x), the detection rate")
        print(f"{'shape':<8} " + "  ".join(f"{f'n={n}':>20}" for n in LV_NS))
        for shape in LV_SHAPES:
            cells = []
            for n in LV_NS:
                cell = ("lv", shape, n)
                r = results[cell]
                ok = "-" if shape == "two" else v.check(f"bimodal flag on one level, {shape} n={n}: <= 2%",
                                                        judge(r["flagged"], r["reps"], None, 0.02),
                                                        _detail(r["flagged"], r["reps"]), cell)
                cells.append(f"{_rate(r['flagged'], r['reps'])} {_mark(ok)}")
            print(f"{shape:<8} " + "  ".join(cells))
    cell = ("look1",)
    if cell in results:
        r = results[cell]
        n = r["reps"]
        ok = v.check(f"look 1: {LOOK1_BENCHES} benchmarks of {LOOK1_EFFECT:.0%} at CV {LOOK1_CV:.0%} all settled",
                     judge(r["all1"], n, 1.0, None) if r["all1"] < n else "PASS", _detail(r["all1"], n), cell)
        print(f"\n== Issue 37: {LOOK1_BENCHES} benchmarks of a true {LOOK1_EFFECT:.0%} at CV {LOOK1_CV:.0%}, one `ab`: "
              f"all settled at look 1 in {_rate(r['all1'], n)} {_mark(ok)} of runs; benchmarks settled at look 1 "
              f"{_rate(r['settled1'], r['benches'])}, `slower` {_rate(r['slower'], r['benches'])}")


# --only's names -> the cells' kinds.
SECTIONS = {"fixed": "fixed", "sequential": "seq", "stored": "stored", "series": "series", "power": "pw",
            "levels": "lv"}


def _cell_task(key: tuple, args, suffix: str = "", reps_factor: int = 1) -> tuple:
    """The worker task of one cell (its result key), its seed key suffixed
    for a top-up (an independent stream) and its repetitions scaled."""
    s, rs, pool = args.seed, args.resamples, args.pool
    kind = key[0]
    if kind == "fixed":
        _, name, n = key
        return ("fixed", (f"fixed/{name}/{n}{suffix}", name, n, args.reps * reps_factor, s, rs, pool))
    if kind == "seq":
        _, name = key
        return ("seq", (f"seq/{name}{suffix}", name, args.seq_reps * reps_factor, s, rs, pool))
    if kind == "stored":
        _, off, runs, per = key
        return ("stored", (f"stored/{off}/{runs}/{per}{suffix}", off, runs, per, args.reps * reps_factor, s, rs, pool))
    if kind == "pw":
        _, model, eff = key
        return ("pw", (f"pw/{model}/{eff}{suffix}", model, eff, args.pw_reps * reps_factor, s, rs))
    if kind == "order":
        return ("order", (f"order/{key[1]}{suffix}", key[1], args.reps * 2 * reps_factor, s))
    if kind == "lv":
        _, shape, n = key
        return ("lv", (f"lv/{shape}/{n}{suffix}", shape, n, args.reps * 2 * reps_factor, s))
    if kind == "look1":
        return ("look1", (f"look1{suffix}", max(2, args.pw_reps // 10) * reps_factor, s, rs))
    _, name, where = key
    return ("series", (f"series/{name}/{where}{suffix}", name, where, args.series_reps * reps_factor, s, pool))


def tasks(args) -> list:
    keys: list = [("fixed", name, n) for name in scenarios.INTERLEAVED for n in FIXED_NS]
    keys += [("seq", name) for name in scenarios.INTERLEAVED]
    keys += [("stored",) + c for c in STORED]
    keys += [("series", name, "flat") for name in SERIES_FLAT]
    keys += [("series", "offset:0.01", where) for where in ("end", "inside")]
    keys += [("pw", m, e) for m, e in PW_CELLS] + [("order", "default"), ("order", "seed0"), ("look1",)]
    keys += [("lv", shape, n) for shape in LV_SHAPES for n in LV_NS]
    out = [(k, _cell_task(k, args)) for k in keys]
    # The slow cells first: two workers then end together.
    order = {"pw": 0, "look1": 0, "seq": 1, "fixed": 2, "stored": 3, "order": 3, "lv": 3, "series": 4}
    kinds = set(args.only) | ({"order", "look1"} if "pw" in args.only else set())
    out = [t for t in out if t[1][0] in kinds]
    # Within the fixed design, n=20 (the power rows) first, then the small n.
    size = {20: 0, 6: 1, 10: 2, 40: 3}
    return sorted(out, key=lambda t: (order[t[1][0]], size.get(t[0][2], 0) if t[0][0] == "fixed" else 0))


def _merge(r: dict, more: dict) -> dict:
    """A cell's figures pooled with its top-up's: counts added, lists joined."""
    out = {}
    for k, v in r.items():
        out[k] = v + more[k] if isinstance(v, (list, int, float)) else v
    return out


def _map(work: list, workers: int) -> list:
    if workers == 1:
        return [_run(t) for t in work]
    with multiprocessing.get_context("fork").Pool(workers) as p:
        return p.map(_run, work, chunksize=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few hundred repetitions (under 2 minutes): the test's mode")
    ap.add_argument("--reps", type=int, help="repetitions per fixed-design and stored cell (default 600; quick 100)")
    ap.add_argument("--seq-reps", type=int, help="repetitions per sequential cell (default 300; quick 40)")
    ap.add_argument("--series-reps", type=int, help="series per series cell (default 300; quick 40)")
    ap.add_argument("--pw-reps", type=int, help="runs per power cell of issue 37 (default 600; quick 20)")
    ap.add_argument("--resamples", type=int, help="bootstrap resamples per comparison (default 1000; quick 300)")
    ap.add_argument("--topups", type=int, help="times a cell outside a target by at most 2 Monte-Carlo SEs is "
                    f"simulated again with {TOPUP_FACTOR}x its repetitions (default 2; quick 0)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2, at most 2)")
    ap.add_argument("--pool", default="syscall.null", help="the real A/A pool: syscall.null, ctx.pipe, signal.catch or all")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--only", metavar="SECTIONS", default=",".join(SECTIONS),
                    help=f"comma-separated sections to run: {', '.join(SECTIONS)} (default: all; power is fixed's)")
    ap.add_argument("--cache", metavar="DIR", help="keep each cell's figures in DIR as it completes (keyed by the "
                    "cell and the audited source), so an interrupted run resumes where it stopped")
    ap.add_argument("--src", metavar="DIR", help="the opcost src/ directory to audit (default: this checkout's)")
    args = ap.parse_args()
    for name, full, quick in (("reps", 600, 100), ("seq_reps", 300, 40), ("series_reps", 300, 40), ("pw_reps", 600, 20),
                              ("resamples", 1000, 300)):
        val = getattr(args, name)
        if val is None:
            setattr(args, name, quick if args.quick else full)
        elif val < 2:
            _fail(f"--{name.replace('_', '-')} must be at least 2, not {val}")
    if args.topups is None:
        args.topups = 0 if args.quick else 2
    elif not 0 <= args.topups <= 4:
        _fail(f"--topups must be 0 to 4, not {args.topups}")
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    if not only or any(x not in SECTIONS for x in only):
        _fail(f"--only takes sections among {', '.join(SECTIONS)}, comma-separated, not {args.only!r}")
    args.only = {SECTIONS[x] for x in only}
    if not 1 <= args.workers <= 2:
        _fail(f"--workers must be 1 or 2 (a shared 2-CPU machine), not {args.workers}")
    try:
        scenarios.load_pool(args.pool)   # a bad --pool is one line, before any work
    except ValueError as e:
        _fail(str(e))
    global _CACHE, _DIGEST
    if args.cache:
        _CACHE = Path(args.cache)
        try:
            _CACHE.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            _fail(f"--cache {args.cache}: {e.strerror}; give a directory that can be created and written")
        _DIGEST = _source_digest()
    t0 = time.monotonic()
    print(f"opcost statistical audit (issue 25): seed {args.seed}, {'quick' if args.quick else 'full'} mode, "
          f"{args.resamples} bootstrap resamples per comparison, pool {args.pool}")
    print(f"rules: {describe_rules()}")
    print(f"opcost audited: {'this checkout' if SRC == HERE.parents[1] / 'src' else 'the src/ given by --src'}")
    print("scenarios: normal CV 2%; lognormal sigma 3%; bimodal 70% at 1.0 / 30% at 1.24, 0.6% within; pool "
          f"resampled; drift lognormal 1% x a {scenarios.DRIFT_TOTAL:.0%} trend over the rounds; stored runs "
          f"lognormal 2% x a per-run offset")
    print(f"targets judged with their Monte-Carlo error, all alike: FAIL only beyond the bound by more than {Z_MC:.0f} "
          f"SEs (the SE at the bound); a cell outside within {Z_MC:.0f} SEs is simulated again ({TOPUP_FACTOR}x its "
          f"repetitions, up to {args.topups} time(s)) and pooled; still so: PASS~ (undecided, listed)")
    work = tasks(args)
    results: dict = {}
    for (key, _), out in zip(work, _map([t for _, t in work], args.workers)):
        results[key] = out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results["floor"] = [(n, smallest_p(n)) for n in (3, 4, 5, 6)]
    # Cells that cannot decide a target (outside it within 2 SE): simulated
    # again, TOPUP_FACTOR times their repetitions each time, and pooled.
    topped: dict = {}
    for i in range(args.topups):
        v0 = Verdicts()
        with contextlib.redirect_stdout(io.StringIO()):
            report(results, args, v0)
        undecided = sorted({row[3] for row in v0.rows if row[2] == "PASS~" and row[3] is not None}, key=str)
        if not undecided:
            break
        more = _map([_cell_task(k, args, f"/topup{i + 1}", TOPUP_FACTOR) for k in undecided], args.workers)
        for k, m in zip(undecided, more):
            results[k] = _merge(results[k], m)
            topped[k] = results[k]["reps"]
    v = Verdicts()
    report(results, args, v)
    bad = [r for r in v.rows if r[2] == "FAIL"]
    near = [r for r in v.rows if r[2] == "PASS~"]
    print(f"\n== Targets: {len(v.rows) - len(bad)} of {len(v.rows)} hold ({len(near)} of them only within "
          f"{Z_MC:.0f} Monte-Carlo SEs of the bound after {args.topups} top-up(s): PASS~); FAIL:")
    if topped:
        print("  (cells simulated again to decide a target, repetitions now: "
              + "; ".join(f"{'/'.join(map(str, k))}: {n}" for k, n in topped.items()) + ")")
    for what, detail, _, _ in bad:
        print(f"  FAIL {what}: {detail}")
    for what, detail, _, _ in near:
        print(f"  PASS~ {what}: {detail}")
    print(f"\n{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
