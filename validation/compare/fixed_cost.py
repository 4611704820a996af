#!/usr/bin/env python3
"""The sequential verdict's fixed cost (issue 25, item 9): what `opcost ab`
pays besides its probe processes, before and after a change, interleaved.

Two checkouts' front ends (their src/ directories) run the same comparisons
in a freshly shuffled order each repetition, with one probe binary
(OPCOST_PROBE: a wrapper that stamps the start of the first measuring probe
process, then execs this tree's probe):
- time to the first probe process: from the Popen of `opcost ab` to the
  start of its first measuring `opcost-probe run` (the preflight's `--check`
  runs excluded);
- wall time of a sequential `ab` that settles at its first look (A spin=1,
  B spin=--spin: a difference far beyond delta, so 10 processes per arm) and
  of the fixed design `-p 20` on the same pair: their ratio is the "time to
  a verdict" of docs/statistics.md (the aim: 0.5, the processes' ratio).

Printed: per checkout the medians, and after/before ratios. Everything is
measured in the same run on the same machine; only ratios are reported.
Run it under the lock other measurements take (docs/validation), e.g.
  flock /tmp/opcost-pytest.lock python3 validation/compare/fixed_cost.py --before OLD/src --after src
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WRAPPER = """#!/bin/sh
# stamp the first measuring probe process (not the preflight's --check), then be the probe
case " $* " in *" run "*) case " $* " in *" --check "*) ;; *)
  [ -e "$STAMP" ] || date +%s.%N > "$STAMP" ;; esac ;; esac
exec "$REAL_PROBE" "$@"
"""


def one(src: str, args: list[str], work: Path, probe: Path) -> tuple[float, float]:
    """(seconds to the first probe process, wall seconds) of one `opcost ...`."""
    stamp = work / "stamp"
    stamp.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": src, "OPCOST_PROBE": str(work / "probe.sh"), "STAMP": str(stamp),
           "REAL_PROBE": str(probe), "XDG_DATA_HOME": str(work)}
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "opcost", *args], env=env, cwd=work, capture_output=True, text=True,
                       timeout=600)
    wall = time.time() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"opcost {' '.join(args)} (PYTHONPATH={src}) failed: {r.stderr.strip()[-400:]}")
    return float(stamp.read_text()) - t0, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the src/ directory of the checkout before the change")
    ap.add_argument("--after", default=str(ROOT / "src"), help="the src/ directory after (default: this tree's)")
    ap.add_argument("--reps", type=int, default=6, help="repetitions (each runs every case of both)")
    ap.add_argument("--spin", type=int, default=301, help="B's spin: a difference far beyond delta")
    ap.add_argument("--cpu", default=None, help="where the probe runs (default: opcost's, the last CPU)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--probe", default=str(ROOT / "probe" / "opcost-probe"),
                    help="the probe both use (default: this tree's; a copy keeps a rebuild out of the run)")
    a = ap.parse_args()
    probe = Path(a.probe)
    if not probe.is_file():
        raise SystemExit(f"build the probe first: make -C {ROOT / 'probe'}")
    base = ["ab", "syscall.null", "--a", "spin=1", "--b", f"spin={a.spin}", "--no-store", "--no-progress"]
    base += ["--cpu", a.cpu] if a.cpu else []
    cases = {"sequential": base, "fixed -p 20": base + ["-p", "20"]}
    rng = random.Random(a.seed)
    first: dict[str, list[float]] = {"before": [], "after": []}
    wall: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="opcost-fixed-cost-") as tmp:
        work = Path(tmp)
        (work / "probe.sh").write_text(WRAPPER)
        (work / "probe.sh").chmod(0o755)
        for rep in range(a.reps):
            runs = [(who, case) for who in ("before", "after") for case in cases]
            rng.shuffle(runs)
            for who, case in runs:
                t_first, t_wall = one(a.before if who == "before" else a.after, cases[case], work, probe)
                first[who].append(t_first)
                wall.setdefault((who, case), []).append(t_wall)
            print(f"repetition {rep + 1}/{a.reps} done", file=sys.stderr, flush=True)
    med = statistics.median
    print(f"opcost ab syscall.null --a spin=1 --b spin={a.spin}: {a.reps} repetitions, both checkouts interleaved "
          f"in a shuffled order (seed {a.seed}); load average at the end {os.getloadavg()[0]:.1f}")
    for who in ("before", "after"):
        print(f"  {who}: time to the first probe process, median {med(first[who]):.3f} s "
              f"(range {min(first[who]):.3f}-{max(first[who]):.3f}); "
              + "; ".join(f"{case} wall {med(wall[(who, case)]):.2f} s" for case in cases)
              + f"; sequential / fixed = {med(wall[(who, 'sequential')]) / med(wall[(who, 'fixed -p 20')]):.3f}")
    print(f"  after / before: time to the first probe process {med(first['after']) / med(first['before']):.2f}; "
          f"sequential wall {med(wall[('after', 'sequential')]) / med(wall[('before', 'sequential')]):.3f}; "
          f"fixed wall {med(wall[('after', 'fixed -p 20')]) / med(wall[('before', 'fixed -p 20')]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
