"""validation/anchors/run.py and its parts (parsers, catalogue, sizing,
summary): the parsers on captured outputs of perf bench, hackbench and
lmbench (nothing is run for those), how it picks an anchor or says why there
is none, its verdict, --help and bad input."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "validation" / "anchors" / "run.py"

sys.path.insert(0, str(ROOT))
from validation.anchors import catalogue, parsers, sizing, summary  # noqa: E402

# The script's parts under one name, as when they were all in run.py.
A = SimpleNamespace(**{k: v for m in (parsers, catalogue, sizing, summary) for k, v in vars(m).items()
                       if not k.startswith("_")})

# Captured on this project's VM (perf 6.1.192, rt-tests 2.4).
PERF_PIPE = """# Running 'sched/pipe' benchmark:
# Executed 200000 pipe operations between two processes

     Total time: 1.456 [sec]

       7.283055 usecs/op
         137305 ops/sec
"""
PERF_PIPE_T = """# Running 'sched/pipe' benchmark:
# Executed 200000 pipe operations between two threads

     Total time: 1.248 [sec]

       6.241035 usecs/op
         160229 ops/sec
"""
PERF_BASIC = """# Running 'syscall/basic' benchmark:
# Executed 5000000 getppid() calls
     Total time: 0.864 [sec]

       0.172914 usecs/op
        5783208 ops/sec
"""
PERF_SYSCALL_LIST_61 = """
        # List of available benchmarks for collection 'syscall':

         basic: Benchmark for basic getppid(2) calls
           all: Run all syscall benchmarks
"""
# Not captured (perf >= 6.2 is not in bookworm): the listing in the shape of
# perf's own, with the fork and execve benchmarks it added.
PERF_SYSCALL_LIST_NEWER = """
        # List of available benchmarks for collection 'syscall':

         basic: Benchmark for basic getppid(2) calls
         getpgid: Benchmark for getpgid(2) calls
          fork: Benchmark for fork(2) calls
        execve: Benchmark for execve(2) calls
           all: Run all syscall benchmarks
