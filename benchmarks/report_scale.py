#!/usr/bin/env python3
"""Does the HTML report hold at scale? A report over 1,000 runs holding
1,000,000 samples (by default: 1,000 runs x 2 benchmarks x 10 processes x 50
batches), stored through the store API in a temporary SQLite store, must
render in under 10 s and 500 MiB.

The synthetic runs look like the probe's (every sample field it writes) and
are summarised by the runner's own code; a 4% step from run 500 on gives the
plots something to show. The report is made in a fresh process, as
`opcost report` would: open the store, load each run (store.load_run, one
at a time, with sample_data=False: each batch's plain columns, its JSON
left unread; the page keeps a digest of each run, not its samples), draw
the page (export/html.serialize_runs), write it. Its time runs from opening the
store to the written file (matplotlib's import included); its peak memory
is the process's maximum resident size (getrusage ru_maxrss). The reference,
measured in the same run in its own fresh process: reading the same samples
(the same columns: process_id, warmup, iters, ns_per_op, tsc_per_op) from
the store with one query.

Prints the figures and the ratio to the one query, and whether the goals
hold; never fails (these machines are shared: read the figures, do not gate
on them). `--runs`, `--samples` etc. make it smaller (CI's .ci/run uses the
defaults)."""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

GOAL_S = 10.0
GOAL_MIB = 500.0

REPORT = """
import resource, sys, time
sys.path.insert(0, {src!r})
t0 = time.perf_counter()
from opcost.store import open_store
from opcost.formats import html
from opcost import output
with open_store({store!r}, readonly=True) as store:
    ids = sorted(r["id"] for r in store.list_runs())
    page = html.serialize_runs(store.load_run(f"id:{{i}}", sample_data=False) for i in ids)
output.write({out!r}, page)
t = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(t, ru.ru_maxrss, len(ids), len(page), page.count(b'<div class="plot"'), ru.ru_utime + ru.ru_stime)
"""

ONE_QUERY = """
import resource, sqlite3, sys, time
t0 = time.perf_counter()
db = sqlite3.connect("file:" + {path!r} + "?mode=ro", uri=True)
rows = db.execute("SELECT process_id, warmup, iters, ns_per_op, tsc_per_op FROM samples").fetchall()
t = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(t, ru.ru_maxrss, len(rows), ru.ru_utime + ru.ru_stime)
"""


def sample(rng: random.Random, i: int, ns: float, warmup: bool) -> dict:
    iters = 10_000
    ticks = ns * iters * 2
    return {"type": "sample", "i": i, "iters": iters, "ns": ns * iters, "ns_per_op": ns, "ticks": ticks,
            "raw_ticks": ticks + 40, "tsc_per_op": ns * 2, "wall_ns": int(ns * iters), "user_ns": int(ns * iters / 4),
            "sys_ns": int(ns * iters * 3 / 4), "user_ns_per_op": ns / 4, "sys_ns_per_op": ns * 3 / 4,
            "cpu_before": 1, "cpu_after": 1, "nvcsw": 0, "nivcsw": rng.randrange(2), "steal_ticks": 0,
            "executed": 64, "start_raw_ns": 10**12 + i * 10**7, "warmup": warmup}


def header(bench: str, params: dict, pid: int) -> dict:
    return {"type": "header", "schema": "opcost.probe/1", "probe_version": "0.1.0", "arch": "x86_64",
            "bench": bench, "params": params, "op": "operation", "tsc_hz": 2_000_000_000,
            "tsc_hz_source": "synthetic", "clock": "tsc", "iters": 10_000, "cpus": [1], "counters": [],
            "overhead": {"clock_ns": 20, "clock_ticks": 40, "loop_ns_per_iter": 0.25, "loop_ticks_per_iter": 0.5},
            "pid": pid, "samples": 50, "warmup": 3, "target_ms": 10, "batch_ms": 10}


