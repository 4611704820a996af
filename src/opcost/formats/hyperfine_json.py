"""`hyperfine-json`: hyperfine 1.x's `--export-json` layout, so the scripts
that read hyperfine's exports (plot_whisker.py, plot_histogram.py,
advanced_statistics.py: `json.load(f)["results"]`, then each result's
`command` and `times`) read opcost results.

One entry per measured variant (`command`: its key, `bench:k=v,...`), and in
a comparison one per arm and benchmark (`A: key`, `B: key`). What hyperfine
calls a run's time is here one probe process: `times` are the per-process
medians of the time per operation (the numbers opcost's median, CI and
verdicts are computed over), in seconds; mean, stddev (n-1, null for one
process), median, min and max are over those; `user` and `system` the
getrusage CPU time per operation (median over processes); `exit_codes` one 0
per measured process (a process that failed left no times); `parameters`
the variant's parameters as strings (with `arm` in a comparison), present
when there are any, as hyperfine writes them only with -P/-L.
"""

from __future__ import annotations

import json
import math

from ..model import Summary, result_key

NAME = "hyperfine-json"
KINDS = ("result", "comparison")


def _s(ns) -> float | None:
    return None if ns is None else ns / 1e9


def entry(command: str, summary: Summary, params: dict) -> dict | None:
    s = summary
    times = [t / 1e9 for t in s.process_medians]
    if not times:
        return None
    n = len(times)
    mean = sum(times) / n
    ordered = sorted(times)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    stddev = math.sqrt(sum((t - mean) ** 2 for t in times) / (n - 1)) if n > 1 else None
    out: dict = {"command": command, "mean": mean, "stddev": stddev, "median": median,
                 "user": _s(s.get("user_ns_per_op")), "system": _s(s.get("sys_ns_per_op")),
                 "min": ordered[0], "max": ordered[-1], "times": times, "exit_codes": [0] * n}
    if params:
        out["parameters"] = {str(k): str(v) for k, v in params.items()}
    return out


def _params(r: dict) -> dict:
    return {k: v for k, v in (r.get("params") or {}).items() if k != "arch"}


def serialize(doc: dict) -> bytes:
    results = []
    if "comparisons" in doc:
        for e in doc["comparisons"]:
            for arm in ("a", "b"):
                side = e.get(arm) or {}
                params = {"arm": arm.upper(), **{k: v for k, v in (side.get("params") or {}).items() if k != "arch"}}
                results.append(entry(f"{arm.upper()}: {e['key']}", Summary.of(side), params))
    else:
        results = [entry(result_key(r), Summary.of(r), _params(r)) for r in doc["results"]]
    return (json.dumps({"results": [r for r in results if r is not None]}, indent=2, allow_nan=False)
            + "\n").encode()
