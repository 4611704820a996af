"""Probe tests for the OS-primitive benchmarks (hackbench, unix/futex/eventfd
ping-pong, process and thread creation, page faults, mmap, epoll, nanosleep),
operations per iteration, and the placement dimension resolved from a fake
sysfs tree (OPCOST_SYSFS_ROOT)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

PROBE_DIR = Path(__file__).resolve().parents[1]
PROBE = PROBE_DIR / "opcost-probe"
TWO_CPUS = len(os.sched_getaffinity(0)) >= 2 and {0, 1} <= os.sched_getaffinity(0)


@pytest.fixture(scope="session", autouse=True)
def built_probe():
    subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)
    return PROBE


def probe(*args, timeout=60, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([str(PROBE), *args], capture_output=True, text=True, timeout=timeout, env=e)


def lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


FAST = ("--samples", "2", "--warmup", "1")

# bench, params, --iters, op, ops per iteration (None: 1)
CASES = [
    ("msg.hackbench", ["groups=2", "fds=3", "loops=5"], 1, "message delivered", 2 * 3 * 3 * 5),
    ("msg.hackbench", ["groups=1", "fds=2", "loops=3", "ipc=pipe", "mode=thread", "size=4000"], 2,
     "message delivered", 1 * 2 * 2 * 3),
    ("msg.hackbench", ["groups=1", "fds=2", "loops=2", "workers_on=pinned"], 1, "message delivered", 8),
    ("ctx.unix", [], 200, "round trip", None),
    ("ctx.unix", ["mode=thread", "type=seqpacket"], 200, "round trip", None),
    ("ctx.futex", [], 200, "round trip", None),
    ("ctx.futex", ["mode=process"], 200, "round trip", None),
    ("ctx.eventfd", [], 200, "round trip", None),
    ("ctx.eventfd", ["mode=thread"], 200, "round trip", None),
    ("proc.fork", [], 10, "fork+exit+wait", None),
    ("proc.vfork", [], 10, "vfork+exit+wait", None),
    ("proc.exec", [], 5, "fork+exec+exit+wait", None),
    ("proc.exec", ["via=vfork"], 5, "fork+exec+exit+wait", None),
    ("proc.exec", ["prog=/bin/true"], 3, "fork+exec+exit+wait", None),
    ("proc.spawn", [], 5, "spawn+exec+exit+wait", None),
    ("thread.create", [], 20, "create+exit+join", None),
    ("thread.create", ["stack=64"], 20, "create+exit+join", None),
    ("mem.pagefault", ["size=65536"], 3, "page faulted", 16),
    ("mem.pagefault", ["size=65536", "access=read"], 3, "page faulted", 16),
    ("mem.mmap", [], 100, "mmap+munmap", None),
    ("mem.mmap", ["pages=16", "populate=yes"], 20, "mmap+munmap", None),
    ("mem.mmap", ["pages=256", "backing=memfd", "touch=tenth"], 20, "mmap+munmap", None),
    ("mem.mmap", ["pages=16", "backing=tmpfile", "populate=yes"], 20, "mmap+munmap", None),
    ("mem.touch", ["size=65536"], 3, "page touched", 16),
    ("mem.touch", ["size=65536", "backing=tmpfile"], 3, "page touched", 16),
    ("epoll.wait", [], 1000, "epoll_wait", None),
    ("epoll.wait", ["fds=10"], 1000, "epoll_wait", None),
    ("timer.nanosleep", [], 20, "nanosleep", None),
    ("timer.nanosleep", ["ns=1000", "slack=min"], 20, "nanosleep", None),
]


@pytest.mark.parametrize("bench,params,iters,op,opi", CASES,
                         ids=[f"{c[0]}:{','.join(c[1])}" for c in CASES])
def test_new_benchmark_runs_and_reports_per_operation(bench, params, iters, op, opi):
    if os.sysconf("SC_PAGE_SIZE") != 4096 and opi == 16:
        opi = 65536 // os.sysconf("SC_PAGE_SIZE")
    args = ["run", bench, "--iters", str(iters), *FAST]
    for p in params:
        args += ["-P", p]
    cp = probe(*args)
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""  # no failed operation was counted
    out = lines(cp.stdout)
    header, samples, trailer = out[0], out[1:-1], out[-1]
    assert header["bench"] == bench and header["op"] == op and header["iters"] == iters
    assert trailer["status"] == "ok" and len(samples) == 3
    if opi is None:
        assert "ops_per_iter" not in header
    else:
        assert header["ops_per_iter"] == opi and header["iteration"]
    for s in samples:
        assert s["ns_per_op"] > 0 and s["tsc_per_op"] > 0
        n = s["iters"] * (opi or 1)
        assert s["ns_per_op"] == pytest.approx(s["ns"] / n, rel=1e-9)
        assert s["sys_ns_per_op"] == pytest.approx(s["sys_ns"] / n, rel=1e-9)
        if opi:
            assert s["ns_per_iter"] == pytest.approx(s["ns"] / s["iters"], rel=1e-9)
    if bench.startswith("ctx."):
        assert header["placement"]["name"] == "same" and header["placement"]["cpus"][0] == header["cpus"][0]


def test_exec_of_a_program_that_fails_is_a_bad_parameter():
    """prog= must name a program that runs and exits 0: said before anything is timed."""
    for prog, why in (("/nonexistent/prog", "cannot be opened"), ("/bin/false", "did not run and exit 0")):
        cp = probe("run", "proc.exec", "-P", f"prog={prog}", "--iters", "2", *FAST)
        assert cp.returncode == 2 and why in cp.stderr, (cp.returncode, cp.stderr)


def test_nanosleep_reports_its_overshoot():
    out = lines(probe("run", "timer.nanosleep", "-P", "ns=1000", "--iters", "20", *FAST).stdout)
    assert out[0]["nominal_ns_per_op"] == 1000
    for s in out[1:-1]:
        assert s["overshoot_ns_per_op"] == pytest.approx(s["ns_per_op"] - 1000)
        assert s["ns_per_op"] > 1000  # a sleep never ends early


def test_pagefaults_are_counted_per_page():
    """The software page-fault counter divided by pages: about one per page."""
    cp = probe("run", "mem.pagefault", "-P", "size=1048576", "--iters", "4", "--counters", "page-faults", *FAST)
    assert cp.returncode == 0, cp.stderr
    for s in lines(cp.stdout)[1:-1]:
        pf = s["counters"]["page-faults"]
        if isinstance(pf, str):
            pytest.skip(f"page-faults counter: {pf}")
        assert pf == pytest.approx(1.0, abs=0.1)


def test_fake_clock_is_per_operation_for_multi_op_iterations():
    cp = probe("run", "msg.hackbench", "-P", "groups=1", "-P", "fds=2", "-P", "loops=5", "--fake-clock", "500",
               "--samples", "3", "--warmup", "0")
    assert cp.returncode == 0, cp.stderr
    out = lines(cp.stdout)
    assert out[0]["ops_per_iter"] == 20
    assert out[0]["iters"] == 1000  # 10 ms / (500 ns * 20 messages)
    for s in out[1:-1]:
        assert s["ns_per_op"] == pytest.approx(500, rel=0.011)
        assert s["ns_per_iter"] == pytest.approx(500 * 20, rel=0.011)


@pytest.mark.parametrize("args,needle", [
    (["run", "msg.hackbench", "-P", "groups=0"], "groups=0 must be an integer in [1, 1000]"),
    (["run", "msg.hackbench", "-P", "size=65537"], "size=65537 must be an integer in [1, 65536]"),
    (["run", "msg.hackbench", "-P", "ipc=tcp"], "ipc=tcp is not allowed; valid: socket|pipe"),
    (["run", "msg.hackbench", "--spin", "3"], "spin= cannot be injected"),
    (["run", "ctx.unix", "-P", "placement=far"], "placement=far is not allowed; valid: same|smt|core|llc|numa"),
    (["run", "ctx.futex", "-P", "placement=moon"], "valid: same|smt|core|llc|numa"),
    (["run", "mem.pagefault", "-P", "size=0"], "size=0 must be an integer in [4096,"),
    (["run", "mem.mmap", "-P", "pages=0"], "pages=0 must be an integer in [1,"),
    (["run", "timer.nanosleep", "-P", "ns=-1"], "ns=-1 must be an integer in [0, 10000000]"),
    (["run", "thread.create", "-P", "stack=1"], "stack=1 KiB"),
    (["placement", "0"], "usage: opcost-probe placement CPU_A CPU_B"),
    (["placement", "0", "x"], "x is not a CPU number"),
])
def test_bad_input_exit_2(args, needle):
    cp = probe(*args)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert cp.stdout == ""
    err = cp.stderr.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


@pytest.mark.skipif(not TWO_CPUS, reason="needs CPUs 0 and 1")
def test_cpu_pair_contradicting_placement_is_a_usage_error():
    real = lines(probe("placement", "0", "1").stdout)[0]["name"]
    wrong = "same" if real != "same" else "core"
    cp = probe("run", "ctx.eventfd", "--cpu", "0,1", "-P", f"placement={wrong}", "--samples", "1")
    assert cp.returncode == 2
    assert f"cpu=0,1 contradicts placement={wrong} (these CPUs mean placement={real}" in cp.stderr
    cp = probe("run", "ctx.eventfd", "--cpu", "0,1", "-P", f"placement={real}", "--iters", "10", *FAST)
    assert cp.returncode == 0, cp.stderr
    h = lines(cp.stdout)[0]
    assert h["placement"]["name"] == real and h["placement"]["cpus"] == [0, 1] and h["placement"]["how"]


# ---- topology from a fake sysfs ------------------------------------------------

def _cpulist(cpus) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def fake_sysfs(root: Path, ncpu: int, smt: list[set], llc: list[set], nodes: list[set] | None, caches=True) -> Path:
    """A sysfs tree: SMT sibling groups, LLC groups (cache index3, level 3),
    NUMA nodes (None: no node directory)."""
    base = root / "sys/devices/system"
    for c in range(ncpu):
        d = base / f"cpu/cpu{c}"
        (d / "topology").mkdir(parents=True)
        sib = next((g for g in smt if c in g), {c})
        (d / "topology/thread_siblings_list").write_text(_cpulist(sib) + "\n")
        if caches:
            shared = next((g for g in llc if c in g), {c})
            for idx, level, group in ((0, 1, sib), (1, 1, sib), (2, 2, sib), (3, 3, shared)):
                cd = d / f"cache/index{idx}"
                cd.mkdir(parents=True)
                (cd / "level").write_text(f"{level}\n")
                (cd / "shared_cpu_list").write_text(_cpulist(group) + "\n")
    for n, cpus in enumerate(nodes or []):
        nd = base / f"node/node{n}"
        nd.mkdir(parents=True)
        (nd / "cpulist").write_text(_cpulist(cpus) + "\n")
    return root


def classify(root: Path, a: int, b: int) -> dict:
    cp = probe("placement", str(a), str(b), env={"OPCOST_SYSFS_ROOT": str(root)})
    assert cp.returncode == 0, cp.stderr
    return lines(cp.stdout)[0]


def test_topology_classifies_all_five_classes(tmp_path):
    # 8 CPUs: SMT pairs; LLCs {0-3}, {4,5}, {6,7}; nodes {0-5}, {6,7}
    root = fake_sysfs(tmp_path, 8, smt=[{0, 1}, {2, 3}, {4, 5}, {6, 7}], llc=[{0, 1, 2, 3}, {4, 5}, {6, 7}],
                      nodes=[{0, 1, 2, 3, 4, 5}, {6, 7}])
    want = {(0, 0): "same", (0, 1): "smt", (1, 0): "smt", (0, 2): "core", (1, 3): "core", (0, 4): "llc",
            (3, 5): "llc", (0, 6): "numa", (5, 7): "numa", (6, 7): "smt"}
    for (a, b), name in want.items():
        got = classify(root, a, b)
        assert got["name"] == name, (a, b, got)
        assert got["cpus"] == [a, b] and got["how"]
    assert "thread_siblings_list=0,1" in classify(root, 0, 1)["how"]
    assert "NUMA node 0" in classify(root, 0, 6)["how"]


def test_topology_without_cache_or_node_information(tmp_path):
    root = fake_sysfs(tmp_path, 4, smt=[], llc=[], nodes=None, caches=False)
    got = classify(root, 0, 1)
    assert got["name"] == "core" and "no cache information" in got["how"]


TWO_CPU_MACHINES = {
    "smt": dict(smt=[{0, 1}], llc=[{0, 1}], nodes=[{0, 1}]),
    "core": dict(smt=[], llc=[{0, 1}], nodes=[{0, 1}]),
    "llc": dict(smt=[], llc=[], nodes=[{0, 1}]),
    "numa": dict(smt=[], llc=[], nodes=[{0}, {1}]),
}


@pytest.mark.skipif(not TWO_CPUS, reason="needs CPUs 0 and 1")
@pytest.mark.parametrize("machine", sorted(TWO_CPU_MACHINES))
def test_placement_resolves_against_the_topology(tmp_path, machine):
    """On a two-CPU machine of each shape, its own class resolves to the pair
    (0,1); every other class but `same` is unsupported, with the reason."""
    root = fake_sysfs(tmp_path, 2, **TWO_CPU_MACHINES[machine])
    env = {"OPCOST_SYSFS_ROOT": str(root)}
    for placement in ("same", "smt", "core", "llc", "numa"):
        cp = probe("run", "ctx.eventfd", "-P", f"placement={placement}", "--iters", "5", "--samples", "1",
                   "--warmup", "0", env=env)
        if placement in ("same", machine):
            assert cp.returncode == 0, (placement, cp.stderr)
            h = lines(cp.stdout)[0]
            assert h["placement"]["name"] == placement
            cpus = h["cpus"]
            assert (cpus[0] == cpus[1]) if placement == "same" else (sorted(cpus) == [0, 1])
        else:
            assert cp.returncode == 3, (placement, cp.stdout, cp.stderr)
            (u,) = lines(cp.stdout)
            assert u["type"] == "unsupported" and u["reason"].startswith(f"placement={placement}: ")


@pytest.mark.skipif(not TWO_CPUS, reason="needs CPUs 0 and 1")
def test_no_smt_sibling_reason(tmp_path):
    root = fake_sysfs(tmp_path, 2, **TWO_CPU_MACHINES["core"])
    cp = probe("run", "ctx.unix", "--cpu", "0", "-P", "placement=smt", "--samples", "1",
               env={"OPCOST_SYSFS_ROOT": str(root)})
    assert cp.returncode == 3
    assert lines(cp.stdout)[0]["reason"] == "placement=smt: CPU 0 has no SMT sibling (thread_siblings_list=0)"
