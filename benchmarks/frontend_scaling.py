#!/usr/bin/env python3
"""Does the front end's cost per probe process stay constant however long the
run? Times `opcost run syscall.null -p 300` against `-p 150` (and `-p 1`, the
fixed start-up cost), on the fake clock so the probe's share is small and
steady, with and without `--json`, interleaved over a few repetitions.

Prints the ratio of the whole runs, t(300)/t(150), and of the part that grows
with the processes, (t(300)-t(1))/(t(150)-t(1)); constant per-process cost
gives 2.0 for the latter (goal: at most 2.2). Prints, never fails: these
machines are shared; read the figures, do not gate on them."""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "--no-progress"]
GOAL = 2.2


def timed(n: int, json_path: str | None, env: dict) -> float:
    cmd = [sys.executable, "-m", "opcost", "run", "syscall.null", "-p", str(n), *FAKE]
    if json_path:
        cmd += ["--json", json_path]
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - t


def main() -> int:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), XDG_DATA_HOME=tmp)
        times: dict[tuple, list[float]] = {}
        for _ in range(reps):
            for json_path in (None, os.path.join(tmp, "out.json")):
                for n in (1, 150, 300):
                    times.setdefault((n, bool(json_path)), []).append(timed(n, json_path, env))
    worst = 0.0
    for with_json in (False, True):
        t1, t150, t300 = (statistics.median(times[(n, with_json)]) for n in (1, 150, 300))
        grow = (t300 - t1) / (t150 - t1)
        worst = max(worst, grow)
        print(f"{'with --json' if with_json else 'no --json  '}: -p 1 {t1:.2f} s, -p 150 {t150:.2f} s, "
              f"-p 300 {t300:.2f} s; t(300)/t(150) = {t300 / t150:.2f}, "
              f"growing part (t(300)-t(1))/(t(150)-t(1)) = {grow:.2f}")
    print(f"front end per process: {'constant' if worst <= GOAL else 'GROWS'} "
          f"(worst growing-part ratio {worst:.2f}, goal <= {GOAL})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
