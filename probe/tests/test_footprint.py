"""The parent's footprint as a parameter of the process-creation benchmarks
(lib/footprint.c): resident= (anonymous memory written before timing) and
mappings= (extra one-page memfd VMAs) size the parent of proc.fork,
proc.vfork, proc.exec and proc.spawn; the header reports what the parent
really was ("parent": resident_bytes, anon_bytes, vmas), and the Python side
carries it into processes[].header and summary.parent."""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import pytest

PROBE_DIR = Path(__file__).resolve().parents[1]
ROOT = PROBE_DIR.parent
PROBE = PROBE_DIR / "opcost-probe"
BENCHES = ["proc.fork", "proc.vfork", "proc.exec", "proc.spawn"]
FAST = ("--samples", "2", "--warmup", "0")
MiB = 1 << 20


@pytest.fixture(scope="session", autouse=True)
def built_probe():
    subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)
    return PROBE


def probe(*args, timeout=60, preexec_fn=None):
    return subprocess.run([str(PROBE), *args], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=preexec_fn, stdin=subprocess.DEVNULL)


def lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def header(bench: str, *params: str, iters: int = 3) -> dict:
    args = [a for p in params for a in ("-P", p)]
    cp = probe("run", bench, *args, "--iters", str(iters), *FAST)
    assert cp.returncode == 0, cp.stderr
    h = lines(cp.stdout)[0]
    assert h["type"] == "header"
    return h


def opcost(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OPCOST_PROBE"}
    env["PYTHONPATH"] = str(ROOT / "src")
    env["XDG_DATA_HOME"] = str(tmp_path)
    return subprocess.run([sys.executable, "-m", "opcost", *args], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_params_declared_as_data():
    cp = probe("list", "--json")
    assert cp.returncode == 0, cp.stderr
    table = {b["name"]: b for b in json.loads(cp.stdout)["benchmarks"]}
    for name in BENCHES:
        ps = {p["name"]: p for p in table[name]["params"]}
        assert ps["resident"]["type"] == "int" and ps["resident"]["default"] == "0"
        assert ps["resident"]["min"] == 0 and ps["resident"]["max"] == 1 << 30  # fits an i386 long
        assert ps["mappings"]["type"] == "int" and ps["mappings"]["default"] == "0"
        assert ps["mappings"]["min"] == 0 and 1000 <= ps["mappings"]["max"] <= 65530 // 2


@pytest.mark.parametrize("bench", BENCHES)
def test_default_parent_is_the_small_probe(bench):
    h = header(bench)
    assert h["params"]["resident"] == "0" and h["params"]["mappings"] == "0"
    parent = h["parent"]
    assert set(parent) == {"resident_bytes", "anon_bytes", "vmas", "vmas_written"}
    assert h["params"].get("written", "0") == "0" and 0 < parent["vmas_written"] <= parent["vmas"], parent
    assert 3 <= parent["vmas"] < 40, parent
    assert 0 < parent["anon_bytes"] < 4 * MiB, parent
    assert parent["anon_bytes"] <= parent["resident_bytes"] < 16 * MiB, parent


@pytest.mark.parametrize("bench", BENCHES)
def test_mappings_and_resident_show_in_the_parent(bench):
    base = header(bench)["parent"]
    maps = header(bench, "mappings=200")["parent"]
    # one VMA per mapping (none merged), little else
    assert 200 <= maps["vmas"] - base["vmas"] <= 202, (base, maps)
    res = header(bench, "resident=8388608")["parent"]
    # every page written is resident; the rest of the probe's anonymous
    # memory moves by a page or two from run to run
    assert res["anon_bytes"] >= 8 * MiB, res
    assert res["anon_bytes"] - base["anon_bytes"] >= 8_000_000, (base, res)
    assert res["vmas"] - base["vmas"] <= 2, (base, res)


def test_many_mappings_do_not_merge():
    base = header("proc.fork", iters=1)["parent"]
    big = header("proc.fork", "mappings=20000", iters=1)["parent"]
    assert 20000 <= big["vmas"] - base["vmas"] <= 20002, (base, big)


def _per_op(bench: str, resident: int, rounds: int, target_ms: str = "5") -> list[float]:
    cp = probe("run", bench, "-P", f"resident={resident}", "--samples", str(rounds), "--warmup", "1",
               "--target-ms", target_ms)
    assert cp.returncode == 0, cp.stderr
    return [s["ns_per_op"] for s in lines(cp.stdout) if s["type"] == "sample" and not s.get("warmup")]


def fork_attempt() -> tuple[bool, dict]:
    # Alternate the variants, several rounds, and compare the fastest batch of
    # each (15 of 5 ms): the machine is shared, noise mostly adds time. The
    # bounds are wide because the machine's state moves between runs (on a
    # loaded VM vfork's fastest batch moved from 16 to 33 us from one probe
    # process to the next, either way of resident=): fork's 64 MiB parent
    # costs it 30-240x here, spawn's and vfork's at most 2.1x.
    size = 64 * MiB  # 16384 page-table entries copied by every fork
    best: dict[tuple[str, int], float] = {}
    for _ in range(3):
        for bench in ("proc.fork", "proc.spawn", "proc.vfork"):
            for r in (0, size):
                v = min(_per_op(bench, r, 5))
                best[bench, r] = min(v, best.get((bench, r), v))
    fork = best["proc.fork", size] / best["proc.fork", 0]
    spawn = best["proc.spawn", size] / best["proc.spawn", 0]
    vfork = best["proc.vfork", size] / best["proc.vfork", 0]
    return fork > 4 and spawn < 3 and vfork < 3, {"fork": fork, "spawn": spawn, "vfork": vfork, **{
        f"{b}:{r}": v for (b, r), v in best.items()}}


def test_fork_pays_for_resident_memory_spawn_and_vfork_do_not():
    # A statistical check on real timings, up to 6 independent attempts. False
    # failure <= 1e-4: per attempt 1 of 30 failed (Intel Xeon, load average
    # 10-12 from other suites, half of them beside a CPU hog pinned on the
    # measuring CPU: vfork's fastest batch once 4.8x with resident=; 95% upper
    # bound 0.172), and 0.172 ** 6 = 2.6e-5.
    for _ in range(6):
        ok, figures = fork_attempt()
        if ok:
            return
    pytest.fail(f"6 attempts, the last: {figures}")


@pytest.mark.parametrize("spec", ["proc.fork:resident=-1", "proc.fork:mappings=999999",
                                  "proc.spawn:resident=1073741825", "proc.exec:mappings=x"])
def test_bad_values_are_one_line_exit_2(tmp_path, spec):
    cp = opcost(tmp_path, "run", spec, "--no-store", "-p", "1", "-n", "1")
    assert cp.returncode == 2, (cp.returncode, cp.stderr)
    assert "Traceback" not in cp.stderr + cp.stdout
    out = cp.stderr.strip().splitlines()
    assert len(out) == 1, cp.stderr
    name = spec.split(":")[1].split("=")[0]
    assert name in out[0] and "[0, " in out[0], out[0]
    assert cp.stdout == ""


def test_bad_values_in_the_probe_itself():
    for p in ("resident=-1", "mappings=999999", "resident=1073741825"):
        cp = probe("run", "proc.fork", "-P", p, "--iters", "1", *FAST)
        assert cp.returncode == 2, cp
        assert cp.stdout == "" and len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def _limit_address_space(nbytes: int):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))


