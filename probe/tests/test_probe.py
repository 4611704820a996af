"""Probe tests: every output line is JSON of the documented shape, every
benchmark in the table runs a few batches (or says why it cannot here),
counters degrade instead of failing, bad input is one line and exit 2, and no
helper outlives the probe."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from benchtable import QUICK, benchmarks, quick_args

PROBE_DIR = Path(__file__).resolve().parents[1]
# OPCOST_TEST_PROBE: run these tests on another build of the probe (the i386
# or aarch64 one), through OPCOST_TEST_WRAPPER (e.g. qemu-aarch64) if set;
# test_arches.py does that. Default: the host probe, built here.
PROBE = Path(os.environ.get("OPCOST_TEST_PROBE") or PROBE_DIR / "opcost-probe")
WRAP = os.environ.get("OPCOST_TEST_WRAPPER", "").split()


@pytest.fixture(scope="session", autouse=True)
def built_probe():
    if not os.environ.get("OPCOST_TEST_PROBE"):
        subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)
    return PROBE


def probe(*args, timeout=60, **kw):
    return subprocess.run([*WRAP, str(PROBE), *args], capture_output=True, text=True, timeout=timeout, **kw)


def probe_arch() -> str:
    return probe("version").stdout.split()[2]


X86 = pytest.mark.skipif(not (os.uname().machine == "x86_64" and not WRAP), reason="x86 FP kinds")


def lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]  # every line must parse


def table() -> dict:
    return json.loads(probe("list", "--json").stdout)


def test_list_is_generated_from_the_table():
    t = table()
    assert t["schema"] == "opcost.probe-list/1"
    names = [b["name"] for b in t["benchmarks"]]
    for want in ("syscall.null", "syscall.read", "syscall.write", "syscall.stat", "syscall.fstat",
                 "syscall.open", "ctx.pipe", "ctx.yield", "signal.catch", "signal.install"):
        assert want in names
    pipe = next(b for b in t["benchmarks"] if b["name"] == "ctx.pipe")
    params = {p["name"]: p for p in pipe["params"]}
    assert params["mode"]["choices"] == ["process", "thread"]
    assert params["fp"]["choices"] == ["none", "parent", "child", "both"]
    assert params["fp"]["default"] == "none"
    assert pipe["helper"] is True and pipe["op"] == "round trip"
    assert "context-switches" in t["counters"] and "cycles" in t["counters"]
    # text form lists the same benchmarks
    assert [ln.split()[0] for ln in probe("list").stdout.splitlines()] == names


# Every benchmark of the table at its defaults (QUICK ones made short), then
# variants of some beyond their defaults.
TABLE = {b["name"]: b for b in benchmarks(PROBE, tuple(WRAP))}
BENCH_VARIANTS = [(name, quick_args(name)) for name in TABLE] + [
    ("syscall.null", ["-P", "via=inline"]), ("ctx.pipe", ["-P", "mode=thread"]),
    pytest.param("ctx.pipe", ["-P", "fp=both", "-P", "fpkind=x87"], marks=X86),
    pytest.param("ctx.pipe", ["-P", "fp=parent", "-P", "fpkind=sse"], marks=X86),
    ("ctx.yield", ["-P", "mode=thread"]), ("signal.catch", ["-P", "sig=0"]),
    pytest.param("signal.catch", ["-P", "state=sse"], marks=X86), ("signal.install", ["-P", "refill=yes"]),
]


def test_quick_parameters_name_benchmarks_of_the_table():
    for name, params in QUICK.items():
        declared = {p["name"] for p in TABLE[name]["params"]}
        assert {p.split("=")[0] for p in params} <= declared, name


@pytest.mark.parametrize("bench,extra", BENCH_VARIANTS, ids=lambda x: x if isinstance(x, str) else ",".join(x))
def test_each_benchmark_runs_a_few_batches(bench, extra):
    cp = probe("run", bench, *extra, "--samples", "3", "--warmup", "1", "--target-ms", "2")
    if cp.returncode == 3:  # not on this machine (an x86 instruction on aarch64...): the probe says why
        (line,) = lines(cp.stdout)
        assert line["type"] == "unsupported" and line["bench"] == bench and line["reason"]
        pytest.skip(f"{bench} is unsupported here: {line['reason']}")
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""  # no failed operation was counted
    out = lines(cp.stdout)
    header, samples, trailer = out[0], out[1:-1], out[-1]
    assert header["type"] == "header" and header["schema"] == "opcost.probe/1"
    assert header["bench"] == bench and header["tsc_hz"] > 1e6  # aarch64 cntvct: tens of MHz
    assert header["op"] == TABLE[bench]["op"]
    opi = header.get("ops_per_iter", 1)
    if "ops_per_iter" in header:
        assert opi > 1 and header["iteration"]
    # a coarse counter (aarch64's or arm's cntvct: tens of MHz) may read the same value twice in a row
    assert header["overhead"]["clock_ticks"] > (0 if header["tsc_hz"] > 1e8 else -1)
    assert header["overhead"]["loop_ticks_per_iter"] >= 0
    assert trailer == {"type": "trailer", "status": "ok", "samples": 3, "warmup": 1}
    assert [s["warmup"] for s in samples] == [True, False, False, False]
    # The net cost (the loop's measured overhead subtracted) of an operation
    # as cheap as that overhead (vzeroupper: under a cycle, overlapping the
    # loop's own instructions) falls below zero in some batches (5 of 90 here
    # on an idle CPU): only the raw batch must have taken time. An operation
    # whose median batch costs over 4x the loop's overhead per iteration nets
    # above zero in every batch: a batch 4x faster than the median does not
    # happen (a CPU made busy only slows batches down).
    loop = header["overhead"]["loop_ticks_per_iter"]
    raw_per_iter = sorted(s["raw_ticks"] / s["iters"] for s in samples)[len(samples) // 2]
    for s in samples:
        assert s["type"] == "sample" and s["iters"] == header["iters"] > 0
        if WRAP:  # emulated counters can stand still for a whole short batch
            assert math.isfinite(s["ns_per_op"]) and math.isfinite(s["tsc_per_op"])
        else:
            assert s["raw_ticks"] > 0
            if raw_per_iter > 4 * loop:
                assert s["ns_per_op"] > 0 and s["tsc_per_op"] > 0, (raw_per_iter, loop, s)
        # ticks and ns agree through the calibrated frequency
        assert s["ns"] == pytest.approx(s["ticks"] / header["tsc_hz"] * 1e9, rel=1e-9)
        assert s["cpu_before"] == header["cpus"][0]
        assert s["user_ns"] >= 0 and s["sys_ns"] >= 0
        # per operation: one iteration may hold several (ops_per_iter)
        n = s["iters"] * opi
        assert s["ns_per_op"] == pytest.approx(s["ns"] / n, rel=1e-9)
        assert s["sys_ns_per_op"] == pytest.approx(s["sys_ns"] / n, rel=1e-9)
        if opi > 1:
            assert s["ns_per_iter"] == pytest.approx(s["ns"] / s["iters"], rel=1e-9)
    if header["cpus"] and len(header["cpus"]) == 2:
        assert all("helper" in s for s in samples)


def test_params_are_recorded_with_defaults():
    out = lines(probe("run", "ctx.pipe", "-P", "mode=thread", "--samples", "1", "--warmup", "0",
                      "--target-ms", "1").stdout)
    fpkind = "neon" if probe_arch() in ("aarch64", "arm") else "sse"
    assert out[0]["params"] == {"mode": "thread", "placement": "same", "fp": "none", "fpkind": fpkind}


def test_requested_iterations_are_not_changed():
    out = lines(probe("run", "syscall.null", "--iters", "1234", "--samples", "2", "--warmup", "0").stdout)
    assert out[0]["iters"] == 1234 and out[0]["iters_source"] == "requested"
    assert all(s["iters"] == 1234 for s in out[1:-1])


def test_placement_core_puts_helper_on_another_cpu():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    out = lines(probe("run", "ctx.pipe", "-P", "placement=core", "--samples", "2", "--warmup", "0",
                      "--target-ms", "2").stdout)
    main, helper = out[0]["cpus"]
    assert main != helper
    assert all(s["helper"]["cpu"] == helper for s in out[1:-1])


@pytest.mark.parametrize("bench,extra", [("signal.catch", ()), ("ctx.pipe", ("--cpu", "0,0")),
                                         ("mem.pagefault", ())])
def test_run_delay_is_measured_or_said_unavailable(bench, extra):
    """Issue 17 item 4: every batch carries the measuring thread's run delay
    and CPU time from schedstat (and the helper's), or the header says why
    not (a kernel without schedstat; qemu-user may or may not pass it on).
    mem.pagefault is a prepared benchmark: summed over its timed segments."""
    cp = probe("run", bench, *extra, "--samples", "3", "--warmup", "0", "--target-ms", "2")
    if cp.returncode == 3:
        pytest.skip(cp.stdout.strip())
    assert cp.returncode == 0, cp.stderr
    out = lines(cp.stdout)
    rd = out[0]["run_delay"]
    samples = [x for x in out if x["type"] == "sample"]
    if not rd["available"]:
        assert "schedstat" in rd["reason"]
        assert not any("run_delay_ns" in x for x in samples)
        return
    assert "schedstat" in rd["source"]
    for x in samples:
        assert x["run_delay_ns"] >= 0 and x["run_ns"] > 0 and x["nivcsw"] >= 0
        # the CPU time is read just outside the timed region: at most the batch plus a little
        assert x["run_ns"] <= x["wall_ns"] + 5_000_000
        if "helper" in x:
            assert x["helper"]["run_delay_ns"] >= 0 and x["helper"]["run_ns"] > 0


def test_fake_clock_has_no_run_delay_on_any_machine():
    out = lines(probe("run", "ctx.pipe", "--fake-clock", "250", "--samples", "2", "--warmup", "0").stdout)
    assert out[0]["run_delay"] == {"available": True,
                                   "source": "fake clock: every batch on the CPU throughout, no run delay"}
    assert all(s["run_delay_ns"] == 0 and s["helper"]["run_delay_ns"] == 0 for s in out[1:-1])


def test_fake_clock_is_deterministic():
    args = ("run", "syscall.null", "--fake-clock", "250", "--seed", "7", "--samples", "5", "--warmup", "1")
    a, b = probe(*args).stdout, probe(*args).stdout
    sa = [s["ns_per_op"] for s in lines(a)[1:-1]]
    assert sa == [s["ns_per_op"] for s in lines(b)[1:-1]]
    assert all(abs(x / 250 - 1) <= 0.01 + 1e-12 for x in sa)
    assert len(set(sa)) > 1  # the jitter is there
    hdr = lines(a)[0]
    assert hdr["fake_clock"] is True and hdr["iters"] == 40000  # 10 ms / 250 ns
    other = [s["ns_per_op"] for s in lines(probe(*args[:-5], "8", *args[-4:]).stdout)[1:-1]]
    assert other != sa


def test_software_counters_count_and_hardware_ones_degrade():
    cp = probe("run", "ctx.pipe", "--counters", "context-switches,task-clock,cycles", "--samples", "3",
               "--warmup", "1", "--target-ms", "2")
    assert cp.returncode == 0, cp.stderr
    out = lines(cp.stdout)
    status = {c["name"]: c for c in out[0]["counters"]}
    if WRAP:  # qemu user mode does not emulate perf_event_open: degrade, with the reason
        assert all(c["status"] == "<not supported>" and c["reason"] for c in status.values())
        return
    assert status["context-switches"]["status"] == "ok"
    for s in out[1:-1]:
        # the measuring side blocks once per round trip
        assert s["counters"]["context-switches"] == pytest.approx(1.0, abs=0.05)
        assert s["counters"]["task-clock"] > 0
        cyc = s["counters"]["cycles"]
        assert isinstance(cyc, float) or cyc == "<not supported>"
    if status["cycles"]["status"] != "ok":
        assert status["cycles"]["reason"]  # says why


def test_user_kernel_modifiers_parse():
    cp = probe("run", "syscall.null", "--counters", "task-clock:u,context-switches:k", "--samples", "1",
               "--warmup", "0", "--target-ms", "1")
    assert cp.returncode == 0, cp.stderr
    assert set(lines(cp.stdout)[1]["counters"]) == {"task-clock:u", "context-switches:k"}


@pytest.mark.parametrize("args,needle", [
    (["run", "nosuch"], "unknown benchmark 'nosuch'; valid: syscall.null"),
    (["run", "ctx.pipe", "-P", "mode=fork"], "mode=fork is not allowed; valid: process|thread"),
    (["run", "ctx.pipe", "-P", "nope=1"], "has no parameter 'nope'; valid: mode, placement, fp, fpkind"),
    (["run", "syscall.null", "--cpu", "99"], "cpu=99 is not a CPU this process may use; valid:"),
    (["run", "syscall.null", "--samples", "-1"], "--samples -1: expected an integer >= 1"),
    (["run", "syscall.null", "--target-ms", "0.5"], "expected a number of milliseconds in [1, 60000]"),
    (["run", "syscall.null", "--counters", "bogus"], "unknown counter 'bogus'; valid:"),
    (["run", "syscall.null", "--counters", "cycles:x"], "unknown modifier 'x'"),
    (["run", "ctx.yield", "--cpu", "0,1"], "both sides of a yield must share one CPU"),
    (["run", "syscall.stat", "-P", "path=/nonexistent"], "path=/nonexistent cannot be stat'ed"),
    (["frobnicate"], "unknown command 'frobnicate'"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    if "0,1" in args and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    cp = probe(*args)
    assert cp.returncode == 2
    assert cp.stdout == ""  # no partial JSON
    err = cp.stderr.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_unsupported_is_reported_with_reason():
    other = "avx" if probe_arch() in ("aarch64", "arm") else "neon"
    cp = probe("run", "ctx.pipe", "-P", "fp=parent", "-P", f"fpkind={other}", "--samples", "1")
    assert cp.returncode == 3
    (line,) = lines(cp.stdout)
    assert line["type"] == "unsupported" and line["reason"]


def test_check_mode_measures_nothing():
    cp = probe("run", "ctx.pipe", "--check")
    assert cp.returncode == 0
    fpkind = "neon" if probe_arch() in ("aarch64", "arm") else "sse"
    assert lines(cp.stdout) == [{"type": "check", "status": "ok", "params": {
        "mode": "process", "placement": "same", "fp": "none", "fpkind": fpkind}}]


def test_strings_are_escaped(tmp_path):
    weird = tmp_path / 'we"ird\\na\tme\u00e9'
    weird.write_text("x")
    cp = probe("run", "syscall.stat", "-P", f"path={weird}", "--samples", "1", "--warmup", "0",
               "--target-ms", "1")
    assert cp.returncode == 0, cp.stderr
    hdr = lines(cp.stdout)[0]
    # non-ASCII bytes come back as Latin-1 code points, one per byte
    assert hdr["params"]["path"].encode("latin-1") == str(weird).encode()


def test_cpuid_line_parses():
    d = json.loads(probe("cpuid").stdout)
    assert d["arch"] == probe_arch()


def _live(name: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes()
            state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if name.encode() in cmd and state != "Z":  # zombies are dead; PID 1 reaps them late here
            pids.append(int(p.name))
    return pids


@pytest.mark.parametrize("bench", ["ctx.pipe", "ctx.yield", "ctx.pipe:thread"])
def test_helpers_die_with_the_probe(tmp_path, bench):
    name = f"uniqprobe-{uuid.uuid4().hex[:8]}"
    exe = tmp_path / name
    shutil.copy2(PROBE, exe)
    b, _, mode = bench.partition(":")
    args = [*WRAP, str(exe), "run", b, "--samples", "100000", "--target-ms", "5"]
    if mode:
        args += ["-P", f"mode={mode}"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    want = 1 if mode == "thread" else 2
    while len(_live(name)) < want and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_live(name)) >= want
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 2
    while _live(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _live(name) == []
