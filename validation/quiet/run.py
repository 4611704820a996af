#!/usr/bin/env python3
"""Does the front end disturb the measurement? Runs the same `opcost run`
with the front end kept off the measuring CPUs (the default: pinned to the
other CPUs, or the probe holding its samples when none is free) and without
(OPCOST_QUIET=0), interleaved: every repetition runs both, in a random order,
on a quiet machine and on a loaded one (a background load of busy loops that
this script starts and stops itself). Per run: the process-to-process CV (of
the per-process medians) and the per-batch outlier rate (batches more than 5%
off their process's median). Prints, per benchmark and load, both over all
repetitions pooled (the CV of all their process medians together, the share
of all their batches) and the ratios kept/plain (below 1: keeping off helps).
Report only: never fails on the figures (these machines are shared)."""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from validation.harness.checkout import build_probe, checkout_opcost  # noqa: E402
from validation.harness.script import log, script_main  # noqa: E402

# (spec, CPUs opcost itself may use: None = all). The first three have a CPU
# free of the measurement, so the front end is pinned there; the last three
# have none (opcost confined to the measuring CPU, or a two-party benchmark
# spanning both CPUs of a 2-CPU machine), so the probe holds its samples.
BENCHES = (("syscall.null", None), ("ctx.pipe", None), ("insn.div:variant=soft", None),
           ("syscall.null", "LAST"), ("insn.div:variant=soft", "LAST"), ("ctx.pipe:cpu=0,1", None))
OUTLIER = 0.05     # a batch this far off its process's median
LOAD_LIMIT_S = 900  # the background load ends by itself after this, whatever happens


def confine(cpus: str | None) -> list[str]:
    """`taskset -c CPU` for a row that confines opcost to the CPU it measures on."""
    if cpus is None:
        return []
    last = max(os.sched_getaffinity(0))
    return ["taskset", "-c", str(last)]


def one_run(spec: str, cpus: str | None, quiet: bool, args) -> dict:
    cmd, env, _ = checkout_opcost()
    cmd = [*confine(cpus), *cmd]
    env = dict(env, OPCOST_QUIET="1" if quiet else "0")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.json"
        cp = subprocess.run([*cmd, "run", spec, "-p", str(args.processes), "-n", str(args.samples), "-w", "3",
                             "--no-store", "--no-progress", "--json", str(out)], capture_output=True, text=True,
                            env=env, timeout=600)
        if cp.returncode != 0:
            raise SystemExit(f"opcost run {spec} failed: {cp.stderr.strip()[-300:]}")
        r = json.loads(out.read_text())["results"][0]
    meds = r["summary"]["process_medians_ns"]
    batches = [(s["ns_per_op"], statistics.median(x["ns_per_op"] for x in p["samples"]))
               for p in r["processes"] for s in p["samples"]]
    return {"meds": meds, "flagged": sum(abs(v / m - 1) > OUTLIER for v, m in batches), "batches": len(batches),
            "front_end": r["processes"][0].get("front_end", "")}


def pooled(runs: list[dict]) -> dict:
    """Over every repetition of one condition: the CV of all the per-process
    medians together (30 processes at 6 x -p 5: a few processes of another
    mode, as a bimodal benchmark's memory layouts give, weigh as often as they
    happen, where the median of six 5-process CVs swings between "all in one
    mode" and "mixed"), and the share of all batches that are outliers."""
    meds = [m for r in runs for m in r["meds"]]
    return {"cv": statistics.stdev(meds) / statistics.mean(meds),
            "outliers": sum(r["flagged"] for r in runs) / sum(r["batches"] for r in runs)}


def start_load(n: int) -> list[subprocess.Popen]:
    code = f"import time\nend = time.monotonic() + {LOAD_LIMIT_S}\nwhile time.monotonic() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def compare(spec: str, cpus: str | None, load: str, args, rng: random.Random) -> dict:
    got: dict[bool, list[dict]] = {True: [], False: []}
    for _ in range(args.reps):
        order = [True, False]
        rng.shuffle(order)
        for quiet in order:
            got[quiet].append(one_run(spec, cpus, quiet, args))
    med = {q: pooled(got[q]) for q in got}
    ratio = {k: (med[True][k] / med[False][k] if med[False][k] else None) for k in ("cv", "outliers")}
    name = spec + (" (1 CPU)" if cpus else "")
    return {"spec": name, "load": load, "kept": med[True], "plain": med[False], "ratio": ratio,
            "front_end": got[True][0]["front_end"]}


def fmt(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=4, help="repetitions of each pair of runs (4)")
    ap.add_argument("--processes", type=int, default=5, help="-p of each run (5)")
    ap.add_argument("--samples", type=int, default=20, help="-n of each run (20)")
    ap.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy loops of the loaded machine")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the figures")
    args = ap.parse_args()
    build_probe()
    rng = random.Random(args.seed)
    rows, t0 = [], time.monotonic()
    for load in ("quiet", "loaded"):
        procs = start_load(args.load) if load == "loaded" else []
        try:
            for spec, cpus in BENCHES:
                rows.append(compare(spec, cpus, load, args, rng))
                log(f"{spec} ({load}): CV kept/plain {fmt(rows[-1]['ratio']['cv'])}, "
                    f"outliers kept/plain {fmt(rows[-1]['ratio']['outliers'])}")
        finally:
            stop_load(procs)
    print(f"{'benchmark':<30} {'load':<7} {'CV kept':>8} {'CV plain':>8} {'ratio':>6} "
          f"{'outl kept':>9} {'outl plain':>10} {'ratio':>6}  front end (kept)")
    for r in rows:
        print(f"{r['spec']:<30} {r['load']:<7} {r['kept']['cv']:>8.2%} {r['plain']['cv']:>8.2%} "
              f"{fmt(r['ratio']['cv']):>6} {r['kept']['outliers']:>9.2%} {r['plain']['outliers']:>10.2%} "
              f"{fmt(r['ratio']['outliers']):>6}  {r['front_end']}")
    print(f"{args.reps} interleaved pairs of runs of -p {args.processes} -n {args.samples} per row; "
          f"{time.monotonic() - t0:.0f} s; CV and outliers pooled over the pairs; "
          f"kept = the default, plain = OPCOST_QUIET=0")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    script_main(main)
