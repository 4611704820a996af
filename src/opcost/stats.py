"""Summary statistics of one variant: pure functions over per-process data.

The independent unit is the probe process (docs/statistics.md): each process is
reduced to the median of its measured batches, and the summary is taken over
those per-process medians: median with a 95% percentile-bootstrap CI (10,000
resamples, fixed seed), min, p90 and CV. Batches inside a process are not
independent and are never pooled for the CI.
"""

from __future__ import annotations

import os

# A BLAS thread pool would spin on the CPUs being measured; opcost needs none.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import diptest  # noqa: E402
import numpy as np  # noqa: E402

from .model import (FIGURE_MIXED, FIGURE_WALL, aux_median, batch_lost_ns, figure_of,  # noqa: E402,F401
                    process_figure, process_median, process_median_wall)

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20240229
BOOTSTRAP_CHUNK = 1_000_000   # resampled values drawn at once (8 MB of indices)
UNSTABLE_CV = 0.05
OUTLIER_MADS = 3.0
# An outlier is noted only where it matters to the figure: beyond 3 MADs
# *and* this far from the median (the default practical threshold, --delta).
# At a spread of 0.3% a process 3 MADs off is 1% off: not worth a reader's doubt.
OUTLIER_MIN_REL = 0.02
SLOW_START = 1.05
# `contended` (docs/statistics.md): a batch is contended when the time it lost
# waiting for its CPU exceeds this share of its wall time (half the default
# practical threshold, 2%: below it, waiting cannot by itself move a figure
# past delta) ...
CONTENDED_BATCH_SHARE = 0.01
# ... and a variant is flagged when more than this share of its measured
# batches were: a process's figure is its median batch, and with 10% of the
# batches inflated the median is the 56th percentile of the clean ones, a
# shift inside the batch-to-batch spread; past that, the figure moves.
CONTENDED_BATCHES = 0.10
# `bimodal` (docs/statistics.md, "Bimodal processes"): process medians on two
# levels. The test is Engelman & Hartigan's for two clusters: the best split
# of the sorted log medians into two groups, its between-group over
# within-group sum of squares, against that statistic's 99% point for n
# normal values (LEVEL_CRITICAL, seeded simulation). A level holds at least
# LEVEL_MIN_PROCESSES processes (one alone is an outlier), and the levels
# must lie LEVEL_MIN_REL apart (the default delta): closer levels cannot
# move a figure by what a reader would act on. The split test alone answers
# "not one normal level", so it also fired on one level with a right tail or
# a flat spread (issue 37: 22-56% and 14-78% of arms at 20-80 processes);
# the split must also be one of two separate levels: Hartigan's dip test of
# unimodality (the `diptest` package) rejects one level at LEVEL_DIP_ALPHA
# (its null is the least favourable unimodal shape, the uniform), or, where
# the dip has little power (a small level of 2-3 processes in 10-20), the
# gap between the two groups is at least LEVEL_GAP times the larger of the
# two groups' own spreads (MAD of logs as an SD): a tail's or a flat
# spread's best split leaves one group about as wide as the gap (validation/stats/audit.py,
# docs/statistics.md).
LEVEL_ALPHA = 0.01
LEVEL_DIP_ALPHA = 0.01
LEVEL_GAP = 10.0
LEVEL_MIN_PROCESSES = 2
LEVEL_MIN_REL = 0.02
# outliers inside one of two levels: only in a level of at least this many
# processes (the MAD of fewer, set by one or two of them, would flag its own members)
OWN_FENCE_MIN = 10
# The 99% point of the statistic for n values of one normal level (the logs
# of log-normal medians): validation/stats/bimodal.py --table prints this
# (200,000 seeded samples per n; tests/test_bimodal.py recomputes some).
LEVEL_CRITICAL: dict[int, float] = {
    4: 147.1, 5: 55.49, 6: 30.01, 7: 19.63, 8: 14.83, 9: 11.71, 10: 9.927, 11: 8.687, 12: 7.776,
    13: 7.107, 14: 6.601, 15: 6.144, 16: 5.86, 17: 5.562, 18: 5.27, 19: 5.094, 20: 4.877, 21: 4.755,
    22: 4.586, 23: 4.482, 24: 4.342, 25: 4.26, 26: 4.158, 27: 4.067, 28: 3.992, 29: 3.923, 30: 3.882,
    31: 3.795, 32: 3.734, 33: 3.693, 34: 3.625, 35: 3.592, 36: 3.54, 37: 3.479, 38: 3.473, 39: 3.438,
    40: 3.39, 41: 3.36, 42: 3.338, 43: 3.303, 44: 3.264, 45: 3.252, 46: 3.222, 47: 3.195, 48: 3.169,
    49: 3.143, 50: 3.124, 51: 3.096, 52: 3.085, 53: 3.06, 54: 3.044, 55: 3.03, 56: 3.013, 57: 2.992,
    58: 2.975, 59: 2.96, 60: 2.947, 70: 2.81, 80: 2.721, 90: 2.644, 100: 2.584, 120: 2.487, 150: 2.387,
    200: 2.283, 250: 2.217, 300: 2.167, 400: 2.102, 500: 2.059, 700: 2.006, 1000: 1.96
}


