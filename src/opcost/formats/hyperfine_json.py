"""`hyperfine-json`: hyperfine 1.x's `--export-json` layout, so the scripts
that read hyperfine's exports (plot_whisker.py, plot_histogram.py,
advanced_statistics.py: `json.load(f)["results"]`, then each result's
`command` and `times`) read opcost results.

One entry per measured variant, and in a comparison one per arm and
benchmark. What hyperfine calls a run's time is here one probe process:
`times` are the per-process medians of the time per operation (the numbers
opcost's median, CI and verdicts are computed over), scaled to OPS (1e9)
operations and in seconds, so that the `command` is `1e9 x KEY` (`A: 1e9 x
KEY`, `B: ...` in a comparison) and its seconds read as nanoseconds per
operation: hyperfine's scripts print three decimals of seconds or
milliseconds, and a time per operation in seconds (1e-7) printed as 0.000.
mean, stddev (n-1, null for one process), median, min and max are over
those; `user` and `system` the getrusage CPU time per operation (median over
processes), scaled alike; `exit_codes` one 0 per measured process (a process
that failed left no times); `parameters` the parameters that vary between
the document's entries (with `arm` in a comparison), as strings, each entry
holding those it has, and none when nothing varies: hyperfine writes the one
it was given with -P (plot_parametrized.py wants exactly one), and a
parameter every entry shares (`via=libc`, the CPU of a pinned run) says
nothing about the entries.
"""

from __future__ import annotations

import json
import math

from ..model import Comparison, Summary, result_key

NAME = "hyperfine-json"
KINDS = ("result", "comparison")


OPS = 1e9   # operations per hyperfine "run": seconds per OPS operations are nanoseconds per operation


SCALE = OPS / 1e9   # nanoseconds per operation -> seconds per OPS operations


def _s(ns) -> float | None:
    return None if ns is None else ns * SCALE


def command(key: str) -> str:
    return f"{OPS:.0e}".replace("+0", "") + f" x {key}"


def entry(command: str, summary: Summary, params: dict) -> dict | None:
    s = summary
    times = [t * SCALE for t in s.process_medians]
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


def varying(params: list[dict]) -> list[dict]:
    """Each entry's parameters, keeping only the keys whose value (absent
    counting as a value) is not the same in every entry."""
    keys = {k for p in params for k in p}
    vary = {k for k in keys if len({str(p[k]) if k in p else None for p in params}) > 1}
    return [{k: v for k, v in p.items() if k in vary} for p in params]


def serialize(doc: dict) -> bytes:
    rows: list[tuple[str, Summary, dict]] = []
    if "comparisons" in doc:
        for e in Comparison.from_json(doc).comparisons:
            for arm, given, s in (("A", e.params_a, e.summary_a), ("B", e.params_b, e.summary_b)):
                params = {"arm": arm, **{k: v for k, v in (given or {}).items() if k != "arch"}}
                rows.append((f"{arm}: {command(e.key)}", s, params))
    else:
        rows = [(command(result_key(r)), Summary.of(r), {k: v for k, v in (r.get("params") or {}).items() if k != "arch"})
                for r in doc["results"]]
    results = [entry(c, s, p) for (c, s, _), p in zip(rows, varying([p for _, _, p in rows]))]
    return (json.dumps({"results": [r for r in results if r is not None]}, indent=2, allow_nan=False)
            + "\n").encode()
