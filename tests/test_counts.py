"""Exact counts from the emulator (issue 34): the probe under qemu-user with
opcost's TCG plugin (probe/plugin/opcount.c) serves --counters instructions:u
and the insns profile's classes where perf cannot count (no PMU here); the
counts are exact, so assertions are equalities to within what the window's
fixed part (the call into the benchmark's loop, a few instructions over
thousands of iterations) can move them: never a timing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "probe"
PLUGIN = PROBE / "opcost-probe-count.so"


def need(*tools: str) -> None:
    if os.uname().machine != "x86_64":
        pytest.skip("written for an x86_64 host")
    for t in tools:
        if not shutil.which(t):
            pytest.skip(f"{t} is not installed")
    if not PLUGIN.is_file():
        subprocess.run(["make", "-C", str(PROBE), "-s"], check=True)


# one known instruction sequence per class (bytes as the CPU sees them), and
# look-alikes that are not in the class
CLASSES = {
    "cr3-writes": ["0f 22 d8", "0f 22 df", "41 0f 22 d8"],        # mov %rax,%cr3; mov %rdi,%cr3; mov %r8,%cr3
    "msr-writes": ["0f 30"],
    "msr-reads": ["0f 32"],
    "xsave-family": ["0f ae 27", "48 0f ae 27", "0f ae 2f", "0f ae 37", "0f ae 07", "0f ae 0f",
                     "0f c7 27", "0f c7 2f", "48 0f c7 1f"],       # xsave xsave64 xrstor xsaveopt fxsave fxrstor xsavec xsaves xrstors64
    "fences": ["0f ae e8", "0f ae f0", "0f ae f8"],               # lfence mfence sfence
    "verw": ["0f 00 2c 24", "0f 00 e8"],                          # verw (%rsp); verw %ax
    "swapgs": ["0f 01 f8"],
    "syscall": ["0f 05", "0f 34", "cd 80"],                       # syscall sysenter int $0x80
    "sysret": ["48 0f 07", "0f 07", "0f 35"],
    "iret": ["48 cf", "cf"],
    "cpuid": ["0f a2"],
    "invlpg-invpcid": ["0f 01 38", "66 0f 38 82 07"],             # invlpg (%rax); invpcid (%rdi),%rax
    "stac-clac": ["0f 01 cb", "0f 01 ca"],
    "rdtsc": ["0f 31", "0f 01 f9"],
    "locked": ["f0 0f b1 17", "f0 48 0f c1 07", "f0 ff 07", "f0 80 0f 01", "87 07", "48 86 07"],   # lock cmpxchg,
}                                                             # lock xadd, lock incl, lock orb; xchg with memory
NONE = ["0f 22 c0",          # mov %rax,%cr0
        "0f 20 d8",          # mov %cr3,%rax (a read)
        "0f ae 3f",          # clflush
        "66 0f ae f0",       # tpause
        "0f c7 0f",          # cmpxchg8b
        "0f 01 f0",          # not swapgs
        "90", "48 89 c3", "0f 1f 44 00 00", "c3",
        "3e ff 07",          # ds incl: a `lock` an x86 kernel on one CPU patched out (SMP alternatives -> UP)
        "48 87 c3", "0f b1 17"]   # xchg of two registers; cmpxchg without lock

TEST_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "classify.h"
#include "../marker.h"
int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		unsigned char b[16];
		size_t n = 0;
		for (char *p = argv[i]; *p && n < 16; ) {
			b[n++] = (unsigned char)strtoul(p, &p, 16);
			while (*p == ' ') p++;
		}
		int c = classify_x86(b, n);
		printf("%s|%d%d%d\n", class_names[c], marker_kind(b, n, 'x'), marker_kind(b, n, 'a'), marker_kind(b, n, 'r'));
	}
	return 0;
}
"""


@pytest.fixture(scope="module")
def classify_bin(tmp_path_factory):
    if not shutil.which("cc"):
        pytest.skip("no cc")
    d = tmp_path_factory.mktemp("classify")
    (d / "t.c").write_text(TEST_C)
    exe = d / "t"
    subprocess.run(["cc", "-O1", "-I", str(PROBE / "plugin"), "-o", str(exe), str(d / "t.c")], check=True)
    return exe


def _classify(exe, seqs):
    out = subprocess.run([str(exe), *seqs], capture_output=True, text=True, check=True).stdout.splitlines()
    return [ln.split("|") for ln in out]


