"""The catalogue of anchors: for each row, which opcost benchmark and
parameters are compared with which established tool's command ("the
anchor"), whether that tool is here (and if not, why), and which rows --ops
selects. make_rows lists the rows; resolve says what can run of one."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from validation.anchors.parsers import parse_hackbench, parse_lmbench, parse_perf_bench, parse_perf_bench_list

LMBENCH_NOT_PACKAGED = "lmbench not packaged in Debian"


@dataclass
class Tools:
    """Where the anchor tools are (injectable for tests)."""
    which: Callable[[str], str | None] = shutil.which
    lmbench_dir: str | None = None
    perf_syscall_benches: list[str] | None = None  # None: not asked yet

    def lmbench(self, name: str) -> str | None:
        if self.lmbench_dir:
            p = Path(self.lmbench_dir) / name
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
        return self.which(name)

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

    def spec(self, declared: set[str] | None = None) -> str:
        ps = {k: v for k, v in self.params.items() if declared is None or k in declared}
        return self.bench + (":" + ",".join(f"{k}={v}" for k, v in ps.items()) if ps else "")


@dataclass
class Config:
    scale: float = 1.0
    hackbench: dict = field(default_factory=lambda: {"groups": 2, "fds": 10, "loops": 2000, "size": 100})

    def loops(self, n: int) -> int:
        return max(1, int(round(n * self.scale)))


def _lm(tools: Tools, exe: str, args: list[str], why_missing: str) -> tuple[Anchor | None, str]:
    path = tools.lmbench(exe)
    if not path:
        return None, f"anchor unavailable: {why_missing}{LMBENCH_NOT_PACKAGED} ({exe} not on PATH or in $LMBENCH_BIN)"
    return Anchor("lmbench", [path, *args], parse_lmbench, stream="both"), ""


def anchor_perf_syscall(bench: str, loops: int, lm_exe: str, lm_args: list[str], why_no_perf: str):
    """`perf bench syscall BENCH -l LOOPS` when this perf has it, else lmbench's LM_EXE."""
    def find(tools: Tools, cfg: Config):
        perf = tools.which("perf")
        if perf and bench in tools.perf_syscall():
            return Anchor("perf bench", [perf, "bench", "syscall", bench, "-l", str(cfg.loops(loops))],
                          parse_perf_bench), ""
        return _lm(tools, lm_exe, lm_args, why_no_perf)
    return find


def anchor_sched_pipe(threads: bool):
    def find(tools: Tools, cfg: Config):
        perf = tools.which("perf")
        if perf:
            return Anchor("perf bench", [perf, "bench", "sched", "pipe", *(["-T"] if threads else []),
                                         "-l", str(cfg.loops(200_000))], parse_perf_bench), ""
        if threads:
            return None, "anchor unavailable: no perf (apt-get install linux-perf); lmbench has no threaded pipe"
        return _lm(tools, "lat_pipe", [], "no perf (apt-get install linux-perf); ")
    return find


def anchor_signal_catch(tools: Tools, cfg: Config):
    return _lm(tools, "lat_sig", ["catch"], "")


def anchor_hackbench(ipc: str, mode: str):
    def find(tools: Tools, cfg: Config):
        hb = tools.which("hackbench")
        if not hb:
            return None, "anchor unavailable: no hackbench (apt-get install rt-tests)"
        h = cfg.hackbench
        argv = [hb, "-g", str(h["groups"]), "-f", str(h["fds"]), "-l", str(cfg.loops(h["loops"])),
                "-s", str(h["size"])]
        if ipc == "pipe":
            argv.append("-p")
        argv.append("-T" if mode == "thread" else "-P")
        return Anchor("hackbench (rt-tests)", argv, parse_hackbench), ""
    return find


def make_rows(cfg: Config) -> list[Row]:
    h = cfg.hackbench
    rows = [
        Row("syscall.null", "syscall.null", {"via": "libc"}, "call",
            anchor_perf_syscall("basic", 5_000_000, "lat_syscall", ["null"],
                                "no `perf bench syscall basic` (apt-get install linux-perf); "),
            "perf bench syscall basic / lmbench lat_syscall null"),
        Row("ctx.pipe process", "ctx.pipe", {"mode": "process", "placement": "same"}, "round trip",
            anchor_sched_pipe(False), "perf bench sched pipe / lmbench lat_pipe"),
        Row("ctx.pipe thread", "ctx.pipe", {"mode": "thread", "placement": "same"}, "round trip",
            anchor_sched_pipe(True), "perf bench sched pipe -T"),
        Row("signal.catch", "signal.catch", {}, "signal", anchor_signal_catch, "lmbench: `lat_sig catch`"),
        Row("proc.fork", "proc.fork", {}, "fork",
            anchor_perf_syscall("fork", 1_000, "lat_proc", ["fork"],
                                "this perf has no `perf bench syscall fork` (perf >= 6.2); "),
            "perf bench syscall fork / lmbench lat_proc fork", children=True, sized_like_anchor=True),
    ]
    for ipc, mode in (("socket", "process"), ("pipe", "thread")):
        rows.append(Row(f"msg.hackbench {ipc} {mode}", "msg.hackbench",
                        {"groups": str(h["groups"]), "fds": str(h["fds"]), "loops": str(cfg.loops(h["loops"])),
                         "size": str(h["size"]), "ipc": ipc, "mode": mode, "workers_on": "pinned"}, "message",
                        anchor_hackbench(ipc, mode), "hackbench (rt-tests)", long=True))
    return rows


def resolve(row: Row, benches: dict[str, set[str]], tools: Tools, cfg: Config) -> dict:
    """What can run for this row: {'status': 'ok'|'not in opcost'|'anchor unavailable', ...}.
    benches: opcost benchmark name -> its declared parameter names."""
    anchor, why = row.find_anchor(tools, cfg)
    out = {"anchor": anchor, "why": why, "spec": row.spec(), "dropped_params": []}
    if row.bench not in benches:
        out["status"] = "not in opcost"
        out["why"] = f"not in this opcost (no benchmark {row.bench})"
        return out
    declared = benches[row.bench]
    out["dropped_params"] = [k for k in row.params if k not in declared]
    out["spec"] = row.spec(declared)
    out["status"] = "ok" if anchor else "anchor unavailable"
    return out


def select_rows(rows: list[Row], ops: str) -> tuple[list[Row], list[str]]:
    """The rows --ops names (a row's name, or a benchmark name for all its
    rows, e.g. 'ctx.pipe'), and the names that match none."""
    want = [w.strip() for w in ops.split(",") if w.strip()]
    if not want:
        return [], ["(empty)"]
    names = {r.name for r in rows}
    bad = [w for w in want if w not in names and not any(n.split()[0] == w for n in names)]
    return [r for r in rows if r.name in want or r.name.split()[0] in want], bad
