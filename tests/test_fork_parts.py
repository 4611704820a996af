"""validation/anchors/fork_parts.py and fork_loop.c: the hand-written loop of
`perf bench syscall fork` (built static and run for a few forks: perf's
output format, both ways out of the child, bad arguments), the shared
libraries read from ldd, a process's shape from /proc, the table. perf
itself is not run here (the script needs it; the anchors report runs it)."""

from __future__ import annotations

import json
import mmap
import time
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from validation.anchors import fork_parts as F  # noqa: E402
from validation.anchors.parsers import parse_perf_bench  # noqa: E402

LDD = """\tlinux-vdso.so.1 (0x00007ffc1e5f1000)
\tlibunwind-x86_64.so.8 => /lib/x86_64-linux-gnu/libunwind-x86_64.so.8 (0x00007f0c8c6a0000)
\tlibdw.so.1 => /lib/x86_64-linux-gnu/libdw.so.1 (0x00007f0c8c5f0000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c8c400000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0c8d9e0000)
"""


def test_shared_libraries_leaves_out_libc_loader_and_vdso():
    assert F.shared_libraries(LDD) == ["/lib/x86_64-linux-gnu/libunwind-x86_64.so.8",
                                       "/lib/x86_64-linux-gnu/libdw.so.1"]
    assert F.shared_libraries("\tnot a dynamic executable\n") == []


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("fork_loop") / "fork_loop"
    subprocess.run([cc, "-O2", "-o", str(out), str(F.LOOP_C)], check=True)
    return out


@pytest.mark.parametrize("how", ["exit", "_exit"])
def test_fork_loop_prints_what_perf_bench_prints(loop, how):
    cp = subprocess.run([str(loop), how, "5"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    got = parse_perf_bench(cp.stdout)
    assert got["count"] == 5 and got["what"] == "fork() calls" and got["ns_per_op"] > 0
    # The header is flushed before the loop: five children's exit() do not print it again.
    assert cp.stdout.count("# Running") == 1


@pytest.mark.parametrize("argv", [[], ["exit"], ["quit", "5"], ["exit", "0"], ["_exit", "x"]])
def test_fork_loop_bad_arguments(loop, argv):
    cp = subprocess.run([str(loop), *argv], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 2 and cp.stdout == ""
    assert cp.stderr.count("\n") == 1 and "usage:" in cp.stderr


def test_shape_counts_mappings_holding_anonymous_pages():
    before = F.shape(os.getpid())
    assert before and before["vmas"] >= before["vmas_written"] > 0 and before["pte_bytes"] > 0
    # 40 one-page private mappings, each written once: 40 more mappings with anonymous pages.
    maps = [mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) for _ in range(40)]
    try:
        for i, m in enumerate(maps):
            m.madvise(mmap.MADV_DONTFORK) if i % 2 else None  # neighbours with other flags: never merged
            m[0] = 1
        after = F.shape(os.getpid())
    finally:
        for m in maps:
            m.close()
    assert after["vmas_written"] - before["vmas_written"] >= 20  # alternate flags: at most pairs merge with old ones
    assert after["anon_bytes"] >= before["anon_bytes"]
    assert F.shape(2 ** 22 + 12345) is None  # no such pid


def test_table_ratios_are_per_round_against_perf():
    runs = {"perf bench syscall fork": [(1000.0, 0.9, False), (2000.0, 0.9, False)],
            "opcost proc.fork": [(100.0, 0.95, True), (400.0, 0.95, True)]}
    rows = {r["variant"]: r for r in F.table(runs)}
    assert rows["perf bench syscall fork"]["vs_perf"] == 1.0
    op = rows["opcost proc.fork"]
    assert (op["vs_perf_min"], op["vs_perf_max"]) == (0.1, 0.2) and op["vs_perf"] == pytest.approx(0.15)
    assert op["us_per_fork"] == pytest.approx(0.25)
    text = F.markdown(F.table(runs), {"perf": None})
    assert "| opcost proc.fork | 0.2 | 0.150 (0.100-0.200) | 0.95 |" in text and "| perf | not read" in text


def test_figure_takes_the_waiting_out_by_the_cpu_share():
    assert F.figure({"ns_per_op": 1000.0, "cpu_share": 0.5}) == 500.0
    assert F.figure({"ns_per_op": 1000.0, "cpu_share": 1.2}) == 1000.0  # never scaled up
    assert F.figure({"ns_per_op": 1000.0, "cpu_share": None}) == 1000.0


def test_bad_options_exit_2():
    cp = subprocess.run([sys.executable, str(ROOT / "validation" / "anchors" / "fork_parts.py"), "--runs", "0"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 2 and "--runs and --loops must be >= 1" in cp.stderr


def test_shape_while_running_reads_the_named_descendant_and_kills_all():
    code = "import subprocess; subprocess.run(['sleep', '30'])"
    t0 = time.monotonic()
    got = F.shape_while_running([sys.executable, "-c", code], None, "sleep", 0.5)
    assert got and got["vmas"] > 3 and got["pte_bytes"] > 0
    assert F.shape_while_running([sys.executable, "-c", code], None, "no-such-comm", 0.3) is None
    assert time.monotonic() - t0 < 10  # the sleeps were killed, not waited for


def _parent(spec: str, tmp_path: Path) -> dict:
    out = tmp_path / "r.json"
    subprocess.run([sys.executable, "-m", "opcost", "run", spec, "-p", "1", "-n", "2", "-w", "0", "--iters", "1",
                    "--no-store", "--no-progress", "--json", str(out)], check=True, capture_output=True, timeout=120,
                   cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return json.loads(out.read_text())["results"][0]["processes"][0]["header"]["parent"]


def test_written_mappings_each_hold_one_anonymous_page(tmp_path):
    bare = _parent("proc.fork:mappings=40", tmp_path)
    got = _parent("proc.fork:mappings=40,written=40", tmp_path)
    # 40 more mappings, each with its own copied page: fork copies their page-table entries.
    assert got["vmas"] - bare["vmas"] == 40
    assert got["vmas_written"] - bare["vmas_written"] == 40
    # the probe's own anonymous pages vary by a few between two processes (80-90 KiB seen): 40 +- 4 pages
    assert 36 * 4096 <= got["anon_bytes"] - bare["anon_bytes"] <= 44 * 4096, (bare, got)
