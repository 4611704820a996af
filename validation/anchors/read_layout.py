#!/usr/bin/env python3
"""Why `syscall.read` reads 0.96-0.97 of `lat_syscall read` on some machines
although both time read(fd, &c, 1) of /dev/zero: on those, what one such
call costs depends on where the calling program's code lies.

Two plain C loops of that read are built here (static, -O2): `one` is the
loop alone; `three` is the same loop in a program that also has loops of
write() and getppid() (never run), so its libc is laid out differently.
They run interleaved on one CPU with lmbench's `lat_syscall read` and
`opcost run syscall.read`, as the anchors report runs them (run_anchor,
run_opcost), each in fresh processes; printed: each one's median
ns per call over --rounds and its ratio to lmbench. On the 2-CPU Intel VM
of 2026-11-25, quiet, 8 rounds: `one` 99.1 ns (0.962 of lmbench), `three`
101.8 (0.988), opcost 99.4 (0.965), lat_syscall read 103.0: the same loop
differs by about 3% between two binaries (static or dynamic linking did not
matter), and lmbench's layout is a slow one. One process can land on the
other side (`one` 104.1 ns once), so give it rounds. Which layouts are slow was not
found (no PMU here).

    python3 validation/anchors/read_layout.py [--rounds 6] [--cpu 1]

Needs cc and lmbench (validation/anchors/install.sh)."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from validation.anchors.lmbench import lm  # noqa: E402
from validation.anchors.model import Config, Tools  # noqa: E402
from validation.anchors.sides import opcost_command, pinned, run_anchor, run_opcost  # noqa: E402

HEAD = r"""#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
  int fd = open("/dev/zero", O_RDONLY), wfd = open("/dev/null", O_WRONLY); char c = 0; long n = 300000;
  int other = argc > 1; double t[11]; (void)wfd;
  for (int rep = 0; rep < 11; rep++) {
    double t0 = now();
"""
LOOPS = {
    "one": "    for (long i = 0; i < n; i++) if (read(fd, &c, 1) != 1) return 1;\n",
    "three": "    if (other && argv[1][0] == 'w') { for (long i = 0; i < n; i++) if (write(wfd, &c, 1) != 1) return 1; }\n"
             "    else if (other) { for (long i = 0; i < n; i++) getppid(); }\n"
             "    else { for (long i = 0; i < n; i++) if (read(fd, &c, 1) != 1) return 1; }\n",
}
TAIL = r"""    t[rep] = (now() - t0) / n;
  }
  qsort(t, 11, sizeof t[0], cmp); printf("%.2f\n", t[5]); return 0;
}
"""


def build(work: Path) -> dict[str, str]:
    out = {}
    for name, loop in LOOPS.items():
        src = work / f"{name}.c"
        src.write_text(HEAD + loop + TAIL)
        exe = work / name
        subprocess.run(["cc", "-O2", "-static", "-o", str(exe), str(src)], check=True)
        out[name] = str(exe)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    args = ap.parse_args()
    anchor, why = lm("lat_syscall", "read")(Tools(), Config(lm_reps=5))
    if anchor is None:
        raise SystemExit(f"read_layout.py: {why}")
    cmd, env, _ = opcost_command()
    with tempfile.TemporaryDirectory(prefix="opcost-read-layout-") as tmp:
        exes = build(Path(tmp))
        def loop(exe: str) -> float:
            argv, pre = pinned([exe], args.cpu)
            return float(subprocess.run(argv, preexec_fn=pre, capture_output=True, text=True, check=True).stdout)

        sides = {"lat_syscall read": lambda: run_anchor(anchor, args.cpu)["ns_per_op"],
                 "opcost syscall.read": lambda: run_opcost(cmd, env, "syscall.read", args.cpu, [], Path(tmp))["ns_per_op"],
                 **{f"C loop, {k}": (lambda e=e: loop(e)) for k, e in exes.items()}}
        got: dict[str, list[float]] = {k: [] for k in sides}
        for r in range(args.rounds):
            order = list(sides)
            random.shuffle(order)
            for k in order:
                got[k].append(sides[k]())
            print(f"round {r + 1}/{args.rounds}: " + "  ".join(f"{k} {got[k][-1]:.1f}" for k in sides), flush=True)
    ref = statistics.median(got["lat_syscall read"])
    print(f"median ns per read(fd, &c, 1) of /dev/zero over {args.rounds} rounds, CPU {args.cpu}:")
    for k, v in got.items():
        m = statistics.median(v)
        print(f"  {k:<20} {m:7.1f} ns  {m / ref:.3f} of lat_syscall read  (min {min(v):.1f}, max {max(v):.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
