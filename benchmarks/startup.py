#!/usr/bin/env python3
"""How long `opcost --help` takes to start, against a bare `python3 -c pass`
measured interleaved in the same run. Goal: under 0.3 s. Prints, never fails
(these machines are shared: read the figures, do not gate on them)."""

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd, env):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - t


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    help_cmd = [sys.executable, "-m", "opcost", "--help"]
    base_cmd = [sys.executable, "-c", "pass"]
    h, b = [], []
    for _ in range(runs):
        h.append(timed(help_cmd, env))
        b.append(timed(base_cmd, env))
    mh, mb = statistics.median(h), statistics.median(b)
    print(f"opcost --help   median {mh * 1000:7.1f} ms over {runs} runs (goal < 300 ms)")
    print(f"python3 -c pass median {mb * 1000:7.1f} ms")
    print(f"ratio help/bare-python {mh / mb:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
