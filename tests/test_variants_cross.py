"""`opcost variants` for another architecture (seed 004's boards are 32-bit
Arm): --arch arm (or --cc arm-linux-gnueabihf-gcc) builds with the cross
compiler, runs the builds under qemu-arm and flags them `emulated` (the
timings are qemu's: these tests check correctness only); a build nothing
here can run is refused in one line naming its architecture. Also --cpu
with several CPUs (one row per build and CPU) and --ops (per-operation
figures of a whole program), on the fake clock."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from opcost import variantbuild, probe

REQUIRED = set(filter(None, os.environ.get("OPCOST_REQUIRE_ARCHES", "").split(",")))

PROGRAM = r"""
#include <stdint.h>
#define N 20000u
#ifdef INLINE_DIV
static inline uint32_t dv(uint32_t n, uint32_t d)
{
	uint32_t q;
	__asm__ volatile(".arch_extension idiv\n\tudiv %0, %1, %2" : "=r"(q) : "r"(n), "r"(d));
	return q;
}
#elif defined(LIBGCC_DIV)
unsigned __aeabi_uidiv(unsigned, unsigned);
static inline uint32_t dv(uint32_t n, uint32_t d) { return __aeabi_uidiv(n, d); }
#else
static inline uint32_t dv(uint32_t n, uint32_t d) { return n / d; }
#endif
int main(void)
{
	uint32_t x = 0;
	for (uint32_t i = 1; i <= N; i++)
		x += dv(0x7fffffffu - i, i);
	return x == 1;
}
"""

OPERATION = "#include <stdint.h>\nuint64_t opcost_op(uint64_t x) { return x * 3 + 1; }\n"


def need_arm():
    if os.uname().machine != "x86_64":
        pytest.skip("written for an x86_64 host")
    for tool in ("arm-linux-gnueabihf-gcc", "qemu-arm"):
        if not shutil.which(tool):
            if "arm" in REQUIRED:
                pytest.fail(f"{tool} is not installed (OPCOST_REQUIRE_ARCHES requires arm; test.sh installs it)")
            pytest.skip(f"{tool} is not installed")


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "div.c"
    p.write_text(PROGRAM)
    return p


def test_arm_program_runs_under_qemu_flagged_emulated(run_cli, src, tmp_path):
    need_arm()
    out = tmp_path / "v.json"
    cp = run_cli("variants", src, "-D", "INLINE_DIV", "-D", "LIBGCC_DIV", "--arch", "arm", "-p", "2",
                 "--no-store", "--json", out, timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert "emulated: built for arm, run under qemu-arm" in cp.stdout
    doc = json.loads(out.read_text())
    info = doc["variants"]
    assert info["arch"] == "arm" and info["emulated"]["emulator"] == "qemu-arm"
    assert info["cc"] == "arm-linux-gnueabihf-gcc"
    assert [b["status"] for b in info["builds"]] == ["ok", "ok"]
    assert len(doc["comparisons"]) == 1


def test_arm_cross_cc_is_the_same_as_arch(run_cli, src, tmp_path):
    """--cc arm-linux-gnueabihf-gcc alone: the ELF header says arm, so qemu-arm runs it
    (today: "Syntax error: word unexpected" from /bin/sh)."""
    need_arm()
    out = tmp_path / "r.json"
    cp = run_cli("variants", src, "-D", "INLINE_DIV", "--cc", "arm-linux-gnueabihf-gcc", "-p", "1",
                 "--no-store", "--json", out, timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert "Syntax error" not in cp.stderr
    doc = json.loads(out.read_text())
    assert doc["variants"]["emulated"]["emulator"] == "qemu-arm"


def test_arm_op_mode_runs_the_arm_probe_under_qemu(run_cli, tmp_path):
    need_arm()
    op = tmp_path / "op.c"
    op.write_text(OPERATION)
    out = tmp_path / "op.json"
    cp = run_cli("variants", op, "-D", "A", "--arch", "arm", "-p", "1", "-n", "2", "-w", "1",
                 "--target-ms", "2", "--no-store", "--json", out, timeout=600)
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    assert doc["variants"]["emulated"]["emulator"] == "qemu-arm"
    assert doc["variants"]["call_overhead"]["median_ns"] is not None


def _path_without_qemu(tmp_path: Path) -> str:
    """A PATH with the arm cross compiler and nothing else (no qemu-arm)."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in ("arm-linux-gnueabihf-gcc",):
        (d / tool).symlink_to(shutil.which(tool))
    return str(d)


@pytest.mark.parametrize("how", [("--arch", "arm"), ("--cc", "arm-linux-gnueabihf-gcc")])
def test_a_build_nothing_here_runs_is_refused_in_one_line(run_cli, src, tmp_path, how):
    need_arm()
    cp = run_cli("variants", src, "-D", "INLINE_DIV", *how, "--no-store",
                 env={"PATH": _path_without_qemu(tmp_path)}, timeout=120)
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1, cp.stderr
    assert "built for arm, this machine is x86_64 and qemu-arm is not installed" in lines[0], lines[0]
    assert "Traceback" not in cp.stderr and cp.stdout == ""


