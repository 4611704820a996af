"""The sequential A/B of `opcost ab` (without -p): the declared schedule (10,
20, 40 processes per arm) run as a group-sequential design. Pure functions;
the statistics of each look are abtest.py's.

- Looks after 10, 20 and 40 processes per arm: information fractions 1/4,
  1/2, 1 (the variance of a rank statistic falls as 1/n).
- Alpha spending (issue 37: alpha 1%, ALPHA): Lan-DeMets, Pocock type by
  default, alpha(t) = alpha log(1 + (e - 1) t), nominal 0.00357, 0.00326,
  0.00466 per look; O'Brien-Fleming type alpha(t) = 2 - 2 Phi(z_{1-alpha/2}
  / sqrt(t)) with `ab --boundary obf`. The verdict is graded
  (abtest.graded_verdict): slower/faster when significant at the look's
  level with the estimate beyond delta, beyond_delta saying whether the CI
  clears it too. By simulation (validation/stats/audit.py --only power,
  docs/statistics.md "Since issue 37"): a true 3% at delta 2% is `slower`
  in 89-99% of runs at CV 2-3% (normal, log-normal; before, with the whole
  CI beyond delta: 22-48%), a true 5% with 30% of processes at 0.75x in
  94%; A/A slower/faster 0.3-0.7%; the repeated CI covers 99-100%.
- Nominal levels per look: the two-sided boundaries z_k such that, under the
  null, the probability of first crossing at look k is what look k spends,
  by the recursive numerical integration of Armitage, McPherson & Rowe
  (Jennison & Turnbull 2000, ch. 19) over the canonical joint distribution
  (corr(Z_j, Z_k) = sqrt(t_j / t_k)); at alpha 1% Pocock z = 2.914, 2.942,
  2.830 (at 5%: 2.368, 2.368, 2.226), nominal levels 2 - 2 Phi(z_k). Exact, not a
  Bonferroni split of the increments: the looks are strongly correlated.
- The p tested: compare_arms' (issue 25: the within-round permutation
  min-p of the signed-rank and rank-sum statistics when the rounds pair A
  and B, else the calibrated unpaired min-p); issue 37: paired only where
  Holm over the report's benchmarks can reach PAIRED_ROOM of the look's
  level with its floor (never at look 1's 10 rounds).
- A benchmark is settled at look k when its Holm-adjusted p (across every
  benchmark of the report, the settled ones with the p they settled with)
  is under the look's level and its estimate lies beyond +/- delta (slower,
  faster), or when its CI at the look's level (the exact interval of the
  estimate at that confidence) lies inside +/- delta
  (same, or negligible when also significant). At the last look a verdict is whatever it is
  (inconclusive allowed). A settled benchmark is measured no more; the run
  stops when all are settled.
- The CI reported (ci95_estimate) is that CI at the look's level: a repeated
  confidence interval (Jennison & Turnbull 1989; 2000, ch. 9). The intervals
  at the nominal levels of the boundaries cover the truth at every look
  simultaneously with probability >= 95%, so the one where the run stopped
  does too, whatever made it stop; the fixed-sample 95% interval of the
  stopping look (sequential.ci95_at_look) does not: an early stop selects
  looks where it missed (issue 25: 90.7-92.8% coverage in the audit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from . import abtest, protocol

import numpy as np  # noqa: E402  (after compare: it keeps BLAS threads off the measured CPUs)
from scipy import optimize, stats  # noqa: E402

norm = stats.norm

STAGES = abtest.SCHEDULE
# The design's level (issue 37): a slower/faster claim needs only the
# estimate beyond delta, so the test carries the claim's error alone; at 1%
# (Pocock over the looks, Holm across benchmarks) an A/A is called
# slower/faster at most 1% of the time, whatever the noise.
ALPHA = 0.01
# The paired test at a look only when Holm over the report's m benchmarks
# can reach this fraction of the look's level with it (m x floor <= level x
# PAIRED_ROOM): at 10 rounds (floor 2/1024) never, so look 1 tests unpaired
# (floor 2/C(20,10) = 1.1e-5: 16 benchmarks settle there); from 20 rounds
# (exact, 1.9e-6) up to ~40 benchmarks at 40 rounds (sampled, 2.5e-5).
PAIRED_ROOM = 0.25
TEST = ("min-p of Wilcoxon signed-rank and rank sum, swapped within rounds (paired rounds, from 20; unpaired and at "
        "look 1: min of Mann-Whitney U and Kolmogorov-Smirnov calibrated by permutation), Holm across benchmarks, "
        "Pocock spending at 1%")
RULE = ("slower/faster: significant at the look's level and the estimate beyond delta (beyond_delta: the CI clears "
        "it too); same/negligible: the CI at the look's level inside +/- delta")
_GRID = 1201        # integration points per look (odd: Simpson); levels to ~1e-9
Z95 = float(norm.ppf(0.975))
CI = ("repeated confidence interval (Jennison & Turnbull): the exact interval at the stopping look's level, "
      "covering at every look simultaneously with probability >= 95%")


def obf_spending(t: float, alpha: float = abtest.ALPHA) -> float:
    """Lan-DeMets O'Brien-Fleming-type spending: the two-sided alpha spent by
    information fraction t."""
    if t <= 0:
        return 0.0
    return float(2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(min(t, 1.0))))


def pocock_spending(t: float, alpha: float = abtest.ALPHA) -> float:
    """Lan-DeMets Pocock-type spending (the default): the two-sided alpha
    spent by information fraction t."""
    return float(alpha * math.log(1 + (math.e - 1) * min(max(t, 0.0), 1.0)))


# The spending functions `ab --boundary` offers: name -> (the name the
# documents carry, the function).
BOUNDARIES = {"obf": ("Lan-DeMets O'Brien-Fleming", obf_spending), "pocock": ("Lan-DeMets Pocock", pocock_spending)}
DEFAULT_BOUNDARY = protocol.BOUNDARY


def spending_of(boundary: str):
    """The spending function of a --boundary name (obf, pocock)."""
    if boundary not in BOUNDARIES:
        raise ValueError(f"unknown boundary {boundary!r}: one of {', '.join(BOUNDARIES)}")
    return BOUNDARIES[boundary][1]


def _simpson(lo: float, hi: float, n: int = _GRID) -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(lo, hi, n)
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4, 2
    return x, w * (hi - lo) / (n - 1) / 3


def boundaries(fractions, alpha: float = abtest.ALPHA, spending=obf_spending) -> list[float]:
    """Two-sided z boundaries c_k of a group-sequential test with looks at the
    given information fractions (increasing, the last usually 1): under the
    null, P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = spending(t_k) - spending(t_{k-1}).

    Recursive integration: f is the sub-density of Z_k on the continuation
    region (-c_k, c_k); given Z_{k-1} = u, Z_k is normal with mean
    u sqrt(t_{k-1}/t_k) and variance 1 - t_{k-1}/t_k. A look that spends
    nothing (or less than the grid can resolve) gets an infinite boundary.
    """
    ts = [float(t) for t in fractions]
    if not ts or any(b <= a for a, b in zip(ts, ts[1:])) or ts[0] <= 0:
        raise ValueError(f"information fractions must increase from above 0: {fractions}")
    out: list[float] = []
    x = w = f = np.zeros(0)
    spent_before = 0.0
    for k, t in enumerate(ts):
        inc = spending(t, alpha) - spent_before
        spent_before += inc
        if k == 0:
            c = float(norm.isf(inc / 2)) if inc > 0 else math.inf
            if math.isfinite(c):
                x, w = _simpson(-c, c)
                f = norm.pdf(x)
            out.append(c)
            continue
        r = ts[k - 1] / t
        mean, sd = math.sqrt(r), math.sqrt(1 - r)

        def cross(c: float) -> float:
            m = x * mean
            return float(np.sum(w * f * (norm.sf((c - m) / sd) + norm.cdf((-c - m) / sd))))

        if inc <= 1e-12:
            c = math.inf
        else:
            c = float(optimize.brentq(lambda c: cross(c) - inc, 1e-6, 40.0, xtol=1e-10))
        out.append(c)
        if k < len(ts) - 1:
            lim = c if math.isfinite(c) else 12.0
            xn, wn = _simpson(-lim, lim)
            dens = norm.pdf((xn[:, None] - x[None, :] * mean) / sd) / sd
            f = dens @ (w * f)
            x, w = xn, wn
    return out


def level(z: float) -> float:
    """The nominal two-sided p level of a z boundary."""
    return float(2 * norm.sf(z)) if math.isfinite(z) else 0.0


@dataclass(frozen=True)
class Look:
    number: int               # 1-based
    processes: int            # per arm
    information: float        # fraction of the last planned stage
    alpha_spent: float        # cumulative
    z: float
    p_level: float            # a Holm-adjusted p under this is significant here
    ci_level: float           # the confidence of the CI that must lie inside +/- delta

    def to_json(self) -> dict:
        return {"look": self.number, "processes_per_arm": self.processes, "information": self.information,
                "alpha_spent": self.alpha_spent, "z": self.z, "p_level": self.p_level, "ci_level": self.ci_level}


@lru_cache(maxsize=64)
def looks(ns: tuple[int, ...], planned: int = STAGES[-1], alpha: float = ALPHA,
          boundary: str = DEFAULT_BOUNDARY) -> tuple[Look, ...]:
    """The looks after ns[k] processes per arm, out of `planned` at the last
    stage: the declared stages, or (when a run ended between two) the stages
    done and where it ended (Lan-DeMets spends by the information reached)."""
    spend = spending_of(boundary)
    ts = [n / planned for n in ns]
    zs = boundaries(ts, alpha, spend)
    return tuple(Look(k + 1, n, t, spend(t, alpha), z, level(z), 1 - level(z))
                 for k, (n, t, z) in enumerate(zip(ns, ts, zs)))


def widened(ratio: float, ci: list[float] | None, z: float) -> list[float] | None:
    """The 95% CI stretched on the log scale, each side by z / z_0.975: the
    CI at the look's level (a percentile bootstrap cannot reach 1 - 8.9e-5
    with 10,000 resamples)."""
    if ci is None or not math.isfinite(z):
        return None
    s = z / Z95
    return [ratio * (ci[0] / ratio) ** s, ratio * (ci[1] / ratio) ** s]


# Arms of one benchmark: the rounds and per-process medians of A, then of B.
Arms = tuple[list[int], list[float], list[int], list[float]]


def _at(arms: Arms, n: int | None) -> tuple[list[float], list[float], tuple[list[int], list[int]]]:
    ra, ma, rb, mb = arms
    if n is None:
        return list(ma), list(mb), (list(ra), list(rb))
    ka = [i for i, r in enumerate(ra) if r < n]
    kb = [i for i, r in enumerate(rb) if r < n]
    return [ma[i] for i in ka], [mb[i] for i in kb], ([ra[i] for i in ka], [rb[i] for i in kb])


def plan(rounds: int, stages: tuple[int, ...] = STAGES) -> tuple[int, ...]:
    """The looks a run of `rounds` rounds had: every stage it completed, and
    where it ended when that was between two stages (a run stopped early)."""
    done = tuple(n for n in stages if n <= rounds)
    return done + ((rounds,) if rounds > (done[-1] if done else 0) and rounds < stages[-1] else ())


def decide(arms: list[Arms | None], *, delta: float, rounds: int, final: bool, stages: tuple[int, ...] = STAGES,
           alpha: float = ALPHA, resamples: int = abtest.BOOTSTRAP_RESAMPLES,
           boundary: str = DEFAULT_BOUNDARY) -> tuple[list[dict | None], list[Look]]:
    """Replays the looks of a run of `rounds` rounds over every benchmark's
    arms (None: not compared). Returns, per benchmark, the compare_arms()
    entry of the look that settled it (or of the last look), with
    p_adjusted, verdict and `sequential` {look, processes_per_arm, p_level,
    ci_at_level, ci95_at_look (the look's fixed-sample 95% interval),
    settled (why, or None: not settled yet), looks (the history)}; its
    ci95_estimate is ci_at_level (the repeated confidence interval);
    and the looks done. final: the last look done is the run's end, so its
    verdicts stand whatever they are."""
    ns = plan(rounds, stages)
    if not ns:   # nothing measured that could be compared
        return [None] * len(arms), []
    done = looks(ns, stages[-1], alpha, boundary)
    state: list[dict | None] = [None] * len(arms)
    history: list[list[dict]] = [[] for _ in arms]
    for lk in done:
        end = lk.processes >= stages[-1]
        last = lk is done[-1] and (final or end)
        active = [(i, g) for i, g in enumerate(arms)
                  if g is not None and not (state[i] or {}).get("sequential", {}).get("settled")]
        fresh = {}
        m = sum(g is not None for g in arms)
        room = lk.p_level * PAIRED_ROOM / max(1, m)
        for i, g in active:
            a, b, rr = _at(g, lk.processes)
            if len(a) < 2 or len(b) < 2:
                continue
            c = abtest.compare_arms(a, b, delta=delta, resamples=resamples, rounds=rr, paired_floor_max=room)
            # the CI at the look's level: the exact interval of the estimate at that confidence
            c["_ci_level"] = abtest.test_and_estimate(a, b, rr, conf=lk.ci_level)["ci95_estimate"]
            fresh[i] = c
        family = [i for i in range(len(arms)) if i in fresh or state[i] is not None]
        padj = abtest.holm([(fresh[i] if i in fresh else state[i])["p_value"] for i in family])   # type: ignore[index]
        for i, pa in zip(family, padj):
            if i not in fresh:
                continue
            c = dict(fresh[i], p_adjusted=pa)
            wide = c.pop("_ci_level")
            c["verdict"] = abtest.graded_verdict(c["estimate"], wide, pa, c["delta"], lk.p_level)
            if c["verdict"] in ("slower", "faster"):
                c["beyond_delta"] = abtest.beyond_delta(wide, c["delta"])
            inside = wide is not None and 1 - c["delta"] <= wide[0] and wide[1] <= 1 + c["delta"]
            hw = abtest.half_width(c)
            if hw is not None:
                # what the design can still show (80% of the time), at each declared stage
                zs = {x.processes: x.z for x in done} | {x.processes: x.z for x in looks(stages, stages[-1], alpha,
                                                                                         boundary)}
                c["resolvable_by_stage"] = {str(n): abtest.resolvable_graded(hw * math.sqrt(lk.processes / n),
                                                                             c["delta"], zs[n])
                                            for n in stages if n >= lk.processes and n in zs}
                c["resolvable"] = c["resolvable_by_stage"].get(str(lk.processes), c.get("resolvable"))
            why = ("significant at the look's level, its estimate beyond +/- delta"
                   if c["verdict"] in ("slower", "faster")
                   else "its CI at the look's level lies inside +/- delta" if inside
                   else ("last look" if end else "the run ended here") if last else None)
            history[i].append({"look": lk.number, "n_a": c["n_a"], "n_b": c["n_b"], "ratio": c["ratio"],
                               "estimate": c["estimate"],
                               "p_adjusted": pa, "p_level": lk.p_level, "ci_at_level": wide,
                               "verdict": c["verdict"]})
            c["sequential"] = {"look": lk.number, "processes_per_arm": lk.processes, "p_level": lk.p_level,
                               "ci_at_level": wide, "settled": why, "looks": history[i]}
            if "estimate" in c:
                # The repeated confidence interval is the one reported: valid
                # after stopping (module docstring); the look's fixed-sample
                # 95% interval stays beside it for reference and sizing.
                c["sequential"]["ci95_at_look"] = c.get("ci95_estimate")
                c["ci95_estimate"] = wide
            state[i] = c
    for e in state:
        if e is not None and e["verdict"] == "inconclusive":
            # Sizing is for a fresh fixed-design run: from the fixed-sample width.
            fixed = dict(e, ci95_estimate=e["sequential"]["ci95_at_look"]) if "ci95_at_look" in e["sequential"] else e
            e.update(abtest.advice(fixed))
    return state, list(done)


def stop_reason(entries: list[dict | None], done: list[Look], stages: tuple[int, ...] = STAGES) -> str:
    """Why the run stopped measuring where it did."""
    if done and done[-1].processes >= stages[-1]:
        return "last stage"
    decided = [c for c in entries if c is not None]
    if decided and all(c["sequential"]["settled"] not in (None, "last look", "the run ended here") for c in decided):
        return "settled"
    return "ended early"
