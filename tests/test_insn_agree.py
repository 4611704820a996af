"""Instruction agreement (validation/instructions): the per-batch aux cost in
opcost's summary, the reference's per-batch flush subtraction
(validation/harness/reference.py), and the reference program itself (built
and run briefly)."""

from __future__ import annotations

import os
import platform
import random
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from opcost.runner import summarize_variant  # a summary: statistics and the facts of its processes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from validation.harness import reference as loops  # noqa: E402

REF_C = ROOT / "validation" / "instructions" / "ref.c"


def _header(aux=None):
    h = {"tsc_hz": 2e9, "overhead": {"clock_ns": 10.0, "loop_ns_per_iter": 0.2}, "iters": 100,
         "cpus": [0]}
    if aux is not None:
        h["aux"] = aux
    return h


def _sample(ns, aux_ns=None):
    s = {"ns_per_op": ns, "tsc_per_op": ns * 2, "user_ns": 1000, "sys_ns": 0, "iters": 100, "wall_ns": 1000,
         "cpu_before": 0, "cpu_after": 0, "nvcsw": 0, "nivcsw": 0, "steal_ticks": 0}
    if aux_ns is not None:
        s["aux_ns_per_op"] = aux_ns
    return s


def test_summary_aux_is_the_median_of_the_per_batch_aux():
    aux = {"what": "clflush of the 38 lines", "subtracted": True, "method": "..."}
    procs = [
        {"header": _header(aux), "samples": [_sample(500, a) for a in (60, 70, 200)]},  # median 70
        {"header": _header(aux), "samples": [_sample(510, a) for a in (120, 125, 121)]},  # median 121
        {"header": _header(aux), "samples": [_sample(505, a) for a in (100, 101, 99)]},  # median 100
    ]
    s = summarize_variant(procs)
    assert s["aux_ns"] == {"what": "clflush of the 38 lines", "per_op": 100}


def test_summary_aux_from_an_older_probe_header():
    aux = {"what": "clflush", "ticks_per_op": 240.0, "ns_per_op": 120.0, "subtracted": True}
    s = summarize_variant([{"header": _header(aux), "samples": [_sample(500), _sample(501)]}])
    assert s["aux_ns"]["per_op"] == 120.0


def test_summary_without_aux_has_none():
    s = summarize_variant([{"header": _header(), "samples": [_sample(500), _sample(501)]}])
    assert "aux_ns" not in s


def _fake_ref(tmp_path: Path, rows: list[str]) -> Path:
    exe = tmp_path / "ref"
    exe.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(rows) + "\nEOF\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_ref_cold_subtracts_each_batch_flushes(tmp_path):
    # warm-up rows first; then batches whose cost moves with their flushes
    # (as when the flush cost drifts within a run): the median of the
    # per-batch differences is 400, the difference of the medians 600.
    assert loops.SAMPLES == 20
    warm = ["999 1"] * loops.WARMUP
    body = ["500 100"] * 9 + ["700 100"] * 6 + ["700 300"] * 5
    got = loops.run_ref(_fake_ref(tmp_path, warm + body), "xsave_cold", 10, 0, random.Random(1))
    assert got["median_ns"] == pytest.approx(400.0)
    assert sorted(got["batches_ns"]) == [400.0] * 14 + [600.0] * 6
    assert got["flush_ns"] == pytest.approx(100.0)


def test_ref_hot_is_the_plain_median(tmp_path):
    rows = ["999"] * loops.WARMUP + [str(50 + k) for k in range(loops.SAMPLES)]
    got = loops.run_ref(_fake_ref(tmp_path, rows), "xsave_hot", 10, 0, random.Random(1))
    assert got["median_ns"] == pytest.approx(50 + (loops.SAMPLES - 1) / 2)
    assert got["flush_ns"] is None


def _has_xsavec() -> bool:
    try:
        flags = next(l for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("flags"))
    except (OSError, StopIteration):
        return False
    return {"xsave", "xsavec"} <= set(flags.split(":", 1)[1].split())


@pytest.mark.skipif(platform.machine() != "x86_64" or not _has_xsavec() or not shutil.which("cc"),
                    reason="the reference is x86_64 with XSAVEC, built with cc")
def test_reference_builds_and_runs(tmp_path):
    exe = loops.build_ref(REF_C, tmp_path, "cc", ["-Wall", "-Wextra", "-Werror"])
    cpu = max(os.sched_getaffinity(0))
    for op, cols in (("xsavec_hot", 1), ("xrstor_cold", 2), ("div_soft", 1)):
        cp = subprocess.run([str(exe), op, "200", "20", str(cpu)], capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        rows = [[float(x) for x in line.split()] for line in cp.stdout.splitlines()]
        assert len(rows) == 20 and all(len(r) == cols and all(x > 0 for x in r) for r in rows), (op, rows[:3])
    cp = subprocess.run([str(exe), "xsave_warm", "10", "1", str(cpu)], capture_output=True, text=True)
    assert cp.returncode == 2 and "unknown OP" in cp.stderr
