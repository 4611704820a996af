#!/usr/bin/env python3
"""Does a series of 100 labels x 10 processes render in under 2 s (issue 14)?

Builds a temporary store of 100 synthetic runs labelled commit=c000..c099,
each one syscall.null result of 10 processes x 20 batches (log-normal, a 5%
step at c060), then times, interleaved over a few repetitions:

- the reference: reading the same sample rows from the store with one query;
- `series`: the library call the command makes (stored_document: find,
  load, match, analyse) plus the table (tables.format_series);
- the whole command, `python -m opcost series syscall.null --by commit`,
  as a user waits for it (interpreter start and imports included), and
  that start alone (python -c "import opcost.changepoint, ruptures").

Prints the times and their ratios to the one query. Prints, never fails:
these machines are shared; read the figures, do not gate on them."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

LABELS, PROCESSES, SAMPLES = 100, 10, 20
GOAL_S = 2.0


def build(path: str) -> None:
    import random

    from opcost import __version__
    from opcost.env import collect
    from opcost.store import open_store

    rng = random.Random(14)
    env = collect()
    with open_store(path) as store:
        for i in range(LABELS):
            rid = store.create_run(env=env, argv=["opcost", "run", "syscall.null"], opcost_version=__version__,
                                   labels={"commit": f"c{i:03d}"})
            res = store.add_result(rid, position=0, bench="syscall.null", params={"via": "libc", "cpu": "1"},
                                   op="system call", unit="ns", key="syscall.null")
            base = 100.0 * (1.05 if i >= 60 else 1.0)
            for p in range(PROCESSES):
                level = base * rng.lognormvariate(0, 0.01)
                samples = [{"iters": 10000, "ns_per_op": level * rng.lognormvariate(0, 0.005),
                            "tsc_per_op": 200.0} for _ in range(SAMPLES)]
                header = {"tsc_hz": 2e9, "overhead": {"clock_ns": 20.0, "loop_ns_per_iter": 0.3},
                          "iters": 10000, "cpus": [1]}
                store.add_process(res, idx=p, header=header, samples=samples, trailer=None,
                                  meta={"round": p, "seq": p})
            store.set_result(res, status="ok")
            store.finish_run(rid, "complete")


def one_query(path: str) -> float:
    import sqlite3

    t = time.perf_counter()
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT s.data FROM samples s JOIN processes p ON p.id = s.process_id"
            " JOIN results r ON r.id = p.result_id WHERE r.bench = 'syscall.null' AND s.warmup = 0"
            " ORDER BY r.run_id, p.idx, s.idx").fetchall()
    assert len(rows) == LABELS * PROCESSES * SAMPLES, len(rows)
    return time.perf_counter() - t


def library(path: str) -> float:
    from opcost.tables import format_series
    from opcost.series import stored_document
    from opcost.store import open_store

    t = time.perf_counter()
    with open_store(path, readonly=True) as store:
        doc = stored_document(store, "syscall.null", "commit", order=None, order_how="time", delta=0.02,
                              force=False)
    text = format_series(doc)
    took = time.perf_counter() - t
    assert len(doc["labels"]) == LABELS and "c060" in text
    assert [c["label"] for c in doc["change_points"]] == ["c060"], doc["change_points"]
    return took


def command(path: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "opcost", "series", "syscall.null", "--by", "commit", "--store", path],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - t


def imports() -> float:
    """What the command pays before it reads a row: the interpreter and the
    statistics' libraries (numpy, scipy.stats, ruptures)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import opcost.changepoint, ruptures"], env=env, check=True)
    return time.perf_counter() - t


def main() -> int:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "series.db")
        t = time.perf_counter()
        build(path)
        print(f"store of {LABELS} runs x {PROCESSES} processes x {SAMPLES} batches built in "
              f"{time.perf_counter() - t:.1f} s")
        library(path)   # warm: imports, page cache
        times: dict[str, list[float]] = {"one query": [], "series (library)": [], "series (command)": [],
                                         "start-up + imports": []}
        for _ in range(reps):
            times["one query"].append(one_query(path))
            times["series (library)"].append(library(path))
            times["series (command)"].append(command(path))
            times["start-up + imports"].append(imports())
    q = statistics.median(times["one query"])
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:<18} {m:7.3f} s (median of {len(ts)})  ratio to the one query {m / q:7.1f}")
    lib = statistics.median(times["series (library)"])
    cmd = statistics.median(times["series (command)"])
    print(f"{LABELS} labels x {PROCESSES} processes: reading, analysing and rendering take {lib:.2f} s "
          f"(goal < {GOAL_S:g} s): {'holds' if lib < GOAL_S else 'does NOT hold'}; the whole command "
          f"{cmd:.2f} s, of which start-up and imports {statistics.median(times['start-up + imports']):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
