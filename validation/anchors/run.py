#!/usr/bin/env python3
"""Anchors: opcost against the established tools that measure the same operations.

For each operation below this runs opcost and the established tool ("the
anchor") INTERLEAVED in one run: --runs rounds (default 5); each round takes
the operations in a new random order and, for each, runs one opcost
measurement and one anchor measurement back to back, which one first drawn
at random. It prints a markdown table (paste it into the README):

  operation, anchor tool and the exact command, opcost's figure and the
  anchor's (median over the runs, same unit: per call / per round trip / per
  message / per page), opcost/anchor (median of the per-round ratios), the CV
  of each side across the runs, the p of a one-sided F-test (on log figures)
  that opcost's spread is larger, where the definitions differ, and PASS/FAIL:
    * where the definitions match, the ratio lies within 0.97-1.03; where
      they differ the row says how, and the ratio is shown, not judged (or,
      where opcost does less, only held to <= 1.03); such a row is paired
      with opcost's like-for-like variant, judged like any other;
    * opcost's spread is not larger: FAIL only when the F-test gives p < 0.05
      (a larger CV that this many runs cannot tell apart is not a FAIL).
  Under the table: the geometric mean over all rows of opcost CV / anchor CV
  (PASS when <= 1), and every anchor that could not run, with why.

  perf bench, hackbench     syscall.null, ctx.pipe (process, thread), proc.fork, msg.hackbench
  lmbench (lat_*)           lat_syscall null|read|write|stat|fstat|open, lat_sig install|catch,
                            lat_pipe, lat_unix, lat_ctx -s 0 2, lat_proc fork|exec,
                            lat_pagefault, lat_mmap (validation/anchors/lmbench.py, with how
                            each definition compares with opcost's)

Like with like: every anchor command runs under `taskset -c CPU` and opcost
with `--cpu CPU` (both sides of a pipe, all hackbench tasks, all of
lmbench's processes on the one CPU), so neither side pays cross-CPU wake-ups
the other does not. hackbench gets the same groups/fds/loops/size/ipc/mode as
msg.hackbench (workers_on=pinned); its figure is its "Time:" over
groups*fds*fds*loops messages. perf bench syscall fork and lat_proc fork|exec
fork their own, larger, process: the script runs the anchor once untimed,
samples its process in /proc, and gives the probe's parent the anonymous
memory and mappings it lacks (resident=, mappings=; logged, and kept in
--json as sized_like_anchor). lmbench runs with -N --lm-reps and
ENOUGH=50000 TIMING_O=0 LOOP_O=0; lat_pagefault's and lat_mmap's files are
made on a tmpfs (/dev/shm), as mem.touch's memfd is shmem; lat_proc exec's
hello is copied to /tmp/hello, as lmbench's suite does.

Another task on the CPU inflates whichever side it hits: a pair in which
either side got under --min-share (0.9) of the CPU (CPU time / wall time:
opcost from its per-batch rusage, msg.hackbench, proc.* and the anchors from
their whole process tree) is run again up to --retries (3) times; runs still
disturbed are left out of the figures when two clean runs remain.

Anchors that are missing are rows that say why, never a crash: no perf, a
perf without `syscall fork` (< 6.2), no hackbench, lmbench not built
(validation/anchors/install.sh builds it outside the repository and records
why when it cannot), a file lmbench reads that is missing; an operation this
opcost has no benchmark (or parameter) for is marked 'not in this opcost'.

Needs: bash validation/anchors/install.sh (perf, rt-tests, lmbench). CI does
not gate on this: it is a report (exit 0 after printing; --check exits 1 on a
FAIL). Runtime on a 2-CPU VM: about 70 s of measuring per run for the 19
lmbench rows (opcost's own default protocol, about 2.5 s per measurement;
lmbench 0.3-0.7 s, lat_pipe 5 s) and 25 s for the 6 others (msg.hackbench:
20 whole runs per opcost measurement); reruns of disturbed pairs add to that
on a busy machine (--retries bounds them).
--ops picks rows (a name, its first word, a benchmark, or a tool: perf,
hackbench, lmbench); --scale shrinks or grows perf's and hackbench's loops.

Usage: validation/anchors/run.py [--runs 5] [--cpu N] [--ops a,b] [--json OUT] [--check]
"""

