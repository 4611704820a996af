#!/usr/bin/env python3
"""Import and show of one large run (issue 38, item 6): a run of 10^6
samples (by default: 1 benchmark x 1,000 processes x 1,000 batches, every
sample field the probe writes), written as `opcost export` writes one run
(compact, as a line of JSON lines), then `opcost import FILE` into a
new SQLite store and `opcost show RUN` of it, each in a fresh process as a
user would run them. The aim: each within 10 s and 500 MiB. The run has
its summary, as every run that reached its end stores it; `--no-summary`
measures a run killed before its end, whose `show` computes the summary
from its processes, read one at a time (docs/commands/stores.md).

Each figure is the command's wall time, its CPU time (user and system, of
all its processes: an import's worker too), its peak resident memory
(getrusage: its largest process) and that of its whole process tree
(sampled every 20 ms; the aim's figure). The reference,
measured in the same round, in its own fresh process: `json.load` of the
same file (the least any import of it does); ratios are to it (CPU's
ratio is the steadier on a busy machine). `--against SRC` measures another
opcost's import (its src/, e.g. main's) in each round too, `--repeat N`
runs N rounds, `--file` keeps the file for the next time. Prints the
figures and whether the aim holds; never fails (a shared machine: read the
figures, do not gate on them). `--processes` and `--samples` make it
smaller."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 10.0
GOAL_MIB = 500.0


def document(processes: int, samples: int, summary: bool = True) -> dict:
    """A run as `opcost export` writes it: one result of `processes`
    processes of `samples` batches each (plus one warm-up batch), and its
    summary as the run stored it at its end (opcost's own summarize_variant;
    summary=False: none, as a run killed before its end has)."""
    def sample(i: int, p: int) -> dict:     # the fields the probe writes (opcost.probe/1)
        ns = 50.0 + ((i * 7919 + p * 104729) % 1000) / 100.0
        wall = int(ns * 10000)
        return {"type": "sample", "i": max(i, 0), "warmup": i < 0, "iters": 10000, "executed": 64,
                "raw_ticks": 2 * wall + 5040, "ticks": 2 * wall, "ns": float(wall), "wall_ns": wall,
                "start_raw_ns": 10**12 + p * 10**9 + i * wall, "ns_per_op": ns, "tsc_per_op": 2 * ns,
                "user_ns": wall // 4, "sys_ns": wall - wall // 4, "user_ns_per_op": ns / 4,
                "sys_ns_per_op": ns * 0.75, "nvcsw": 0, "nivcsw": i % 3, "cpu_before": 1, "cpu_after": 1,
                "steal_ticks": 0, "run_ns": wall, "run_delay_ns": 0}
    header = {'type': 'header',
              'schema': 'opcost.probe/1',
              'probe_version': '0.1.0',
              'arch': 'x86_64',
              'compiler': 'gcc 12.2.0',
              'pid': 28981,
              'bench': 'syscall.null',
              'op': 'system call',
              'blocks': False,
              'params': {'via': 'libc'},
              'cpus': [1],
              'clock': 'fake',
              'tsc_hz': 2000000000,
              'tsc_hz_source': 'fake clock (2 GHz)',
              'overhead': {'clock_ticks': 40,
              'loop_ticks_per_iter': 0.5,
              'clock_ns': 20,
              'loop_ns_per_iter': 0.25,
              'loop_subtracted': True,
              'method': 'minimum of 2000 empty clock pairs and of 50 empty 20000-iteration loops; both subtracted from every batch'},
              'iters': 10000,
              'iters_source': 'calibrated to target_ms',
              'samples': 5,
              'warmup': 1,
              'target_ms': 1,
              'batch_ms': 1,
              'run_delay': {'available': True,
              'source': 'fake clock: every batch on the CPU throughout, no run delay'},
              'fake_clock': True,
              'counters': []}
    header |= {"samples": samples}
    procs = [{"index": p, "round": p, "seq": p, "header": header | {"pid": 1000 + p}, "samples": [sample(i, p) for i in range(samples)],
              "warmup": [sample(-1, p)], "trailer": {"type": "trailer", "status": "ok", "samples": samples, "warmup": 1}}
             for p in range(processes)]
    summarized = None
    if summary:
        sys.path.insert(0, str(ROOT / "src"))
        from opcost.summaries import summarize_variant

        summarized = summarize_variant(procs)
    return {"schema": "opcost.result/1", "opcost_version": "0.1.0", "run_id": 1,
            "uuid": "6b3f1f7e-0000-4000-8000-000000000038", "created": "2026-01-01T00:00:00Z",
            "finished": "2026-01-01T01:00:00Z", "label": "large", "labels": {"name": "large"}, "kind": "run",
            "status": "complete", "argv": ["opcost", "run", "syscall.null"], "env": {},
            "results": [{"bench": "syscall.null", "key": "syscall.null", "params": {"via": "libc", "cpu": "1", "arch": "x86_64"},
                         "op": "system call", "unit": "ns", "status": "ok", "reason": None,
                         "processes": procs, "summary": summarized}]}


# Each command runs under this small wrapper, which reports the peak RSS of
# its one child (a child forked from this process, which held the document,
# would inherit its high-water mark) and of its whole process tree (an
# import's worker process too: the sum of the tree's RSS, sampled every
# 20 ms; pages a fork shares are counted in each process, so an upper bound).
_WRAP = """
import os, resource, subprocess, sys, time
def tree(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
        with open(f"/proc/{pid}/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0
    return rss + sum(tree(int(k)) for k in kids)
t = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
peak = 0
while p.poll() is None:
    peak = max(peak, tree(p.pid))
    time.sleep(0.02)
err = p.stderr.read()
w = time.monotonic() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stderr.buffer.write(err[-300:])
print(w, u.ru_maxrss / 1024, p.returncode, u.ru_utime + u.ru_stime, peak / 2**20)
"""


def timed(argv: list[str], env: dict) -> tuple[float, float, int, float, float]:
    """(wall seconds, peak RSS MiB of its largest process, exit code, CPU
    seconds of all its processes, peak RSS MiB of its process tree) of one
    fresh process."""
    cp = subprocess.run([sys.executable, "-c", _WRAP, *argv], env=env, capture_output=True, text=True)
    wall, mib, code, cpu, tree = cp.stdout.split()
    if int(code):
        print(f"  {' '.join(argv[2:4])}: exit {code}: {cp.stderr.strip()}", file=sys.stderr)
    return float(wall), float(mib), int(code), float(cpu), float(tree)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=1000, help="batches per process")
    ap.add_argument("--no-summary", action="store_true", help="the run without its summary (killed before its "
                    "end): show computes it from every sample")
    ap.add_argument("--file", help="the run's file: written there if absent, else read as it is (to measure "
                    "again without writing it again; give the --processes, --samples and --no-summary it was "
                    "written with: the header line says them)")
    ap.add_argument("--against", metavar="SRC", help="another opcost's src/ (e.g. main's): its import measured "
                    "too, interleaved with this one's, for a before/after ratio")
    ap.add_argument("--repeat", type=int, default=1, help="measure each this many times, interleaved")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    with tempfile.TemporaryDirectory(prefix="opcost-large-") as tmp:
        path = Path(args.file or Path(tmp) / "large.json")
        if not path.exists():
            with open(path, "w") as f:     # compact: as `opcost export` writes runs as JSON lines
                json.dump(document(args.processes, args.samples, not args.no_summary), f, separators=(",", ":"))
                f.write("\n")
        n = args.processes * args.samples
        print(f"one run of {n:,} samples ({args.processes} processes x {args.samples}"
              f"{', no summary stored' if args.no_summary else ''}); "
              f"file {path.stat().st_size / 2**20:.0f} MiB; load {os.getloadavg()[0]:.2f}")
        cli = [sys.executable, "-m", "opcost"]
        for k in range(args.repeat):
            store = str(Path(tmp) / f"s{k}.db")
            ref = timed([sys.executable, "-c", "import json, sys; json.load(open(sys.argv[1]))", str(path)], env)
            print(f"  reference json.load:  {ref[0]:6.2f} s  {ref[1]:6.0f} MiB  (CPU {ref[3]:.2f} s; load "
                  f"{os.getloadavg()[0]:.2f})")
            runs = [("import", env, [*cli, "import", str(path), "--store", store]),
                    ("show", env, [*cli, "show", "large", "--store", store])]
            if args.against:     # before this one's in every other round (ABBA: a trend in the load evens out)
                runs.insert(1 - k % 2, ("import (against)", dict(env, PYTHONPATH=args.against),
                                        [*cli, "import", str(path), "--store", store + ".against"]))
            for name, e, argv in runs:
                wall, mib, code, cpu, tree = timed(argv, e)
                ok = code == 0 and wall <= GOAL_S and tree <= GOAL_MIB
                print(f"  opcost {name:<16} {wall:6.2f} s  {mib:6.0f} MiB (tree {tree:4.0f})  CPU {cpu:5.2f} s  "
                      f"({wall / ref[0]:.2f}x the reference's time, {cpu / ref[3]:.2f}x its CPU, {tree / ref[1]:.2f}x "
                      f"its memory; aim {GOAL_S:g} s, {GOAL_MIB:g} MiB: {'met' if ok else 'NOT met'}; load "
                      f"{os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
