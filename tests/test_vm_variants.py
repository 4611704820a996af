"""`opcost variants` in virtual machines (--kernel, --target vm:, --over
kernel=|cmdline=) with the stand-in QEMU (fake_qemu.py): the builds travel
in the guest's initramfs and run there, each machine booted in the runner's
order, TCG results withheld from verdicts unless --allow-emulated, the run
stored with its plan and replayed by `show`; and what cannot be meaningful
(a build for another architecture, --over of a non-machine parameter) is
refused with one line. The real boot is in test_vm_boot.py. Every figure
comes from the fake clock. One real boot (Debian's kernel under TCG, as in
test_vm_boot.py) runs two program builds."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time

import pytest

from opcost import probe
from opcost.errors import UsageError
from opcost.targets import vm
from test_vm import FAKE, _alive, _wait_for, fake_kernel, one_error_line, parse_cpio
from test_vm_boot import kernel_pair, releases  # noqa: F401 (a fixture)

QUICK = ["--accel", "tcg", "--vm-cpus", "1", "--no-progress"]

PROGRAM = r"""
#include <stdio.h>
int main(void)
{
	volatile unsigned long s = 0;
	for (unsigned long i = 0; i < 1000; i++)
		s += i;
#ifdef B
	s += 1;
#endif
	printf("%lu\n", s);
	return 0;
}
"""

OPERATION = r"""
#include <stdint.h>
uint64_t opcost_op(uint64_t x) { return x * 3 + 1; }
"""


@pytest.fixture
def env():
    return {"OPCOST_QEMU": str(FAKE)}


def stored(run_cli, env, tmp_path, run: str = "1") -> dict:
    out = tmp_path / f"run{run}.json"
    cp = run_cli("show", run, "--json", str(out), env=env, timeout=240)
    assert cp.returncode == 0, cp.stderr
    return json.loads(out.read_text())


def test_guest_files_put_the_builds_in_the_initramfs(tmp_path):
    exe, prog = tmp_path / "probe-FAST", tmp_path / "prog"
    exe.write_bytes(b"\x7fELF probe")
    prog.write_bytes(b"\x7fELF program")
    reqs = [probe.ProbeRequest("user.op", {}, "x86_64", exe=str(exe)),
            probe.ProbeRequest("program", {}, "x86_64", program=(str(prog),)),
            probe.ProbeRequest("user.op", {}, "x86_64", exe=str(exe), seed=2),
            probe.ProbeRequest("syscall.null", {}, "x86_64")]
    runs, files = vm.guest_files(reqs)
    assert files == {"/opcost/build-1": exe, "/opcost/build-2": prog}   # one copy of each build
    assert [g for _, g in runs] == ["/opcost/build-1", None, "/opcost/build-1", None]
    assert runs[0][0].exe is None and runs[1][0].program == ("/opcost/build-2",)
    assert runs[1][0].argv()[-2:] == ["--", "/opcost/build-2"] and runs[3][0] is reqs[3]
    job = vm.job_text([(g.argv(), {}, e) for g, e in runs])
    assert job.count(b"\nexe /opcost/build-1\nend\n") == 2 and b"exe /opcost/build-2" not in job
    image = parse_cpio(vm.initramfs(job, exe, exe, files))
    assert image["opcost/build-2"][1] == b"\x7fELF program" and image["opcost/build-2"][0] == 0o100755
    assert image["opcost/job"][1] == job
    with pytest.raises(UsageError, match="another architecture.*x86_64 builds only"):
        vm.guest_files([probe.ProbeRequest("program", {}, "arm", program=("qemu-arm", str(prog)),
                                           emulator="/usr/bin/qemu-arm")])


def test_program_builds_run_in_the_guest_of_each_kernel(run_cli, src, tmp_path, env):
    k1, k2 = fake_kernel(tmp_path / "k1"), fake_kernel(tmp_path / "k2")
    out = tmp_path / "c.json"
    cp = run_cli("variants", str(src(PROGRAM)), "-D", "A", "-D", "B", "--over", f"kernel={k1}|{k2}", "-p", "3",
                 "--fake-clock", "1e6", *QUICK, "--json", str(out), env=env, timeout=240)
    assert cp.returncode == 0, cp.stderr
    assert "linking the x86_64 builds -static, to run in the virtual machine (no libc there)" in cp.stderr
    doc = json.loads(out.read_text())
    info = doc["variants"]
    assert info["compared"] == "within each machine"
    assert info["machines"] == [{"kernel": str(k1)}, {"kernel": str(k2)}]
    # each machine's -DB against that machine's -DA; TCG: figures kept, verdicts withheld
    assert [(e["key"], e["verdict"]) for e in doc["comparisons"]] == [(f"-DB kernel={k1}", None),
                                                                      (f"-DB kernel={k2}", None)]
    assert all("allow-emulated" in e["withheld"] and e["ratio"] > 0 for e in doc["comparisons"])
    # the header names each arm's guest and says once that the timings are emulated (issue 39)
    for k in (k1, k2):
        assert f"A (baseline) ran on: kernel fake ({k}), cmdline ''" in cp.stdout
        assert f"B ran on: kernel fake ({k}), cmdline ''" in cp.stdout
    assert "emulated (QEMU TCG): the timings are the emulator's, not this CPU's; no verdict on cost" in cp.stdout
    run = stored(run_cli, env, tmp_path)
    assert run["plan"]["kind"] == "variants" and run["plan"]["target"] == "vm"
    for r in run["results"]:
        assert r["status"] == "ok" and len(r["processes"]) == 3 and r["params"]["link"] == "-static"
        for p in r["processes"]:
            v = p["header"]["vm"]
            assert v["kernel"] == r["params"]["kernel"] and v["accel"] == "tcg"
            assert v["processes_in_boot"] == 2   # -DA and -DB of one kernel share its boot
            assert p["header"]["emulator"].endswith("(TCG)")
    # the boots interleaved: every round booted both kernels
    rounds = {}
    for r in run["results"]:
        for p in r["processes"]:
            rounds.setdefault(p["round"], set()).add(r["params"]["kernel"])
    assert all(ks == {str(k1), str(k2)} for ks in rounds.values()) and len(rounds) == 3
    shown = run_cli("show", "1", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split("\n", 1)[1] == cp.stdout   # the same tables, rebuilt from the store
    for fmt in ("markdown", "html"):
        rep = run_cli("report", "1", "--format", fmt, env=env)
        assert rep.returncode == 0 and "no verdict" in rep.stdout, rep.stderr


def test_one_build_over_kernels_is_kernel_against_kernel(run_cli, src, tmp_path, env):
    k1, k2 = fake_kernel(tmp_path / "k1"), fake_kernel(tmp_path / "k2")
    out = tmp_path / "c.json"
    cp = run_cli("variants", str(src(OPERATION)), "-D", "X", "--kernel", str(k1),
                 "--over", f"kernel={k1}|{k2}", "--over", "cmdline=|mitigations=off", "-p", "2", "-n", "2",
                 "--fake-clock", "7", *QUICK, "--allow-emulated", "--json", str(out), env=env, timeout=240)
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    names = [b["name"] for b in doc["variants"]["builds"]]
    assert names == [f"-DX kernel={k1} cmdline=", f"-DX kernel={k1} cmdline=mitigations=off",
                     f"-DX kernel={k2} cmdline=", f"-DX kernel={k2} cmdline=mitigations=off"]
    assert doc["variants"]["compared"] == "across machines"
    assert [e["key"] for e in doc["comparisons"]] == names[1:]   # each against the first machine's
    assert all(e["verdict"] is not None for e in doc["comparisons"])   # --allow-emulated
    # op mode: the reference (empty opcost_op) ran on every machine too, and nets each build's figure
    assert all("net_median_ns" in b for b in doc["variants"]["builds"])
    run = stored(run_cli, env, tmp_path)
    refs = [r for r in run["results"] if r["params"].get("reference")]
    assert len(refs) == 4 and all(r["status"] == "ok" for r in run["results"])   # user.op: only the builds have it
    cmdlines = {r["key"]: r["processes"][0]["header"]["vm"]["cmdline"] for r in run["results"]}
    assert cmdlines[f"-DX kernel={k2} cmdline=mitigations=off"] == "mitigations=off"
    assert run["plan"]["allow_emulated"] is True
    shown = run_cli("show", "1", env=env)
    assert shown.stdout.split("\n", 1)[1] == cp.stdout


@pytest.mark.parametrize("args, want", [
    (["--kernel", "{k}", "--arch", "aarch64"], "--arch aarch64: the virtual machine runs x86_64 builds only"),
    (["--over", "spin=1|2", "--kernel", "{k}"], "--over spin=1|2: variants runs its builds over machines"),
    (["--over", "cmdline=a|b"], "--over cmdline=... boots --kernel with each"),
    (["--over", "kernel=/nonexistent/bzImage"], "kernel= /nonexistent/bzImage: no such file"),
    (["--over", "kernel={k}|{k}"], "names a value twice"),
    (["--over", "kernel={k}", "--over", "kernel={k}"], "--over kernel= is given twice"),
    (["--over", "kernel={text}"], "is not an x86 Linux kernel image"),
    (["--kernel", "{k}", "--target", "vm:{k}"], "name two targets"),
])
def test_bad_input_one_line_exit_2(run_cli, src, tmp_path, env, args, want):
    (tmp_path / "text").write_text("hello\n" * 200)
    fill = {"k": str(fake_kernel(tmp_path / "k")), "text": str(tmp_path / "text")}
    cp = run_cli("variants", str(src(PROGRAM)), "-D", "A", *[a.format(**fill) for a in args], *QUICK, env=env)
    assert want.format(**fill) in one_error_line(cp)
    assert not (tmp_path / "opcost").exists() or not any((tmp_path / "opcost").iterdir())   # nothing stored


def test_a_cross_compiler_is_refused_for_the_guest(run_cli, src, tmp_path, env):
    cc = shutil.which("aarch64-linux-gnu-gcc")
    if cc is None:
        pytest.skip("no aarch64 cross compiler here")
    k = fake_kernel(tmp_path / "k")
    cp = run_cli("variants", str(src(PROGRAM)), "-D", "A", "--cc", cc, "--kernel", str(k), *QUICK, env=env)
    line = one_error_line(cp)
    assert "aarch64" in line and ("x86_64 builds only" in line or "cannot run here" in line), line


def test_target_vm_spec_runs_the_builds_there(run_cli, src, tmp_path, env):
    k = fake_kernel(tmp_path / "k")
    pids = tmp_path / "pids"
    cp = run_cli("variants", str(src(PROGRAM)), "-D", "A", "-D", "B", "--target", f"vm:{k}?cpus=1&accel=tcg",
                 "-p", "2", "--fake-clock", "1e6", "--no-progress", "--no-store",
                 env=dict(env, FAKE_QEMU_PIDFILE=str(pids)), timeout=240)
    assert cp.returncode == 0, cp.stderr
    assert "no verdict: emulated (QEMU TCG)" in cp.stdout
    booted = [int(x) for x in pids.read_text().split()]
    assert len(booted) >= 3 and not any(_alive(p) for p in booted)   # a preflight and 2 rounds; none left


def test_real_boot_runs_the_program_builds(run_cli, src, tmp_path, kernel_pair):
    """One real TCG boot of Debian's kernel beside the preflight (about 30 s
    here): both static builds run in it, from the initramfs."""
    k1 = kernel_pair[0]
    out = tmp_path / "c.json"
    cp = run_cli("variants", str(src(PROGRAM)), "-D", "A", "-D", "B", "--kernel", str(k1), "-p", "1",
                 "--fake-clock", "1e6", *QUICK, "--vm-mem", "256", "--json", str(out), timeout=600)
    assert cp.returncode == 0, cp.stderr
    (e,) = json.loads(out.read_text())["comparisons"]
    assert e["verdict"] is None   # one boot a side: nothing to decide (the fake-QEMU tests decide, and withhold)
    run = stored(run_cli, {}, tmp_path)
    release = releases()[0]
    for r in run["results"]:
        assert r["status"] == "ok" and r["params"]["link"] == "-static"
        assert any(f["flag"] == "emulated" and "(TCG)" in f["detail"] for f in r["summary"]["flags"])
        (p,) = r["processes"]
        v = p["header"]["vm"]
        assert v["guest"]["release"] == release and v["processes_in_boot"] == 2 and v["accel"] == "tcg"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
@pytest.mark.parametrize("mode", ["hang", "stall"])
def test_interrupted_variants_leave_no_qemu_and_no_build(cli_environ, src, tmp_path, sig, mode):
    """While the guest boots (hang: its preflight) and while it measures
    (stall): no QEMU outlives opcost, and the build directory is gone (after
    SIGKILL, which nothing can catch, the next variants run removes it:
    variantbuild.sweep_stale_workdirs)."""
    from conftest import cli_argv

    from opcost import variantbuild

    k = fake_kernel(tmp_path / "k")
    pids, tmp = tmp_path / "qemu.pids", tmp_path / "tmp"
    tmp.mkdir()
    env = cli_environ(OPCOST_QEMU=str(FAKE), FAKE_QEMU_MODE=mode, FAKE_QEMU_PIDFILE=str(pids), TMPDIR=str(tmp),
                      OPCOST_VM_BOOT_LIMIT="60")
    proc = subprocess.Popen(cli_argv("variants", str(src(PROGRAM)), "-D", "A", "-D", "B", "--kernel", str(k), "-p", "3",
                                     "--fake-clock", "1e6", *QUICK),
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        want = 2 if mode == "stall" else 1   # stall: the preflight boot ended, the measuring one hangs
        assert _wait_for(lambda: pids.exists() and len(pids.read_text().split()) >= want, 120), "no QEMU started"
        time.sleep(0.3)
        qemu = [int(x) for x in pids.read_text().split()]
        proc.send_signal(sig)
        proc.wait(timeout=20)
        assert _wait_for(lambda: not any(_alive(p) for p in qemu), 5), "a QEMU outlived opcost"
        if sig == signal.SIGKILL:
            left = list(tmp.iterdir())
            assert all(d.name.startswith(f"{variantbuild.WORKDIR_PREFIX}{proc.pid}-") for d in left), left
            assert sorted(variantbuild.sweep_stale_workdirs(tmp)) == sorted(left)
        else:
            assert proc.returncode == 128 + sig, proc.stderr.read()
        assert list(tmp.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