@pytest.mark.parametrize("bench", ["proc.fork", "proc.spawn"])
def test_no_memory_is_unsupported_with_a_reason(bench):
    # A 256 MiB address-space limit: a 1 GiB parent cannot be mapped, nor
    # 20000 mappings of one page each (80 MiB).
    cp = probe("run", bench, "-P", "resident=1073741824", "--iters", "1", *FAST,
               preexec_fn=_limit_address_space(256 * MiB))
    assert cp.returncode == 3, (cp.returncode, cp.stderr)
    (line,) = lines(cp.stdout)
    assert line["type"] == "unsupported"
    assert line["reason"] == "resident=1073741824: mmap of 1073741824 bytes: Cannot allocate memory"
    cp = probe("run", bench, "-P", "mappings=20000", "--iters", "1", *FAST,
               preexec_fn=_limit_address_space(64 * MiB))
    assert cp.returncode == 3, (cp.returncode, cp.stderr)
    (line,) = lines(cp.stdout)
    assert line["type"] == "unsupported"
    assert line["reason"].startswith("mappings=20000: mmap number ") and "Cannot allocate memory" in line["reason"]


def test_cli_result_carries_the_parent(tmp_path):
    out = tmp_path / "r.json"
    cp = opcost(tmp_path, "run", "proc.fork:mappings=0|200,resident=0|4194304", "-p", "2", "-n", "2", "-w", "0",
                "--target-ms", "1", "--no-store", "--json", str(out))
    assert cp.returncode == 0, cp.stderr
    results = {(r["params"]["mappings"], r["params"]["resident"]): r for r in json.loads(out.read_text())["results"]}
    assert len(results) == 4
    for r in results.values():
        parents = [p["header"]["parent"] for p in r["processes"]]
        assert len(parents) == 2
        for k in ("resident_bytes", "anon_bytes", "vmas"):
            assert r["summary"]["parent"][k] == round(median(p[k] for p in parents))
    s = {k: r["summary"]["parent"] for k, r in results.items()}
    assert s["200", "0"]["vmas"] - s["0", "0"]["vmas"] >= 200
    assert s["0", "4194304"]["anon_bytes"] >= 4 * MiB
    assert s["0", "4194304"]["anon_bytes"] - s["0", "0"]["anon_bytes"] >= 4_000_000
    assert s["200", "4194304"]["vmas"] - s["0", "4194304"]["vmas"] >= 200


def _live_in_sessions(sessions: set[int]) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) in sessions:
            out.append(int(p.name))
    return out


def test_killed_big_parent_leaves_nothing_behind():
    # Killed anywhere (setup, mid-fork of a 64 MiB parent, measuring): no
    # child survives it; memory and memfds go with the process.
    sessions: set[int] = set()
    headers = 0
    cases = [["proc.fork", "-P", "resident=67108864", "-P", "mappings=2000"],
             ["proc.exec", "-P", "resident=67108864"], ["proc.spawn", "-P", "mappings=2000"],
             ["proc.vfork", "-P", "resident=67108864"]]
    for i in range(16):
        p = subprocess.Popen([str(PROBE), "run", *cases[i % len(cases)], "--target-ms", "1", "--samples", "1000000"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        sessions.add(p.pid)
        if i % 2 == 0:
            # until the header (measuring has begun): its 64 MiB written and 2000
            # mappings made take far longer on a loaded machine than alone, so a
            # generous bound, not 2 s (header counts must not depend on the load)
            r, _, _ = select.select([p.stdout], [], [], 30.0)
            if r and p.stdout.readline():
                headers += 1  # measuring had begun
        else:
            time.sleep(0.01 * (i % 5))
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()
    deadline = time.monotonic() + 5
    left = _live_in_sessions(sessions)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _live_in_sessions(sessions)
    assert left == []
    assert headers >= 4, "too few probes got as far as their header"
