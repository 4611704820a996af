#!/usr/bin/env python3
"""Anchors: opcost against the established tools that measure the same operations.

For each operation below this runs opcost and the established tool ("the
anchor") INTERLEAVED in one run: --runs rounds (default 5); each round takes
the operations in a new random order and, for each, runs one opcost
measurement and one anchor measurement back to back, which one first drawn
at random. It prints a markdown table (paste it into the README):

  operation, anchor tool and the exact command, opcost's figure and the
  anchor's (median over the runs, same unit: per call / per round trip / per
  message), opcost/anchor (median of the per-round ratios), the CV of each
  side across the runs, and PASS/FAIL for
    * ratio <= 1.03: opcost's own overhead is at most the anchor's, and
    * opcost CV <= anchor CV: opcost is at least as repeatable.
  A CV FAIL also prints the p of a one-sided F-test (on log figures) that
  opcost's spread is larger: from 5 runs a CV is known to about +-35%, so
  two equally repeatable tools fail this test about half the time; p says
  whether the gap is real (p < 0.05) or within what 5 runs can tell apart.

  operation        opcost                                anchor
  syscall.null     syscall.null:via=libc                 perf bench syscall basic (getppid())
  ctx.pipe process ctx.pipe:mode=process,placement=same  perf bench sched pipe
  ctx.pipe thread  ctx.pipe:mode=thread,placement=same   perf bench sched pipe -T
  signal.catch     signal.catch                          lmbench lat_sig catch
  proc.fork        proc.fork                             perf bench syscall fork, else lmbench lat_proc fork
  msg.hackbench    msg.hackbench:groups=..,fds=..,loops=..,size=..,ipc=socket|pipe,mode=process|thread,
                   workers_on=pinned                     hackbench (rt-tests) -g -f -l -s [-p] -P|-T

Like with like: every anchor command runs under `taskset -c CPU` and opcost
with `--cpu CPU` (both sides of a pipe, all hackbench tasks on the one CPU),
so neither side pays cross-CPU wake-ups the other does not. (perf bench sched
pipe unpinned on a 2-CPU VM costs about 3x the pinned figure.) hackbench gets
the same groups/fds/loops/size/ipc/mode as msg.hackbench (workers_on=pinned:
all workers on the measuring CPU, as under taskset); its figure is its
"Time:" over groups*fds*fds*loops messages (each of the fds senders in a
group sends `loops` messages to each of the group's fds receivers). Both
start their workers untimed, wait for them at a ready barrier, and time from
the start signal to the last worker reaped; both receivers read one message
(size bytes) per read(). perf bench syscall fork's parent is perf itself (about 3.3 MB anonymous
resident, 13 MB file-backed, 320 mappings): the script runs the anchor once
untimed, samples its process in /proc, and gives proc.fork the anonymous
memory and mappings the bare probe lacks (resident=, mappings=; the sizing is
logged and kept in --json as sized_like_anchor).
What is not the same: perf bench sched pipe's figure includes one fork or
thread start per run; perf's forked child calls exit(0) (atexit handlers,
stdio; about 270 copy-on-write page faults per fork here) where the probe's
calls _exit(0).
The anchors are dynamically linked against glibc, opcost's probe is static
(worth about 1% on a syscall, see validation/overhead).

Another task on the CPU inflates whichever side it hits: a pair in which
either side got under --min-share (0.9) of the CPU (CPU time / wall time:
opcost from its per-batch rusage, msg.hackbench and the anchors from their
whole process tree) is run again up to --retries (3) times; runs still
disturbed are left out of the figures when two clean runs remain.

Anchors that are missing are rows that say why, never a crash:
  * lmbench is not packaged in Debian (bookworm), so signal.catch has no
    anchor unless lmbench's binaries are on PATH or in $LMBENCH_BIN
    (lat_syscall, lat_pipe, lat_sig, lat_proc); then they are used where
    perf has nothing (lmbench prints "...: X microseconds");
  * perf 6.1 (bookworm's linux-perf) has `perf bench syscall basic` but no
    `syscall fork`: proc.fork uses lmbench if present, else is unavailable;
  * an operation this opcost has no benchmark for is marked
    'not in this opcost'.

Needs: apt-get install -y linux-perf rt-tests (perf, hackbench). CI does not
gate on this: it is a report (exit 0 after printing; --check exits 1 on a
FAIL). Runtime with the defaults on a 2-CPU VM: about 2 minutes for the
syscall/pipe/fork rows (opcost with its own default protocol, 10 processes,
about 3 s per measurement; anchors sized to about 1-2 s each) plus about 2
minutes for the two msg.hackbench rows (20 whole runs per opcost
measurement, 15 measured); reruns of disturbed pairs add to that on
a busy machine (up to 4x). --scale shrinks or grows the anchors' loop counts
(and msg.hackbench's loops).

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
from validation.anchors.sizing import size_rows  # noqa: E402
from validation.anchors.summary import RATIO_MAX, attempt, markdown, summarise  # noqa: E402
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
    return Config(scale=args.scale, hackbench={"groups": g, "fds": f, "loops": lo, "size": s})


def resolve_rows(rows: list[Row], benches: dict[str, set[str]], cfg: Config) -> dict[str, dict]:
    """resolve() for every row, saying which cannot run and which parameters are left out."""
    tools = Tools(lmbench_dir=os.environ.get("LMBENCH_BIN"))
    resolved = {r.name: resolve(r, benches, tools, cfg) for r in rows}
    for r in rows:
        res = resolved[r.name]
        if res["dropped_params"]:
            log(f"{r.name}: opcost {r.bench} has no parameter {', '.join(res['dropped_params'])}: "
                "not passed (the comparison may not be like with like)")
        if res["status"] != "ok":
            log(f"{r.name}: {res['why']}")
    return resolved


def footnote(args: argparse.Namespace, cpu: int, seconds: float) -> str:
    return (f"\nopcost `run SPEC {args.opcost_args} --cpu {cpu}` (msg.hackbench: `{args.opcost_args_long}`; "
            f"the median over processes); anchors pinned with "
            f"`taskset -c {cpu}`; {args.runs} interleaved runs; figures: medians over runs; opcost/anchor: median "
            f"of per-run ratios (min-max); CV across runs; PASS: ratio <= {RATIO_MAX:g} and CV opcost <= CV anchor "
            f"(a CV FAIL gives the one-sided F-test p of so large a gap between equally repeatable tools); "
            f"reruns: pairs run again because a side's CPU time was under {args.min_share:g} of its wall time "
            f"(another task on CPU {cpu}; 'kept': still so after --retries {args.retries}, left out of the figures "
            f"when at least two clean runs remain); "
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
    resolved = resolve_rows(rows, benches, cfg)
    active = {r.name: r for r in rows if resolved[r.name]["status"] == "ok"}
    size_rows(list(active.values()), resolved, benches, cmd, env, cpu)
    log(f"opcost: {cmd_desc} run SPEC {args.opcost_args} --cpu {cpu}; anchors under taskset -c {cpu}; "
        f"{args.runs} runs; seed {il.seed}; {len(active)} of {len(rows)} operations comparable")

    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="opcost-anchors-") as tmp:
        def sides(name: str) -> dict:
            row, res = active[name], resolved[name]
            return {"opcost": lambda: run_opcost(cmd, env, res["spec"], cpu, extra_long if row.long else extra,
                                                 Path(tmp), whole_process_share=row.long or row.children),
                    "anchor": lambda: run_anchor(res["anchor"], cpu)}

        runs = il.rounds(args.runs, list(active), sides, attempt)

    table = [summarise(r, resolved[r.name], runs.get(r.name, []), cpu) for r in rows]
    print(markdown(table), flush=True)
    print(footnote(args, cpu, time.monotonic() - t_start))
    if args.json:
        write_document(args.json, {
            "schema": "opcost.validation-anchors/1", "opcost": cmd_desc, "opcost_args": extra,
            "opcost_args_long": extra_long, "cpu": cpu, "runs": args.runs, "seed": il.seed, "scale": args.scale,
            "retries": args.retries, "min_share": args.min_share, "hackbench": cfg.hackbench, "ratio_max": RATIO_MAX,
        }, table)
    failed = [r for r in table if r.get("pass") is False or r["status"] == "error"]
    return 1 if (args.check and failed) else 0


if __name__ == "__main__":
    script_main(main)
