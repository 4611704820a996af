"""What a row of the anchors report is made of: the tools found here
(Tools), one anchor command (Anchor), one row (Row: which opcost spec
against which anchor, and whether their definitions match), and the
report's sizes (Config). Data only; catalogue.py and lmbench.py fill them."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from validation.anchors.parsers import parse_perf_bench_list

# Where validation/anchors/install.sh builds lmbench (outside the repository).
def anchors_cache() -> Path:
    env = os.environ.get("OPCOST_ANCHORS_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "opcost-anchors"


# Rows whose definitions match: opcost/anchor must lie in this band.
RATIO_BAND = (0.97, 1.03)


@dataclass
class Tools:
    """Where the anchor tools are (injectable for tests). lmbench: the
    directory in $LMBENCH_BIN, else the one install.sh built (its
    lmbench.status says where, or why the build failed)."""
    which: Callable[[str], str | None] = shutil.which
    lmbench_dir: str | None = None
    perf_syscall_benches: list[str] | None = None  # None: not asked yet
    lmbench_status: Path | None = None              # None: the install.sh cache's

    def _status(self) -> tuple[str | None, str]:
        """(lmbench's bin directory, or None and why not)."""
        if self.lmbench_dir:
            return self.lmbench_dir, ""
        path = self.lmbench_status or anchors_cache() / "lmbench.status"
        try:
            line = path.read_text().strip().splitlines()[0]
        except (OSError, IndexError):
            return None, f"lmbench not built (no {path}: run bash validation/anchors/install.sh)"
        if line.startswith("ok "):
            return line[3:].strip(), ""
        return None, f"lmbench could not be built: {line.removeprefix('failed: ')}"

    def lmbench(self, name: str) -> tuple[str | None, str]:
        """(path of lmbench's NAME, or None and why it is not here)."""
        d, why = self._status()
        if d is None:
            return None, why
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p), ""
        return None, f"lmbench has no {name} in {d}"

    def perf_syscall(self) -> list[str]:
        if self.perf_syscall_benches is None:
            perf = self.which("perf")
            self.perf_syscall_benches = []
            if perf:
                try:
                    cp = subprocess.run([perf, "bench", "syscall"], capture_output=True, text=True, timeout=30)
                    self.perf_syscall_benches = parse_perf_bench_list(cp.stdout + cp.stderr)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        return self.perf_syscall_benches


@dataclass
class Anchor:
    tool: str                       # shown: "perf bench", "hackbench (rt-tests)", "lmbench"
    argv: list[str]                 # without the taskset prefix
    parse: Callable[[str], dict]
    stream: str = "stdout"          # where the figure is printed: stdout, stderr, both
    env: dict[str, str] = field(default_factory=dict)  # added to the environment
    prepare: Callable[[], None] | None = None          # once before the runs (files it reads); OSError: cannot run


@dataclass
class Row:
    name: str                       # shown, and --ops key
    bench: str                      # opcost benchmark
    params: dict[str, str]
    unit: str                       # "call", "round trip", "message", ...
    find_anchor: Callable[[Tools, "Config"], tuple[Anchor | None, str]]  # (anchor, why not)
    anchor_desc: str                # shown when the anchor is not here
    long: bool = False              # one iteration is a whole run: opcost gets --opcost-args-long
    children: bool = False          # the work runs in children the samples' usage leaves out
    sized_like_anchor: bool = False  # give the probe the anchor process's footprint (resident=, mappings=)
    pagetable_like_anchor: int = 0  # bytes of the anchor's file mapping: place opcost's like it (pagetable=)
    differs: str = ""               # how the anchor's definition differs from this opcost spec ("": it does not)
    band: tuple[float | None, float | None] | None = RATIO_BAND  # judged ratio range; None: not judged
    minus: dict[str, str] | None = None  # opcost's figure less this spec's (same benchmark, these parameters changed)
    minus_bench: str | None = None  # ... or this benchmark with only the minus parameters
    minus_div: int = 1              # ... divided by this (per-page share of a per-mapping cost)
    tool: str = "perf"              # --ops group: perf, hackbench, lmbench

    def spec(self, declared: set[str] | None = None, params: dict[str, str] | None = None) -> str:
        ps = {k: v for k, v in (params or self.params).items() if declared is None or k in declared}
        return self.bench + (":" + ",".join(f"{k}={v}" for k, v in ps.items()) if ps else "")


@dataclass
class Config:
    scale: float = 1.0
    hackbench: dict = field(default_factory=lambda: {"groups": 2, "fds": 10, "loops": 2000, "size": 100})
    lm_reps: int = 5                # lmbench -N (its default is 11)
    workdir: Path | None = None     # lmbench's input files (a tmpfs directory); None: not made

    def loops(self, n: int) -> int:
        return max(1, int(round(n * self.scale)))
