#!/usr/bin/env python3
"""Agreement check: opcost's instruction benchmarks against hand-written C loops.

For xsave, xsavec, xrstor and fxsave (each hot and cold) and 64-bit unsigned
division (inline instruction and shift-subtract software division, dependent
chain) this runs, interleaved in a freshly shuffled order every round:

  (a) one opcost process:
        opcost run SPEC -p 1 -n 20 -w 3 --cpu CPU --no-store --json TMP
      statistic: results[0].summary.median_ns (the median batch, per op);
  (b) one reference process (ref.c, built here with `cc -O2`):
        ref OP ITERS 23 CPU
      with ITERS = the batch length opcost calibrated for that operation
      (results[0].processes[0].samples[0].iters); statistic: the median of its
      last 20 batches (the first 3 are warm-up, as in opcost).

and prints opcost/reference per operation: the median of the per-round
ratios, their min-max, and PASS/FAIL against the band (default 0.95-1.05).
It is a report: exit 0 after printing, unless something crashed; with
--check, exit 1 when a ratio is outside the band.

What is done to keep the comparison about opcost and not about the setup:
  * same CPU for both (default: the last CPU we may run on), both pinned,
    helpers on the same CPU;
  * same batch length (opcost's calibrated iteration count), same number of
    warm-up and measured batches, same statistic (median batch);
  * every round runs the operations in a new random order; for each, the
    opcost process and the reference process run back to back, which one
    first drawn at random, so machine drift (other load, host noise) hits
    both sides alike; the ratio is formed per round within such a pair;
  * before round 1, one opcost process per operation only learns the batch
    length (discarded), so a reference process may run before its opcost
    partner;
  * a pair in which either process got less than --min-share (0.8) of the
    CPU (CPU time / wall time; opcost: its per-batch getrusage and wall_ns
    summed over the measured batches; reference: its whole-process rusage,
    helper included, over its wall time) was disturbed by another task on
    the CPU and is run again, up to --retries (3) times; every attempt is
    kept in --json;
  * opcost's runner gives every probe process a random-length environment
    variable (stack placement randomisation); the reference gets the same
    (a random 0-4096 byte variable), so a lucky or unlucky fixed stack
    alignment of the reference does not bias the ratio.
What is deliberately *not* equalised, because it is the point of the check:
opcost's overhead subtraction (clock pair + empty-loop cost per iteration),
its TSC-to-ns conversion (TSC rate calibrated against CLOCK_MONOTONIC_RAW)
versus the reference's plain clock_gettime(CLOCK_MONOTONIC), its per-batch
bookkeeping between batches, its static probe binary versus a plain
dynamically linked `cc -O2` program, and whatever the opcost CLI process
does while its probe runs (reading the probe's output, and any threads it
has, which can share the measuring CPU).

Both sides run under the same conditions: mask = XCR0, state = sse (all
components init, then xmm15 loaded), page-aligned area sized by CPUID.0DH;
cold: each batch on the next of 16 such areas (pages), its flush-alone batch
timed right after it on the same area and subtracted from it.
x86_64 only.

Usage: validation/instructions/run.py [--rounds 10] [--cpu N] [--json OUT] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from loops import SAMPLES, WARMUP, Failure, build_ref, default_cpu, fmt_ns, log, run_opcost, run_ref  # noqa: E402

# (name shown, opcost spec, ref OP)
OPS = [
    ("xsave hot", "xstate.xsave:cache=hot", "xsave_hot"),
    ("xsave cold", "xstate.xsave:cache=cold", "xsave_cold"),
    ("xsavec hot", "xstate.xsavec:cache=hot", "xsavec_hot"),
    ("xsavec cold", "xstate.xsavec:cache=cold", "xsavec_cold"),
    ("xrstor hot", "xstate.xrstor:cache=hot", "xrstor_hot"),
    ("xrstor cold", "xstate.xrstor:cache=cold", "xrstor_cold"),
    ("fxsave hot", "xstate.fxsave:cache=hot", "fxsave_hot"),
    ("fxsave cold", "xstate.fxsave:cache=cold", "fxsave_cold"),
    ("div inline", "insn.div:variant=inline,width=64,signed=no,form=latency", "div_inline"),
    ("div soft", "insn.div:variant=soft,width=64,signed=no,form=latency", "div_soft"),
]


def opcost_command() -> tuple[list[str], dict[str, str], str]:
    """`python -m opcost` from this checkout, with this checkout's probe
    (an installed opcost may predate the instruction benchmarks)."""
    env = dict(os.environ)
    src = str(REPO / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["OPCOST_PROBE"] = str(REPO / "probe" / "opcost-probe")
    return [sys.executable, "-m", "opcost"], env, f"{sys.executable} -m opcost (PYTHONPATH={src})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    ap.add_argument("--cpu", type=int, default=None,
                    help="CPU for opcost, the reference and their helpers (default: the last allowed CPU)")
    ap.add_argument("--json", metavar="OUT", help="write the figures as JSON to OUT")
    ap.add_argument("--check", action="store_true", help="exit 1 when a ratio is outside the band")
    ap.add_argument("--band", default="0.95,1.05", help="accepted ratio band LO,HI (default 0.95,1.05)")
    ap.add_argument("--ops", default=",".join(o[0] for o in OPS),
                    help="operations to check, comma-separated (default: all)")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"), help="C compiler for ref.c (default $CC or cc)")
    ap.add_argument("--ref-cflags", default="",
                    help="extra flags for building ref.c, e.g. -static (default: none, plain cc -O2)")
    ap.add_argument("--retries", type=int, default=3,
                    help="run a disturbed pair again up to this many times (default 3; 0: never)")
    ap.add_argument("--min-share", type=float, default=0.8,
                    help="a process whose CPU time is under this fraction of its wall time was "
                         "disturbed (default 0.8)")
    ap.add_argument("--seed", type=int, default=None, help="seed for the run order (default: random)")
    args = ap.parse_args(argv)

    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if args.retries < 0:
        ap.error("--retries must be >= 0")
    try:
        lo, hi = (float(x) for x in args.band.split(","))
    except ValueError:
        ap.error("--band must be LO,HI, e.g. 0.95,1.05")
    allowed = os.sched_getaffinity(0)
    cpu = default_cpu() if args.cpu is None else args.cpu
    if cpu not in allowed:
        ap.error(f"--cpu {cpu}: not a CPU this process may use ({', '.join(map(str, sorted(allowed)))})")
    want = [w.strip() for w in args.ops.split(",") if w.strip()]
    by_name = {o[0]: o for o in OPS}
    bad = [w for w in want if w not in by_name]
    if bad or not want:
        ap.error(f"--ops: unknown {', '.join(bad) or '(empty)'}; valid: {', '.join(by_name)}")
    ops = [by_name[w] for w in want]
    ref_cflags = args.ref_cflags.split()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)

    cmd, env, cmd_desc = opcost_command()
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="opcost-instructions-") as tmp:
        work = Path(tmp)
        ref = build_ref(HERE / "ref.c", work, args.cc, ref_cflags)
        log(f"opcost: {cmd_desc}; reference: {' '.join([args.cc, '-O2', *ref_cflags])} {HERE / 'ref.c'}; "
            f"cpu {cpu}; {args.rounds} rounds; seed {seed}")

        # Learn each operation's batch length, so a reference process can run
        # before its opcost partner in the shuffled rounds. Discarded.
        iters: dict[str, int] = {}
        pre = list(ops)
        rng.shuffle(pre)
        for name, spec, _ in pre:
            iters[name] = run_opcost(cmd, env, spec, cpu, work)["iters"]
            log(f"calibration: {name}: {iters[name]} iterations per batch")

        rounds: dict[str, list[dict]] = {o[0]: [] for o in ops}
        for rnd in range(args.rounds):
            order = list(ops)
            rng.shuffle(order)
            for name, spec, refop in order:
                # One pair: the two processes back to back, in random order.
                # If another task took the CPU from either of them (CPU time
                # well under wall time), the pair is run again, up to
                # --retries times; every attempt is kept in the JSON.
                attempts = []
                for attempt in range(1 + args.retries):
                    sides = ["opcost", "ref"]
                    rng.shuffle(sides)
                    got = {}
                    for side in sides:
                        if side == "opcost":
                            got[side] = run_opcost(cmd, env, spec, cpu, work)
                            iters[name] = got[side]["iters"]
                        else:
                            got[side] = run_ref(ref, refop, iters[name], cpu, rng)
                    a, b = got["opcost"], got["ref"]
                    shares = [x["cpu_share"] for x in (a, b) if x["cpu_share"] is not None]
                    disturbed = bool(shares) and min(shares) < args.min_share
                    attempts.append({
                        "first": sides[0], "opcost_ns": a["median_ns"], "ref_ns": b["median_ns"],
                        "ratio": a["median_ns"] / b["median_ns"], "opcost_iters": a["iters"],
                        "ref_iters": b["iters"], "opcost_cpu_share": a["cpu_share"],
                        "ref_cpu_share": b["cpu_share"], "disturbed": disturbed,
                        "opcost_overhead_ns": a.get("overhead_ns"), "ref_flush_ns": b.get("flush_ns"),
                        "opcost_aux_ns": a.get("aux_ns"),
                        "opcost_batches_ns": a["batches_ns"], "ref_batches_ns": b["batches_ns"],
                    })
                    if not disturbed:
                        break
                    log(f"round {rnd + 1}: {name}: disturbed (CPU share opcost "
                        f"{a['cpu_share'] or float('nan'):.2f}, ref {b['cpu_share'] or float('nan'):.2f})"
                        + (", again" if attempt < args.retries else ", kept"))
                final = dict(attempts[-1], round=rnd + 1, reruns=len(attempts) - 1, attempts=attempts[:-1])
                rounds[name].append(final)
            log(f"round {rnd + 1}/{args.rounds}: " + "  ".join(
                f"{n} {rounds[n][-1]['ratio']:.3f}" for n, _, _ in ops))

    rows = []
    for name, spec, refop in ops:
        rs = rounds[name]
        ratios = [r["ratio"] for r in rs]
        med = statistics.median(ratios)
        rows.append({
            "operation": name, "opcost_spec": spec, "ref_op": refop,
            "opcost_median_ns": statistics.median(r["opcost_ns"] for r in rs),
            "ref_median_ns": statistics.median(r["ref_ns"] for r in rs),
            "ratio": med, "ratio_min": min(ratios), "ratio_max": max(ratios),
            "pass": lo <= med <= hi, "reruns": sum(r["reruns"] for r in rs),
            "disturbed_kept": sum(r["disturbed"] for r in rs), "rounds": rs,
        })

    head = ("operation", "opcost ns", "reference ns", "opcost/ref", "per-round min-max", "reruns", "")
    table = [head] + [(r["operation"], fmt_ns(r["opcost_median_ns"]), fmt_ns(r["ref_median_ns"]),
                       f"{r['ratio']:.3f}", f"{r['ratio_min']:.3f}-{r['ratio_max']:.3f}",
                       f"{r['reruns']}" + (f" ({r['disturbed_kept']} kept)" if r["disturbed_kept"] else ""),
                       "PASS" if r["pass"] else "FAIL") for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    for k, t in enumerate(table):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(t, widths))).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print(f"\nmedians over {args.rounds} rounds on CPU {cpu}; ratio = median of per-round "
          f"opcost/ref; band {lo:g}-{hi:g}; {time.monotonic() - t_start:.0f} s")
    print(f"reruns: pairs run again because a side's CPU time was under {args.min_share:g} of its wall time "
          f"(another task on CPU {cpu}); 'kept': still disturbed after --retries {args.retries}")

    if args.json:
        doc = {
            "schema": "opcost.validation-instructions/1",
            "opcost": cmd_desc, "cc": args.cc, "ref_cflags": ["-O2", *ref_cflags],
            "cpu": cpu, "rounds": args.rounds, "seed": seed,
            "warmup": WARMUP, "samples": SAMPLES, "band": [lo, hi],
            "retries": args.retries, "min_share": args.min_share,
            "machine": {"node": platform.node(), "kernel": platform.release(), "arch": platform.machine()},
            "operations": rows,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    failed = [r["operation"] for r in rows if not r["pass"]]
    return 1 if (args.check and failed) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        log(f"run.py: {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        log("run.py: interrupted")
        sys.exit(130)
