"""`opcost.result/1`: the result document of `opcost run` (`--json FILE`).

History of the format (readers ignore unknown fields):
  opcost.result/1 (0.1.0): schema, opcost_version, run_id, label, status, argv,
    env, results[] of {bench, key, params (cpu and arch included), op, unit,
    status (ok|unsupported|failed|pending), reason, processes[] of {index,
    round, seq (order of starting in the run), pad_bytes, wall_s, header,
    samples, warmup, trailer}, summary}.
  extended (counters branch): summary.derived {name: {value, expr, profile,
    help, reason?}}, summary.counters_running {event: running share}; samples
    may carry counters_running and start_raw_ns; results[].parallel (and
    summary.parallel) with --parallel N: {copies, cpus, wrapped,
    single_ops_per_s, per_copy_ops_per_s, total_ops_per_s, efficiency,
    efficiency_range, overlap, flags, rounds[]}.
  extended (issue 11): store_missed {reason, processes} when the store was
    lost during the run; summary is null while status is running (computed
    once at the end); run status may read "abandoned" (from a store: its
    opcost is gone); an outliers flag carries processes[] and rounds[].
"""

from __future__ import annotations

import json

SCHEMA = "opcost.result/1"


def build(*, env: dict, results: list[dict], version: str, run_id: int | None, label: str | None,
          status: str, argv: list[str]) -> dict:
    return {"schema": SCHEMA, "opcost_version": version, "run_id": run_id, "label": label,
            "status": status, "argv": argv, "env": env, "results": results}


def serialize(doc: dict) -> bytes:
    return (json.dumps(doc, indent=1, allow_nan=False) + "\n").encode()
