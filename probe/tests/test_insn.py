"""Instruction benchmarks: xstate.* run or say why not (never SIGILL), cold
and dirty report their subtracted auxiliary cost, bad masks are refused,
insn.div runs in every form, and insn.chain is linear in n (the harness's
overhead subtraction checked against a known cost)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

PROBE_DIR = Path(__file__).resolve().parents[1]
PROBE = PROBE_DIR / "opcost-probe"
X86 = platform.machine() in ("x86_64", "i686", "i386")


@pytest.fixture(scope="module", autouse=True)
def built_probe():
    subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)


def probe(*args, exe=PROBE, timeout=120):
    return subprocess.run([*([exe] if isinstance(exe, (str, Path)) else exe), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def run(bench, *params, quick=True, exe=PROBE):
    argv = ["run", bench]
    for p in params:
        argv += ["-P", p]
    argv += ["--iters", "200", "--samples", "2", "--warmup", "1"] if quick else []
    return probe(*argv, exe=exe)


def parse(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def ok_or_unsupported(cp):
    """Exit 0 with samples, or exit 3 with a reason; anything else (a crash,
    SIGILL = -4) fails."""
    assert cp.returncode in (0, 3), (cp.returncode, cp.stderr)
    out = parse(cp.stdout)
    if cp.returncode == 3:
        assert out[-1]["type"] == "unsupported" and out[-1]["reason"]
        return None
    assert out[0]["type"] == "header" and out[-1]["type"] == "trailer"
    return out


XSTATE = ["xsave", "xsaveopt", "xsavec", "xrstor", "fxsave", "fxrstor", "vzeroupper", "vzeroall"]


@pytest.mark.parametrize("insn", XSTATE)
@pytest.mark.parametrize("state", ["x87", "sse", "avx", "avx512"])
def test_xstate_runs_or_says_why(insn, state):
    out = ok_or_unsupported(run(f"xstate.{insn}", f"state={state}"))
    if out is not None:
        assert out[0]["op"] == "instruction" and out[0]["params"]["state"] == state


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


needs_xsave = pytest.mark.skipif(not X86 or "xsave" not in cpu_flags(), reason="needs x86 with XSAVE")


@needs_xsave
@pytest.mark.parametrize("insn", ["xsave", "xsavec", "xrstor", "fxsave", "fxrstor"])
def test_cold_reports_and_subtracts_the_flushes(insn):
    out = ok_or_unsupported(run(f"xstate.{insn}", "cache=cold"))
    if out is None:
        pytest.skip("unsupported here")
    aux = out[0]["aux"]
    assert "clflush" in aux["what"] and aux["subtracted"] is True
    overhead = out[0]["overhead"]
    samples = [x for x in out if x["type"] == "sample"]
    assert samples
    for s in samples:  # every batch has its own aux batch, subtracted from it
        assert s["aux_ticks_per_iter"] > 0
        assert s["aux_ns_per_op"] == pytest.approx(s["aux_ticks_per_iter"] / out[0]["tsc_hz"] * 1e9, rel=1e-6)
        expect = s["raw_ticks"] - overhead["clock_ticks"] - s["iters"] * (overhead["loop_ticks_per_iter"] + s["aux_ticks_per_iter"])
        assert s["ticks"] == pytest.approx(expect, rel=1e-6, abs=1e-3)


@needs_xsave
def test_hot_clean_has_no_aux_and_dirty_has_one():
    out = ok_or_unsupported(run("xstate.xsave"))
    assert "aux" not in out[0]
    out = ok_or_unsupported(run("xstate.xsaveopt", "dirty=yes", "state=sse"))
    assert "register write" in out[0]["aux"]["what"]


@needs_xsave
def test_mask_outside_xcr0_is_unsupported_with_reason():
    cp = run("xstate.xsave", "mask=0x8000000000000000")
    assert cp.returncode == 3, cp.stderr
    assert "XCR0" in parse(cp.stdout)[-1]["reason"]


@pytest.mark.parametrize("mask", ["foo", "0x", "-1", "3z"])
def test_bad_mask_is_a_usage_error(mask):
    cp = run("xstate.xsave", f"mask={mask}")
    if not X86:
        assert cp.returncode == 3
        return
    assert cp.returncode == 2 and cp.stdout == ""
    assert len(cp.stderr.strip().splitlines()) == 1 and "mask" in cp.stderr


@needs_xsave
@pytest.mark.parametrize("src", ["xsave", "xsaveopt", "xsavec"])
def test_xrstor_from_each_format(src):
    out = ok_or_unsupported(run("xstate.xrstor", f"from={src}", "state=avx", "mask=0x7"))
    if out is not None:
        assert out[0]["params"]["from"] == src


DIV = [(v, w, s, f) for v in ("inline", "outofline", "soft") for w in ("32", "64") for s in ("no", "yes")
       for f in ("latency", "throughput")]


@pytest.mark.parametrize("variant,width,signed,form", DIV)
def test_div_runs(variant, width, signed, form):
    out = ok_or_unsupported(run("insn.div", f"variant={variant}", f"width={width}", f"signed={signed}", f"form={form}"))
    assert out is not None and out[0]["op"] == "division"


def tsc_batches(bench, *params, samples=9, target_ms=3):
    argv = ["run", bench]
    for p in params:
        argv += ["-P", p]
    cp = probe(*argv, "--samples", samples, "--warmup", "2", "--target-ms", target_ms)
    assert cp.returncode == 0, cp.stderr
    return [s["tsc_per_op"] for s in parse(cp.stdout) if s["type"] == "sample" and not s["warmup"]]


def attempts(tries, attempt):
    """A statistical check on real timings: up to `tries` independent
    attempts, passing at the first that shows the property; the failure of
    the last is the test's. With a per-attempt false failure p (measured, at
    each use) the test fails falsely with probability p ** tries."""
    for i in range(tries):
        ok, why = attempt()
        if ok:
            return
    pytest.fail(f"{tries} attempts, the last: {why}")


# Both figures are the fastest of many 1 ms batches: noise on a shared machine
# (another tenant, a CPU hog, an interrupt) only ever adds time, and some
# batches of every figure run undisturbed.

def soft_division_attempt():
    inline = min(tsc_batches("insn.div", "variant=inline", samples=30, target_ms=1))
    soft = min(tsc_batches("insn.div", "variant=soft", samples=30, target_ms=1))
    return soft > 2 * inline, (inline, soft)


def test_soft_division_costs_more_than_the_instruction():
    # False failure <= 1e-4: per attempt 0 of 60 failed (Intel Xeon, load
    # average 10-12 from other suites, half of them beside a CPU hog pinned
    # on the measuring CPU; 95% upper bound 0.049), and 0.049 ** 4 = 6e-6.
    attempts(4, soft_division_attempt)


def chain_attempt():
    """Three interleaved rounds of n=100, n=200 and n=1; each figure the
    fastest of its 90 batches."""
    got = {1: [], 100: [], 200: []}
    for _ in range(3):
        for n in (100, 200, 1):
            got[n] += tsc_batches("insn.chain", f"n={n}", samples=30, target_ms=1)
    f = {n: min(v) for n, v in got.items()}
    ratio = f[200] / f[100]
    # linear: 2.0 (2.00-2.04 on a quiet Xeon: the subtracted overhead is a
    # tick or two off; up to 2.35 when another tenant loads the host: the
    # 200-add block then runs slower per add than the 100-add one). A fixed
    # extra cost of the size of the chain (ratio 1.5) or a cost growing with
    # n squared (4) falls outside 1.7-2.6.
    return 1.7 <= ratio <= 2.6 and f[1] < 10, f"chain(200)/chain(100) = {ratio:.3f}, chain(1) = {f[1]:.2f} ({f})"


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="unrolled chain on x86_64/aarch64 only")
def test_chain_is_linear_in_n():
    if os.environ.get("OPCOST_TEST_PROBE"):
        # test_arches.py runs this file once per architecture; this test times the
        # host's probe, already timed once in the main suite (a shared machine: once is enough)
        pytest.skip("times the host probe: run in the main suite, not again per architecture")
    # False failure <= 1e-4: per attempt 0 of 50 failed (Intel Xeon, load
    # average 10-12 from other suites, half of them beside a CPU hog pinned on
    # the measuring CPU; 95% upper bound 0.058), and 0.058 ** 4 = 1.1e-5. (The
    # former medians of 9 batches within +-0.04 failed 4 of 14 beside the hog.)
    attempts(4, chain_attempt)


def test_i386_has_no_64bit_divide():
    exe = PROBE_DIR / "build" / "opcost-probe-i386"
    if not exe.exists() or not X86:
        pytest.skip("no i386 build (make CC=i686-linux-gnu-gcc OUT=build/opcost-probe-i386)")
    cp = run("insn.div", "width=64", exe=exe)
    assert cp.returncode == 3 and "i386" in parse(cp.stdout)[-1]["reason"]
    assert run("insn.div", "width=64", "variant=soft", exe=exe).returncode == 0
    assert run("insn.div", "width=32", exe=exe).returncode == 0


def test_aarch64_div_under_qemu():
    exe = PROBE_DIR / "build" / "opcost-probe-aarch64"
    qemu = shutil.which("qemu-aarch64")
    if not exe.exists() or qemu is None:
        pytest.skip("no aarch64 build or qemu-aarch64")
    for v in ("inline", "outofline", "soft"):
        cp = run("insn.div", f"variant={v}", exe=[qemu, str(exe)])
        assert cp.returncode == 0, cp.stderr
    cp = run("xstate.xsave", exe=[qemu, str(exe)])
    assert cp.returncode == 3 and "x86" in parse(cp.stdout)[-1]["reason"]


def _arm():
    exe = PROBE_DIR / "build" / "opcost-probe-arm"
    qemu = shutil.which("qemu-arm")
    if not exe.exists() or qemu is None:
        pytest.skip("no arm build (make CC=arm-linux-gnueabihf-gcc OUT=build/opcost-probe-arm) or qemu-arm")
    return qemu, exe


@pytest.mark.parametrize("variant", ["inline", "outofline", "soft", "libgcc"])
@pytest.mark.parametrize("signed", ["no", "yes"])
def test_arm_div_under_qemu(variant, signed):
    """Seed 004's variants on the arm probe (qemu's Cortex-A15: udiv/sdiv
    present): every one runs; the default width is 32."""
    qemu, exe = _arm()
    cp = run("insn.div", f"variant={variant}", f"signed={signed}", exe=[qemu, "-cpu", "cortex-a15", str(exe)])
    assert cp.returncode == 0, cp.stderr
    head = parse(cp.stdout)[0]
    assert head["params"]["width"] == "32" and head["clock"] in ("cntvct", "monotonic_raw")
    if head["clock"] == "monotonic_raw":
        assert "CNTVCT" in head["clock_note"]


def test_arm_without_hardware_divide_says_so():
    """A Cortex-A9 has no udiv: inline and outofline are unsupported on that
    CPU (exit 3 with the reason, never SIGILL); libgcc and soft run."""
    qemu, exe = _arm()
    wrap = [qemu, "-cpu", "cortex-a9", str(exe)]
    for v in ("inline", "outofline"):
        cp = run("insn.div", f"variant={v}", exe=wrap)
        assert cp.returncode == 3, (cp.returncode, cp.stderr)
        assert "unsupported on this CPU" in parse(cp.stdout)[-1]["reason"]
    for v in ("libgcc", "soft"):
        assert run("insn.div", f"variant={v}", exe=wrap).returncode == 0
    cp = run("insn.div", "variant=inline", "width=64", exe=[qemu, str(exe)])
    assert cp.returncode == 3 and "64-bit divide" in parse(cp.stdout)[-1]["reason"]
    assert run("insn.div", "variant=libgcc", "width=64", exe=[qemu, str(exe)]).returncode == 0


def test_libgcc_variant_is_refused_where_the_compiler_uses_an_instruction():
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("x86_64/aarch64 host")
    cp = run("insn.div", "variant=libgcc")
    assert cp.returncode == 3 and "libgcc has no routine" in parse(cp.stdout)[-1]["reason"]


def xsave_layout() -> dict:
    """CPUID leaf 0xD as `opcost-probe cpuid` reports it (its own reading, not xstate.c's)."""
    return json.loads(probe("cpuid").stdout)["xsave"]


@needs_xsave
@pytest.mark.parametrize("insn, mask", [("xsave", "xcr0"), ("xsave", "0x3"), ("xsave", "all"), ("xsavec", "xcr0"),
                                        ("xsaveopt", "all"), ("xrstor", "0x7")])
def test_header_says_the_rfbm_and_the_area(insn, mask):
    """Issue 36 item 4: the header's `xstate` says which components were asked
    for (RFBM = mask & XCR0) and the area's size, from CPUID leaf 0xD (never
    an assumed 4 KiB): standard format: the size for XCR0 (EBX of
    sub-leaf 0) and the bytes up to the end of the highest requested
    component; compacted: 576 plus the requested components' sizes, each
    64-aligned where CPUID says so."""
    out = ok_or_unsupported(run(f"xstate.{insn}", f"mask={mask}"))
    if out is None:
        return
    x, lay = out[0]["xstate"], xsave_layout()
    xcr0 = int(x["xcr0"], 16)
    comps = [c for c in lay["components"] if not c["supervisor"] and xcr0 >> c["bit"] & 1]
    xfd = int(x["xfd_capable"], 16)
    want = {"xcr0": xcr0 & ~xfd, "all": xcr0}.get(mask, int(mask, 16) if mask.startswith("0x") else 0)
    assert int(x["rfbm"], 16) == want & xcr0
    asked = [c for c in comps if int(x["rfbm"], 16) >> c["bit"] & 1]
    if insn == "xsavec":
        size = 576
        for c in asked:
            size = (size + 63) // 64 * 64 if c["align64"] else size
            size += c["size"]
        assert x["format"] == "compacted" and x["area_bytes"] == x["touched_bytes"] == size
    else:
        assert x["format"] == "standard" and x["area_bytes"] == lay["size_enabled"]
        assert x["touched_bytes"] == max([576] + [c["offset"] + c["size"] for c in asked])


@needs_xsave
def test_fxsave_header_is_the_legacy_area_and_vzeroupper_has_none():
    out = ok_or_unsupported(run("xstate.fxsave"))
    assert out[0]["xstate"]["format"] == "legacy" and out[0]["xstate"]["area_bytes"] == 512
    assert "rfbm" not in out[0]["xstate"]
    out = ok_or_unsupported(run("xstate.vzeroupper"))
    if out is not None:
        assert "xstate" not in out[0]


@needs_xsave
def test_mask_all_is_for_the_saves():
    cp = run("xstate.xrstor", "mask=all")
    assert cp.returncode == 2 and cp.stdout == "" and "mask=all" in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1


@needs_xsave
def test_the_table_says_the_rfbm_and_the_area(tmp_path):
    """`opcost run`'s notes say what the header's xstate records (fake clock: no timing)."""
    import sys
    root = PROBE_DIR.parent
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "OPCOST_PROBE": str(PROBE)}
    cp = subprocess.run([sys.executable, "-m", "opcost", "run", "xstate.xsave:mask=0x3", "--fake-clock", "100",
                         "-p", "1", "-n", "1", "-w", "0", "--target-ms", "1", "--no-store",
                         "--json", str(tmp_path / "r.json")], capture_output=True, text=True, env=env, timeout=120)
    assert cp.returncode == 0, cp.stderr
    x = json.loads((tmp_path / "r.json").read_text())["results"][0]["processes"][0]["header"]["xstate"]
    assert x["rfbm"] == "0x3"
    assert (f"xstate.xsave:mask=0x3: standard area of {x['area_bytes']} bytes, 576 touched; RFBM 0x3 "
            f"(XCR0 {x['xcr0']}") in cp.stdout
