"""compare_main: the whole comparison of opcost with a hand-written C loop
(overhead/run.py, instructions/run.py; each brings its operations, band and
schema). For each operation it runs, interleaved in a freshly shuffled
order every round:

  (a) one opcost process:
        opcost run SPEC -p 1 -n 20 -w 3 --cpu CPU --no-store --json TMP
      statistic: results[0].summary.median_ns (the median batch, per op);
  (b) one reference process (ref.c, built here with `cc -O2`):
        ref OP ITERS 23 CPU
      with ITERS = the batch length opcost calibrated for that operation
      (results[0].processes[0].samples[0].iters); statistic: the median of its
      last 20 batches (the first 3 are warm-up, as in opcost).

and prints opcost/reference per operation: the median of the per-round
ratios, their min-max, and PASS/FAIL against the band; then the two sides'
per-process medians as distributions (distributions.py: the levels each
side's processes fall on, the ratio at the 10/50/90% quantiles with
bootstrap intervals, the Hodges-Lehmann ratio with its Moses interval,
Mann-Whitney and Anderson-Darling p-values), so that a side which never
reaches the other's fast level shows even when the medians agree. It is a
report: exit 0 after printing, unless something crashed; with --check, exit
1 when a ratio is outside the band or opcost is slower beyond noise at a
quantile.

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
has, which can share the measuring CPU)."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from validation.harness import distributions, interleave
from validation.harness.checkout import Command, build_probe, checkout_opcost
from validation.harness.interleave import Interleave, Record
from validation.harness.reference import SAMPLES, WARMUP, build_ref, run_opcost, run_ref
from validation.harness.report import text_table, write_document
from validation.harness.script import log, pick_cpu

# (name shown and --ops key, opcost spec, ref.c OP)
Op = tuple[str, str, str]


def options(doc: str, ops: list[Op], band: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=12, help="interleaved rounds (default 12: 12 processes a side)")
    ap.add_argument("--cpu", type=int, default=None,
                    help="CPU for opcost, the reference and their helpers (default: the last allowed CPU)")
    ap.add_argument("--json", metavar="OUT", help="write the figures as JSON to OUT")
    ap.add_argument("--check", action="store_true", help="exit 1 when a ratio is outside the band")
    ap.add_argument("--band", default=band, help=f"accepted ratio band LO,HI (default {band})")
    ap.add_argument("--ops", default=",".join(o[0] for o in ops),
                    help="operations to check, comma-separated (default: all)")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"), help="C compiler for ref.c (default $CC or cc)")
    ap.add_argument("--ref-cflags", default="",
                    help="extra flags for building ref.c, e.g. -static (default: none, plain cc -O2)")
    ap.add_argument("--checkout", action="store_true",
                    help="measure this checkout (python -m opcost with src/ and probe/opcost-probe, built if "
                         "missing) rather than the script's default opcost")
    interleave.add_options(ap, 0.8, "a process whose CPU time is under this fraction of its wall time was "
                                    "disturbed (default 0.8)")
    return ap


def choose_ops(ap: argparse.ArgumentParser, arg: str, ops: list[Op]) -> list[Op]:
    want = [w.strip() for w in arg.split(",") if w.strip()]
    by_name = {o[0]: o for o in ops}
    bad = [w for w in want if w not in by_name]
    if bad or not want:
        ap.error(f"--ops: unknown {', '.join(bad) or '(empty)'}; valid: {', '.join(by_name)}")
    return [by_name[w] for w in want]


def calibrate(cmd: list[str], env: dict[str, str], ops: list[Op], cpu: int, work: Path,
              rng: random.Random) -> dict[str, int]:
    """Each operation's batch length, learnt from one opcost process per
    operation (discarded), so a reference process can run before its
    opcost partner in the shuffled rounds."""
    iters: dict[str, int] = {}
    pre = list(ops)
    rng.shuffle(pre)
    for name, spec, _ in pre:
        iters[name] = run_opcost(cmd, env, spec, cpu, work)["iters"]
        log(f"calibration: {name}: {iters[name]} iterations per batch")
    return iters


def attempt_record(aux_fields: bool) -> Record:
    """aux_fields: also the reference's flush and opcost's aux cost (instruction cold forms)."""
    def record(first: str, got: dict[str, dict], disturbed: bool) -> dict:
        a, b = got["opcost"], got["ref"]
        return {
            "first": first, "opcost_ns": a["median_ns"], "ref_ns": b["median_ns"],
            "ratio": distributions.ratio(a["median_ns"], b["median_ns"]), "opcost_iters": a["iters"],
            "ref_iters": b["iters"], "opcost_cpu_share": a["cpu_share"],
            "ref_cpu_share": b["cpu_share"], "disturbed": disturbed,
            "opcost_overhead_ns": a.get("overhead_ns"),
            **({"ref_flush_ns": b.get("flush_ns"), "opcost_aux_ns": a.get("aux_ns")} if aux_fields else {}),
            "opcost_batches_ns": a["batches_ns"], "ref_batches_ns": b["batches_ns"],
        }
    return record


def summarise(ops: list[Op], rounds: dict[str, list[dict]], lo: float, hi: float, seed: int = 0) -> list[dict]:
    rows = []
    for k, (name, spec, refop) in enumerate(ops):
        rs = rounds[name]
        # a round whose figure is <= 0 has no ratio: the row is not measurable here (its figures still shown)
        ratios = [r["ratio"] for r in rs if r["ratio"] is not None]
        whole = len(ratios) == len(rs) and bool(rs)
        med = statistics.median(ratios) if whole else None
        dist = distributions.compare([r["opcost_ns"] for r in rs], [r["ref_ns"] for r in rs], hi, seed + k)
        rows.append({
            "operation": name, "opcost_spec": spec, "ref_op": refop,
            "opcost_median_ns": statistics.median(r["opcost_ns"] for r in rs),
            "ref_median_ns": statistics.median(r["ref_ns"] for r in rs),
            "ratio": med, "ratio_min": min(ratios) if whole else None, "ratio_max": max(ratios) if whole else None,
            **({} if whole else {"not_measurable": distributions.NOT_MEASURABLE,
                                 "rounds_not_measurable": len(rs) - len(ratios)}),
            "pass": None if med is None else lo <= med <= hi, "reruns": sum(r["reruns"] for r in rs),
            "disturbed_kept": sum(r["disturbed"] for r in rs), "distribution": dist, "rounds": rs,
        })
    return rows


def fmt_ns(x: float) -> str:
    return f"{x:,.1f}"


def table(rows: list[dict]) -> str:
    head = ("operation", "opcost ns", "reference ns", "opcost/ref", "per-round min-max", "reruns", "")

    def verdict(r: dict) -> str:
        if r["pass"] is None:
            return f"{r['not_measurable']} in {r['rounds_not_measurable']} of {len(r['rounds'])} rounds"
        return "PASS" if r["pass"] else "FAIL"
    return text_table(head, [(r["operation"], fmt_ns(r["opcost_median_ns"]), fmt_ns(r["ref_median_ns"]),
                              "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
                              "-" if r["ratio"] is None else f"{r['ratio_min']:.3f}-{r['ratio_max']:.3f}",
                              f"{r['reruns']}" + (f" ({r['disturbed_kept']} kept)" if r["disturbed_kept"] else ""),
                              verdict(r)) for r in rows])


def distribution_table(rows: list[dict]) -> str:
    """Per operation: each side's levels (processes@median ns), opcost/ref at
    matched quantiles [95% bootstrap], the Hodges-Lehmann ratio [Moses], the
    two p-values, and where opcost is slower beyond noise."""
    def q(d: dict, at: float) -> str:
        x = next(x for x in d["quantiles"] if x["q"] == at)
        return f"{x['ratio']:.3f} [{x['ci95'][0]:.3f},{x['ci95'][1]:.3f}]"

    head = ("operation", "opcost levels", "reference levels", "q10", "q50", "q90", "HL ratio",
            "p MWU", "p AD", "")
    out = []
    for r in rows:
        d = r["distribution"]
        if "not_measurable" in d:
            out.append((r["operation"], distributions.fmt_levels(d["opcost_levels"]),
                         distributions.fmt_levels(d["ref_levels"]), "-", "-", "-", "-", "-", "-", d["not_measurable"]))
            continue
        out.append((r["operation"], distributions.fmt_levels(d["opcost_levels"]),
                    distributions.fmt_levels(d["ref_levels"]), q(d, 0.1), q(d, 0.5), q(d, 0.9),
                    f"{d['hl_ratio']:.3f} [{d['hl_ci95'][0]:.3f},{d['hl_ci95'][1]:.3f}]",
                    f"{d['p_mannwhitney']:.3f}", f"{d['p_anderson']:.3f}",
                    "slower at " + ",".join(f"{int(x * 100)}%" for x in d["slower_at"]) if d["slower_at"]
                    else "no slower"))
    return text_table(head, out)


def compare_main(argv: list[str] | None, *, doc: str, here: Path, ops: list[Op], band: str, schema: str,
                 opcost_command: Callable[[], Command], aux_fields: bool = False) -> int:
    """The whole script: options, the interleaved rounds of opcost/reference
    pairs, the table and the JSON. here: the script's folder (its ref.c);
    band: default LO,HI; opcost_command(): which opcost runs; aux_fields:
    see attempt_record."""
    ap = options(doc, ops, band)
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    il = Interleave.from_args(ap, args)
    try:
        lo, hi = (float(x) for x in args.band.split(","))
    except ValueError:
        ap.error(f"--band must be LO,HI, e.g. {band}")
    cpu = pick_cpu(ap, args.cpu)
    ops = choose_ops(ap, args.ops, ops)
    ref_cflags = args.ref_cflags.split()

    if args.checkout:
        build_probe()
        cmd, env, cmd_desc = checkout_opcost(probe=True)
    else:
        cmd, env, cmd_desc = opcost_command()
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"opcost-{here.name}-") as tmp:
        work = Path(tmp)
        ref = build_ref(here / "ref.c", work, args.cc, ref_cflags)
        log(f"opcost: {cmd_desc}; reference: {' '.join([args.cc, '-O2', *ref_cflags])} {here / 'ref.c'}; "
            f"cpu {cpu}; {args.rounds} rounds; seed {il.seed}")
        iters = calibrate(cmd, env, ops, cpu, work, il.rng)
        by_name = {o[0]: o for o in ops}

        def sides(name: str) -> dict:
            _, spec, refop = by_name[name]

            def opcost() -> dict:
                got = run_opcost(cmd, env, spec, cpu, work)
                iters[name] = got["iters"]  # the reference runs the batch length opcost last calibrated
                return got
            return {"opcost": opcost, "ref": lambda: run_ref(ref, refop, iters[name], cpu, il.rng)}

        rounds = il.rounds(args.rounds, list(by_name), sides, attempt_record(aux_fields))

    rows = summarise(ops, rounds, lo, hi, il.seed)
    print(table(rows))
    print(f"\nmedians over {args.rounds} rounds on CPU {cpu}; ratio = median of per-round "
          f"opcost/ref; band {lo:g}-{hi:g}; {time.monotonic() - t_start:.0f} s")
    print("\nper-process medians as distributions (levels: processes@median ns, a new level past a "
          f"{distributions.LEVEL_GAP:.0%} gap; q10/q50/q90: opcost/ref at matched quantiles [95% bootstrap]; "
          "HL: Hodges-Lehmann ratio [Moses 95%]; slower: a quantile's whole interval above the band)")
    print(distribution_table(rows))
    print(f"reruns: pairs run again because a side's CPU time was under {args.min_share:g} of its wall time "
          f"(another task on CPU {cpu}); 'kept': still disturbed after --retries {args.retries}")
    if args.json:
        write_document(args.json, {
            "schema": schema, "opcost": cmd_desc, "cc": args.cc, "ref_cflags": ["-O2", *ref_cflags],
            "cpu": cpu, "rounds": args.rounds, "seed": il.seed, "warmup": WARMUP, "samples": SAMPLES,
            "band": [lo, hi], "retries": args.retries, "min_share": args.min_share,
        }, rows)
    # a row not measurable here is said in its row, neither passed nor failed
    failed = [r["operation"] for r in rows if r["pass"] is False or r["distribution"]["slower_at"]]
    return 1 if (args.check and failed) else 0