from __future__ import annotations
import argparse
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from validation.anchors.catalogue import Config, Row, Tools, make_rows, resolve, select_rows  # noqa: E402
from validation.anchors.sides import opcost_benches, opcost_command, run_anchor, run_opcost  # noqa: E402
from validation.anchors.sizing import place_rows, size_rows  # noqa: E402
from validation.anchors.summary import F_TEST_P, attempt, cv_ratio_geomean, geomean_line, markdown, summarise, unavailable  # noqa: E402
from validation.anchors.model import RATIO_BAND  # noqa: E402
from validation.harness import interleave  # noqa: E402
from validation.harness.interleave import Interleave  # noqa: E402
from validation.harness.report import write_document  # noqa: E402
from validation.harness.script import log, pick_cpu, script_main  # noqa: E402


def options() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--cpu", type=int, default=None,
                    help="CPU for opcost and every anchor, all their tasks (default: the last allowed CPU)")
    ap.add_argument("--ops", default=None, help="operations, comma-separated (default: all; see the table above)")
    ap.add_argument("--opcost-args", default="",
                    help="opcost run protocol options (default: none, opcost's own protocol as a user runs it: 10 processes x (3+20) batches of 10 ms)")
    ap.add_argument("--opcost-args-long", default="-p 5 -n 3 -w 1 --iters 1",
                    help="the same for msg.hackbench, whose one iteration is a whole hackbench run "
                         "(default '-p 5 -n 3 -w 1 --iters 1': 20 runs, 15 measured)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply the anchors' loop counts (and msg.hackbench loops) by this (default 1)")
    ap.add_argument("--hackbench", default="2,10,2000,100", metavar="G,F,L,S",
                    help="groups, fds, loops, message size for hackbench and msg.hackbench (default 2,10,2000,100: 0.3-0.9 s per run here, long enough that one run is not mostly noise)")
    ap.add_argument("--lm-reps", type=int, default=5,
                    help="lmbench's -N, its repetitions per command (default 5; lmbench's own default is 11)")
    ap.add_argument("--json", metavar="OUT", help="also write every figure as JSON to OUT")
    ap.add_argument("--check", action="store_true", help="exit 1 when a row FAILs (default: report only)")
    interleave.add_options(ap, 0.9, "a side whose CPU time is under this fraction of its wall time was disturbed "
                                    "by another task on the CPU (default 0.9)")
    return ap


def config(ap: argparse.ArgumentParser, args: argparse.Namespace) -> Config:
    if not args.scale > 0:
        ap.error("--scale must be > 0")
    try:
        g, f, lo, s = (int(x) for x in args.hackbench.split(","))
        if min(g, f, lo, s) < 1:
            raise ValueError
    except ValueError:
        ap.error("--hackbench must be four positive integers G,F,L,S, e.g. 2,10,1000,100")
    if args.lm_reps < 1:
        ap.error("--lm-reps must be >= 1")
    return Config(scale=args.scale, hackbench={"groups": g, "fds": f, "loops": lo, "size": s}, lm_reps=args.lm_reps)


def resolve_rows(rows: list[Row], benches: dict[str, set[str]], cfg: Config) -> dict[str, dict]:
    """resolve() for every row, saying which cannot run and which parameters are left out."""
    tools = Tools(lmbench_dir=os.environ.get("LMBENCH_BIN"))
    resolved = {r.name: resolve(r, benches, tools, cfg) for r in rows}
    for r in rows:
        res = resolved[r.name]
        if res["dropped_params"]:
            log(f"{r.name}: opcost {r.bench} has no parameter {', '.join(res['dropped_params'])}: "
                "not passed (the comparison may not be like with like)")
        prepare = res["anchor"].prepare if res["status"] == "ok" else None
        try:
            if prepare:
                prepare()
        except OSError as e:
            res["status"], res["why"] = "anchor unavailable", f"anchor unavailable: preparing its input: {e}"
        if res["status"] != "ok":
            log(f"{r.name}: {res['why']}")
    return resolved


