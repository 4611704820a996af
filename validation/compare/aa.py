#!/usr/bin/env python3
"""A/A: identical variants compared repeatedly with `opcost ab`; counts how
often opcost wrongly says `slower` or `faster`. Target: at most 5% per
benchmark (STATISTICS.md). Keeps every comparison document (--keep DIR) so
coverage.py can simulate over the real data."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from validation.harness.checkout import ab  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--comparisons", type=int, default=100)
    ap.add_argument("--benches", default="syscall.null,signal.install")
    ap.add_argument("--params", default="", help="the one variant used as both A and B")
    ap.add_argument("--keep", default=None, help="directory for the raw comparison documents")
    ap.add_argument("run_options", nargs="*", default=["-p", "10", "-n", "10", "-w", "2", "--target-ms", "5"],
                    help="passed to opcost ab (after --)")
    args = ap.parse_args()
    benches = args.benches.split(",")
    keep = Path(args.keep) if args.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    verdicts = {b: Counter() for b in benches}
    family = 0
    t0 = time.monotonic()
    for i in range(args.comparisons):
        doc = ab(benches, args.params, args.params, [*args.run_options, "--seed", str(i)])
        if keep:
            (keep / f"aa-{i:04d}.json").write_text(json.dumps(doc))
        wrong = False
        for e in doc["comparisons"]:
            verdicts[e["bench"]][e["verdict"]] += 1
            wrong |= e["verdict"] in ("slower", "faster")
        family += wrong
        print(f"{i + 1}/{args.comparisons}: " + "  ".join(f"{e['bench']} {e['verdict']} {e['ratio']:.4f}"
                                                           for e in doc["comparisons"]), flush=True)
    n = args.comparisons
    print(f"\nA/A, {n} interleaved comparisons of identical variants "
          f"(opcost ab {' '.join(benches)} {' '.join(args.run_options)}), {time.monotonic() - t0:.0f} s")
    for b in benches:
        c = verdicts[b]
        wrong = c["slower"] + c["faster"]
        print(f"  {b:<16} slower/faster {wrong}/{n} = {wrong / n:.1%}   "
              + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    print(f"  family-wise (any benchmark slower/faster, Holm): {family}/{n} = {family / n:.1%}  (target <= 5%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