def build(path: str, runs: int, benches: int, processes: int, samples: int) -> None:
    from opcost.runner import summarize_variant
    from opcost.store import open_store

    rng = random.Random(15)
    env = {"hostname": {"value": "scale", "source": "synthetic"},
           "kernel_release": {"value": "6.18.0", "source": "synthetic"}}
    names = [("syscall.null", {"via": "libc"}, 100.0), ("ctx.pipe", {"mode": "thread"}, 2400.0),
             ("signal.catch", {}, 700.0), ("proc.fork", {}, 60000.0)]
    with open_store(path) as store:
        for run in range(runs):
            rid = store.create_run(label=f"commit={run:04d}", env=env, argv=["opcost", "run", "synthetic"],
                                   opcost_version="0.1.0")
            for pos in range(benches):
                bench, params, base = names[pos % len(names)]
                level = base * (1.04 if run >= runs // 2 else 1.0)
                res = store.add_result(rid, position=pos, bench=bench, params={"cpu": "1", **params}, op="operation",
                                       unit="ns", key=bench)
                procs = []
                for p in range(processes):
                    pl = level * (1 + rng.gauss(0, 0.005))
                    warm = [sample(rng, i, pl * 1.05, True) for i in range(3)]
                    meas = [sample(rng, i, pl * (1 + abs(rng.gauss(0, 0.01))), False) for i in range(samples)]
                    h = header(bench, params, 1000 + p)
                    store.add_process(res, idx=p, header=h, samples=warm + meas, trailer={"type": "trailer"},
                                      meta={"round": p, "seq": p})
                    procs.append({"header": h, "samples": meas})
                store.set_result(res, status="ok", summary=summarize_variant(procs))
            store.finish_run(rid, "complete")


def child(code: str) -> list[float]:
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if cp.returncode != 0:
        raise SystemExit(f"report_scale: the measured process failed:\n{cp.stderr}")
    return [float(x) for x in cp.stdout.split()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--benches", type=int, default=2, help="results per run (at most 4)")
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--samples", type=int, default=50, help="measured batches per process")
    ap.add_argument("--reps", type=int, default=1, help="times the report and the query are each timed "
                    "(interleaved; medians printed)")
    ap.add_argument("--keep", metavar="FILE", help="also copy the page here")
    a = ap.parse_args()
    total = a.runs * a.benches * a.processes * a.samples
    # On tmpfs when there is one: the build commits once per process (20,000
    # commits), each an fsync on a disk. Both timed readers read the same
    # file, which after the build is in the page cache wherever it is.
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="opcost-scale-", dir=shm) as tmp:
        store = os.path.join(tmp, "scale.db")
        out = os.path.join(tmp, "report.html")
        t = time.perf_counter()
        build(store, a.runs, a.benches, a.processes, a.samples)
        print(f"store ({'tmpfs' if shm else 'temporary directory'}): {a.runs} runs, {total} measured samples ({a.runs * a.benches * a.processes * 3} warm-up), "
              f"{os.path.getsize(store) / 2**20:.0f} MiB, built in {time.perf_counter() - t:.1f} s")
        reports, queries = [], []
        for _ in range(a.reps):
            reports.append(child(REPORT.format(src=str(ROOT / "src"), store=store, out=out)))
            queries.append(child(ONE_QUERY.format(path=store)))
        if a.keep:
            Path(a.keep).write_bytes(Path(out).read_bytes())
    reports.sort()
    queries.sort()
    rt, rss_kib, n_runs, size, plots, rcpu = reports[len(reports) // 2]
    qt, q_kib, n_rows, qcpu = queries[len(queries) // 2]
    mib = max(r[1] for r in reports) / 1024
    print(f"report: {int(n_runs)} runs -> {size / 1024:.0f} KiB of HTML, {int(plots)} plots, "
          f"{rt:.2f} s ({rcpu:.2f} s CPU), peak RSS {mib:.0f} MiB (median time of {a.reps})")
    print(f"one query (SELECT process_id, warmup, iters, ns_per_op, tsc_per_op FROM samples: {int(n_rows)} rows): "
          f"{qt:.2f} s ({qcpu:.2f} s CPU), "
          f"peak RSS {q_kib / 1024:.0f} MiB")
    print(f"ratio report / one query: {rt / qt:.1f} (CPU time: {rcpu / qcpu:.1f}); load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"goals (< {GOAL_S:.0f} s, < {GOAL_MIB:.0f} MiB): "
          f"time {'met' if rt < GOAL_S else 'NOT MET'}, memory {'met' if mib < GOAL_MIB else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
