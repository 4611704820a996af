"""`--parallel N`: N copies of a benchmark at once, one per CPU, like
will-it-scale. Each round of a variant runs its usual single process and N
concurrent copies (in a random order); copy i is pinned to the i-th allowed
CPU, wrapping around when N exceeds the CPUs (then copies share a CPU and
the report says so). The probe is unchanged: every copy is a normal probe run
with --cpu.

Throughput of a process is the operations it executed over the wall time
from its first to its last batch used, so descheduled time counts (copies
sharing a CPU), as in will-it-scale. Per round: per-copy throughput = the mean over the
copies, total = their sum, efficiency = per-copy throughput / the throughput
of that round's single process (paired, so slow drift cancels). Across rounds:
medians. The copies are started together (one fork after the other) but each
calibrates alone, so their measured batches begin a few ms apart; the overlap
of the copies' measuring windows is measured and reported, and flagged when
it is under 90%.
"""

from __future__ import annotations

from .model import process_median

LOW_OVERLAP = 0.9


def place(n: int, cpus: list[int]) -> tuple[list[int], bool]:
    """Copy i on cpus[i % len(cpus)] (the target's allowed CPUs); wrapped is
    True when copies share CPUs."""
    return [cpus[i % len(cpus)] for i in range(n)], n > len(cpus)


def spans(res) -> list[tuple[float, float]]:
    """(start, end) of every measured batch in seconds of CLOCK_MONOTONIC_RAW,
    which every process on the machine shares: from the probe's own
    `start_raw_ns` and `wall_ns`; from the arrival times of the lines when the
    probe is older (coarse: a busy reader gets several lines at once)."""
    if res.samples and all("start_raw_ns" in s for s in res.samples):
        return [(s["start_raw_ns"] / 1e9, (s["start_raw_ns"] + s["wall_ns"]) / 1e9) for s in res.samples]
    if len(res.sample_spans) == len(res.samples):
        return list(res.sample_spans)
    return []


def common_window(results: list) -> tuple[float, float] | None:
    """The span in which every copy was running measured batches: from the
    latest first-batch start to the earliest last-batch end (None if empty)."""
    spans_ = [spans(r) for r in results]
    if not all(spans_):
        return None
    lo = max(s[0][0] for s in spans_)
    hi = min(s[-1][1] for s in spans_)
    return (lo, hi) if hi > lo else None


def rate(samples: list[dict], header: dict | None) -> float | None:
    """Operations per second of wall time over a run of batches: the
    operations they executed over the span from the first one's start to the
    last one's end, so time the process spent descheduled (copies sharing a
    CPU) counts against it, as in will-it-scale. A fake clock has no real
    wall time: 1e9 / median ns per op then."""
    if not samples:
        return None
    header = header or {}
    if header.get("fake_clock") or not all("start_raw_ns" in s for s in samples):
        ns = process_median(samples, header)
        return 1e9 / ns if ns > 0 else None
    opi = header.get("ops_per_iter") or 1
    ops = sum(s["iters"] for s in samples) * opi
    span_ns = samples[-1]["start_raw_ns"] + samples[-1]["wall_ns"] - samples[0]["start_raw_ns"]
    return ops * 1e9 / span_ns if span_ns > 0 else None


def copy_result(copy: int, cpu: int, res, window: tuple[float, float] | None) -> dict:
    """One copy's throughput over the batches that ran while every copy was
    measuring (all its batches if there were none: then concurrent is False)."""
    sp = spans(res) or [(0.0, 0.0)] * len(res.samples)
    inside = [s for s, (a, b) in zip(res.samples, sp) if window and a >= window[0] and b <= window[1]]
    used = inside or res.samples
    ns = process_median(used, res.header) if used else None
    migrated = sum(1 for s in used if s["cpu_before"] != cpu or s["cpu_after"] != cpu)
    return {"copy": copy, "cpu": cpu, "median_ns": ns, "ops_per_s": rate(used, res.header),
            "n_samples": len(res.samples), "n_concurrent": len(inside), "concurrent": bool(inside),
            "iters": (res.header or {}).get("iters"), "migrated_batches": migrated,
            "start_s": sp[0][0] if sp else None, "end_s": sp[-1][1] if sp else None,
            "wall_s": round(res.wall_s, 4)}


def overlap(copies: list[dict]) -> float | None:
    """Share of the copies' joint measuring span (first batch start to last
    batch end over all copies) during which all of them were measuring."""
    starts = [c["start_s"] for c in copies if c.get("start_s") is not None]
    ends = [c["end_s"] for c in copies if c.get("end_s") is not None]
    if len(starts) != len(copies) or len(ends) != len(copies):
        return None
    span = max(ends) - min(starts)
    return max(0.0, min(ends) - max(starts)) / span if span > 0 else None
