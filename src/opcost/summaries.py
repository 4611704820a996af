"""The summary of one variant (`summary` of opcost.result/1): the statistics
of its processes (stats), the facts of their headers (model.facts), the
derived counter metrics and the --parallel rounds; and the summaries of a
stored run that never got them. The runner calls it at the end of a run; the
store's readers when a stored run is behind (`load_run(..., summaries=True)`).
"""

from __future__ import annotations

from .model import Summary, with_facts


def summarize_variant(processes: list[dict], derived: list | None = None, parallel_rounds: list | None = None,
                      copies: int = 1) -> dict:
    """The summary of one variant from its processes (statistics, facts, derived
    metrics, --parallel rounds): what a run stores at its end and what a
    reader computes for a run that never got there."""
    from .stats import summarize   # numpy: when a summary is computed, not when this module loads

    summary = with_facts(summarize(processes), [p for p in processes if p.get("samples")])
    if summary.get("n_processes"):
        from .counters import derive, running_fractions

        if derived:
            summary["derived"] = derive(processes, derived)
        running = running_fractions(processes)
        if running:
            summary["counters_running"] = running
        if parallel_rounds:
            from .parallel import summarize_parallel

            summary["parallel"] = summarize_parallel(parallel_rounds, processes, copies)
    return summary


def fill_summaries(doc: dict) -> dict:
    """A stored run's summaries computed from the processes it holds, in
    place (and returned): a run that never finished (killed, abandoned) has
    none yet, and one that was interrupted between storing a process and
    summarizing it is behind. The store's readers call it (`load_run(...,
    summaries=True)`), never a command."""
    for r in doc.get("results", []):
        procs = [p for p in r.get("processes") or [] if p.get("samples")]
        s = Summary.of(r)
        if procs and s.get("n_processes") != len(procs):
            fresh = summarize_variant(procs)
            for keep in ("derived", "parallel"):   # need the run's plan: kept as stored
                if keep in s:
                    fresh[keep] = s[keep]
            r["summary"] = fresh
    return doc