def test_every_class_counts_its_known_sequences_and_nothing_else(classify_bin):
    for name, seqs in CLASSES.items():
        got = _classify(classify_bin, seqs)
        assert [g[0] for g in got] == [name] * len(seqs), (name, seqs, got)
    assert [g[0] for g in _classify(classify_bin, NONE)] == [""] * len(NONE)


def test_markers_are_recognised_per_architecture_only(classify_bin):
    # x86: nopl TAG(%eax,%eax,1) with the tag 0x4f430000 + kind; the same NOP with another tag is none
    x86 = ["0f 1f 84 00 01 00 43 4f", "0f 1f 84 00 02 00 43 4f", "0f 1f 84 00 04 00 43 4f",
           "0f 1f 84 00 05 00 43 4f", "0f 1f 84 00 00 00 00 00"]
    assert [g[1] for g in _classify(classify_bin, x86)] == ["100", "200", "400", "000", "000"]
    # aarch64 mov x21, x21 (orr x21, xzr, x21) and A32 mov r8, r8, little-endian words
    a64 = "f5 03 15 aa"
    a32 = "08 80 a0 e1"
    assert [g[1] for g in _classify(classify_bin, [a64, a32])] == ["010", "001"]


def _json(run_cli, tmp_path, *args, timeout=300):
    out = tmp_path / "out.json"
    cp = run_cli(*args, "--json", out, timeout=timeout)
    assert cp.returncode == 0, cp.stderr
    return cp, json.loads(out.read_text())


