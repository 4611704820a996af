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

import numpy as np  # noqa: E402

from .model import (FIGURE_MIXED, FIGURE_WALL, batch_lost_ns, figure_of, process_median,  # noqa: E402,F401
                    process_median_wall)

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20240229
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
    idx = rng.integers(0, a.size, size=(resamples, a.size))
    meds = np.median(a[idx], axis=1)
    lo, hi = np.percentile(meds, [(1 - conf) / 2 * 100, (1 + conf) / 2 * 100])
    return [float(lo), float(hi)]


def mad_outliers(xs, k: float = OUTLIER_MADS) -> list[int]:
    """Indices further than k scaled MADs from the median."""
    a = np.asarray(xs, dtype=float)
    if a.size < 3:
        return []
    med = np.median(a)
    mad = 1.4826 * np.median(np.abs(a - med))
    if mad == 0:
        return []
    return [int(i) for i in np.nonzero(np.abs(a - med) > k * mad)[0]]


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
    out: dict = {
        "median_ns": process_median(samples, header),   # the figure of a process, defined once (model)
        "median_wall_ns": process_median_wall(samples),
        "figure": figure_of(samples, header),
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


def contention(procs: list[dict]) -> dict | None:
    """How much of the measured time the processes lost waiting for their
    CPU (another task had it): the share over all measured batches, how many
    batches lost more than CONTENDED_BATCH_SHARE, and the involuntary
    switches per batch. None when no sample carries run delay (an older
    probe, or a kernel without schedstat: the probe's header says why)."""
    lost = wall = 0.0
    n = over = 0
    nivcsw = 0
    paired = False
    for p in procs:
        cpus = (p.get("header") or {}).get("cpus") or []
        same = len(cpus) > 1 and cpus[0] == cpus[1]
        paired = paired or same
        for s in p["samples"]:
            x = batch_lost_ns(s, same)
            if x is None or not s.get("wall_ns"):
                continue
            n += 1
            lost += x
            wall += s["wall_ns"]
            over += x > CONTENDED_BATCH_SHARE * s["wall_ns"]
            nivcsw += s.get("nivcsw", 0) + (s.get("helper") or {}).get("nivcsw", 0)
    if not n:
        return None
    return {"lost_share": lost / wall if wall else 0.0, "batches": n, "batches_over": over,
            "batch_share_threshold": CONTENDED_BATCH_SHARE, "involuntary_switches_per_batch": nivcsw / n,
            "method": "wall time less the CPU time of the measuring thread and its helper on the same CPU" if paired
            else "run delay (schedstat) of the measuring thread, plus its helper's"}


def _med_or_none(xs):
    xs = [x for x in xs if x is not None]
    return median(xs) if xs else None


def summarize(processes: list[dict]) -> dict:
    """processes: [{"header": {...}, "samples": [...]}, ...] with measured
    samples only. Returns the statistics of the `summary` of opcost.result/1
    (what the processes were, from their headers, is model.facts)."""
    procs = [p for p in processes if p.get("samples")]
    if not procs:
        return {"n_processes": 0}
    stats = [process_stats(p["samples"], p.get("header")) for p in procs]
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
        "n_processes": len(procs),
        "n_samples": sum(len(p["samples"]) for p in procs),
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
    cont = contention(procs)
    if cont is not None:
        summary["contention"] = cont
    summary["flags"] = flags(procs, stats, summary)
    if summary["figure"] != FIGURE_WALL:
        for f in summary["flags"]:
            if f["flag"] == "contended":
                # flags() says what the wall figure does; this figure leaves the waiting out
                f["detail"] = f["detail"].replace("the figure includes that waiting", _EXCLUDED[summary["figure"]])
                f["in_figure"] = False
    return summary


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


def flags(procs: list[dict], stats: list[dict], summary: dict) -> list[dict]:
    """Everything a reader must know before trusting the number."""
    out: list[dict] = []
    migrated = steal = total = 0
    for p in procs:
        want = p["header"]["cpus"][0] if p.get("header") else None
        for s in p["samples"]:
            total += 1
            if s["cpu_before"] != s["cpu_after"] or (want is not None and s["cpu_before"] != want):
                migrated += 1
            if s.get("steal_ticks", 0) > 0:
                steal += 1
    if migrated:
        out.append({"flag": "migrations", "detail": f"{migrated} of {total} batches ran off the pinned CPU"})
    if steal:
        out.append({"flag": "steal", "detail": f"{steal} of {total} batches saw hypervisor steal time"})
    c = summary.get("cv")
    if c is not None and summary["n_processes"] >= 3 and c > UNSTABLE_CV:
        out.append({"flag": "unstable", "detail": f"CV of process medians {c:.1%} > {UNSTABLE_CV:.0%}"})
    meds = summary["process_medians_ns"]
    mid = summary["median_ns"]
    outl = [i for i in mad_outliers(meds) if mid and abs(meds[i] / mid - 1) > OUTLIER_MIN_REL]
    if outl:
        out.append({"flag": "outliers", "detail": f"{len(outl)} process(es) beyond {OUTLIER_MADS:g} MADs and "
                    f"{OUTLIER_MIN_REL:.0%} off the median: " + ", ".join(
                        f"#{i} ({meds[i] / mid - 1:+.1%})" for i in outl),
                    "processes": outl, "rounds": [procs[i].get("round") for i in outl]})
    slow = [bool(s.get("slow_start")) for s in stats if "slow_start" in s]
    if slow and sum(slow) * 2 > len(slow):
        out.append({"flag": "no steady state",
                    "detail": f"first batches >{SLOW_START - 1:.0%} slower in {sum(slow)} of {len(slow)} processes: "
                              "raise --warmup"})
    cont = summary.get("contention")
    if cont and cont["batches_over"] > CONTENDED_BATCHES * cont["batches"]:
        out.append({"flag": "contended", "lost_share": cont["lost_share"],
                    "detail": f"{cont['lost_share']:.1%} of the measured time lost waiting for the CPU ("
                              + ("neither the measuring thread nor its helper on the same CPU ran: another task did"
                                 if cont["method"].startswith("wall") else "run delay: runnable, another task running")
                              + f"); {cont['batches_over']} of {cont['batches']} batches "
                              f"lost > {CONTENDED_BATCH_SHARE:.0%}, {cont['involuntary_switches_per_batch']:.1f} "
                              "involuntary switches per batch: the figure includes that waiting"})
    emus = sorted({p["header"]["emulator"] for p in procs if (p.get("header") or {}).get("emulator")})
    if emus:
        out.append({"flag": "emulated", "detail": f"ran under {', '.join(emus)}: the timings are the emulator's, "
                    "not this CPU's cost of the operation (use them for correctness only)"})
    fr = [s.get("counters_running_fraction") for p in procs for s in p["samples"] if "counters_running_fraction" in s]
    if fr:
        out.append({"flag": "multiplexed", "detail": f"counters ran {min(fr):.0%}-{max(fr):.0%} of the time; scaled"})
    return out

