"""The benchmark table as the probe tests see it: read from the built probe's
`list --json` while pytest collects, so that every benchmark bench/table.c
lists gets the smoke test (test_probe.py) and the leak test (test_leaks.py)
without a hand-kept list."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

PROBE_DIR = Path(__file__).resolve().parents[1]
HOST_PROBE = PROBE_DIR / "opcost-probe"

# Defaults too heavy for a smoke run (one msg.hackbench iteration at its
# defaults is 400 tasks and 400,000 messages): what the tests give instead.
QUICK = {"msg.hackbench": ["groups=2", "fds=4", "loops=20"]}


@functools.lru_cache(maxsize=None)
def benchmarks(probe: Path = HOST_PROBE, wrap: tuple[str, ...] = ()) -> tuple[dict, ...]:
    """The benchmarks of `probe` (run through `wrap`, e.g. qemu-aarch64), in
    table order; the host probe is built first."""
    if Path(probe) == HOST_PROBE:
        subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)
    cp = subprocess.run([*wrap, str(probe), "list", "--json"], capture_output=True, text=True, timeout=120,
                        check=True)
    return tuple(json.loads(cp.stdout)["benchmarks"])


def quick_args(name: str) -> list[str]:
    """The `-P key=value` arguments that keep a run of benchmark `name` short."""
    return [a for p in QUICK.get(name, []) for a in ("-P", p)]
