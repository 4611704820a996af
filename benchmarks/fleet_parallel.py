#!/usr/bin/env python3
"""Do hosts measured at once cost about one host's time? Times `opcost fleet
run` on three hosts with --parallel-hosts 3 against each host alone, and
prints the wall time of the three at once over the slowest host alone
(goal: at most 1.3), per repetition and their median.

The three "hosts" are sshd on 127.0.0.2-4 (tests/sshd_hosts.py; needs
root and openssh-server), all on this one machine. Real hosts measure on
their own CPUs; here they would share this machine's, so the study is
`timer.nanosleep:ns=1000000`: its batches sleep, so three hosts measuring at
once do not wait for each other's CPU, and what is timed is what the fleet
adds (connections, uploads, the remote environment, streaming, storing).
The rounds are interleaved (alone x3, together) in a rotated order.

Bounded: 3 repetitions by default (argv[1], at most 10), each command at
most 300 s. Prints, never fails: this machine is shared; read the figures."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import sshd_hosts  # noqa: E402

STUDY = ["timer.nanosleep:ns=1000000", "-p", "4", "-n", "10", "-w", "1", "--target-ms", "20", "--no-progress"]
GOAL = 1.3


def timed(hosts: list[str], config: Path, env: dict) -> float:
    cmd = [sys.executable, "-m", "opcost", "fleet", "run", "--ssh-config", str(config), "--hosts", ",".join(hosts),
           "--parallel-hosts", str(len(hosts)), *STUDY]
    t = time.perf_counter()
    cp = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, timeout=300,
                        stdin=subprocess.DEVNULL)
    took = time.perf_counter() - t
    if cp.returncode != 0:
        raise SystemExit(f"fleet_parallel: {' '.join(hosts)} failed (exit {cp.returncode}): {cp.stderr.strip()}")
    return took


def main() -> int:
    reps = min(10, int(sys.argv[1])) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory(prefix="opcost-bench-fleet-") as tmp:
        try:
            fleet = sshd_hosts.start(Path(tmp) / "hosts")
        except sshd_hosts.Unavailable as e:
            print(f"fleet_parallel: cannot start the sshd hosts here: {e}")
            return 0
        try:
            env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), XDG_DATA_HOME=tmp)
            names = fleet.names
            ratios = []
            print(f"{'rep':>3}  {'alone (s): ' + ', '.join(names):<40} {'slowest':>8} {'together':>9} {'ratio':>6}")
            for rep in range(reps):
                alone: dict[str, float] = {}
                together = 0.0
                steps = [[h] for h in names] + [names]
                steps = steps[rep % len(steps):] + steps[:rep % len(steps)]
                for step in steps:
                    t = timed(step, fleet.ssh_config, env)
                    if len(step) == 1:
                        alone[step[0]] = t
                    else:
                        together = t
                slowest = max(alone.values())
                ratios.append(together / slowest)
                print(f"{rep + 1:>3}  {', '.join(f'{alone[h]:.2f}' for h in names):<40} {slowest:>8.2f} "
                      f"{together:>9.2f} {ratios[-1]:>6.2f}")
        finally:
            fleet.stop()
    med = statistics.median(ratios)
    print(f"three hosts at once / the slowest alone: median {med:.2f} over {reps} repetitions "
          f"(goal <= {GOAL}: {'met' if med <= GOAL else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