def test_spin_adds_an_exact_linear_count_under_qemu_user(run_cli, tmp_path):
    """The must-hold: spin=11 against spin=1 adds 10 chain steps of 3
    instructions (add, dec, jnz) per op, within 0.01 instructions/op; the
    verdict, decided on the count, is slower, and show replays it."""
    need("qemu-x86_64")
    cp, doc = _json(run_cli, tmp_path, "ab", "syscall.null", "--a", "spin=1", "--b", "spin=11",
                    "--counters", "instructions:u", "--verdict-on", "instructions:u",
                    "--samples", "3", "--warmup", "1", "--target-ms", "5")
    (e,) = doc["comparisons"]
    on = e["decided_on"]
    assert on["counter"] == "instructions:u" and on["source"] == "emulator"
    assert abs(on["difference"] - 30.0) < 0.01, on
    assert e["verdict"] == "slower"
    assert re.search(r"B-A \+(29\.99\d|30\.00\d) instructions/op", cp.stdout), cp.stdout
    shown = run_cli("show", str(doc["a"]["run_id"]), timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "decided on instructions:u per op (emulator, exact; per process its smallest batch)" in shown.stdout
    assert re.search(r"B-A \+(29\.99\d|30\.00\d) instructions/op", shown.stdout), shown.stdout
    # where the instructions are: the whole difference in the spin chain, first
    fn = run_cli("show", str(doc["a"]["run_id"]), "--functions", "3", timeout=120)
    assert fn.returncode == 0, fn.stderr
    rows = [ln.split() for ln in fn.stdout.splitlines()[2:]]
    assert rows[0][0] == "spin_chain" and abs(float(rows[0][3]) - 30.0) < 0.01, fn.stdout
    assert all(abs(float(r[3])) < 0.01 for r in rows[1:]), fn.stdout


def test_classes_in_user_code_under_qemu_user(run_cli, tmp_path):
    """One syscall instruction per syscall.null, one xsave per xstate.xsave,
    counted by the insns profile; recorded with their source."""
    need("qemu-x86_64")
    _, doc = _json(run_cli, tmp_path, "run", "syscall.null", "xstate.xsave", "--counters", "insns:u",
                   "-p", "1", "--samples", "2", "--warmup", "0", "--target-ms", "2", "--no-store")
    by = {r["bench"]: r for r in doc["results"]}

    def per_batch(bench: str, event: str) -> list[float]:
        # a batch's count: one per op, and what the window's fixed part (the call into the loop,
        # the benchmark's own set-up there) adds once per batch
        return [s["counters"][event] * s["iters"] - s["iters"] for p in by[bench]["processes"] for s in p["samples"]]

    assert all(-1e-6 <= x <= 4 and abs(x - round(x)) < 1e-6 for x in per_batch("syscall.null", "syscall:u"))
    assert all(-1e-6 <= x <= 4 and abs(x - round(x)) < 1e-6 for x in per_batch("xstate.xsave", "xsave-family:u"))
    sc = by["syscall.null"]["summary"]["counters"]
    xs = by["xstate.xsave"]["summary"]["counters"]
    assert sc["xsave-family:u"] == 0 and sc["cpuid:u"] == 0 and xs["syscall:u"] < 0.01
    head = by["syscall.null"]["processes"][0]["header"]
    src = {c["name"]: c for c in head["counters"]}
    assert src["instructions:u"]["source"] == "emulator" and src["instructions:u"]["exact"] is True


def test_a_prepared_benchmark_counts_its_calls_own_instructions(run_cli, tmp_path):
    """msg.hackbench (prepare(): every iteration a timed call of its own,
    run(ctx, 1), after an untimed set-up): the count per iteration is the
    call's own instructions, all of them. Checked against the plugin's
    blocks folded into functions: per iteration, the benchmark's functions
    (its run, reap, libc's write and wait4) hold exactly the count plus the
    empty call's return taken off with the fixed part, and no harness
    function is left in. Before, the fixed part came from the benchmark's
    run called unprepared (its whole write-and-reap of no worker, 37
    instructions, not a call's 4): the count was 29 short per iteration and
    the harness's call site stayed in."""
    need("qemu-x86_64")
    from elftools.elf.elffile import ELFFile   # here, as src/opcost/emucount.py does: pyelftools only where symbols are read

    _, doc = _json(run_cli, tmp_path, "run", "msg.hackbench:groups=1,fds=2,loops=1,workers_on=pinned",
                   "--counters", "instructions:u", "-p", "1", "--samples", "2", "--warmup", "0", "--no-store")
    (p,) = doc["results"][0]["processes"]
    head = p["header"]
    ops = head["ops_per_iter"]
    assert ops == 4 and head["prepare"]
    (c,) = [c for c in head["counters"] if c["name"] == "instructions:u"]
    per_iter = {s["counters"]["instructions:u"] * ops for s in p["samples"]}
    assert len(per_iter) == 1, per_iter
    fns = dict(head["count_functions"])
    assert not {"run_prepared", "marked_segment", "marked_run", "harness_run"} & set(fns), fns
    assert {"run", "reap", "write"} <= set(fns), fns
    # the empty run the fixed part calls: `ret` (and endbr64 where the build protects branches)
    with open(ROOT / "probe" / "opcost-probe", "rb") as f:
        elf = ELFFile(f)
        (sym,) = elf.get_section_by_name(".symtab").get_symbol_by_name("empty_run")
        empty = {1: 1, 5: 2}[sym["st_size"]]
    # a call: marked_segment's few instructions around it and the empty run's
    assert empty < c["fixed_part"]["u"] <= 8, c
    assert abs(sum(fns.values()) * ops - empty - per_iter.pop()) < 1e-6, (fns, per_iter)


def test_armv7_udiv_against_the_library_division_counted_under_qemu_arm(run_cli, tmp_path, src):
    """Seed 004: a hardware udiv against the EABI library division, counted
    under qemu-arm: the library's instructions per call in the table."""
    need("qemu-arm", "arm-linux-gnueabihf-gcc")
    op = src(r"""
#include <stdint.h>
#ifdef HW_UDIV
static inline uint32_t dv(uint32_t n, uint32_t d)
{ uint32_t q; __asm__ volatile(".arch_extension idiv\n\tudiv %0, %1, %2" : "=r"(q) : "r"(n), "r"(d)); return q; }
#else
unsigned __aeabi_uidiv(unsigned, unsigned);
static inline uint32_t dv(uint32_t n, uint32_t d) { return __aeabi_uidiv(n, d); }
#endif
uint64_t opcost_op(uint64_t x) { return dv(0x7fffffffu, 12345u) + x; }
""", "div.c")
    cp, doc = _json(run_cli, tmp_path, "variants", op, "--mode", "op", "-D", "HW_UDIV", "-D", "LIB_DIV",
                    "--arch", "arm", "--counters", "instructions:u", "--verdict-on", "instructions:u",
                    "-p", "2", "--samples", "2", "--warmup", "0", "--target-ms", "2", "--no-store", timeout=600)
    (e,) = doc["comparisons"]
    on = e["decided_on"]
    # the same operands every call: each build's path is the same every time, and the window's
    # fixed part is taken off: both counts are whole numbers of instructions per call
    assert on["source"] == "emulator" and on["difference"] > 10, on
    assert abs(on["a"] - round(on["a"])) < 1e-6 and abs(on["b"] - round(on["b"])) < 1e-6, on
    assert "instructions:u" in cp.stdout


def test_bad_input_one_line_exit_2(run_cli, tmp_path):
    need("qemu-x86_64")
    cases = [
        (("ab", "syscall.null", "--a", "spin=1", "--b", "spin=2", "--counters", "instructions:u",
          "--verdict-on", "cycles:u"), {}, "--verdict-on cycles:u: not a counter this run records"),
        (("run", "syscall.null", "--counters", "instructions:k", "--no-store"), {},
         "kernel instructions are counted only in a guest"),
        (("run", "syscall.null", "--counters", "instructions:u", "--samples", "1", "--warmup", "0", "-p", "1",
          "--no-store"), {"OPCOST_COUNT_PLUGIN_ARGS": "api_range=5:7"},
         "cannot load opcost's counting plugin: written for QEMU plugin API 1, this QEMU supports API 5 to 7"),
    ]
    for args, env, want in cases:
        cp = run_cli(*args, env=env, timeout=120)
        assert cp.returncode == 2, (args, cp.stdout, cp.stderr)
        lines = cp.stderr.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], (args, cp.stderr)
        if "API 5 to 7" in want:
            assert "qemu-x86_64 (QEMU " in lines[0]


