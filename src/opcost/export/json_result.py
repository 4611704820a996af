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
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ..errors import UsageError

SCHEMA = "opcost.result/1"


def build(*, env: dict, results: list[dict], version: str, run_id: int | None, label: str | None,
          status: str, argv: list[str]) -> dict:
    return {"schema": SCHEMA, "opcost_version": version, "run_id": run_id, "label": label,
            "status": status, "argv": argv, "env": env, "results": results}


def serialize(doc: dict) -> bytes:
    return (json.dumps(doc, indent=1, allow_nan=False) + "\n").encode()


def check_writable(path: str) -> None:
    """Fail before measuring, not after: try what write_atomic will do (a new
    file beside the target), without touching the target itself, so a usage
    error found later leaves neither an empty file nor a truncated one."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"--json {path} is a directory; give a file path")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=_dir_of(p))
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise UsageError(f"--json {path} cannot be written ({e.strerror}); give a writable file path") from None


def _dir_of(p: Path) -> Path | str:
    return p.parent if str(p.parent) else "."


def write_atomic(path: str, data: bytes) -> None:
    """Write beside the target and rename, so a reader never sees half a file."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=_dir_of(p))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
