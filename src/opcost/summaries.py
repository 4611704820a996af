"""The summary of one variant (`summary` of opcost.result/1): the statistics
of its processes (stats), the facts of their headers (model.facts), the
derived counter metrics and the --parallel rounds; and the summaries of a
stored run that never got them. The runner calls it at the end of a run; the
store's readers when a stored run is behind (`load_run(..., summaries=True)`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .budget import summary_of as budget_summary
from .counters import _names, evaluate
from .model import Summary, with_facts
from .parallel import LOW_OVERLAP, overlap, rate

if TYPE_CHECKING:
    from .stats import Digest


def summarize_variant(processes: list[dict], derived: list | None = None, parallel_rounds: list | None = None,
                      copies: int = 1) -> dict:
    """The summary of one variant from its processes (statistics, facts, derived
    metrics, --parallel rounds): what a run stores at its end and what a
    reader computes for a run that never got there."""
    from .stats import Digest   # numpy: when a summary is computed, not when this module loads

    return summarize_digest(Digest.of(processes),
                            (lambda: derive(processes, derived)) if derived else None,
                            (lambda: summarize_parallel(parallel_rounds, processes, copies)) if parallel_rounds
                            else None)


def summarize_digest(d: Digest, derived: Callable[[], dict] | None = None,
                     parallel: Callable[[], dict] | None = None) -> dict:
    """The summary of one variant from its stats.Digest (its processes taken
    one at a time, without their batches); derived and parallel, which need
    the run's plan and every batch, computed by the caller's functions."""
    summary = with_facts(d.summary(), d.procs, d.aux)
    if summary.get("n_processes"):
        if derived:
            summary["derived"] = derived()
        running = d.running_fractions()
        if running:
            summary["counters_running"] = running
        if parallel:
            summary["parallel"] = parallel()
        budget = budget_summary(d.procs, d.seen)
        if budget:
            summary["time_budget"] = budget
    return summary


def fill_summaries(doc: dict) -> dict:
    """A stored run's summaries computed from the processes it holds, in
    place (and returned): a run that never finished (killed, abandoned) has
    none yet, and one that was interrupted between storing a process and
    summarizing it is behind. The store's readers call it (`load_run(...,
    summaries=True)`), never a command."""
    for r in doc.get("results", []):
        procs = [p for p in r.get("processes") or [] if p.get("samples")]
        if procs and Summary.of(r).get("n_processes") != len(procs):
            from .stats import Digest   # numpy: only when a summary is computed (a refusal before it imports none)
            r["summary"] = resummarized(r.get("summary"), Digest.of(procs))
    return doc


def resummarized(stored: dict | None, d: Digest) -> dict:
    """The summary of a result whose stored one (`stored`: None, or of fewer
    processes) is behind, from its processes in the stats.Digest d; derived
    and parallel (they need the run's plan) kept as stored."""
    s = Summary(stored)
    fresh = summarize_digest(d)
    for keep in ("derived", "parallel"):
        if keep in s:
            fresh[keep] = s[keep]
    return fresh


def derive(processes: list[dict], derived: list) -> dict:
    """summary["derived"]: per metric, the median over processes of the
    metric computed from that process's per-op counter medians (and its median
    ns per op). A metric whose inputs were not counted says which ones."""
    from .stats import median, process_stats   # numpy (stats): when a summary is computed, not when this module loads

    per_proc = []
    for p in processes:
        if p.get("samples"):
            st = process_stats(p["samples"], p.get("header"))
            per_proc.append((st.get("counters", {}), st["median_ns"]))
    out = {}
    for d in derived:
        vals = []
        for counters, ns in per_proc:
            env = {ident: counters.get(ev) for ident, ev in d.events.items()}
            env["ns"] = ns
            v = evaluate(d.expr, env)
            if v is not None:
                vals.append(v)
        entry: dict = {"expr": d.shown_expr(), "profile": d.profile}
        if d.help:
            entry["help"] = d.help
        if vals:
            entry["value"] = median(vals)
        else:
            missing = [ev for ident, ev in d.events.items() if ident in _names(d.expr, d.name)
                       and not any(isinstance(c.get(ev), (int, float)) for c, _ in per_proc)]
            entry["value"] = None
            entry["reason"] = ("not counted here: " + ", ".join(missing)) if missing else "undefined (division by zero)"
        out[d.name] = entry
    return out


def summarize_parallel(rounds: list[dict], processes: list[dict], n: int) -> dict:
    """summary["parallel"] (and result["parallel"]) of opcost.result/1."""
    from .stats import median   # numpy (stats): when a summary is computed, not when this module loads

    single_rate = {p["index"]: rate(p["samples"], p.get("header")) for p in processes if p.get("samples")}
    out_rounds = []
    for r in rounds:
        ops = [c["ops_per_s"] for c in r["copies"] if c["ops_per_s"]]
        if len(ops) != len(r["copies"]):
            continue
        per_copy = sum(ops) / len(ops)
        single = single_rate.get(r.get("single_process"))
        out_rounds.append({"round": r["round"], "seq": r["seq"], "single_process": r.get("single_process"),
                           "single_ops_per_s": single, "per_copy_ops_per_s": per_copy,
                           "total_ops_per_s": sum(ops), "min_copy_ops_per_s": min(ops),
                           "efficiency": per_copy / single if single else None,
                           "overlap": overlap(r["copies"]), "copies": r["copies"]})
    cpus = [c["cpu"] for c in rounds[0]["copies"]] if rounds else []
    doc = {"copies": n, "cpus": cpus, "wrapped": bool(rounds and rounds[0].get("wrapped")),
           "n_rounds": len(out_rounds),
           "method": "throughput = operations / wall time from the first to the last batch used (batches "
                     "while all copies measured); per round: per-copy = mean over the copies, efficiency = "
                     "per-copy / the round's single process; medians over rounds",
           "rounds": out_rounds}

    def med(key):
        xs = [r[key] for r in out_rounds if r.get(key) is not None]
        return median(xs) if xs else None

    for key in ("single_ops_per_s", "per_copy_ops_per_s", "total_ops_per_s", "min_copy_ops_per_s",
                "efficiency", "overlap"):
        doc[key] = med(key)
    effs = [r["efficiency"] for r in out_rounds if r.get("efficiency") is not None]
    doc["efficiency_range"] = [min(effs), max(effs)] if effs else None
    flags = []
    if doc["wrapped"]:
        flags.append(f"{n} copies on {len(set(cpus))} CPU(s): copies share CPUs, so per-copy throughput "
                     "includes time-sharing")
    ov = [r["overlap"] for r in out_rounds if r.get("overlap") is not None]
    if ov and min(ov) < LOW_OVERLAP:
        flags.append(f"copies measured concurrently only {min(ov):.0%} of their span in the worst round "
                     "(calibration skew); only batches inside the common span are used")
    alone = sum(1 for r in rounds for c in r["copies"] if not c.get("concurrent", True))
    if alone:
        flags.append(f"{alone} copy run(s) had no batch while all copies were measuring: their throughput is "
                     "over all their batches, not a concurrent one; raise --samples")
    mig = sum(c["migrated_batches"] for r in rounds for c in r["copies"])
    if mig:
        flags.append(f"{mig} batch(es) of the copies ran off their pinned CPU")
    doc["flags"] = flags
    return doc