def test_qemu_without_plugin_support_is_refused(run_cli, tmp_path):
    need("qemu-x86_64")
    fake = tmp_path / "bin"
    fake.mkdir()
    q = fake / "qemu-x86_64"
    q.write_text("#!/bin/sh\ncase \"$1\" in --version) echo 'qemu-x86_64 version 5.0.0';; "
                 "-h) echo 'usage: qemu-x86_64 [options] program'; echo '-L path';; esac\nexit 1\n")
    q.chmod(0o755)
    cp = run_cli("run", "syscall.null", "--counters", "instructions:u", "--samples", "1", "--warmup", "0",
                 "-p", "1", "--no-store", env={"PATH": f"{fake}:{os.environ['PATH']}"}, timeout=120)
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "qemu-x86_64 (QEMU 5.0.0) was built without TCG plugin support" in lines[0]


@pytest.mark.parametrize("arch", ["i386", "aarch64", "arm"])
def test_spin_counted_on_the_other_architectures(run_cli, tmp_path, arch):
    """The markers of i386 (the x86 NOP), aarch64 (mov x21, x21...) and
    32-bit Arm (mov r8, r8...): spin=4 against spin=1 adds 3 steps of 3
    instructions (add, sub/dec, branch) per op, counted under qemu-ARCH."""
    need(f"qemu-{arch}")
    if not (PROBE / "build" / f"opcost-probe-{arch}").is_file():
        pytest.skip(f"the {arch} probe is not built (make -C probe CC=... OUT=build/opcost-probe-{arch}, as test.sh)")
    _, doc = _json(run_cli, tmp_path, "ab", "syscall.null", "--a", f"arch={arch},spin=1", "--b", f"arch={arch},spin=4",
                   "--counters", "instructions:u", "--verdict-on", "instructions:u",
                   "-p", "2", "--samples", "2", "--warmup", "0", "--no-store")
    on = doc["comparisons"][0]["decided_on"]
    assert on["source"] == "emulator" and abs(on["difference"] - 9.0) < 0.01, on


def test_series_run_finds_the_change_on_a_count(run_cli, tmp_path):
    """series --run --verdict-on: the change point on the exact count, where
    spin goes from 1 to 4 (+9 instructions per op), under qemu-user."""
    need("qemu-x86_64")
    _, doc = _json(run_cli, tmp_path, "series", "--run", "syscall.null", "--over", "spin=1|1|4|4",
                   "--counters", "instructions:u", "--verdict-on", "instructions:u",
                   "-p", "3", "--samples", "2", "--warmup", "0", "--target-ms", "2", "--no-store")
    assert doc["decided_on"] == {"counter": "instructions:u", "source": "emulator"}
    assert [c["index"] for c in doc["change_points"]] == [2], doc["change_points"]
