#!/usr/bin/env python3
"""Anchors: opcost against the established tools that measure the same operations.

For each operation below this runs opcost and the established tool ("the
anchor") INTERLEAVED in one run: --runs rounds (default 5); each round takes
the operations in a new random order and, for each, runs one opcost
measurement and one anchor measurement back to back, which one first drawn
at random. It prints a markdown table (paste it into the README):

  operation, anchor tool and the exact command, opcost's figure and the
  anchor's (median over the runs, same unit: per call / per round trip / per
  message), opcost/anchor (median of the per-round ratios), the CV of each
  side across the runs, and PASS/FAIL for
    * ratio <= 1.03: opcost's own overhead is at most the anchor's, and
    * opcost CV <= anchor CV: opcost is at least as repeatable.
  A CV FAIL also prints the p of a one-sided F-test (on log figures) that
  opcost's spread is larger: from 5 runs a CV is known to about +-35%, so
  two equally repeatable tools fail this test about half the time; p says
  whether the gap is real (p < 0.05) or within what 5 runs can tell apart.

  operation        opcost                                anchor
  syscall.null     syscall.null:via=libc                 perf bench syscall basic (getppid())
  ctx.pipe process ctx.pipe:mode=process,placement=same  perf bench sched pipe
  ctx.pipe thread  ctx.pipe:mode=thread,placement=same   perf bench sched pipe -T
  signal.catch     signal.catch                          lmbench lat_sig catch
  proc.fork        proc.fork                             perf bench syscall fork, else lmbench lat_proc fork
  msg.hackbench    msg.hackbench:groups=..,fds=..,loops=..,size=..,ipc=socket|pipe,mode=process|thread,
                   workers_on=pinned                     hackbench (rt-tests) -g -f -l -s [-p] -P|-T

Like with like: every anchor command runs under `taskset -c CPU` and opcost
with `--cpu CPU` (both sides of a pipe, all hackbench tasks on the one CPU),
so neither side pays cross-CPU wake-ups the other does not. (perf bench sched
pipe unpinned on a 2-CPU VM costs about 3x the pinned figure.) hackbench gets
the same groups/fds/loops/size/ipc/mode as msg.hackbench (workers_on=pinned:
all workers on the measuring CPU, as under taskset); its figure is its
"Time:" over groups*fds*fds*loops messages (each of the fds senders in a
group sends `loops` messages to each of the group's fds receivers). Both
start their workers untimed, wait for them at a ready barrier, and time from
the start signal to the last worker reaped; both receivers read one message
(size bytes) per read(). perf bench syscall fork's parent is perf itself (about 3.3 MB anonymous
resident, 13 MB file-backed, 320 mappings): the script runs the anchor once
untimed, samples its process in /proc, and gives proc.fork the anonymous
memory and mappings the bare probe lacks (resident=, mappings=; the sizing is
logged and kept in --json as sized_like_anchor).
What is not the same: perf bench sched pipe's figure includes one fork or
thread start per run; perf's forked child calls exit(0) (atexit handlers,
stdio; about 270 copy-on-write page faults per fork here) where the probe's
calls _exit(0).
The anchors are dynamically linked against glibc, opcost's probe is static
(worth about 1% on a syscall, see validation/overhead).

Another task on the CPU inflates whichever side it hits: a pair in which
either side got under --min-share (0.9) of the CPU (CPU time / wall time:
opcost from its per-batch rusage, msg.hackbench and the anchors from their
whole process tree) is run again up to --retries (3) times; runs still
disturbed are left out of the figures when two clean runs remain.

Anchors that are missing are rows that say why, never a crash:
  * lmbench is not packaged in Debian (bookworm), so signal.catch has no
    anchor unless lmbench's binaries are on PATH or in $LMBENCH_BIN
    (lat_syscall, lat_pipe, lat_sig, lat_proc); then they are used where
    perf has nothing (lmbench prints "...: X microseconds");
  * perf 6.1 (bookworm's linux-perf) has `perf bench syscall basic` but no
    `syscall fork`: proc.fork uses lmbench if present, else is unavailable;
  * an operation this opcost has no benchmark for is marked
    'not in this opcost'.

Needs: apt-get install -y linux-perf rt-tests (perf, hackbench). CI does not
gate on this: it is a report (exit 0 after printing; --check exits 1 on a
FAIL). Runtime with the defaults on a 2-CPU VM: about 2 minutes for the
syscall/pipe/fork rows (opcost with its own default protocol, 10 processes,
about 3 s per measurement; anchors sized to about 1-2 s each) plus about 2
minutes for the two msg.hackbench rows (20 whole runs per opcost
measurement, 15 measured); reruns of disturbed pairs add to that on
a busy machine (up to 4x). --scale shrinks or grows the anchors' loop counts
(and msg.hackbench's loops).

Usage: validation/anchors/run.py [--runs 5] [--cpu N] [--ops a,b] [--json OUT] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TIMEOUT_S = 300
RATIO_MAX = 1.03
LMBENCH_NOT_PACKAGED = "lmbench not packaged in Debian"
sys.path.insert(0, str(REPO))
from validation.harness.checkout import checkout_opcost  # noqa: E402
from validation.harness.cpushare import opcost_share, run_timed  # noqa: E402
from validation.harness.script import Failure, log, script_main, tail  # noqa: E402


# --------------------------------------------------------------------------
# Parsers: text of one anchor run -> ns per operation. Pure functions
# (tests/test_anchors_script.py feeds them captured outputs).

_NUM = r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"


def parse_perf_bench(text: str) -> dict:
    """perf bench (sched pipe, syscall basic|fork|execve), default format:
    '# Executed N <what>' ... 'X usecs/op'. Returns ns_per_op and count."""
    m = re.search(r"^\s*" + _NUM + r"\s+usecs/op\s*$", text, re.M)
    if not m:
        raise ValueError("no 'usecs/op' line in perf bench output")
    n = re.search(r"#\s*Executed\s+([0-9]+)\s+(.*?)\s*$", text, re.M)
    return {"ns_per_op": float(m.group(1)) * 1000.0,
            "count": int(n.group(1)) if n else None,
            "what": n.group(2) if n else None}


def parse_perf_bench_list(text: str) -> list[str]:
    """`perf bench syscall` with no benchmark lists '<name>: <summary>' lines."""
    return [m.group(1) for m in re.finditer(r"^\s+([a-z0-9_-]+):\s", text, re.M) if m.group(1) != "all"]


def parse_hackbench(text: str) -> dict:
    """rt-tests hackbench: 'Running in process mode with G groups using 2F file
    descriptors each (== T tasks)', 'Each sender will pass L messages of S
    bytes', 'Time: SECONDS'. Messages delivered = G*F*F*L (each of the F
    senders in a group sends L messages to each of its F receivers)."""
    t = re.search(r"^Time:\s*" + _NUM, text, re.M)
    if not t:
        raise ValueError("no 'Time:' line in hackbench output")
    h = re.search(r"Running in (\w+) mode with ([0-9]+) groups using ([0-9]+) file descriptors", text)
    e = re.search(r"Each sender will pass ([0-9]+) messages of ([0-9]+) bytes", text)
    if not (h and e):
        raise ValueError("no 'Running in ... mode with G groups using N file descriptors' / "
                         "'Each sender will pass L messages of S bytes' lines in hackbench output")
    groups, fds2, loops, size = int(h.group(2)), int(h.group(3)), int(e.group(1)), int(e.group(2))
    if fds2 % 2:
        raise ValueError(f"hackbench reports {fds2} file descriptors per group, expected an even number")
    fds = fds2 // 2
    messages = groups * fds * fds * loops
    seconds = float(t.group(1))
    return {"ns_per_op": seconds * 1e9 / messages, "seconds": seconds, "messages": messages,
            "mode": h.group(1), "groups": groups, "fds": fds, "loops": loops, "size": size}


def parse_lmbench(text: str) -> dict:
    """lmbench lat_*: '<what>: X microseconds' (on stderr)."""
    m = re.search(r"^(.*?):\s*" + _NUM + r"\s+microseconds\s*$", text, re.M)
    if not m:
        raise ValueError("no '<what>: X microseconds' line in lmbench output")
    return {"ns_per_op": float(m.group(2)) * 1000.0, "what": m.group(1).strip()}


def cv(xs: list[float]) -> float | None:
    """Coefficient of variation (sample stdev / mean); None for < 2 values."""
    if len(xs) < 2:
        return None
    mean = statistics.fmean(xs)
    return statistics.stdev(xs) / mean if mean else None


def cv_larger_p(opcost: list[float], anchor: list[float]) -> float | None:
    """One-sided F-test that opcost's run-to-run spread is larger than the
    anchor's: P(F(n_o-1, n_a-1) >= var(log opcost) / var(log anchor)) under
    equal spread (logs: the variance of a log is the squared CV, whatever the
    scale). Small p: opcost really is less repeatable; large p: the two CVs
    are closer than this many runs can tell apart (from 5 runs a CV is known
    to about +-35%, so CVs 2.5x apart are still p ~ 0.05). None below 2 runs
    a side or with a zero spread."""
    import math

    if len(opcost) < 2 or len(anchor) < 2 or min(opcost + anchor) <= 0:
        return None
    vo = statistics.variance([math.log(x) for x in opcost])
    va = statistics.variance([math.log(x) for x in anchor])
    if vo == 0 or va == 0:
        return None
    from scipy.stats import f  # lazy: the parsers and --help need no scipy

    return float(f.sf(vo / va, len(opcost) - 1, len(anchor) - 1))


def verdict(ratio: float, cv_opcost: float | None, cv_anchor: float | None,
            ratio_max: float = RATIO_MAX, cv_p: float | None = None) -> tuple[bool, list[str]]:
    """PASS when ratio <= ratio_max and opcost's CV <= the anchor's (the
    must-hold, as written). A CV failure says how likely so large a gap is
    when both tools are equally repeatable (cv_p, cv_larger_p): the verdict
    is not softened, the reader sees whether the gap is distinguishable."""
    why = []
    if not ratio <= ratio_max:
        why.append(f"ratio {ratio:.3f} > {ratio_max:g}")
    if cv_opcost is not None and cv_anchor is not None and cv_opcost > cv_anchor:
        why.append(f"opcost CV {cv_opcost:.2%} > anchor CV {cv_anchor:.2%}"
                   + ("" if cv_p is None else f", F-test p={cv_p:.2f}"
                      + (": a real difference" if cv_p < 0.05 else ": not distinguishable in these runs")))
    return (not why), why


# --------------------------------------------------------------------------
# Anchors: which tool measures an operation, whether it is here, its command.

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


def anchor_syscall_null(tools: Tools, cfg: Config):
    perf = tools.which("perf")
    if perf and "basic" in tools.perf_syscall():
        return Anchor("perf bench", [perf, "bench", "syscall", "basic", "-l", str(cfg.loops(5_000_000))],
                      parse_perf_bench), ""
    return _lm(tools, "lat_syscall", ["null"], "no `perf bench syscall basic` (apt-get install linux-perf); ")


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


def anchor_proc_fork(tools: Tools, cfg: Config):
    perf = tools.which("perf")
    if perf and "fork" in tools.perf_syscall():
        return Anchor("perf bench", [perf, "bench", "syscall", "fork", "-l", str(cfg.loops(1_000))],
                      parse_perf_bench), ""
    return _lm(tools, "lat_proc", ["fork"], "this perf has no `perf bench syscall fork` (perf >= 6.2); ")


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
        Row("syscall.null", "syscall.null", {"via": "libc"}, "call", anchor_syscall_null,
            "perf bench syscall basic / lmbench lat_syscall null"),
        Row("ctx.pipe process", "ctx.pipe", {"mode": "process", "placement": "same"}, "round trip",
            anchor_sched_pipe(False), "perf bench sched pipe / lmbench lat_pipe"),
        Row("ctx.pipe thread", "ctx.pipe", {"mode": "thread", "placement": "same"}, "round trip",
            anchor_sched_pipe(True), "perf bench sched pipe -T"),
        Row("signal.catch", "signal.catch", {}, "signal", anchor_signal_catch, "lmbench: `lat_sig catch`"),
        Row("proc.fork", "proc.fork", {}, "fork", anchor_proc_fork,
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


# --------------------------------------------------------------------------
# Running.

def opcost_command() -> tuple[list[str], dict[str, str], str]:
    """`python -m opcost` from this checkout (the code under test), else opcost on PATH."""
    if (REPO / "src" / "opcost").is_dir():
        return checkout_opcost()
    exe = shutil.which("opcost")
    if not exe:
        raise Failure("no opcost: neither src/opcost in this checkout nor opcost on PATH")
    return [exe], dict(os.environ), exe


def opcost_benches(cmd: list[str], env: dict[str, str]) -> dict[str, set[str]]:
    argv = [*cmd, "list", "--json"]
    cp = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    if cp.returncode != 0:
        raise Failure(f"{shlex.join(argv)}: exit {cp.returncode}\n{tail(cp.stderr, 6)}")
    try:
        doc = json.loads(cp.stdout)
        generic = {p["name"] for p in doc.get("generic_params", [])}
        return {b["name"]: {p["name"] for p in b.get("params", [])} | generic for b in doc["benchmarks"]}
    except (ValueError, KeyError, TypeError) as e:
        raise Failure(f"{shlex.join(argv)}: unexpected output ({e!r})") from None


def run_opcost(cmd, env, spec: str, cpu: int, extra: list[str], work: Path, whole_process_share: bool = False) -> dict:
    """One opcost measurement. cpu_share: CPU time over wall time of the
    measured batches from opcost's own per-batch rusage (measuring side and
    helper), or, with whole_process_share (benchmarks whose samples leave
    their workers' CPU time out: msg.hackbench, proc.fork), of the whole opcost process
    tree (the CLI's Python start-up included: close to 1 when undisturbed)."""
    out = work / "opcost.json"
    if out.exists():
        out.unlink()
    argv = [*cmd, "run", spec, *extra, "--cpu", str(cpu), "--no-store", "--no-progress", "--json", str(out)]
    cp, wall, tree_share = run_timed(argv, env=env, timeout=TIMEOUT_S)
    try:
        r = json.loads(out.read_text())["results"][0]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        r = None
    if r is not None and r.get("status") not in (None, "ok"):
        raise Failure(f"opcost {spec}: {r.get('status')}: {r.get('reason') or tail(cp.stderr, 2)}")
    if cp.returncode != 0 or r is None:
        raise Failure(f"{shlex.join(argv)}: exit {cp.returncode}\n{tail(cp.stderr, 6)}")
    try:
        s = r["summary"]
        return {"ns_per_op": float(s["median_ns"]), "cv_processes": s.get("cv"), "wall_s": wall,
                "op": r.get("op"),
                "cpu_share": tree_share if whole_process_share else opcost_share(
                    [x for p in r.get("processes") or [] for x in p.get("samples") or []])}
    except (KeyError, TypeError, ValueError) as e:
        raise Failure(f"opcost {spec}: no summary.median_ns in {out}: {e!r}") from None


def pin_prefix(cpu: int) -> list[str]:
    ts = shutil.which("taskset")
    return [ts, "-c", str(cpu)] if ts else []


def run_anchor(anchor: Anchor, cpu: int) -> dict:
    prefix = pin_prefix(cpu)
    argv = [*prefix, *anchor.argv]
    pre = None if prefix else (lambda: os.sched_setaffinity(0, {cpu}))
    cp, wall, share = run_timed(argv, preexec_fn=pre, timeout=TIMEOUT_S)
    if cp.returncode != 0:
        raise Failure(f"{shlex.join(argv)}: exit {cp.returncode}\n{tail(cp.stdout + cp.stderr, 6)}")
    text = {"stdout": cp.stdout, "stderr": cp.stderr}.get(anchor.stream, cp.stdout + "\n" + cp.stderr)
    try:
        got = anchor.parse(text)
    except ValueError as e:
        raise Failure(f"{shlex.join(argv)}: {e}; output:\n{tail(cp.stdout + cp.stderr, 6)}") from None
    got["wall_s"] = wall
    got["cpu_share"] = share
    return got


def footprint(pid: int) -> dict | None:
    """A running process's anonymous resident bytes (RssAnon) and mapping
    count (lines of /proc/PID/maps); None once it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            vmas = sum(1 for _ in f)
        with open(f"/proc/{pid}/status") as f:
            anon = next((int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:")), None)
    except (OSError, ValueError, IndexError):
        return None
    return None if anon is None else {"anon_bytes": anon, "vmas": vmas}


def anchor_footprint(anchor: Anchor, cpu: int, interval: float = 0.02) -> dict | None:
    """Run the anchor once, untimed, and sample its process until it exits:
    the largest anonymous resident size and mapping count seen (its steady
    state in the measuring loop; the first samples may still be taskset or
    the loader). None if it exited before a sample."""
    prefix = pin_prefix(cpu)
    pre = None if prefix else (lambda: os.sched_setaffinity(0, {cpu}))
    proc = subprocess.Popen([*prefix, *anchor.argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=pre)
    best: dict | None = None
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(interval)
            got = footprint(proc.pid)
            if got:
                best = got if best is None else {k: max(best[k], got[k]) for k in best}
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return best


def size_like(anchor_fp: dict, probe_fp: dict, page: int = 4096) -> dict[str, str]:
    """Parameters that give the probe's parent the anchor's footprint:
    resident= the anonymous memory it lacks (whole pages), mappings= the
    mappings it lacks (less the one the resident= area adds)."""
    resident = max(0, anchor_fp["anon_bytes"] - probe_fp["anon_bytes"]) // page * page
    mappings = max(0, anchor_fp["vmas"] - probe_fp["vmas"] - (1 if resident else 0))
    return {"resident": str(resident), "mappings": str(mappings)}


def opcost_parent(cmd, env, spec: str, cpu: int, work: Path) -> dict | None:
    """The probe's own parent footprint for SPEC (header 'parent' of one
    tiny untimed run), or None when this opcost does not report it."""
    out = work / "parent.json"
    argv = [*cmd, "run", spec, "-p", "1", "-n", "1", "-w", "0", "--iters", "1", "--cpu", str(cpu), "--no-store",
            "--no-progress", "--json", str(out)]
    cp = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    try:
        par = json.loads(out.read_text())["results"][0]["processes"][0]["header"]["parent"]
        return {"anon_bytes": int(par["anon_bytes"]), "vmas": int(par["vmas"])}
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        log(f"{spec}: no parent footprint in opcost's header (exit {cp.returncode}): not sized")
        return None


def shown_command(anchor: Anchor, cpu: int) -> str:
    argv = [Path(anchor.argv[0]).name, *anchor.argv[1:]]
    return shlex.join(["taskset", "-c", str(cpu), *argv])


def fmt_ns(x: float) -> str:
    if x >= 10_000:
        return f"{x / 1000:,.2f} us"
    if x >= 1_000:
        return f"{x / 1000:.3f} us"
    return f"{x:.1f} ns"


def fmt_cv(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def summarise(row: Row, res: dict, runs: list[dict], cpu: int) -> dict:
    out = {"operation": row.name, "unit": row.unit, "opcost_spec": res["spec"], "status": res["status"],
           "why": res["why"], "dropped_params": res["dropped_params"],
           "anchor_tool": res["anchor"].tool if res["anchor"] else None,
           "anchor_command": shown_command(res["anchor"], cpu) if res["anchor"] else None,
           "anchor_desc": row.anchor_desc, "sized_like_anchor": res.get("sized"), "runs": runs}
    if res["status"] != "ok":
        return out
    errors = [r["error"] for r in runs if "error" in r]
    ok = [r for r in runs if "error" not in r]
    if errors:
        out["status"] = "error"
        out["why"] = errors[0]
    if not ok:
        return out
    # Figures, ratio and CVs from the runs no other task disturbed (kept
    # after --retries), when at least two are left; else from all of them.
    clean = [r for r in ok if not r.get("disturbed")]
    used = clean if len(clean) >= 2 else ok
    o = [r["opcost_ns"] for r in used]
    a = [r["anchor_ns"] for r in used]
    ratios = [r["ratio"] for r in used]
    out.update({
        "n_runs": len(ok), "n_used": len(used), "opcost_ns": statistics.median(o), "anchor_ns": statistics.median(a),
        "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "opcost_cv": cv(o), "anchor_cv": cv(a),
        "reruns": sum(r.get("reruns", 0) for r in ok), "disturbed_kept": sum(bool(r.get("disturbed")) for r in ok),
    })
    out["cv_larger_p"] = cv_larger_p(o, a)
    out["pass"], out["fail_reasons"] = verdict(out["ratio"], out["opcost_cv"], out["anchor_cv"],
                                               cv_p=out["cv_larger_p"])
    return out


def markdown(rows: list[dict]) -> str:
    lines = ["| operation | anchor (command) | opcost | anchor | opcost/anchor | CV opcost | CV anchor | reruns | |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cmd = (f"{r['anchor_tool']}: `{r['anchor_command']}`" if r.get("anchor_command")
               else r.get("anchor_desc") or "-")
        if "ratio" in r:
            unit = f"/{r['unit']}"
            res = "PASS" if r["pass"] else "FAIL (" + "; ".join(r["fail_reasons"]) + ")"
            if r["status"] == "error":
                res += f" ({r['n_runs']} runs; error: {r['why'].splitlines()[0]})"
            lines.append(f"| `{r['opcost_spec']}` | {cmd} | {fmt_ns(r['opcost_ns'])}{unit} | "
                         f"{fmt_ns(r['anchor_ns'])}{unit} | {r['ratio']:.3f} ({r['ratio_min']:.3f}-"
                         f"{r['ratio_max']:.3f}) | {fmt_cv(r['opcost_cv'])} | {fmt_cv(r['anchor_cv'])} | "
                         f"{r.get('reruns', 0)}" + (f" ({r['disturbed_kept']} kept, "
                                                    + ("left out" if r["n_used"] < r["n_runs"] else "used") + ")"
                                                    if r.get("disturbed_kept") else "")
                         + f" | {res} |")
        else:
            name = f"`{r['opcost_spec']}`"
            why = (r["why"] or r["status"]).splitlines()[0].replace("|", "\\|")
            lines.append(f"| {name} | {cmd} | - | - | - | - | - | - | {why} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--cpu", type=int, default=None,
                    help="CPU for opcost and every anchor, all their tasks (default: the last allowed CPU)")
    ap.add_argument("--ops", default=None, help="operations, comma-separated (default: all; see the table above)")
    ap.add_argument("--opcost-args", default="",
                    help="opcost run protocol options (default: none, opcost's own protocol as a user runs it: 10 processes x (3+20) batches of 10 ms)")
    ap.add_argument("--opcost-args-long", default="-p 5 -n 3 -w 1 --iters 1",
                    help="the same for msg.hackbench, whose one iteration is a whole hackbench run "
                         "(default '-p 5 -n 3 -w 1 --iters 1': 20 runs, 15 measured)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply the anchors' loop counts (and msg.hackbench loops) by this (default 1)")
    ap.add_argument("--hackbench", default="2,10,2000,100", metavar="G,F,L,S",
                    help="groups, fds, loops, message size for hackbench and msg.hackbench (default 2,10,2000,100: 0.3-0.9 s per run here, long enough that one run is not mostly noise)")
    ap.add_argument("--json", metavar="OUT", help="also write every figure as JSON to OUT")
    ap.add_argument("--check", action="store_true", help="exit 1 when a row FAILs (default: report only)")
    ap.add_argument("--retries", type=int, default=3,
                    help="run a disturbed pair again up to this many times (default 3; 0: never)")
    ap.add_argument("--min-share", type=float, default=0.9,
                    help="a side whose CPU time is under this fraction of its wall time was disturbed by "
                         "another task on the CPU (default 0.9)")
    ap.add_argument("--seed", type=int, default=None, help="seed for the run order (default: random)")
    args = ap.parse_args(argv)

    if args.runs < 1:
        ap.error("--runs must be >= 1")
    if args.retries < 0:
        ap.error("--retries must be >= 0")
    if not args.scale > 0:
        ap.error("--scale must be > 0")
    try:
        g, f, lo, s = (int(x) for x in args.hackbench.split(","))
        if min(g, f, lo, s) < 1:
            raise ValueError
    except ValueError:
        ap.error("--hackbench must be four positive integers G,F,L,S, e.g. 2,10,1000,100")
    cfg = Config(scale=args.scale, hackbench={"groups": g, "fds": f, "loops": lo, "size": s})
    allowed = os.sched_getaffinity(0)
    cpu = max(allowed) if args.cpu is None else args.cpu
    if cpu not in allowed:
        ap.error(f"--cpu {cpu}: not a CPU this process may use ({', '.join(map(str, sorted(allowed)))})")
    rows = make_rows(cfg)
    if args.ops:
        want = [w.strip() for w in args.ops.split(",") if w.strip()]
        names = {r.name for r in rows}
        # 'ctx.pipe' or 'msg.hackbench' select all their rows
        bad = [w for w in want if w not in names and not any(n.split()[0] == w for n in names)]
        if bad or not want:
            ap.error(f"--ops: unknown {', '.join(bad) or '(empty)'}; valid: {', '.join(r.name for r in rows)} "
                     "(or a benchmark name for all its rows)")
        rows = [r for r in rows if r.name in want or r.name.split()[0] in want]
    extra = shlex.split(args.opcost_args)
    extra_long = shlex.split(args.opcost_args_long)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)

    cmd, env, cmd_desc = opcost_command()
    benches = opcost_benches(cmd, env)
    tools = Tools(lmbench_dir=os.environ.get("LMBENCH_BIN"))
    resolved = {r.name: resolve(r, benches, tools, cfg) for r in rows}
    for r in rows:
        res = resolved[r.name]
        if res["dropped_params"]:
            log(f"{r.name}: opcost {r.bench} has no parameter {', '.join(res['dropped_params'])}: "
                "not passed (the comparison may not be like with like)")
        if res["status"] != "ok":
            log(f"{r.name}: {res['why']}")
    active = [r for r in rows if resolved[r.name]["status"] == "ok"]
    with tempfile.TemporaryDirectory(prefix="opcost-anchors-size-") as tmp:
        for r in active:
            res = resolved[r.name]
            if not (r.sized_like_anchor and {"resident", "mappings"} <= benches.get(r.bench, set())):
                continue
            afp = anchor_footprint(res["anchor"], cpu)
            pfp = opcost_parent(cmd, env, res["spec"], cpu, Path(tmp))
            if afp and pfp:
                params = size_like(afp, pfp)
                res["spec"] = replace(r, params={**r.params, **params}).spec(benches[r.bench])
                res["sized"] = {"anchor": afp, "probe": pfp, "params": params}
                log(f"{r.name}: parent sized like {res['anchor'].tool}'s process ({afp['anon_bytes'] >> 10} KiB "
                    f"anonymous, {afp['vmas']} mappings; the bare probe: {pfp['anon_bytes'] >> 10} KiB, "
                    f"{pfp['vmas']}): {res['spec']}")
    log(f"opcost: {cmd_desc} run SPEC {args.opcost_args} --cpu {cpu}; anchors under taskset -c {cpu}; "
        f"{args.runs} runs; seed {seed}; {len(active)} of {len(rows)} operations comparable")

    t_start = time.monotonic()
    runs: dict[str, list[dict]] = {r.name: [] for r in rows}
    broken: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="opcost-anchors-") as tmp:
        work = Path(tmp)
        for rnd in range(args.runs):
            order = [r for r in active if r.name not in broken]
            rng.shuffle(order)
            for row in order:
                res = resolved[row.name]
                # One pair: opcost and the anchor back to back, in random
                # order. If another task took the CPU from either (CPU time
                # under --min-share of wall time), the pair runs again, up to
                # --retries times; every attempt is kept in --json.
                attempts: list[dict] = []
                try:
                    for attempt in range(1 + args.retries):
                        sides = ["opcost", "anchor"]
                        rng.shuffle(sides)
                        got: dict[str, dict] = {}
                        for side in sides:
                            if side == "opcost":
                                got[side] = run_opcost(cmd, env, res["spec"], cpu, extra_long if row.long else extra,
                                                       work, whole_process_share=row.long or row.children)
                            else:
                                got[side] = run_anchor(res["anchor"], cpu)
                        o, a = got["opcost"], got["anchor"]
                        shares = [x["cpu_share"] for x in (o, a) if x.get("cpu_share") is not None]
                        disturbed = bool(shares) and min(shares) < args.min_share
                        attempts.append({
                            "first": sides[0], "opcost_ns": o["ns_per_op"], "anchor_ns": a["ns_per_op"],
                            "ratio": o["ns_per_op"] / a["ns_per_op"], "opcost_wall_s": o["wall_s"],
                            "anchor_wall_s": a["wall_s"], "opcost_cpu_share": o.get("cpu_share"),
                            "anchor_cpu_share": a.get("cpu_share"), "disturbed": disturbed,
                            "opcost_cv_processes": o.get("cv_processes"),
                            "anchor_detail": {k: v for k, v in a.items()
                                              if k not in ("ns_per_op", "wall_s", "cpu_share")},
                        })
                        if not disturbed:
                            break
                        log(f"run {rnd + 1}: {row.name}: disturbed (CPU share opcost "
                            f"{o.get('cpu_share') or float('nan'):.2f}, anchor "
                            f"{a.get('cpu_share') or float('nan'):.2f})"
                            + (", again" if attempt < args.retries else ", kept"))
                except Failure as e:
                    # One broken operation does not sink the others: its row
                    # says what failed; it is not run again.
                    log(f"run {rnd + 1}: {row.name}: {e}")
                    runs[row.name].append({"run": rnd + 1, "error": str(e), "attempts": attempts})
                    broken.add(row.name)
                    continue
                runs[row.name].append(dict(attempts[-1], run=rnd + 1, reruns=len(attempts) - 1,
                                           attempts=attempts[:-1]))
            done = [r for r in active if runs[r.name] and "ratio" in runs[r.name][-1]]
            log(f"run {rnd + 1}/{args.runs}: " + "  ".join(
                f"{r.name} {runs[r.name][-1]['ratio']:.3f}" for r in done))

    table = [summarise(r, resolved[r.name], runs[r.name], cpu) for r in rows]
    print(markdown(table), flush=True)
    print(f"\nopcost `run SPEC {args.opcost_args} --cpu {cpu}` (msg.hackbench: `{args.opcost_args_long}`; "
          f"the median over processes); anchors pinned with "
          f"`taskset -c {cpu}`; {args.runs} interleaved runs; figures: medians over runs; opcost/anchor: median "
          f"of per-run ratios (min-max); CV across runs; PASS: ratio <= {RATIO_MAX:g} and CV opcost <= CV anchor "
          f"(a CV FAIL gives the one-sided F-test p of so large a gap between equally repeatable tools); "
          f"reruns: pairs run again because a side's CPU time was under {args.min_share:g} of its wall time "
          f"(another task on CPU {cpu}; 'kept': still so after --retries {args.retries}, left out of the figures "
          f"when at least two clean runs remain); "
          f"{time.monotonic() - t_start:.0f} s")

    if args.json:
        doc = {
            "schema": "opcost.validation-anchors/1", "opcost": cmd_desc, "opcost_args": extra,
            "opcost_args_long": extra_long, "cpu": cpu,
            "runs": args.runs, "seed": seed, "scale": args.scale, "retries": args.retries,
            "min_share": args.min_share, "hackbench": cfg.hackbench,
            "ratio_max": RATIO_MAX,
            "machine": {"node": platform.node(), "kernel": platform.release(), "arch": platform.machine()},
            "operations": table,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    failed = [r for r in table if r.get("pass") is False or r["status"] == "error"]
    return 1 if (args.check and failed) else 0


if __name__ == "__main__":
    script_main(main)