def test_runner_for(monkeypatch):
    host = probe.host_arch()
    assert variantbuild.runner_for(host, "x") is None
    monkeypatch.setattr(probe, "emulator", lambda arch: None)
    other = "arm" if host != "arm" else "x86_64"
    with pytest.raises(Exception) as e:
        variantbuild.runner_for(other, "variant -DA")
    assert f"variant -DA: built for {other}, this machine is {host} and qemu-{other} is not installed" in str(e.value)


def test_arch_of_build_names_what_the_compiler_built(tmp_path):
    exe = Path(sys.executable).resolve()
    assert variantbuild.arch_of_build(exe, "v", None, ["cc"]) == probe.host_arch()
    with pytest.raises(Exception, match="builds .* files, not arm"):
        variantbuild.arch_of_build(exe, "v", "arm" if probe.host_arch() != "arm" else "x86_64", ["cc"])
    riscv = tmp_path / "r"
    riscv.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + (2).to_bytes(2, "little") + (243).to_bytes(2, "little")
                      + b"\0" * 40)
    with pytest.raises(Exception, match="built for riscv 64-bit by cc, this machine is"):
        variantbuild.arch_of_build(riscv, "variant -DA", None, ["cc"])


def test_emulated_requests_start_the_right_thing():
    """op mode: the arm probe under qemu; program mode: the host's probe,
    which starts qemu with the program; --ops reaches `time`."""
    r = probe.ProbeRequest(bench="user.op", params={}, arch="arm", exe="/b/opcost-probe-A",
                           emulator="/usr/bin/qemu-arm")
    assert r.command() == ["/usr/bin/qemu-arm", "/b/opcost-probe-A"]
    r = probe.ProbeRequest(bench="program", params={}, arch="arm", program=("/usr/bin/qemu-arm", "/b/prog"),
                           emulator="/usr/bin/qemu-arm", ops=1000)
    assert r.command() == probe.probe_command(None)
    argv = r.argv()
    assert argv[:1] == ["time"] and argv[argv.index("--ops") + 1] == "1000"
    assert argv[-3:] == ["--", "/usr/bin/qemu-arm", "/b/prog"]


def _two_cpus():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    return cpus[:2]


def test_cpu_range_gives_one_row_per_build_and_cpu(run_cli, tmp_path):
    """--cpu A-B (or 'A|B'): every build on every CPU, each CPU's builds
    compared with that CPU's first (today: refused, "CPU 0-1 is not available")."""
    a, b = _two_cpus()
    prog = tmp_path / "p.c"
    prog.write_text("int main(void){return 0;}\n")
    for spec in (f"{a}-{b}" if b == a + 1 else f"{a}|{b}", f"{a}|{b}"):
        out = tmp_path / "c.json"
        cp = run_cli("variants", prog, "-D", "X", "-D", "Y", "--cpu", spec, "--fake-clock", "1000000",
                     "-p", "2", "--no-store", "--json", out, timeout=120)
        assert cp.returncode == 0, cp.stderr
        doc = json.loads(out.read_text())
        names = [x["name"] for x in doc["variants"]["builds"]]
        assert names == [f"-DX cpu={a}", f"-DX cpu={b}", f"-DY cpu={a}", f"-DY cpu={b}"]
        assert doc["variants"]["cpus"] == [str(a), str(b)]
        assert sorted(c["key"] for c in doc["comparisons"]) == [f"-DY cpu={a}", f"-DY cpu={b}"]
        assert all(c["a"]["params"]["cpu"] == c["b"]["params"]["cpu"] for c in doc["comparisons"])
        assert f"-DX cpu={b}" in cp.stdout and "one row per build and CPU" in cp.stdout


def test_ops_divides_a_run_by_its_operation_count(run_cli, tmp_path):
    """The fake clock makes a run cost 1 ms (+-1%): --ops 1000 reports ~1 us
    per operation, and says so."""
    prog = tmp_path / "p.c"
    prog.write_text("int main(void){return 0;}\n")
    out = tmp_path / "o.json"
    cp = run_cli("variants", prog, "-D", "X", "--ops", "1000", "--fake-clock", "1000000", "-p", "2",
                 "--no-store", "--json", out, timeout=120)
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    med = doc["variants"]["builds"][0]["median_ns"]
    assert 980 <= med <= 1020, med
    assert doc["variants"]["ops"] == 1000
    assert "a run's time / --ops 1000" in cp.stdout


def test_i386_program_is_linked_static_and_runs_natively(run_cli, src, tmp_path):
    """x86_64 runs i386 natively but may have no i386 libc: the build is
    linked -static (before: "cannot run -DA: No such file or directory")."""
    if os.uname().machine != "x86_64" or not shutil.which("i686-linux-gnu-gcc"):
        if "i386" in REQUIRED:
            pytest.fail("i686-linux-gnu-gcc is not installed (OPCOST_REQUIRE_ARCHES requires i386)")
        pytest.skip("needs an x86_64 host and i686-linux-gnu-gcc")
    prog = tmp_path / "p.c"
    prog.write_text("int main(void){return 0;}\n")
    out = tmp_path / "i.json"
    cp = run_cli("variants", prog, "-D", "X", "--arch", "i386", "-p", "1", "--no-store", "--json", out, timeout=120)
    assert cp.returncode == 0, cp.stderr
    info = json.loads(out.read_text())["variants"]
    assert info["arch"] == "i386" and "emulated" not in info
    assert "built for i386, which this machine runs natively" in cp.stdout