def median(xs) -> float:
    return float(np.median(np.asarray(xs, dtype=float)))


def percentile(xs, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    return float(np.percentile(np.asarray(xs, dtype=float), q))


def cv(xs) -> float | None:
    """Coefficient of variation with the sample standard deviation (ddof=1)."""
    a = np.asarray(xs, dtype=float)
    if a.size < 2 or a.mean() == 0:
        return None
    return float(a.std(ddof=1) / a.mean())


def bootstrap_ci_median(xs, conf: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED) -> list[float] | None:
    a = np.asarray(xs, dtype=float)
    if a.size < 2:
        return None
    rng = np.random.default_rng(seed)
    # the resamples drawn BOOTSTRAP_CHUNK values at a time: the same draws, in
    # the same order, as one (resamples, n) array, which at 1,000 processes
    # took 240 MB (tests/test_stats.py checks the draws are the same)
    rows = max(1, BOOTSTRAP_CHUNK // a.size)
    meds = np.concatenate([np.median(a[rng.integers(0, a.size, size=(min(rows, resamples - i), a.size))], axis=1)
                           for i in range(0, resamples, rows)])
    lo, hi = np.percentile(meds, [(1 - conf) / 2 * 100, (1 + conf) / 2 * 100])
    return [float(lo), float(hi)]


def mad_outliers(xs, k: float = OUTLIER_MADS, min_rel: float = 0.0) -> list[int]:
    """Indices of the lone values further than k scaled MADs from the median
    of their level, and further than min_rel of it.

    A level is never outliers: processes that landed on another level of
    cost (a layout, a frequency) are the distribution, and flagging them
    would tell the reader to discard a share of the data
    (docs/statistics.md). So where the values have two levels (levels()),
    each level is taken on its own, with its own median and MAD, if it holds
    OWN_FENCE_MIN values (fewer say nothing about their own spread); and
    values beyond the same fence that stand together (each within k MADs of
    the next, at least LEVEL_MIN_PROCESSES of them) are a level the test
    could not confirm, not outliers."""
    a = np.asarray(xs, dtype=float)
    if a.size < 3:
        return []
    lv = levels(a, separate=False)   # a split is enough to keep a level's members from being outliers
    groups = [np.asarray(d["processes"]) for d in lv["levels"]] if lv else [np.arange(a.size)]
    out: list[int] = []
    for g in groups:
        if lv and g.size < OWN_FENCE_MIN:
            continue
        med = np.median(a[g])
        mad = 1.4826 * np.median(np.abs(a[g] - med))
        if mad == 0:
            continue
        for side in (-1.0, 1.0):
            dev = side * (a[g] - med)
            beyond = g[(dev > k * mad) & (dev > min_rel * abs(med))]
            beyond = beyond[np.argsort(a[beyond], kind="stable")]
            # chains of values within k MADs of their neighbour: a chain of one is an outlier
            cuts = np.nonzero(np.diff(a[beyond]) > k * mad)[0] + 1
            out += [int(i) for c in np.split(beyond, cuts) if c.size < LEVEL_MIN_PROCESSES for i in c]
    return sorted(out)


def _level_split(y: np.ndarray, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Engelman & Hartigan's statistic for each row of y (rows sorted): the
    largest between-group over within-group sum of squares over the splits
    of a row into its k smallest and n - k largest values, each group at
    least min_size; and that k. A row without spread has statistic 0; a
    split into groups without spread, infinity."""
    r, n = y.shape
    y = y - y.mean(axis=1, keepdims=True)   # centred: the sums below lose no digits
    c1, c2 = np.cumsum(y, axis=1), np.cumsum(y * y, axis=1)
    ks = np.arange(min_size, n - min_size + 1)
    w = (c2[:, ks - 1] - c1[:, ks - 1] ** 2 / ks
         + (c2[:, -1:] - c2[:, ks - 1]) - (c1[:, -1:] - c1[:, ks - 1]) ** 2 / (n - ks))
    total = c2[:, -1:] - c1[:, -1:] ** 2 / n
    w = np.maximum(w, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(total > 0, (total - w) / w, 0.0)
    best = np.argmax(f, axis=1)
    return f[np.arange(r), best], ks[best]


def level_null(n: int, q: float, reps: int, seed: int, min_size: int = LEVEL_MIN_PROCESSES) -> float:
    """The q quantile of the statistic for n normal values (its null: one
    level with normal spread), by seeded simulation; LEVEL_CRITICAL holds
    its values at q = 1 - LEVEL_ALPHA (validation/stats/bimodal.py --table)."""
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, reps, max(1, 2_000_000 // n)):
        m = min(reps - start, max(1, 2_000_000 // n))
        out.append(_level_split(np.sort(rng.standard_normal((m, n)), axis=1), min_size)[0])
    return float(np.quantile(np.concatenate(out), q))


def level_critical(n: int) -> float | None:
    """The 99% point of the statistic for n values of one level (None below
    two levels of LEVEL_MIN_PROCESSES); between the tabulated sizes, linear
    in log n; beyond the largest, the largest's (the point falls with n, so
    that errs towards no flag)."""
    if n < 2 * LEVEL_MIN_PROCESSES:
        return None
    if n in LEVEL_CRITICAL:
        return LEVEL_CRITICAL[n]
    ns = sorted(LEVEL_CRITICAL)
    if n >= ns[-1]:
        return LEVEL_CRITICAL[ns[-1]]
    hi = next(m for m in ns if m > n)
    lo = max(m for m in ns if m < n)
    t = (np.log(n) - np.log(lo)) / (np.log(hi) - np.log(lo))
    return float(LEVEL_CRITICAL[lo] + t * (LEVEL_CRITICAL[hi] - LEVEL_CRITICAL[lo]))


def levels(xs, separate: bool = True) -> dict | None:
    """Two levels of cost among the values (process medians), or None.

    The best split of the sorted log values into two groups of at least
    LEVEL_MIN_PROCESSES, kept when its between/within sum-of-squares ratio
    is beyond the 99% point for one normal level (level_critical), the two
    groups are separate levels (the dip test rejects one level, p under
    LEVEL_DIP_ALPHA, or their gap is LEVEL_GAP times the wider group's
    spread; separate=False: not asked, for mad_outliers, which only must
    not flag a level's members) and the two groups' medians lie at least
    LEVEL_MIN_REL apart. Levels are listed
    by share, the larger first: {"n", "share", "median_ns", "of_median",
    "processes" (indices)}; `cv_within` is the pooled spread of the logs
    inside the levels (what `cv` would be without them)."""
    a = np.asarray(xs, dtype=float)
    n = a.size
    crit = level_critical(n)
    if crit is None or not np.all(np.isfinite(a)) or a.min() <= 0:
        return None
    order = np.argsort(a, kind="stable")
    y = np.log(a[order])
    stat, k = (float(v[0]) for v in _level_split(y[None, :], LEVEL_MIN_PROCESSES))
    if not stat > crit:
        return None
    k = int(k)
    dip_p = _dip_p(y)
    spread = max(_robust_sd(y[:k]), _robust_sd(y[k:]))
    gap = float(y[k] - y[k - 1])
    if separate and not (dip_p < LEVEL_DIP_ALPHA or gap >= LEVEL_GAP * spread):
        return None
    groups = [order[:k], order[k:]]
    meds = [float(np.median(a[g])) for g in groups]
    if meds[1] < (1 + LEVEL_MIN_REL) * meds[0]:
        return None
    mid = float(np.median(a))
    within = sum(float(((y[s] - y[s].mean()) ** 2).sum()) for s in (slice(0, k), slice(k, n)))
    lv: list[dict] = [{"n": int(g.size), "share": g.size / n, "median_ns": m, "of_median": m / mid,
                       "processes": sorted(int(i) for i in g)} for g, m in zip(groups, meds)]
    lv.sort(key=lambda d: (-d["n"], -d["median_ns"]))
    return {"levels": lv, "statistic": stat if np.isfinite(stat) else None, "critical": crit,
            "alpha": LEVEL_ALPHA, "dip_p": dip_p, "cv_within": float(np.sqrt(within / (n - 2)))}


def _robust_sd(v: np.ndarray) -> float:
    """A level's own spread: its MAD as an SD (a level's tail does not widen
    it); of two values, their range over d2 = 1.128."""
    if v.size > 2:
        return MAD_SD * float(np.median(np.abs(v - np.median(v))))
    return float(np.ptp(v)) / 1.128


def _dip_p(y: np.ndarray) -> float:
    """Hartigan's dip test of unimodality on sorted values: its p (the
    package's table, interpolated)."""
    return float(diptest.diptest(np.asarray(y, dtype=float), sort_x=False)[1])


def _per_op(samples: list[dict], key: str, side: str | None = None) -> float | None:
    """CPU time per op over a whole process: getrusage is tick-sampled, so a
    sum over all batches is far less noisy than a median of per-batch values."""
    total, iters = 0.0, 0
    for s in samples:
        src = s.get(side) if side else s
        if not src or key not in src:
            return None
        total += src[key]
        iters += s["iters"] * s.get("ops_per_iter", 1)  # operations, when an iteration holds several
    return total / iters if iters else None


def process_stats(samples: list[dict], header: dict | None = None) -> dict:
    """One process: the median batch by its figure (model.batch_figures:
    time on the CPU, or wall time less the waiting, or wall time) and by
    wall time, and its CPU time per op. Pass its header (it says whether
    the benchmark blocks)."""
    ns = [s["ns_per_op"] for s in samples]
    figure, med = process_figure(samples, header)   # the figure of a process, defined once (model)
    out: dict = {
        "median_ns": med,
        "median_wall_ns": process_median_wall(samples),
        "figure": figure,
        "median_tsc": median([s["tsc_per_op"] for s in samples]),
        "user_ns_per_op": _per_op(samples, "user_ns"),
        "sys_ns_per_op": _per_op(samples, "sys_ns"),
        "helper_user_ns_per_op": _per_op(samples, "user_ns", "helper"),
        "helper_sys_ns_per_op": _per_op(samples, "sys_ns", "helper"),
    }
    counters: dict[str, object] = {}
    for name in (samples[0].get("counters") or {}) if samples else {}:
        vals = [s["counters"][name] for s in samples]
        nums = [v for v in vals if isinstance(v, (int, float))]
        counters[name] = median(nums) if len(nums) == len(vals) else next(v for v in vals if isinstance(v, str))
    if counters:
        out["counters"] = counters
    # Warm-up effect: the first three measured batches against the rest.
    if len(ns) >= 6:
        out["slow_start"] = median(ns[:3]) > SLOW_START * median(ns[3:])
    return out


class Digest:
    """What the summary of one variant needs of its processes, taken one
    process at a time (add) and the process's batches then dropped: each
    process's statistics (process_stats), its auxiliary cost (model.facts),
    its header and the runner's facts about it; and, over every batch, the
    counts and sums of contention and flags and the pooled counter running
    shares, accumulated in the order they have always been (the same figures
    to the last bit). summarize adds a list of processes; a store's reader
    adds each process as it reads it, so a run of 10^6 samples is never held
    whole (issue 38)."""

    def __init__(self) -> None:
        self.procs: list[dict] = []     # each process with measured batches, without its batches
        self.stats: list[dict] = []     # process_stats of each
        self.aux: list[float] = []      # model.aux_median of each that has one
        self.seen = 0                   # processes added, with batches or not
        self.n_samples = self.migrated = self.steal = 0
        self.lost = self.wall = 0.0     # contention: over the batches that carry run delay
        self.batches = self.over = self.nivcsw = 0
        self.paired = False
        self.fraction_range: tuple[float, float] | None = None   # counters_running_fraction
        self.running: dict[str, list[float]] = {}   # counters_running, every batch's, pooled

    @classmethod
    def of(cls, processes: list[dict]) -> "Digest":
        d = cls()
        for p in processes:
            d.add(p)
        return d

    def add(self, p: dict) -> None:
        """One process ({"header", "samples" (measured only), round...})."""
        self.seen += 1
        samples = p.get("samples") or []
        if not samples:
            return
        header = p.get("header")
        self.procs.append({k: v for k, v in p.items() if k not in ("samples", "warmup")})
        self.stats.append(process_stats(samples, header))
        aux = aux_median(samples)
        if aux is not None:
            self.aux.append(aux)
        self.n_samples += len(samples)
        cpus = (header or {}).get("cpus") or []
        same = len(cpus) > 1 and cpus[0] == cpus[1]
        self.paired = self.paired or same
        self._batches(samples, same, header["cpus"][0] if header else None)

    def _batches(self, samples: list[dict], same: bool, want: object) -> None:
        """One process's batches into the sums and counts over every batch,
        one after the other as they have always been summed (kept in locals
        for speed: a run of 10^6 batches)."""
        lost, wall, batches, over, nivcsw = self.lost, self.wall, self.batches, self.over, self.nivcsw
        migrated, steal, running = self.migrated, self.steal, self.running
        for s in samples:
            shares = s.get("counters_running")
            if shares:
                for name, fr in shares.items():
                    running.setdefault(name, []).append(fr)
            x = batch_lost_ns(s, same)
            if x is not None and s.get("wall_ns"):
                batches += 1
                lost += x
                wall += s["wall_ns"]
                over += x > CONTENDED_BATCH_SHARE * s["wall_ns"]
                nivcsw += s.get("nivcsw", 0) + (s.get("helper") or {}).get("nivcsw", 0)
            before = s["cpu_before"]
            if before != s["cpu_after"] or (want is not None and before != want):
                migrated += 1
            if s.get("steal_ticks", 0) > 0:
                steal += 1
            if "counters_running_fraction" in s:
                fr = s["counters_running_fraction"]
                lo, hi = self.fraction_range or (fr, fr)
                self.fraction_range = (min(lo, fr), max(hi, fr))
        self.lost, self.wall, self.batches, self.over, self.nivcsw = lost, wall, batches, over, nivcsw
        self.migrated, self.steal = migrated, steal

    def contention(self) -> dict | None:
        """How much of the measured time the processes lost waiting for their
        CPU (another task had it): the share over all measured batches, how many
        batches lost more than CONTENDED_BATCH_SHARE, and the involuntary
        switches per batch. None when no sample carries run delay (an older
        probe, or a kernel without schedstat: the probe's header says why)."""
        if not self.batches:
            return None
        return {"lost_share": self.lost / self.wall if self.wall else 0.0, "batches": self.batches,
                "batches_over": self.over, "batch_share_threshold": CONTENDED_BATCH_SHARE,
                "involuntary_switches_per_batch": self.nivcsw / self.batches,
                "method": "wall time less the CPU time of the measuring thread and its helper on the same CPU"
                if self.paired else "run delay (schedstat) of the measuring thread, plus its helper's"}

    def running_fractions(self) -> dict:
        """summary["counters_running"]: for each counter that was multiplexed in
        any measured batch, the median share of the batch it was counting."""
        return {k: median(v) for k, v in self.running.items()}

    def summary(self) -> dict:
        """The statistics of the `summary` of opcost.result/1 (what the
        processes were, from their headers, is model.facts)."""
        stats = self.stats
        if not stats:
            return {"n_processes": 0}
        meds = [s["median_ns"] for s in stats]
        walls = [s["median_wall_ns"] for s in stats]
        figures = {s["figure"] for s in stats}
        summary: dict = {
            "median_ns": median(meds),
            "ci95_ns": bootstrap_ci_median(meds),
            "min_ns": float(min(meds)),
            "p90_ns": percentile(meds, 90),
            "cv": cv(meds),
            "median_cycles": median([s["median_tsc"] for s in stats]),
            "n_processes": len(stats),
            "n_samples": self.n_samples,
            "process_medians_ns": meds,
            # which figure the medians above are of (model.figure_of), and the
            # median by wall time, waiting included, beside it
            "figure": figures.pop() if len(figures) == 1 else FIGURE_MIXED,
            "median_wall_ns": median(walls),
            "user_ns_per_op": _med_or_none(s["user_ns_per_op"] for s in stats),
            "sys_ns_per_op": _med_or_none(s["sys_ns_per_op"] for s in stats),
        }
        hu = _med_or_none(s["helper_user_ns_per_op"] for s in stats)
        if hu is not None:
            summary["helper_user_ns_per_op"] = hu
            summary["helper_sys_ns_per_op"] = _med_or_none(s["helper_sys_ns_per_op"] for s in stats)
        cpu_parts = [summary.get(k) for k in ("user_ns_per_op", "sys_ns_per_op", "helper_user_ns_per_op",
                                                "helper_sys_ns_per_op")]
        if all(v is not None for v in cpu_parts[:2]):
            summary["cpu_ns_per_op"] = sum(v for v in cpu_parts if v is not None)
        counters = _summarize_counters(stats)
        if counters:
            summary["counters"] = counters
        cont = self.contention()
        if cont is not None:
            summary["contention"] = cont
        boots = boot_spread(self.procs, meds)
        if boots is not None:
            summary["boots"] = boots
        summary["flags"] = flags(self, summary)
        return summary


def _med_or_none(xs):
    xs = [x for x in xs if x is not None]
    return median(xs) if xs else None


def summarize(processes: list[dict]) -> dict:
    """processes: [{"header": {...}, "samples": [...]}, ...] with measured
    samples only. Returns the statistics of the `summary` of opcost.result/1
    (Digest.summary)."""
    return Digest.of(processes).summary()


MAD_SD = 1.4826   # a normal distribution's standard deviation over its median absolute deviation


def boot_spread(procs: list[dict], figures: list[float]) -> dict | None:
    """How much the probe processes of one boot vary against how much the
    boots do (vm target, --vm-procs N > 1: each process record is one boot,
    `figures` its figures, header.vm.processes[].median_ns the medians of the
    processes pooled into it). On log medians, so the spreads are shares of
    the cost: within_boot_mad from each process's distance to its boot's
    median of them, between_boot_mad over the boots' figures (it still holds
    1/N of the within-boot variance), and between_share the intraclass
    correlation ICC(1) from scipy's one-way ANOVA F over the boots: the share
    of a process's variance that is the boot's (0: boots are alike, 1: the
    processes of a boot are). None below 2 boots of 2 processes.
    docs/statistics.md ("boots and processes")."""
    groups, figs = [], []
    for p, fig in zip(procs, figures):
        meds = [q.get("median_ns") for q in ((p.get("header") or {}).get("vm") or {}).get("processes") or []]
        if len(meds) >= 2 and all(isinstance(m, (int, float)) and m > 0 for m in meds) and fig > 0:
            groups.append(np.log(np.asarray(meds, dtype=float)))
            figs.append(fig)
    if len(groups) < 2:
        return None
    within = np.concatenate([g - np.median(g) for g in groups])
    lf = np.log(np.asarray(figs))
    sizes = [len(g) for g in groups]
    total = sum(sizes)
    ss_within = float(sum(((g - g.mean()) ** 2).sum() for g in groups))
    ss_between = float(sum(len(g) * (g.mean() - np.concatenate(groups).mean()) ** 2 for g in groups))
    if ss_within <= 0:
        share = None if ss_between <= 0 else 1.0   # no spread inside the boots: all of it is between them
    else:
        from scipy import stats as sps   # scipy.stats takes seconds to load: only for the bootstrap spread

        f = float(sps.f_oneway(*groups).statistic)
        n0 = (total - sum(n * n for n in sizes) / total) / (len(groups) - 1)
        share = min(1.0, max(0.0, (f - 1) / (f + n0 - 1)))
    return {"n_boots": len(groups), "processes_per_boot": sorted(set(sizes)),
            "within_boot_mad": MAD_SD * float(np.median(np.abs(within))),
            "between_boot_mad": MAD_SD * float(np.median(np.abs(lf - np.median(lf)))),
            "between_share": share,
            "method": "log medians: MAD (x1.4826) of each process from its boot's median, and of the boots' "
                      "figures; between_share: ICC(1) of a one-way ANOVA over the boots (scipy f_oneway), "
                      "clipped to [0, 1]"}


_EXCLUDED = {"cpu": "the figure (time on the CPU) leaves it out; wall time includes it",
             "wall-less-waiting": "the figure (wall time less that waiting) leaves it out; wall time includes it",
             "mixed": "the figure leaves it out where the benchmark allows; wall time includes it"}


def _summarize_counters(stats: list[dict]) -> dict:
    names: list[str] = []
    for s in stats:
        for n in s.get("counters", {}):
            if n not in names:
                names.append(n)
    out = {}
    for n in names:
        vals = [s.get("counters", {}).get(n) for s in stats]
        nums = [v for v in vals if isinstance(v, (int, float))]
        out[n] = median(nums) if nums else next((v for v in vals if isinstance(v, str)), None)
    return out


def restore_note(procs: list[dict]) -> dict | None:
    """The note on a counting run's guests restored from a snapshot
    (targets/vm/restore.py): how many processes ran in one, and the restores
    that failed and booted fresh; None when none was tried."""
    rest = [r for p in procs for r in [((p.get("header") or {}).get("vm") or {}).get("restore")] if r]
    restored = sum(r.get("way") == "restored" for r in rest)
    failed = [r["restore_failed"] for r in rest if r.get("restore_failed")]
    if not (restored or failed):
        return None
    return {"flag": "boot restored", "restored": restored, "restore_failed": len(failed),
            "detail": f"{restored} of {len(rest)} process(es) ran in a guest restored from a snapshot of its "
                      "machine's first boot (exact counts need no new boot; --vm-restore off boots each fresh)"
                      + (f"; {len(failed)} restore(s) failed and booted fresh: {failed[-1]}" if failed else "")}


def flags(d: Digest, summary: dict) -> list[dict]:
    """Everything a reader must know before trusting the number (d: the
    variant's processes, summary: their statistics so far)."""
    out: list[dict] = []
    procs, stats = d.procs, d.stats
    migrated, steal, total = d.migrated, d.steal, d.n_samples
    if migrated:
        out.append({"flag": "migrations", "detail": f"{migrated} of {total} batches ran off the pinned CPU"})
    if steal:
        out.append({"flag": "steal", "detail": f"{steal} of {total} batches saw hypervisor steal time"})
    c = summary.get("cv")
    if c is not None and summary["n_processes"] >= 3 and c > UNSTABLE_CV:
        out.append({"flag": "unstable", "detail": f"CV of process medians {c:.1%} > {UNSTABLE_CV:.0%}"})
    meds = summary["process_medians_ns"]
    mid = summary["median_ns"]
    lv = levels(meds)
    if lv:
        out.append({"flag": "bimodal", "detail": f"{len(lv['levels'])} levels, " + ", ".join(
                        f"{d['share']:.0%} at {d['of_median']:.2f}x" for d in lv["levels"])
                    + f" of the median (spread within the levels {lv['cv_within']:.1%}; the CV counts both)",
                    "levels": [{k: d[k] for k in ("share", "median_ns", "of_median", "n", "processes")}
                               for d in lv["levels"]],
                    "cv_within": lv["cv_within"], "statistic": lv["statistic"], "critical": lv["critical"]})
    outl = mad_outliers(meds, min_rel=OUTLIER_MIN_REL)
    if outl:
        # each from the median of its level (the median of all when one level)
        centre = {i: d["median_ns"] for d in (lv["levels"] if lv else []) for i in d["processes"]}
        out.append({"flag": "outliers", "detail": f"{len(outl)} process(es) beyond {OUTLIER_MADS:g} MADs and "
                    f"{OUTLIER_MIN_REL:.0%} off the median{' of their level' if lv else ''}: " + ", ".join(
                        f"#{i} ({meds[i] / centre.get(i, mid) - 1:+.1%})" for i in outl),
                    "processes": outl, "rounds": [procs[i].get("round") for i in outl]})
    slow = [bool(s.get("slow_start")) for s in stats if "slow_start" in s]
    if slow and sum(slow) * 2 > len(slow):
        out.append({"flag": "no steady state",
                    "detail": f"first batches >{SLOW_START - 1:.0%} slower in {sum(slow)} of {len(slow)} processes: "
                              "raise --warmup"})
    cont = summary.get("contention")
    if cont and cont["batches_over"] > CONTENDED_BATCHES * cont["batches"]:
        figure = summary.get("figure", FIGURE_WALL)   # what the waiting is, or is not, part of
        out.append({"flag": "contended", "lost_share": cont["lost_share"],
                    "detail": f"{cont['lost_share']:.1%} of the measured time lost waiting for the CPU ("
                              + ("neither the measuring thread nor its helper on the same CPU ran: another task did"
                                 if cont["method"].startswith("wall") else "run delay: runnable, another task running")
                              + f"); {cont['batches_over']} of {cont['batches']} batches "
                              f"lost > {CONTENDED_BATCH_SHARE:.0%}, {cont['involuntary_switches_per_batch']:.1f} "
                              "involuntary switches per batch: " + _EXCLUDED.get(figure, "the figure includes that waiting"),
                    **({"in_figure": False} if figure in _EXCLUDED else {})})
    retried = [(p.get("round"), x) for p in procs for x in ((p.get("header") or {}).get("vm") or {}).get("retries") or []]
    if retried:   # the vm target killed a hung boot and booted again in the same round (targets/vm/supervise.py)
        out.append({"flag": "boot retried", "rounds": sorted({r for r, _ in retried if r is not None}),
                    "detail": f"{len(retried)} boot(s) hung and were retried in their round (round "
                              + ", ".join(str((r or 0) + 1) for r, _ in retried) + "): "
                              + str(retried[-1][1].get("cause", "")).split("; the console")[0]
                              + "".join(f"; {x['gave_up']}" for _, x in retried if x.get("gave_up"))})
    note = restore_note(procs)
    if note:
        out.append(note)
    emus = sorted({p["header"]["emulator"] for p in procs if (p.get("header") or {}).get("emulator")})
    if emus:
        out.append({"flag": "emulated", "detail": f"ran under {', '.join(emus)}: the timings are the emulator's, "
                    "not this CPU's cost of the operation (use them for correctness only)"})
    if d.fraction_range is not None:
        lo, hi = d.fraction_range
        out.append({"flag": "multiplexed", "detail": f"counters ran {lo:.0%}-{hi:.0%} of the time; scaled"})
    return out

