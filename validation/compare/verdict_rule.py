#!/usr/bin/env python3
"""The verdict rule of issue 25, by simulation with opcost's own functions.

Per-process medians are simulated round by round, as `ab` measures them (one
A and one B process per round), and decided by:

- before: the rule up to issue 25, reimplemented here from its definition:
  ratio of medians with its bootstrap CI, twice the smaller p of
  Mann-Whitney and KS, delta widened to twice the A/A noise, `slower`/
  `faster` on the point estimate, `negligible` significant and under delta;
- unpaired: abtest.compare_arms + abtest.decide without the rounds
  (stored runs): Hodges-Lehmann shift with Moses' interval, min(p_MWU,
  p_KS) calibrated by permutation, fixed delta, CI-based same/negligible;
- paired: the same with the rounds (`ab`, `variants`): signed-rank on
  per-round log ratios with its Hodges-Lehmann interval (from 6 rounds);
- sequential: sequential.decide on 40 rounds (looks at 10, 20, 40, Pocock),
  paired, for the stopping bias and the rates after stopping.

Scenarios (B = A's distribution times 1 + effect):
- normal: log-normal process medians, CV 2%;
- bimodal: each process on one of two levels, 70% at 1.0 and 30% at 1.25,
  CV 1% within a level (a level mix);
- real: resampled from data/aa_pool.json (syscall.null's per-process medians
  of 88 real A/A comparisons on a shared 2-core VM: two levels, heavy tails);
- drift: CV 1% per process, plus what both processes of a round share: a
  slow trend of 10% over the run and a round-to-round CV of 2%.

Printed: A/A false `slower`/`faster`; CI coverage (the CI the verdict uses;
before: the ratio's); at a true effect of exactly delta the share called
`same`/`negligible` and `slower`; at a true 2% the share `slower` and the
reference: a Wilcoxon signed-rank test on per-round log ratios at 0.05,
significant and positive. Each figure with its Monte-Carlo standard error.
Then the small-n test comparison (item 2): rejection rate at 0.05 of twice
the smaller p, the calibrated min-p, Anderson-Darling k-sample (permutation)
and Mann-Whitney alone, on A/A and on a 3% shift. Seeded.

Usage: verdict_rule.py [--trials N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from opcost import abtest, sequential  # noqa: E402
from scipy import stats as sps  # noqa: E402

POOL = Path(__file__).resolve().parent / "data" / "aa_pool.json"
DELTA = 0.02


def draw(scenario: str, n: int, effect: float, rng, pool) -> tuple[np.ndarray, np.ndarray]:
    """n rounds: A's and B's per-process medians, round by round."""
    if scenario == "normal":
        cv = 0.02
        a = np.exp(cv * rng.standard_normal(n))
        b = np.exp(cv * rng.standard_normal(n))
    elif scenario == "bimodal":
        a = np.where(rng.random(n) < 0.3, 1.25, 1.0) * np.exp(0.01 * rng.standard_normal(n))
        b = np.where(rng.random(n) < 0.3, 1.25, 1.0) * np.exp(0.01 * rng.standard_normal(n))
    elif scenario == "real":
        a = rng.choice(pool, size=n)
        b = rng.choice(pool, size=n)
    elif scenario == "drift":
        shared = np.exp(0.10 * np.arange(n) / max(n - 1, 1) + 0.02 * rng.standard_normal(n))
        a = shared * np.exp(0.01 * rng.standard_normal(n))
        b = shared * np.exp(0.01 * rng.standard_normal(n))
    else:
        raise ValueError(scenario)
    return a, b * (1 + effect)


def before_rule(a, b, delta: float) -> tuple[str, list[float] | None]:
    """The verdict up to issue 25 (see the module docstring)."""
    ratio, ci = abtest.ratio_ci(a, b, resamples=300)
    p = abtest.p_value(a, b)["p"]
    d = max(delta, 2 * abtest.aa_noise(a, b))
    if p < 0.05:
        v = ("faster" if ratio < 1 else "slower") if abs(ratio - 1) >= d else "negligible"
    elif ci is not None and 1 - d <= ci[0] and ci[1] <= 1 + d:
        v = "same"
    else:
        v = "inconclusive"
    return v, ci


def new_rule(a, b, delta: float, paired: bool) -> tuple[str, list[float] | None]:
    """compare_arms + decide for one benchmark (Holm over one is the p
    itself), without the fields the verdict does not use (the bootstrap of
    the ratio of medians, the uncalibrated Mann-Whitney and KS p's):
    test_and_estimate and verdict, the two functions compare_arms and decide
    call for it."""
    n = len(a)
    rounds = (list(range(n)), list(range(n))) if paired else None
    te = abtest.test_and_estimate(a, b, rounds)
    return abtest.verdict(te["estimate"], te["ci95_estimate"], te["p"], delta), te["ci95_estimate"]


def sequential_rule(a, b, delta: float) -> tuple[str, list[float] | None, float, int]:
    r = list(range(len(a)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (e,), _ = sequential.decide([(r, list(a), r, list(b))], delta=delta, rounds=len(a), final=True,
                                    resamples=50)
    return e["verdict"], e["ci95_estimate"], e["estimate"], e["n_a"]


def signed_rank_ref(a, b) -> bool:
    d = np.log(b) - np.log(a)
    return bool(sps.wilcoxon(d).pvalue < 0.05 and np.median(d) > 0)


def se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n)


def pct(k: int, n: int) -> str:
    p = k / n
    return f"{100 * p:.1f}% ({100 * se(p, n):.1f})"


def verdict_table(trials: int, seed: int, pool, scenarios, ns) -> None:
    print(f"## Fixed design, delta {DELTA:.0%}, {trials} comparisons per cell (Monte-Carlo SE in brackets)\n")
    print("| scenario | n/arm | rule | A/A slower/faster | A/A CI coverage | true delta (2%): same/negligible "
          "| true 2%: slower (power) | true 2%: CI coverage | signed-rank reference, 2% |")
    print("|---|---|---|---|---|---|---|---|---|")
    for sc in scenarios:
        for n in ns:
            rng_seed = zlib.crc32(f"{sc}/{n}".encode()) ^ seed
            data = {}
            for eff in (0.0, DELTA):
                rng = np.random.default_rng(rng_seed + int(eff * 1e4))
                data[eff] = [draw(sc, n, eff, rng, pool) for _ in range(trials)]
            ref = sum(signed_rank_ref(a, b) for a, b in data[DELTA]) if n >= 6 else None
            for rule in ("before", "unpaired", "paired"):
                def run(a, b):
                    if rule == "before":
                        return before_rule(a, b, DELTA)
                    return new_rule(a, b, DELTA, rule == "paired")
                aa = [run(a, b) for a, b in data[0.0]]
                false = sum(v in ("slower", "faster") for v, _ in aa)
                cov = [ci is not None and ci[0] <= 1 <= ci[1] for _, ci in aa]
                tru = [run(a, b) for a, b in data[DELTA]]
                sn = sum(v in ("same", "negligible") for v, _ in tru)
                sl = sum(v == "slower" for v, _ in tru)
                cov2 = sum(ci is not None and ci[0] <= 1 + DELTA <= ci[1] for _, ci in tru)
                print(f"| {sc} | {n} | {rule} | {pct(false, trials)} | {pct(sum(cov), trials)} | {pct(sn, trials)} "
                      f"| {pct(sl, trials)} | {pct(cov2, trials)} | {pct(ref, trials) if ref is not None else '-'} |")
            sys.stdout.flush()
    print("\n(delta is 2%, so the true effect of delta is the true 2%; coverage: the CI the verdict uses "
          "contains the true ratio; a cell without a CI counts as not covering)\n")


def sequential_table(trials: int, seed: int, pool, scenarios) -> None:
    print(f"## Sequential design (Pocock, looks at 10/20/40, paired), delta {DELTA:.0%}, {trials} runs per cell\n")
    print("| scenario | true effect | slower | faster | same/negligible | CI coverage | mean estimate - truth "
          "| median estimate / truth | stopped at 10/20/40 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for sc in scenarios:
        for eff in (0.0, DELTA, 0.05):
            rng = np.random.default_rng(zlib.crc32(f"seq/{sc}/{eff}".encode()) ^ seed)
            out = [sequential_rule(*draw(sc, 40, eff, rng, pool), DELTA) for _ in range(trials)]
            vs = [o[0] for o in out]
            truth = 1 + eff
            cov = sum(ci is not None and ci[0] <= truth <= ci[1] for _, ci, _, _ in out)
            est = np.array([o[2] for o in out])
            stops = [sum(o[3] == k for o in out) for k in (10, 20, 40)]
            print(f"| {sc} | {eff:.0%} | {pct(vs.count('slower'), trials)} | {pct(vs.count('faster'), trials)} "
                  f"| {pct(vs.count('same') + vs.count('negligible'), trials)} | {pct(cov, trials)} "
                  f"| {100 * (est.mean() - truth):+.2f} pp | {np.median(est) / truth:.4f} | {'/'.join(map(str, stops))} |")
            sys.stdout.flush()
    print()


def small_n_table(trials: int, seed: int) -> None:
    print(f"## Small-n tests (unpaired), rejection at 0.05, {trials} comparisons per cell, log-normal CV 2%\n")
    print("| n/arm | shift | twice the smaller (before) | calibrated min-p (chosen) | Anderson-Darling k-sample "
          "(permutation) | Mann-Whitney alone (exact) |")
    print("|---|---|---|---|---|---|")
    for n in (4, 5, 6, 8, 10):
        for eff in (0.0, 0.03):
            rng = np.random.default_rng(zlib.crc32(f"small/{n}/{eff}".encode()) ^ seed)
            counts = [0, 0, 0, 0]
            for _ in range(trials):
                a, b = draw("normal", n, eff, rng, None)
                p = abtest.p_value(a, b)
                counts[0] += p["p"] < 0.05
                counts[1] += abtest.calibrated_p(a, b)[0] < 0.05
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ad = sps.anderson_ksamp([a, b], method=sps.PermutationMethod(n_resamples=999, random_state=rng))
                counts[2] += ad.pvalue < 0.05
                counts[3] += p["mannwhitney"] < 0.05
            print(f"| {n} | {eff:.0%} | " + " | ".join(pct(k, trials) for k in counts) + " |")
            sys.stdout.flush()
    print()


def sizing_table(trials: int, seed: int, pool) -> None:
    """Item 5: does the advice hold for the rule itself? A pilot of 10 rounds
    (paired, as `ab`'s first look) gives an inconclusive verdict and
    processes_needed; where that is at most 80, a fresh comparison of that
    many rounds is decided: the share decisive (not inconclusive) is what the
    advice promises (about 80%)."""
    print(f"## Sizing: a 10-round pilot's processes_needed, then a fresh run of that size, {trials} per cell\n")
    print("| scenario | true effect | pilots inconclusive | median processes_needed | needed <= 80 "
          "| decisive at that size | slower/faster | same/negligible |")
    print("|---|---|---|---|---|---|---|---|")
    for sc in ("normal", "real", "drift"):
        for eff in (0.0, 0.01, 0.03):
            rng = np.random.default_rng(zlib.crc32(f"size/{sc}/{eff}".encode()) ^ seed)
            needs, decisive, sf, sn, inc = [], 0, 0, 0, 0
            for _ in range(trials):
                a, b = draw(sc, 10, eff, rng, pool)
                r = list(range(10))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    [d] = abtest.decide([abtest.compare_arms(a, b, delta=DELTA, resamples=50, rounds=(r, r))])
                if d["verdict"] != "inconclusive":
                    continue
                inc += 1
                needs.append(d["processes_needed"])
                if d["processes_needed"] > 80:
                    continue
                n = max(10, d["processes_needed"])
                a, b = draw(sc, n, eff, rng, pool)
                v, _ = new_rule(a, b, DELTA, True)
                decisive += v != "inconclusive"
                sf += v in ("slower", "faster")
                sn += v in ("same", "negligible")
            k = sum(x <= 80 for x in needs)
            if inc:
                print(f"| {sc} | {eff:.0%} | {pct(inc, trials)} | {int(np.median(needs))} | {pct(k, inc)} "
                      + (f"| {pct(decisive, k)} | {pct(sf, k)} | {pct(sn, k)} |" if k else "| - | - | - |"))
            sys.stdout.flush()
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=1000, help="comparisons per cell (fixed design)")
    ap.add_argument("--seq-trials", type=int, default=400, help="runs per cell (sequential design)")
    ap.add_argument("--small-trials", type=int, default=1000, help="comparisons per cell (small-n tests)")
    ap.add_argument("--quick", action="store_true", help="a few hundred per cell")
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--parts", default="fixed,sequential,sizing,small")
    ap.add_argument("--ns", default="4,6,10,20", help="processes per arm of the fixed design")
    ap.add_argument("--scenarios", default="normal,bimodal,real,drift")
    args = ap.parse_args()
    if args.quick:
        args.trials, args.seq_trials, args.small_trials = 200, 100, 200
    pool = np.asarray(json.loads(POOL.read_text())["pools"]["syscall.null"], dtype=float)
    scenarios = tuple(args.scenarios.split(","))
    t0 = time.time()
    parts = args.parts.split(",")
    if "fixed" in parts:
        verdict_table(args.trials, args.seed, pool, scenarios, tuple(int(x) for x in args.ns.split(",")))
    if "sequential" in parts:
        sequential_table(args.seq_trials, args.seed, pool, tuple(x for x in scenarios if x != "real"))
    if "sizing" in parts:
        sizing_table(args.small_trials, args.seed, pool)
    if "small" in parts:
        small_n_table(args.small_trials, args.seed)
    print(f"({time.time() - t0:.0f} s, seed {args.seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
