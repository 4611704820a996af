#!/usr/bin/env python3
"""A/A: identical variants compared repeatedly with `opcost ab`; counts how
often opcost wrongly says `slower` or `faster`. Target: at most 5% per
benchmark, and family-wise with Holm (docs/statistics.md). By default `ab` runs
its sequential design (no -p: looks after 10, 20, 40 processes per arm), so
the looks are part of what is checked; give `-p N` after -- for the fixed
design. Keeps every comparison document (--keep DIR) so coverage.py can
simulate over the real data. --minutes stops starting new comparisons after
that long (the count reached is what is reported)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from validation.harness.checkout import ab  # noqa: E402


def stopped_at(e: dict) -> str:
    q = e.get("sequential")
    return f"{q['processes_per_arm']}" if q else f"{e['n_a']} (fixed)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--comparisons", type=int, default=200)
    ap.add_argument("--minutes", type=float, default=None, help="start no comparison after this long")
    ap.add_argument("--benches", default="syscall.null,ctx.pipe,signal.catch")
    ap.add_argument("--params", default="", help="the one variant used as both A and B")
    ap.add_argument("--keep", default=None, help="directory for the raw comparison documents")
    ap.add_argument("run_options", nargs="*", default=["-n", "10", "-w", "2", "--target-ms", "5"],
                    help="passed to opcost ab (after --)")
    args = ap.parse_args()
    benches = args.benches.split(",")
    keep = Path(args.keep) if args.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    verdicts = {b: Counter() for b in benches}
    stops = {b: Counter() for b in benches}
    family = done = 0
    walls = []
    t0 = time.monotonic()
    for i in range(args.comparisons):
        if args.minutes is not None and time.monotonic() - t0 > args.minutes * 60:
            break
        t = time.monotonic()
        doc = ab(benches, args.params, args.params, [*args.run_options, "--seed", str(i)])
        walls.append(time.monotonic() - t)
        done += 1
        if keep:
            (keep / f"aa-{i:04d}.json").write_text(json.dumps(doc))
        wrong = False
        for e in doc["comparisons"]:
            verdicts[e["bench"]][e["verdict"]] += 1
            stops[e["bench"]][stopped_at(e)] += 1
            wrong |= e["verdict"] in ("slower", "faster")
        family += wrong
        print(f"{i + 1}/{args.comparisons} ({walls[-1]:.0f} s): " + "  ".join(
            f"{e['bench']} {e['verdict']} {e['ratio']:.4f} @{stopped_at(e)}" for e in doc["comparisons"]), flush=True)
    n = done
    took = time.monotonic() - t0
    design = "fixed" if any(o in ("-p", "--processes") for o in args.run_options) else "sequential (10, 20, 40)"
    print(f"\nA/A, {n} interleaved comparisons of identical variants, {design} design "
          f"(opcost ab {' '.join(benches)} {' '.join(args.run_options)}), {took:.0f} s, "
          f"{took / max(n, 1):.0f} s per comparison")
    if n < args.comparisons:
        print(f"  stopped at --minutes {args.minutes:g}: {n} of {args.comparisons}; all {args.comparisons} "
              f"would take about {took / max(n, 1) * args.comparisons / 60:.0f} min")
    for b in benches:
        c = verdicts[b]
        wrong = c["slower"] + c["faster"]
        print(f"  {b:<16} slower/faster {wrong}/{n} = {wrong / max(n, 1):.1%}   "
              + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
              + "   stopped after (per arm): " + ", ".join(f"{k}: {v}" for k, v in sorted(stops[b].items())))
    print(f"  family-wise (any benchmark slower/faster, Holm): {family}/{n} = {family / max(n, 1):.1%}  "
          "(target <= 5%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