"""
HACKBENCH_PROC = """Running in process mode with 2 groups using 20 file descriptors each (== 40 tasks)
Each sender will pass 200 messages of 100 bytes
Time: 0.091
"""
HACKBENCH_THREAD = """Running in threaded mode with 1 groups using 10 file descriptors each (== 10 tasks)
Each sender will pass 100 messages of 64 bytes
Time: 0.002
"""
# lmbench's own wording ("<what>: X microseconds", on stderr).
LMBENCH_SIG = "Signal handler overhead: 1.6441 microseconds\n"
LMBENCH_FORK = "Process fork+exit: 178.2188 microseconds\n"


def test_perf_bench_sched_pipe_per_round_trip():
    got = A.parse_perf_bench(PERF_PIPE)
    assert got["ns_per_op"] == pytest.approx(7283.055)
    assert got["count"] == 200000 and "processes" in got["what"]
    assert A.parse_perf_bench(PERF_PIPE_T)["ns_per_op"] == pytest.approx(6241.035)


def test_perf_bench_syscall_basic_per_call():
    got = A.parse_perf_bench(PERF_BASIC)
    assert got["ns_per_op"] == pytest.approx(172.914)
    assert got["count"] == 5000000


def test_perf_bench_garbage_is_an_error():
    with pytest.raises(ValueError, match="usecs/op"):
        A.parse_perf_bench("# Running 'sched/pipe' benchmark:\n  Total time: 1.0 [sec]\n")


def test_perf_syscall_listing():
    assert A.parse_perf_bench_list(PERF_SYSCALL_LIST_61) == ["basic"]
    assert "fork" in A.parse_perf_bench_list(PERF_SYSCALL_LIST_NEWER)


def test_hackbench_per_message():
    # 2 groups, 20 fds reported = 10 senders x 10 receivers per group, 200
    # loops: 2*10*10*200 = 40000 messages in 0.091 s.
    got = A.parse_hackbench(HACKBENCH_PROC)
    assert got["messages"] == 40000
    assert (got["groups"], got["fds"], got["loops"], got["size"]) == (2, 10, 200, 100)
    assert got["ns_per_op"] == pytest.approx(0.091e9 / 40000)
    t = A.parse_hackbench(HACKBENCH_THREAD)
    assert t["mode"] == "threaded" and t["messages"] == 1 * 5 * 5 * 100


def test_hackbench_without_time_is_an_error():
    with pytest.raises(ValueError, match="Time"):
        A.parse_hackbench(HACKBENCH_PROC.replace("Time: 0.091\n", ""))


def test_lmbench():
    assert A.parse_lmbench(LMBENCH_SIG)["ns_per_op"] == pytest.approx(1644.1)
    got = A.parse_lmbench("noise\n" + LMBENCH_FORK)
    assert got["ns_per_op"] == pytest.approx(178218.8) and got["what"] == "Process fork+exit"
    with pytest.raises(ValueError):
        A.parse_lmbench("Signal handler overhead: fast\n")


def test_cv_and_verdict():
    assert A.cv([1.0]) is None
    assert A.cv([1.0, 1.0, 1.0]) == 0.0
    assert A.cv([9.0, 11.0]) == pytest.approx(2 ** 0.5 / 10)
    assert A.verdict(1.02, 0.01, 0.02) == (True, [])
    ok, why = A.verdict(1.05, 0.01, 0.02)
    assert not ok and "ratio" in why[0]
    ok, why = A.verdict(0.99, 0.03, 0.02)
    assert not ok and "CV" in why[0]


def fake_tools(present: dict[str, str], perf_syscall: list[str] | None = None, lmbench_dir=None):
    return A.Tools(which=lambda n: present.get(n), lmbench_dir=lmbench_dir,
                   perf_syscall_benches=perf_syscall if perf_syscall is not None else [])


BENCHES = {"syscall.null": {"via", "cpu", "arch"}, "ctx.pipe": {"mode", "placement", "fp", "fpkind", "cpu"},
           "signal.catch": {"state", "cpu"}}


def rows_by_name(cfg):
    return {r.name: r for r in A.make_rows(cfg)}


def test_resolve_with_perf_and_hackbench_only():
    cfg = A.Config()
    tools = fake_tools({"perf": "/usr/bin/perf", "hackbench": "/usr/bin/hackbench"}, ["basic"])
    rows = rows_by_name(cfg)
    res = {n: A.resolve(r, BENCHES, tools, cfg) for n, r in rows.items()}
    assert res["syscall.null"]["status"] == "ok"
    assert res["syscall.null"]["anchor"].argv[:4] == ["/usr/bin/perf", "bench", "syscall", "basic"]
    assert res["ctx.pipe thread"]["anchor"].argv[-3] == "-T"
    assert res["ctx.pipe process"]["spec"] == "ctx.pipe:mode=process,placement=same"
    sig = res["signal.catch"]
    assert sig["status"] == "anchor unavailable" and "lmbench not packaged in Debian" in sig["why"]
    # Not in this opcost: marked, not a crash; the anchor is still named.
    for name in ("proc.fork", "msg.hackbench socket process", "msg.hackbench pipe thread"):
        assert res[name]["status"] == "not in opcost"
        assert "not in this opcost" in res[name]["why"]
    assert "fork" in res["proc.fork"]["why"]


def test_resolve_hackbench_params_match_the_anchor():
    cfg = A.Config(hackbench={"groups": 3, "fds": 7, "loops": 50, "size": 64})
    tools = fake_tools({"hackbench": "/usr/bin/hackbench"})
    benches = dict(BENCHES, **{"msg.hackbench": {"groups", "fds", "loops", "size", "ipc", "mode", "workers_on", "cpu"}})
    rows = rows_by_name(cfg)
    r = A.resolve(rows["msg.hackbench pipe thread"], benches, tools, cfg)
    assert r["status"] == "ok" and r["dropped_params"] == []
    assert r["spec"] == "msg.hackbench:groups=3,fds=7,loops=50,size=64,ipc=pipe,mode=thread,workers_on=pinned"
    assert r["anchor"].argv == ["/usr/bin/hackbench", "-g", "3", "-f", "7", "-l", "50", "-s", "64", "-p", "-T"]
    s = A.resolve(rows["msg.hackbench socket process"], benches, tools, cfg)
    assert s["anchor"].argv[-1] == "-P" and "-p" not in s["anchor"].argv
    # A parameter opcost does not declare is left out, and said so.
    fewer = dict(benches, **{"msg.hackbench": {"groups", "fds", "ipc", "mode"}})
    d = A.resolve(rows["msg.hackbench pipe thread"], fewer, tools, cfg)
    assert d["dropped_params"] == ["loops", "size", "workers_on"] and "loops" not in d["spec"]


def test_resolve_fork_prefers_perf_then_lmbench(tmp_path):
    cfg = A.Config()
    fork = rows_by_name(cfg)["proc.fork"]
    benches = dict(BENCHES, **{"proc.fork": {"cpu"}})
    perf = fake_tools({"perf": "/usr/bin/perf"}, A.parse_perf_bench_list(PERF_SYSCALL_LIST_NEWER))
    r = A.resolve(fork, benches, perf, cfg)
    assert r["status"] == "ok" and r["anchor"].argv[:4] == ["/usr/bin/perf", "bench", "syscall", "fork"]
    lat = tmp_path / "lat_proc"
    lat.write_text("#!/bin/sh\n")
    lat.chmod(0o755)
    lm = fake_tools({"perf": "/usr/bin/perf"}, ["basic"], lmbench_dir=str(tmp_path))
    r = A.resolve(fork, benches, lm, cfg)
    assert r["status"] == "ok" and r["anchor"].tool == "lmbench" and r["anchor"].argv == [str(lat), "fork"]
    r = A.resolve(fork, benches, fake_tools({"perf": "/usr/bin/perf"}, ["basic"]), cfg)
    assert r["status"] == "anchor unavailable" and "perf bench syscall fork" in r["why"]


def test_markdown_rows():
    rows = [
        {"operation": "syscall.null", "unit": "call", "opcost_spec": "syscall.null:via=libc", "status": "ok",
         "why": "", "anchor_tool": "perf bench", "anchor_command": "taskset -c 1 perf bench syscall basic -l 5",
         "anchor_desc": "", "n_runs": 5, "opcost_ns": 170.0, "anchor_ns": 172.0, "ratio": 0.99,
         "ratio_min": 0.98, "ratio_max": 1.0, "opcost_cv": 0.001, "anchor_cv": 0.01, "pass": True,
         "fail_reasons": []},
        {"operation": "signal.catch", "unit": "signal", "opcost_spec": "signal.catch", "status": "anchor unavailable",
         "why": "anchor unavailable: lmbench not packaged in Debian", "anchor_tool": None, "anchor_command": None,
         "anchor_desc": "lmbench: `lat_sig catch`"},
    ]
    md = A.markdown(rows).splitlines()
    assert len(md) == 4
    assert "170.0 ns/call" in md[2] and "0.990 (0.980-1.000)" in md[2] and md[2].endswith("PASS |")
    assert "lat_sig catch" in md[3] and "lmbench not packaged in Debian" in md[3]


def test_help_works():
    cp = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert "--runs" in cp.stdout and "lat_sig" in cp.stdout and "hackbench" in cp.stdout


@pytest.mark.parametrize("args, what", [(["--runs", "0"], "--runs"), (["--ops", "nope"], "--ops"),
                                        (["--hackbench", "2,10"], "--hackbench")])
def test_bad_input_is_one_line_exit_2(args, what):
    cp = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 2 and what in cp.stderr and "Traceback" not in cp.stderr


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf not installed (apt-get install linux-perf)")
def test_one_tiny_run_with_perf(probe_bin, tmp_path):
    """End to end on one operation, scaled down to about a second."""
    out = tmp_path / "a.json"
    cp = subprocess.run([sys.executable, str(SCRIPT), "--ops", "syscall.null,signal.catch", "--runs", "2",
                         "--scale", "0.02", "--opcost-args", "-p 1 -n 3 -w 1", "--json", str(out)],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    import json
    doc = json.loads(out.read_text())
    ops = {o["operation"]: o for o in doc["operations"]}
    sn = ops["syscall.null"]
    assert sn["status"] == "ok" and len(sn["runs"]) == 2 and sn["n_runs"] == 2
    assert 0.2 < sn["ratio"] < 5  # same operation, same order of magnitude
    assert "perf bench syscall basic" in sn["anchor_command"]
    assert "| `syscall.null:via=libc` |" in cp.stdout


def test_summary_leaves_out_disturbed_runs():
    cfg = A.Config()
    row = rows_by_name(cfg)["syscall.null"]
    tools = fake_tools({"perf": "/usr/bin/perf"}, ["basic"])
    res = A.resolve(row, BENCHES, tools, cfg)

    def run(o, a, disturbed=False, reruns=0):
        return {"opcost_ns": o, "anchor_ns": a, "ratio": o / a, "disturbed": disturbed, "reruns": reruns}

    runs = [run(100, 101), run(100, 102), run(300, 150, True, 3), run(101, 100)]
    s = A.summarise(row, res, runs, 1)
    assert s["n_runs"] == 4 and s["n_used"] == 3 and s["reruns"] == 3 and s["disturbed_kept"] == 1
    assert s["ratio"] == pytest.approx(100 / 101) and s["pass"]
    assert s["anchor_command"] == "taskset -c 1 perf bench syscall basic -l 5000000"
    # Fewer than two clean runs: all are used, and a noisy opcost fails the CV test.
    s = A.summarise(row, res, [run(100, 100), run(200, 101, True)], 1)
    assert s["n_used"] == 2 and not s["pass"] and any("CV" in w for w in s["fail_reasons"])
    assert "(1 kept, used)" in A.markdown([s])


def test_cv_larger_p_tells_a_real_gap_from_noise():
    import math
    # Same spread on both sides: p = 0.5 exactly (F = 1).
    same = [100.0, 101.0, 99.0, 100.5, 99.5]
    assert A.cv_larger_p(same, [2 * x for x in same]) == pytest.approx(0.5)
    # opcost ten times as spread (CV ~10x): clearly real.
    wide = [100 * math.exp(10 * math.log(x / 100)) for x in same]
    assert A.cv_larger_p(wide, same) < 0.01
    # opcost tighter: p near 1.
    assert A.cv_larger_p(same, wide) > 0.99
    assert A.cv_larger_p([1.0], same) is None and A.cv_larger_p([5.0, 5.0], same) is None


def test_cv_fail_reason_says_whether_the_gap_is_distinguishable():
    ok, why = A.verdict(1.0, 0.004, 0.003, cv_p=0.31)
    assert not ok and "p=0.31" in why[0] and "not distinguishable" in why[0]
    ok, why = A.verdict(1.0, 0.04, 0.003, cv_p=0.001)
    assert not ok and "real difference" in why[0]
    assert A.verdict(1.0, 0.002, 0.003, cv_p=0.9) == (True, [])


def test_footprint_of_a_running_process():
    me = A.footprint(os.getpid())
    assert me["vmas"] > 5 and me["anon_bytes"] > 0
    assert A.footprint(2 ** 22 + 12345) is None  # no such pid


def test_anchor_footprint_samples_the_anchor_while_it_runs():
    # A stand-in anchor holding 64 MiB of touched anonymous memory for a moment.
    code = "import time; b = bytearray(64 << 20); time.sleep(0.4)"
    fp = A.anchor_footprint(A.Anchor("x", [sys.executable, "-c", code], A.parse_lmbench), cpu=min(os.sched_getaffinity(0)))
    assert fp is not None and fp["anon_bytes"] >= 64 << 20 and fp["vmas"] > 5


def test_size_like_adds_what_the_probe_lacks():
    got = A.size_like({"anon_bytes": 3_411_968, "vmas": 321}, {"anon_bytes": 110_000, "vmas": 12})
    assert got == {"resident": str((3_411_968 - 110_000) // 4096 * 4096), "mappings": str(321 - 12 - 1)}
    # A probe already larger than the anchor gets nothing added.
    assert A.size_like({"anon_bytes": 1000, "vmas": 5}, {"anon_bytes": 9000, "vmas": 12}) == \
        {"resident": "0", "mappings": "0"}