def tmpfs_dir() -> str | None:
    """Where lmbench's input files go: /dev/shm (shmem, as mem.touch's memfd), if usable."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def footnote(args: argparse.Namespace, cpu: int, seconds: float) -> str:
    lo, hi = RATIO_BAND
    return (f"\nopcost `run SPEC {args.opcost_args} --cpu {cpu}` (msg.hackbench: `{args.opcost_args_long}`; "
            f"the median over processes; `A - B`: both in one run, B's median subtracted); anchors pinned with "
            f"`taskset -c {cpu}` (lmbench: -N {args.lm_reps}); {args.runs} interleaved runs; figures: medians over "
            f"runs; opcost/anchor: median of per-run ratios (min-max); CV across runs; F-test p: one-sided, that "
            f"opcost's spread is the larger; PASS: ratio within {lo:g}-{hi:g} where the definitions match (else as "
            f"the verdict says), and not p < {F_TEST_P:g}; reruns: pairs run again because a side's CPU time was "
            f"under {args.min_share:g} of its wall time (another task on CPU {cpu}; 'kept': still so after "
            f"--retries {args.retries}, left out of the figures when at least two clean runs remain); "
            f"{seconds:.0f} s")


def main(argv: list[str] | None = None) -> int:
    ap = options()
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    il = Interleave.from_args(ap, args, word="run", isolate_failures=True)
    cfg = config(ap, args)
    cpu = pick_cpu(ap, args.cpu)
    rows = make_rows(cfg)
    if args.ops:
        chosen, bad = select_rows(rows, args.ops)
        if bad:
            ap.error(f"--ops: unknown {', '.join(bad)}; valid: {', '.join(r.name for r in rows)} "
                     "(or a benchmark name for all its rows)")
        rows = chosen
    extra = shlex.split(args.opcost_args)
    extra_long = shlex.split(args.opcost_args_long)

    cmd, env, cmd_desc = opcost_command()
    benches = opcost_benches(cmd, env)
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="opcost-anchors-") as tmp, \
            tempfile.TemporaryDirectory(prefix="opcost-anchors-", dir=tmpfs_dir()) as files:
        cfg.workdir = Path(files) if tmpfs_dir() else None
        resolved = resolve_rows(rows, benches, cfg)
        active = {r.name: r for r in rows if resolved[r.name]["status"] == "ok"}
        size_rows(list(active.values()), resolved, benches, cmd, env, cpu)
        place_rows(list(active.values()), resolved, benches, cpu)
        log(f"opcost: {cmd_desc} run SPEC {args.opcost_args} --cpu {cpu}; anchors under taskset -c {cpu}; "
            f"{args.runs} runs; seed {il.seed}; {len(active)} of {len(rows)} operations comparable")

        def sides(name: str) -> dict:
            row, res = active[name], resolved[name]
            return {"opcost": lambda: run_opcost(cmd, env, res["spec"], cpu, extra_long if row.long else extra,
                                                 Path(tmp), whole_process_share=row.long or row.children,
                                                 minus_spec=res["minus_spec"], minus_div=res["minus_div"]),
                    "anchor": lambda: run_anchor(res["anchor"], cpu)}

        runs = il.rounds(args.runs, list(active), sides, attempt)

    table = [summarise(r, resolved[r.name], runs.get(r.name, []), cpu) for r in rows]
    print(markdown(table), flush=True)
    print("\n" + geomean_line(table))
    missing = unavailable(table)
    if missing:
        print("\nanchors that could not run:\n" + "\n".join(missing))
    print(footnote(args, cpu, time.monotonic() - t_start))
    if args.json:
        write_document(args.json, {
            "schema": "opcost.validation-anchors/1", "opcost": cmd_desc, "opcost_args": extra,
            "opcost_args_long": extra_long, "cpu": cpu, "runs": args.runs, "seed": il.seed, "scale": args.scale,
            "retries": args.retries, "min_share": args.min_share, "hackbench": cfg.hackbench, "ratio_band": RATIO_BAND,
            "f_test_p": F_TEST_P, "lm_reps": cfg.lm_reps,
            "cv_ratio_geomean": dict(zip(("value", "rows"), cv_ratio_geomean(table))),
        }, table)
    failed = [r for r in table if r.get("pass") is False or r["status"] == "error"]
    return 1 if (args.check and failed) else 0


if __name__ == "__main__":
    script_main(main)
