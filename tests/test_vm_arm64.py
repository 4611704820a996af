"""arm64 guests: Debian's arm64 cloud kernel (6.1.0-50, fetched by
tests/kernels.py) boots under qemu-system-aarch64 -M virt (TCG) with the
aarch64 probe and init, the architecture read from the image. The timings
are QEMU's: every figure asserted comes from the fake clock; the boots, the
architecture recorded and the verdicts are what is tested. Without a boot:
the image's recognition and QEMU's command line.

Skipped when qemu-system-aarch64, the kernel or the aarch64 probe and init
are not here, unless OPCOST_REQUIRE_VM=1 (test.sh: then they fail)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

import kernels
from test_vm_boot import interrupt_in_boot

ROOT = Path(__file__).resolve().parents[1]
FAKE = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "--accel", "tcg", "--vm-cpus", "1",
        "--vm-mem", "256"]


@pytest.fixture(scope="module")
def arm64_kernel():
    k = kernels.arm64_kernel()
    built = ROOT / "probe" / "build"
    why = (None if shutil.which("qemu-system-aarch64") else "qemu-system-aarch64 is not installed (qemu-system-arm)")
    why = why or (None if k else "the arm64 test kernel is not fetched (python3 tests/kernels.py)")
    why = why or (None if (built / "opcost-probe-aarch64-vminit").is_file() and (built / "opcost-probe-aarch64").is_file()
                  else "the aarch64 probe and init are not built (make -C probe CC=aarch64-linux-gnu-gcc "
                       "OUT=build/opcost-probe-aarch64)")
    # the benchmark table comes from the aarch64 probe here, under qemu-user
    why = why or (None if shutil.which("qemu-aarch64") else "qemu-aarch64 (qemu-user) is not installed")
    if why:
        if os.environ.get("OPCOST_REQUIRE_VM") == "1":
            pytest.fail(why + " (OPCOST_REQUIRE_VM=1)")
        pytest.skip(why)
    return k


def arm64_release() -> str:
    return (kernels.kernel_path(kernels.ARM64).parent / "release").read_text().strip()


# -- without a boot --

def test_the_architecture_is_read_from_the_image(tmp_path):
    from opcost.targets.vm.arch import image_arch, kernel_arch
    from opcost.targets.vm.image import check_kernel

    head = bytearray(0x400)
    head[0x38:0x3C] = b"ARM\x64"
    raw, gz = tmp_path / "Image", tmp_path / "Image.gz"
    raw.write_bytes(bytes(head) + os.urandom(4096))
    gz.write_bytes(gzip.compress(raw.read_bytes()))
    assert image_arch(bytes(head)) == "aarch64" and kernel_arch(check_kernel(str(raw))) == "aarch64"
    assert kernel_arch(check_kernel(str(gz))) == "aarch64"   # QEMU's -kernel decompresses an Image.gz for aarch64
    bz = bytearray(0x240)
    bz[0x1FE:0x200], bz[0x202:0x206] = b"\x55\xaa", b"HdrS"
    assert image_arch(bytes(bz)) == "x86_64" and image_arch(b"\x7fELF" + bytes(0x300)) is None


def test_a_gzipped_image_cut_short_or_damaged_is_refused(tmp_path):
    """An Image.gz is read through before any boot: a stream that stops
    short, or whose CRC does not match, is refused; a whole one passes."""
    from opcost.errors import UsageError
    from opcost.targets.vm.image import check_kernel

    head = bytearray(0x400)
    head[0x38:0x3C] = b"ARM\x64"
    whole = gzip.compress(bytes(head) + os.urandom(1 << 16))
    bad = bytearray(whole)
    bad[-8] ^= 0xFF   # the trailer's CRC-32
    for name, data, why in (("stop.gz", whole[:len(whole) // 2], "cut short: its gzip stream stops before its end"),
                            ("bad.gz", bytes(bad), "damaged: its gzip stream does not decompress"),
                            ("ok.gz", whole, None)):
        (tmp_path / name).write_bytes(data)
        if why is None:
            assert check_kernel(str(tmp_path / name)) == (tmp_path / name).resolve()
            continue
        with pytest.raises(UsageError, match=why):
            check_kernel(str(tmp_path / name))


def test_qemu_boots_an_arm64_image_on_virt_with_its_own_console_and_data_port(tmp_path):
    from opcost.targets.vm.qemu import Machine, VmConfig, qemu_argv

    head = bytearray(0x400)
    head[0x38:0x3C] = b"ARM\x64"
    (tmp_path / "Image").write_bytes(bytes(head))
    m = Machine(tmp_path / "Image", "quiet")
    assert m.arch == "aarch64"
    argv = qemu_argv(VmConfig(), m, "tcg", "virt", 10, 11, 12)
    assert argv[0] == "qemu-system-aarch64" and argv[argv.index("-machine") + 1] == "virt"
    assert argv[argv.index("-cpu") + 1] == "max,pauth-impdef=on"
    assert argv[argv.index("-append") + 1].startswith("console=ttyAMA0 ")
    assert "pci-serial,chardev=data" in argv and "stdio,id=data" in argv
    assert qemu_argv(VmConfig(qemu="/opt/q"), m, "tcg", "virt", 10, 11, 12)[0] == "/opt/q"   # OPCOST_QEMU wins


def test_an_arm64_guest_is_counted_by_the_plugin_whatever_the_accel_option(tmp_path):
    """An arm64 guest on this x86_64 host always runs under TCG, so the
    plugin counts it with --accel auto too (an x86_64 guest there: only when
    KVM cannot be used)."""
    from opcost.targets.vm import Machine, VmConfig, VmTarget

    head = bytearray(0x400)
    head[0x38:0x3C] = b"ARM\x64"
    (tmp_path / "Image").write_bytes(bytes(head))
    t = VmTarget(VmConfig(accel="auto"), Machine(tmp_path / "Image"))
    assert t.host_arch() == "aarch64" and t.counts_by_emulator()


def test_variants_builds_for_an_arm64_guest_with_no_emulator(tmp_path):
    """The builds of `opcost variants` for an arm64 guest: for aarch64, run
    in the guest (never under qemu-user here), a program linked -static."""
    from opcost import variantbuild

    if shutil.which("aarch64-linux-gnu-gcc") is None:
        if os.environ.get("OPCOST_REQUIRE_ARCHES"):
            pytest.fail("no aarch64 cross compiler (OPCOST_REQUIRE_ARCHES)")
        pytest.skip("no aarch64 cross compiler here")
    src = tmp_path / "prog.c"
    src.write_text("int main(void) { return 0; }\n")
    (tmp_path / "w").mkdir()
    b = variantbuild.build(source=src, defines=["A", "B"], cc=["aarch64-linux-gnu-gcc"], cflags=["-O2"],
                           mode="program", workdir=tmp_path / "w", cpus=["0"], guest="the virtual machine",
                           guest_arch="aarch64")
    assert b.emulator is None and [v.arch for v in b.variants] == ["aarch64", "aarch64"]
    assert all(len(v.program) == 1 and not v.emulator for v in b.variants)   # no qemu-aarch64 before it
    assert all(v.params.get("link") == "-static" for v in b.variants)
    with pytest.raises(variantbuild.UsageError, match="runs x86_64 builds only"):
        variantbuild.build(source=src, defines=["A"], cc=["aarch64-linux-gnu-gcc"], cflags=[], mode="program",
                           workdir=tmp_path / "w", cpus=["0"], guest="the virtual machine")


# -- real boots (about 4-7 s each under TCG here) --

def test_arm64_aa_across_two_boot_parameters_runs_syscall_null_and_ctx_pipe(run_cli, tmp_path, arm64_kernel):
    """One A/A `ab` of syscall.null and ctx.pipe across cmdline= and
    cmdline=quiet, 5 boots per arm (the fewest with which a verdict is
    possible): each boot of the arm64 kernel runs both benchmarks, records
    the guest's architecture, and no verdict is slower or faster (fake
    clock). 12 boots: two preflights and five rounds of two."""
    out = tmp_path / "aa.json"
    cp = run_cli("ab", "syscall.null", "ctx.pipe", "--kernel", str(arm64_kernel), "--a", "cmdline=",
                 "--b", "cmdline=quiet", "-p", "5", *FAKE, "--allow-emulated", "--json", str(out), timeout=900)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads(out.read_text())
    assert len(doc["comparisons"]) == 2 and all(
        e["verdict"] in ("same", "negligible", "inconclusive") for e in doc["comparisons"]), doc["comparisons"]
    assert doc["env"]["vm"]["value"]["guest_arch"] == "aarch64"
    run = json.loads(run_cli("export", "1").stdout)   # every process as stored, with its header
    assert sorted(r["bench"] for r in run["results"]) == ["ctx.pipe", "ctx.pipe", "syscall.null", "syscall.null"]
    for r in run["results"]:
        assert r["status"] == "ok" and len(r["processes"]) == 5, r
        for p in r["processes"]:
            h, v = p["header"], p["header"]["vm"]
            assert h["arch"] == "aarch64" and v["arch"] == "aarch64" and v["cpuid"]["arch"] == "aarch64"
            assert v["machine"] == "virt" and v["accel"] == "tcg" and v["guest"]["machine"] == "aarch64"
            assert v["guest"]["release"] == arm64_release() and v["processes_in_boot"] == 2
            assert v["qemu_argv"][0].endswith("qemu-system-aarch64") and h["emulator"] == "qemu-system-aarch64 (TCG)"
            assert v["cmdline"] == r["params"].get("cmdline", "") and "Image" in v["entry"]
    assert all(e["median_a"] == pytest.approx(100, rel=0.05) for e in doc["comparisons"])   # the fake clock's cost


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_an_arm64_boot_leaves_no_qemu_and_no_temporary_file(cli_environ, tmp_path, arm64_kernel, sig):
    from conftest import cli_argv

    marker = f"opcosttest.arm64={os.getpid()}-{int(sig)}"   # its QEMU found by a kernel parameter of its own
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(cli_argv("run", "syscall.null", "--kernel", str(arm64_kernel), "--kernel-cmdline", marker,
                                     *FAKE), cwd=tmp_path, env=cli_environ(TMPDIR=str(tmp)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = interrupt_in_boot(proc, marker, sig, tmp, program=b"qemu-system-aarch64")
    assert proc.returncode == 128 + sig, err


def test_arm64_series_run_over_three_labels_in_each_boot(run_cli, tmp_path, arm64_kernel):
    """`series --run` on arm64 guests, as cheap as a series can be: the
    fewest labels a series takes (3), two processes each, all three labels
    in each boot (one machine): three boots, a preflight and two rounds.
    Every label measured in the aarch64 guest and flagged emulated, the
    figures the fake clock's, and `show` replays the series from the store."""
    out = tmp_path / "s.json"
    cp = run_cli("series", "--run", "syscall.null", "--kernel", str(arm64_kernel), "--over", "spin=1|1|8", "-p", "2",
                 *FAKE, "--allow-emulated", "--json", str(out), timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"].startswith("opcost.series") and doc["env"]["vm"]["value"]["guest_arch"] == "aarch64"
    assert [lb["value"] for lb in doc["labels"]] == ["1", "1", "8"], doc["labels"]
    assert all(lb["emulated"] and lb["n_processes"] == 2 for lb in doc["labels"])
    assert doc["labels"][0]["median_ns"] == pytest.approx(100, rel=0.05)   # the fake clock's cost
    run = json.loads(run_cli("export", "1").stdout)
    assert len(run["results"]) == 3 and run["kind"] == "series"
    for r in run["results"]:
        assert r["status"] == "ok" and len(r["processes"]) == 2, r
        for p in r["processes"]:
            h, v = p["header"], p["header"]["vm"]
            assert h["arch"] == "aarch64" and v["arch"] == "aarch64" and v["machine"] == "virt"
            assert v["guest"]["release"] == arm64_release() and v["processes_in_boot"] == 3
    shown = run_cli("show", "1")
    assert shown.returncode == 0, shown.stderr
    assert cp.stdout.split("\n\n", 1)[1] == shown.stdout.split("\n\n", 1)[1], shown.stdout   # the same series


def test_arm64_guest_instructions_are_counted_by_the_plugin(run_cli, tmp_path, arm64_kernel):
    """The counting plugin in qemu-system-aarch64 (issue 34 on arm64): one
    process of syscall.null (a preflight and one counting boot). User
    instructions exact (the probe's loop: the same count in every batch's
    smallest), kernel ones exact too in the batches no timer tick fell in
    (with randomize_kstack_offset=off), counted on the kernel's side of the address
    space and folded into the kernel's functions by this boot's base
    (arm64's kallsyms has no _text: the init sends _stext), the syscall
    entry path among them; the second process, restored from a snapshot of
    the first's boot (--vm-restore auto), counts exactly what the fresh boot
    counts; a class (x86's) refused before any boot."""
    out = tmp_path / "c.json"
    # randomize_kstack_offset=off: no get_random_u16 (and its refills, some calls' only) in each call
    cp = run_cli("run", "syscall.null", "--kernel", str(arm64_kernel), "--kernel-cmdline", "randomize_kstack_offset=off",
                 "--accel", "tcg", "--counters", "instructions:k,instructions:u", "-p", "2", "--samples", "11",
                 "--warmup", "1", "--target-ms", "1", "--json", str(out), timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    (r,) = json.loads(out.read_text())["results"]
    p, restored = r["processes"]
    assert [q["header"]["vm"]["restore"]["way"] for q in (p, restored)] == ["fresh", "restored"]
    for event in ("instructions:k", "instructions:u"):      # each process's smallest batch: exact (below)
        assert min(s["counters"][event] for s in restored["samples"]) == min(
            s["counters"][event] for s in p["samples"]), event
    h = p["header"]
    assert {c["name"]: c["source"] for c in h["counters"]} == {"instructions:k": "emulator", "instructions:u": "emulator"}
    assert "qemu-system-aarch64 (TCG)" in h["counters"][0]["how"]
    u = [s["counters"]["instructions:u"] for s in p["samples"]]
    k = [s["counters"]["instructions:k"] for s in p["samples"]]
    assert min(u) == int(min(u)) and 5 <= min(u) <= 100, u   # svc and the loop's few instructions a call
    assert 100 <= min(k) <= 5000, k                           # el0 entry, the syscall, the return
    # exact: the batches no timer tick fell in (about 3 in 4 here; fewer than 2 of 11: ~1e-5) give one integer
    assert min(k) == int(min(k)) and k.count(min(k)) >= 2, k
    assert int(h["vm"]["kernel_text"], 16) >= 1 << 63          # the kernel's half of the address space
    names = [f for f, _ in h["count_functions"]]
    assert "invoke_syscall" in names and any(n.startswith("el0") for n in names), names
    refused = run_cli("run", "syscall.null", "--kernel", str(arm64_kernel), "--accel", "tcg", "--counters",
                      "cr3-writes:k", "-p", "1")
    assert refused.returncode == 2 and "classifies x86 instructions only" in refused.stderr, refused.stderr
