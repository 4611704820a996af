"""The vm target without a kernel: its input checks, the initramfs it
writes, and, with a stand-in QEMU (fake_qemu.py: QMP, the job, then a mode),
bad guests (garbage, a panic, a hang), QEMU missing, KVM refused, and
interruptions (SIGINT, SIGTERM, SIGKILL of opcost: no QEMU left, no file
left). The real boots are in test_vm_boot.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opcost.errors import UsageError
from opcost.targets import vm

HERE = Path(__file__).resolve().parent
FAKE = HERE / "fake_qemu.py"
FAST = ["--fake-clock", "10", "-n", "3", "-w", "1", "--target-ms", "1", "--accel", "tcg", "--vm-cpus", "1"]


def fake_kernel(path: Path) -> Path:
    """Enough of a bzImage to pass the header check (the fake QEMU never reads it)."""
    data = bytearray(0x400)
    data[0x1FE:0x200] = b"\x55\xaa"
    data[0x202:0x206] = b"HdrS"
    path.write_bytes(bytes(data))
    return path


def one_error_line(cp, code=2):
    err = cp.stderr.strip().splitlines()
    assert cp.returncode == code, cp.stderr
    assert len(err) == 1 and err[0].startswith("opcost: ") and "Traceback" not in cp.stderr, err
    return err[0]


def parse_cpio(data: bytes) -> dict[str, tuple[int, bytes]]:
    """newc, read the way the kernel reads it (independent of vm.cpio_newc)."""
    out, i = {}, 0
    while True:
        assert data[i:i + 6] == b"070701", data[i:i + 6]
        f = [int(data[i + 6 + 8 * k:i + 14 + 8 * k], 16) for k in range(13)]
        mode, size, namesize = f[1], f[6], f[11]
        name = data[i + 110:i + 110 + namesize - 1].decode()
        i += 110 + namesize
        i += -i % 4
        body = data[i:i + size]
        i += size
        i += -i % 4
        if name == "TRAILER!!!":
            return out
        out[name] = (mode, body)


def test_cpio_newc_is_what_the_kernel_reads():
    data = vm.cpio_newc([("opcost", 0o040755, b""), ("opcost/job", 0o100644, b"abc"), ("init", 0o100755, b"12345")])
    assert len(data) % 4 == 0
    got = parse_cpio(data)
    assert got == {"opcost": (0o040755, b""), "opcost/job": (0o100644, b"abc"), "init": (0o100755, b"12345")}


def test_job_text_and_its_refusals():
    assert vm.job_text([(["run", "syscall.null"], {"OPCOST_PAD": "xx"})]) == (
        b"opcost-vminit/1\narg run\narg syscall.null\nenv OPCOST_PAD=xx\nend\n")
    with pytest.raises(UsageError, match="newline"):
        vm.job_text([(["a\nb"], {})])


def test_kernel_and_cmdline_checks(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        vm.check_kernel(str(tmp_path / "nope"))
    (tmp_path / "text").write_text("not a kernel\n" * 100)
    with pytest.raises(UsageError, match="not a Linux kernel image the vm target boots"):
        vm.check_kernel(str(tmp_path / "text"))
    assert vm.check_kernel(str(fake_kernel(tmp_path / "k"))) == (tmp_path / "k").resolve()
    assert vm.check_cmdline("  mitigations=off   nosmt ") == "mitigations=off nosmt"
    for bad in ('init="/bin/sh"', "a\nb", "x='1'", "tab\there"):
        with pytest.raises(UsageError):
            vm.check_cmdline(bad)


def test_withheld_without_allow_emulated():
    tcg = {"flag": "emulated", "arm": "A", "detail": "ran under qemu-system-x86_64 (TCG): ..."}
    doc = {"comparisons": [{"verdict": "slower", "ratio": 1.1, "flags": [tcg]},
                           {"verdict": "same", "ratio": 1.0, "flags": []},
                           {"verdict": "faster", "ratio": 0.9, "flags": [dict(tcg, detail="ran under qemu-arm")]}],
           "summary": {"n": 3, "geomean_ratio": 1.0, "counts": {"slower": 1, "same": 1, "faster": 1}}}
    assert vm.withhold_emulated(json.loads(json.dumps(doc)), True)["comparisons"][0]["verdict"] == "slower"
    out = vm.withhold_emulated(doc, False)
    assert out["comparisons"][0]["verdict"] is None and "allow-emulated" in out["comparisons"][0]["withheld"]
    assert [e["verdict"] for e in out["comparisons"][1:]] == ["same", "faster"]   # qemu-user: as before
    assert out["summary"]["counts"] == {"slower": 0, "same": 1, "faster": 1} and out["summary"]["n"] == 3


@pytest.mark.parametrize("args, want", [
    (["run", "syscall.null", "--kernel", "/nonexistent/bzImage"], "no such file"),
    (["run", "syscall.null", "--kernel", "{text}"], "not a Linux kernel image the vm target boots"),
    (["run", "syscall.null", "--kernel", "{k}", "--kernel-cmdline", 'init="/x"'], "quote"),
    (["run", "syscall.null:cmdline=a'b", "--kernel", "{k}"], "quote"),
    (["run", "syscall.null:kernel={text}"], "kernel= {text} is not a Linux kernel image the vm target boots"),
    (["run", "syscall.null", "--kernel", "{k}", "--vm-mem", "10"], "--vm-mem 10: give guest memory in MiB"),
    (["ab", "syscall.null", "--a", "kernel={k}", "--b", "kernel={k},cpu=5"], "cpu=5"),
])
def test_bad_input_one_line_exit_2(run_cli, tmp_path, args, want):
    (tmp_path / "text").write_text("hello\n" * 200)
    k = fake_kernel(tmp_path / "k")
    fill = {"k": str(k), "text": str(tmp_path / "text")}
    cp = run_cli(*[a.format(**fill) for a in args], *FAST, env={"OPCOST_QEMU": str(FAKE)})
    assert want.format(**fill) in one_error_line(cp)


def test_qemu_missing(run_cli, tmp_path):
    k = fake_kernel(tmp_path / "k")
    cp = run_cli("run", "syscall.null", "--kernel", str(k), *FAST, env={"OPCOST_QEMU": str(tmp_path / "no-qemu")})
    assert "is not installed" in one_error_line(cp)


def test_kvm_refused(run_cli, tmp_path, monkeypatch):
    monkeypatch.setattr(vm.host, "kvm_usable", lambda: "/dev/kvm cannot be opened (Permission denied)")
    with pytest.raises(UsageError, match="--accel kvm: /dev/kvm cannot be opened"):
        vm.VmTarget(vm.VmConfig(qemu=sys.executable, accel="kvm"), None)
    t = vm.VmTarget(vm.VmConfig(qemu=sys.executable, accel="auto"), vm.Machine(fake_kernel(tmp_path / "k")))
    assert t.choice.accel_for(t.default)[0] == "tcg"   # auto: no trial boot when /dev/kvm does not open


def test_fake_boot_runs_the_job_and_records_the_guest(run_cli, tmp_path):
    k = fake_kernel(tmp_path / "k")
    out = tmp_path / "r.json"
    cp = run_cli("run", "syscall.null", "signal.install", "--kernel", str(k), "-p", "2", *FAST, "--json", str(out),
                 env={"OPCOST_QEMU": str(FAKE)})
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    for r in doc["results"]:
        assert r["status"] == "ok" and len(r["processes"]) == 2
        for p in r["processes"]:
            v = p["header"]["vm"]
            assert v["guest"]["release"] == "fake" and v["accel"] == "tcg" and v["processes_in_boot"] == 2
            assert v["kernel_sha256"] == vm.sha256_of(k) and "-kernel" in v["qemu_argv"]
        assert any(f["flag"] == "emulated" for f in r["summary"]["flags"])
    # both variants of a round ran in one boot, in the round's order
    by_round = {}
    for r in doc["results"]:
        for p in r["processes"]:
            by_round.setdefault(p["round"], []).append(p["header"]["vm"]["position_in_boot"])
    assert all(sorted(v) == [0, 1] for v in by_round.values())
    assert doc["env"]["vm"]["value"]["machines"][0]["guest"]["release"] == "fake"


@pytest.mark.parametrize("mode, want", [
    ("garbage", "garbled"),
    ("panic", "did not boot"),
    ("hang", "did not reach opcost's init within 2 s"),
])
def test_bad_guest_is_one_line_and_keeps_its_console(run_cli, tmp_path, mode, want):
    k = fake_kernel(tmp_path / "k")
    state = tmp_path / "state"
    cp = run_cli("run", "syscall.null", "--kernel", str(k), *FAST, timeout=60,
                 env={"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_MODE": mode, "OPCOST_VM_BOOT_LIMIT": "2",
                      "XDG_STATE_HOME": str(state)})
    line = one_error_line(cp)
    assert want in line
    saved = list((state / "opcost" / "vm-console").glob("*.log"))
    assert len(saved) == 1 and str(saved[0]) in line
    if mode == "panic":
        assert "Kernel panic" in saved[0].read_text()
    from test_vm_boot import no_run_stored

    assert no_run_stored(tmp_path)   # found in the preflight boot: no run at all


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(cond, limit: float) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


# 20 trials in all: each signal while the guest boots (its preflight) and while it measures.
TRIALS = [(sig, mode) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL) for mode in ("hang", "stall")]
TRIALS = (TRIALS * 4)[:20]


@pytest.mark.parametrize("sig, mode", TRIALS)
def test_interrupted_opcost_leaves_no_qemu_and_no_file(cli_environ, tmp_path, sig, mode):
    from conftest import cli_argv

    k = fake_kernel(tmp_path / "k")
    pids = tmp_path / "qemu.pids"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = cli_environ(OPCOST_QEMU=str(FAKE), FAKE_QEMU_MODE=mode, FAKE_QEMU_PIDFILE=str(pids), TMPDIR=str(tmp),
                      OPCOST_VM_BOOT_LIMIT="60")
    proc = subprocess.Popen(cli_argv("run", "syscall.null", "--kernel", str(k), "-p", "3", *FAST), env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        want = 2 if mode == "stall" else 1   # stall: the preflight boot ended, the measuring one hangs
        assert _wait_for(lambda: pids.exists() and len(pids.read_text().split()) >= want, 30), "no QEMU started"
        time.sleep(0.3)
        qemu = [int(x) for x in pids.read_text().split()]
        proc.send_signal(sig)
        proc.wait(timeout=20)
        assert _wait_for(lambda: not any(_alive(p) for p in qemu), 5), "a QEMU outlived opcost"
        assert list(tmp.iterdir()) == []
        if sig != signal.SIGKILL:
            assert proc.returncode == 128 + sig, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_series_over_kernels_is_stored_and_shown(run_cli, tmp_path):
    k1, k2 = fake_kernel(tmp_path / "k1"), fake_kernel(tmp_path / "k2")
    out = tmp_path / "s.json"
    env = {"OPCOST_QEMU": str(FAKE)}
    cp = run_cli("series", "--run", "syscall.null", "--over", f"kernel={k1}|{k2}|{k1}", "-p", "3", *FAST,
                 "--json", str(out), env=env)
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"].startswith("opcost.series") and len(doc["labels"]) == 3
    shown = run_cli("show", "1", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count(str(k1)) >= 2 and str(k2) in shown.stdout
    assert cp.stdout.splitlines()[-5:] == shown.stdout.splitlines()[-5:]   # the same series, replayed


def test_compare_refuses_a_guest_against_another_machine(run_cli, tmp_path):
    k = fake_kernel(tmp_path / "k")
    env = {"OPCOST_QEMU": str(FAKE)}
    fake = ["--fake-clock", "10", "-n", "3", "-w", "1", "--target-ms", "1", "-p", "2"]
    assert run_cli("run", "syscall.null", *fake, env=env).returncode == 0
    cp = run_cli("run", "syscall.null", "--kernel", str(k), "--accel", "tcg", "--vm-cpus", "1", *fake, env=env)
    assert cp.returncode == 0, cp.stderr
    line = one_error_line(run_cli("compare", "1", "2", env=env))
    assert "different machines" in line and "guest_cpu_model" in line


def test_vcpu_threads_pinned_through_qmp(run_cli, tmp_path):
    """The KVM path's pinning (forced under TCG by OPCOST_VM_PIN=1; the stand-in
    QEMU names its own thread as vCPU 0): vCPU 0 on the last CPU opcost may use."""
    own = sorted(os.sched_getaffinity(0))
    if len(own) < 2:
        pytest.skip("pinning needs a CPU for the vCPU and one for the rest")
    k = fake_kernel(tmp_path / "k")
    out = tmp_path / "r.json"
    cp = run_cli("run", "syscall.null", "--kernel", str(k), "-p", "1", *FAST, "--json", str(out),
                 env={"OPCOST_QEMU": str(FAKE), "OPCOST_VM_PIN": "1"})
    assert cp.returncode == 0, cp.stderr
    (p,) = json.loads(out.read_text())["results"][0]["processes"]
    assert p["header"]["vm"]["vcpus"]["0"]["host_cpu"] == own[-1]
    assert p["header"]["vm"]["guest"]["affinity"] == [own[-1]]   # where the stand-in's vCPU thread really ran


def test_open_vm_spec(tmp_path):
    k = fake_kernel(tmp_path / "k")
    t = vm.open_vm_spec(f"vm:{k}?cpus=1&accel=tcg&cmdline=mitigations%3Doff%20nosmt")
    assert t.allowed_cpus() == [0] and t.default.kernel == k.resolve()
    assert t.default.cmdline == "mitigations=off nosmt" and t.cfg.accel == "tcg"
    for bad in ("vm:", f"vm:{k}?cpus=x", f"vm:{k}?disk=1", f"vm:{tmp_path}/nope"):
        with pytest.raises(UsageError):
            vm.open_vm_spec(bad)
    with pytest.raises(UsageError, match=r"cpus=999: opcost may use \d+ host CPU\(s\) here.*give .*cpus=\d+ or fewer"):
        vm.open_vm_spec(f"vm:{k}?cpus=999&accel=tcg")   # each a host thread under TCG: the boot would hang
    # a key given twice is bad input, whichever value would have won (issue 36)
    for twice in (f"vm:{k}?cpus=2&cpus=3", f"vm:{k}?cmdline=a&accel=tcg&cmdline=b"):
        with pytest.raises(UsageError, match="given more than once; give each key once"):
            vm.open_vm_spec(twice)


def test_garbage_while_measuring_fails_the_variant_and_keeps_nothing_as_measured(run_cli, tmp_path):
    k = fake_kernel(tmp_path / "k")
    out = tmp_path / "r.json"
    cp = run_cli("run", "syscall.null", "--kernel", str(k), "-p", "2", *FAST, "--json", str(out),
                 env={"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_MODE": "garbage_run",
                      "XDG_STATE_HOME": str(tmp_path / "state")})
    assert cp.returncode == 1, cp.stderr
    (r,) = json.loads(out.read_text())["results"]
    assert r["status"] == "failed" and "garbled" in r["reason"] and r["processes"] == []
    assert "Traceback" not in cp.stderr


def test_several_processes_per_boot_make_one_figure(run_cli, tmp_path):
    k = fake_kernel(tmp_path / "k")
    out = tmp_path / "r.json"
    cp = run_cli("run", "syscall.null", "signal.install", "--kernel", str(k), "-p", "2", "--vm-procs", "3", *FAST,
                 "--json", str(out), env={"OPCOST_QEMU": str(FAKE)})
    assert cp.returncode == 0, cp.stderr
    for r in json.loads(out.read_text())["results"]:
        assert len(r["processes"]) == 2   # one record per boot
        for p in r["processes"]:
            v = p["header"]["vm"]
            assert v["processes_in_boot"] == 6 and len(v["processes"]) == 3
            # interleaved in the boot: this variant's processes are every other one
            pos = [q["position_in_boot"] for q in v["processes"]]
            assert pos[1] - pos[0] == 2 and pos[2] - pos[1] == 2
            assert len({q["pad_bytes"] for q in v["processes"]}) == 3
            assert len(p["samples"]) == 9 and [s["i"] for s in p["samples"]] == list(range(9))


def test_kvm_path_argv_and_thread_placement(tmp_path, monkeypatch):
    """The KVM path with the stand-in QEMU (it has a thread per vCPU and one
    more): -accel kvm, -cpu host, guest memory preallocated; vCPU i's thread
    (from QMP query-cpus-fast) pinned to one host CPU of its own, QEMU's
    other threads and opcost itself kept off those CPUs while the guest
    runs; opcost's own CPUs given back after the boot."""
    own = set(os.sched_getaffinity(0))
    if len(own) < 2:
        pytest.skip("pinning needs a CPU for the vCPUs and one for the rest")
    monkeypatch.setattr(vm.host, "kvm_usable", lambda: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("OPCOST_VM_PIN", raising=False)
    cpus = min(3, len(own) - 1)
    t = vm.VmTarget(vm.VmConfig(qemu=str(FAKE), accel="kvm", cpus=cpus, machine="pc", mem_mib=256),
                    vm.Machine(fake_kernel(tmp_path / "k")))
    b, accel, machine = t._boot(t.default, [(["cpuid"], {})], 60.0)
    assert (accel, machine) == ("kvm", "pc") and b.done
    argv = b.argv
    assert argv[argv.index("-accel") + 1] == "kvm" and argv[argv.index("-cpu") + 1] == "host"
    assert "memory-backend-ram,id=mem0,size=256M,prealloc=on" in argv and "memory-backend=mem0" in argv
    assert argv[argv.index("-smp") + 1].startswith(f"{cpus},") and "-S" in argv
    vcpu_cpus = sorted(own)[-cpus:]
    rest = sorted(own - set(vcpu_cpus))
    facts = b.facts
    assert facts["vcpu_threads"] == [b.vcpus[i]["thread"] for i in range(cpus)]
    for i in range(cpus):   # each vCPU thread on its own host CPU, as recorded
        assert b.vcpus[i]["host_cpu"] == vcpu_cpus[i]
        assert facts["threads"][str(b.vcpus[i]["thread"])] == [vcpu_cpus[i]]
    others = {tid: a for tid, a in facts["threads"].items() if int(tid) not in facts["vcpu_threads"]}
    assert len(others) >= 2 and all(a == rest for a in others.values()), others   # QEMU's other threads
    assert facts["frontend_affinity"] == rest        # opcost off the vCPUs' CPUs while the guest ran
    assert set(os.sched_getaffinity(0)) == own       # and back on all of its CPUs after


def test_kvm_with_too_few_host_cpus_says_it_did_not_pin(tmp_path, monkeypatch):
    monkeypatch.setattr(vm.host, "kvm_usable", lambda: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    own = len(os.sched_getaffinity(0))
    t = vm.VmTarget(vm.VmConfig(qemu=str(FAKE), accel="kvm", cpus=own, machine="pc"),
                    vm.Machine(fake_kernel(tmp_path / "k")))
    b, _, _ = t._boot(t.default, [], 60.0)
    rec = t._record(t.default, b, "kvm", "pc")
    assert all("host_cpu" not in v for v in rec["vcpus"].values())
    assert "not pinned" in rec["pinning"] and f"--vm-cpus {own}" in rec["pinning"]


def _machines_tried(argv_log: Path) -> list[str]:
    return [a[a.index("-machine") + 1] for a in map(json.loads, argv_log.read_text().splitlines())
            if "--version" not in a]


def test_machine_auto_boots_microvm_where_it_boots(run_cli, tmp_path):
    k = fake_kernel(tmp_path / "k")
    out, log = tmp_path / "r.json", tmp_path / "argv.log"
    cp = run_cli("run", "syscall.null", "--kernel", str(k), "-p", "2", *FAST, "--json", str(out),
                 env={"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_ARGV": str(log)})
    assert cp.returncode == 0, cp.stderr
    assert _machines_tried(log) == ["microvm"] * 3   # the preflight (the trial) and two measuring boots
    argv = json.loads(log.read_text().splitlines()[0])
    append = argv[argv.index("-append") + 1]
    assert re.search(r"\btsc_early_khz=\d{4,}\b", append)   # TCG: the kernel told the TSC's frequency
    assert "isa-serial,chardev=data,index=1" in argv and "stdio" not in argv   # the data port is ttyS1
    for p in json.loads(out.read_text())["results"][0]["processes"]:
        assert p["header"]["vm"]["machine"] == "microvm" and "microvm" in p["header"]["vm"]["machine_why"]


def test_machine_auto_falls_back_to_pc_and_remembers(run_cli, tmp_path):
    k = fake_kernel(tmp_path / "k")
    out, log = tmp_path / "r.json", tmp_path / "argv.log"
    env = {"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_ARGV": str(log), "FAKE_QEMU_MICROVM": "hang",
           "OPCOST_VM_BOOT_LIMIT": "3"}
    cp = run_cli("run", "syscall.null", "--kernel", str(k), "-p", "2", *FAST, "--json", str(out), env=env)
    assert cp.returncode == 0, cp.stderr
    assert _machines_tried(log) == ["microvm", "pc", "pc", "pc"]   # tried once, briefly
    for p in json.loads(out.read_text())["results"][0]["processes"]:
        v = p["header"]["vm"]
        assert v["machine"] == "pc" and "microvm did not reach the init" in v["machine_why"]
        assert "tsc_early_khz" not in v["qemu_argv"][v["qemu_argv"].index("-append") + 1]
    log.unlink()
    cp = run_cli("run", "syscall.null", "--kernel", str(k), "-p", "1", *FAST, env=env)
    assert cp.returncode == 0, cp.stderr
    assert _machines_tried(log) == ["pc", "pc"]   # remembered for this kernel, host and accel
    cached = json.loads((tmp_path / "cache" / "opcost" / "vm-machine.json").read_text())
    (key,) = cached
    assert key.startswith(vm.sha256_of(k) + "|tcg|") and cached[key]["machine"] == "pc"


def test_machine_asked_is_not_second_guessed(run_cli, tmp_path):
    k = fake_kernel(tmp_path / "k")
    log = tmp_path / "argv.log"
    env = {"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_ARGV": str(log), "FAKE_QEMU_MICROVM": "panic",
           "XDG_STATE_HOME": str(tmp_path / "state")}
    line = one_error_line(run_cli("run", "syscall.null", "--kernel", str(k), "--vm-machine", "microvm", *FAST,
                                  env=env))
    assert "did not boot" in line and _machines_tried(log) == ["microvm"]
    log.unlink()
    cp = run_cli("run", "syscall.null", "--kernel", str(k), "--vm-machine", "pc", "-p", "1", *FAST, env=env)
    assert cp.returncode == 0 and _machines_tried(log) == ["pc", "pc"], cp.stderr
    assert "--vm-machine" in one_error_line(run_cli("run", "syscall.null", "--kernel", str(k), "--vm-machine", "q35",
                                                    *FAST, env=env))


@pytest.mark.parametrize("opts, flag", [
    (["--kernel", "{k}"], "--kernel"),
    (["--kernel-cmdline", "mitigations=off"], "--kernel-cmdline"),
    (["--vm-cpus", "2"], "--vm-cpus"),
    (["--vm-mem", "256"], "--vm-mem"),
    (["--vm-procs", "3"], "--vm-procs"),
    (["--accel", "tcg"], "--accel"),
    (["--accel", "auto"], "--accel"),   # given, even as the default: it is refused, not ignored
])
def test_stored_series_refuses_the_vm_options(run_cli, tmp_path, opts, flag):
    k = fake_kernel(tmp_path / "k")
    cp = run_cli("series", "syscall.null", "--by", "commit", *[o.format(k=k) for o in opts],
                 env={"OPCOST_QEMU": str(FAKE)})
    line = one_error_line(cp)
    assert line.startswith(f"opcost: {flag} is for measuring") and f"leave {flag} out" in line


def test_the_vm_goes_through_open_target(tmp_path, monkeypatch):
    """No special case: the vm target the command line asks for is TARGETS["vm"]'s, through open_target."""
    import argparse

    from opcost import protocol, targets
    from opcost.targets.vm_options import add_vm_options

    k = fake_kernel(tmp_path / "k")
    p = argparse.ArgumentParser()
    p.add_argument("--target")
    add_vm_options(p)
    monkeypatch.setenv("OPCOST_QEMU", str(FAKE))
    opened = []
    real = targets.open_target
    monkeypatch.setattr(targets, "open_target", lambda spec=None, **o: opened.append((spec, o)) or real(spec, **o))
    args = p.parse_args(["--kernel", str(k), "--vm-procs", "3", "--accel", "tcg"])
    protocol.check_numbers(args, lambda dest: "--" + dest.replace("_", "-"))   # as cli.main does
    t = targets.target_of(args)
    assert isinstance(t, vm.VmTarget) and t.cfg.procs == 3 and t.cfg.accel == "tcg" and t.default.kernel == k.resolve()
    assert opened == [("vm:", {"kernel": str(k), "cmdline": "", "cpus": None, "mem_mib": None, "procs": 3,
                               "accel": "tcg", "allow_emulated": False, "machine": "auto", "cpu_model": "",
                               "restore": "auto"})]
    t = targets.target_of(p.parse_args([]), ["syscall.null:kernel=" + str(k)])
    assert isinstance(t, vm.VmTarget) and t.default is None and opened[-1][0] == "vm:"
    assert not isinstance(targets.target_of(p.parse_args([]), ["syscall.null"]), vm.VmTarget)
    assert opened[-1] == (None, {})
    with pytest.raises(UsageError, match="name two targets"):
        targets.target_of(p.parse_args(["--target", f"vm:{k}", "--kernel", str(k)]))
    t = targets.target_of(p.parse_args(["--target", f"vm:{k}?accel=tcg"]))
    assert isinstance(t, vm.VmTarget) and opened[-1] == (f"vm:{k}?accel=tcg", {})


def test_series_under_tcg_withholds_its_change_points(run_cli, tmp_path):
    """As ab does: every label flagged emulated, the change point (a real
    step, spin 1 -> 8 on the fake clock) not given without --allow-emulated,
    the reason said; the plan records --allow-emulated and show replays both."""
    k = fake_kernel(tmp_path / "k")
    env = {"OPCOST_QEMU": str(FAKE)}
    common = ["series", "--run", f"syscall.null:kernel={k}", "--over", "spin=1|1|1|8|8|8", "-p", "3",
              "--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "--accel", "tcg", "--vm-cpus", "1"]
    for run_id, allow in ((1, []), (2, ["--allow-emulated"])):
        out = tmp_path / f"s{run_id}.json"
        cp = run_cli(*common, *allow, "--json", str(out), env=env)
        assert cp.returncode == 0, cp.stderr
        doc = json.loads(out.read_text())
        assert all(lb["emulated"] for lb in doc["labels"]) and doc["allow_emulated"] == bool(allow)
        assert all("emulated" in lb["flags"][0]["flag"] for lb in doc["labels"])
        if allow:
            assert [c["label"] for c in doc["change_points"]] == ["8"] and "withheld" not in doc
            assert doc["change_points"][0]["verdict"] == "slower" and doc["labels"][3]["change_point"]
            assert "change points (1;" in cp.stdout
        else:
            assert doc["change_points"] == [] and not any(lb["change_point"] for lb in doc["labels"])
            assert [c["index"] for c in doc["withheld_change_points"]] == [3]   # found, figures kept
            assert "--allow-emulated" in doc["withheld"] and "emulated (QEMU TCG)" in doc["withheld"]
            assert "change points: withheld: 6 of 6 labels emulated (QEMU TCG)" in cp.stdout
            assert "(1 found, not given: 8 (label 4))" in cp.stdout
        sh = run_cli("show", str(run_id), env=env)
        assert sh.returncode == 0, sh.stderr
        assert cp.stdout.split("change points")[1] == sh.stdout.split("change points")[1]   # replayed alike
        md = run_cli("report", str(run_id), "--format", "markdown", env=env)
        assert md.returncode == 0, md.stderr
        assert ("No change point given: 6 of 6 labels emulated" in md.stdout) == (not allow)


def test_boot_spread_against_a_hand_computed_anova():
    """stats.boot_spread: the two MADs and ICC(1) = (F - 1) / (F + n0 - 1),
    F from mean squares computed here by hand (not by scipy)."""
    import math

    from opcost.stats import boot_spread

    def boot(*meds):
        return {"header": {"vm": {"processes": [{"median_ns": m} for m in meds]}}}

    groups = [[100.0, 102.0, 101.0], [110.0, 108.0, 111.0], [95.0, 96.0, 99.0], [105.0, 104.0, 103.0]]
    figures = [101.0, 110.0, 96.0, 104.0]
    got = boot_spread([boot(*g) for g in groups], figures)
    logs = [[math.log(x) for x in g] for g in groups]
    grand = sum(map(sum, logs)) / 12
    msb = sum(3 * (sum(g) / 3 - grand) ** 2 for g in logs) / 3
    msw = sum((x - sum(g) / 3) ** 2 for g in logs for x in g) / 8
    f = msb / msw
    assert got["between_share"] == pytest.approx((f - 1) / (f + 3 - 1), rel=1e-9)
    dev = sorted(abs(x - sorted(g)[1]) for g in logs for x in g)
    assert got["within_boot_mad"] == pytest.approx(1.4826 * (dev[5] + dev[6]) / 2, rel=1e-9)
    lf = sorted(math.log(x) for x in figures)
    mid = (lf[1] + lf[2]) / 2
    bd = sorted(abs(x - mid) for x in lf)
    assert got["between_boot_mad"] == pytest.approx(1.4826 * (bd[1] + bd[2]) / 2, rel=1e-9)
    assert got["n_boots"] == 4 and got["processes_per_boot"] == [3]
    # boots alike, processes not: nothing between boots; one process a boot: nothing to say
    assert boot_spread([boot(100, 120), boot(120, 100), boot(110, 110.0001)], [110, 110, 110])["between_share"] == 0.0
    assert boot_spread([boot(100), boot(120)], [100, 120]) is None
    assert boot_spread([{"header": {}}, {"header": {}}], [1, 2]) is None


def test_vm_procs_reports_within_against_between_boots(run_cli, tmp_path):
    k = fake_kernel(tmp_path / "k")
    out = tmp_path / "r.json"
    env = {"OPCOST_QEMU": str(FAKE)}
    cp = run_cli("run", "syscall.null", "--kernel", str(k), "-p", "3", "--vm-procs", "2", *FAST, "--json", str(out),
                 env=env)
    assert cp.returncode == 0, cp.stderr
    (r,) = json.loads(out.read_text())["results"]
    meds = [[q["median_ns"] for q in p["header"]["vm"]["processes"]] for p in r["processes"]]
    assert len(meds) == 3 and all(len(m) == 2 and all(x > 0 for x in m) for m in meds)   # recorded per boot
    from opcost.stats import boot_spread

    b = r["summary"]["boots"]
    want = boot_spread(r["processes"], r["summary"]["process_medians_ns"])
    assert b["within_boot_mad"] == pytest.approx(want["within_boot_mad"]) and b["n_boots"] == 3
    assert b["between_boot_mad"] == pytest.approx(want["between_boot_mad"]) and b["processes_per_boot"] == [2]
    assert b["between_share"] == pytest.approx(want["between_share"])
    line = [ln for ln in cp.stdout.splitlines() if "boots of 2 processes" in ln]
    assert len(line) == 1 and "within a boot" in line[0] and "of the variance between boots" in line[0]
    assert line == [ln for ln in run_cli("show", "1", env=env).stdout.splitlines() if "boots of" in ln]
    one = run_cli("run", "syscall.null", "--kernel", str(k), "-p", "2", *FAST, "--json", str(tmp_path / "1.json"),
                  env=env)
    assert one.returncode == 0 and "boots of" not in one.stdout   # one process a boot: no such line
    assert "boots" not in json.loads((tmp_path / "1.json").read_text())["results"][0]["summary"]


def test_hung_boots_are_retried_in_their_round(run_cli, tmp_path):
    """A stand-in QEMU hanging on its 3rd and 7th boots (1 and 2 are the
    preflights): each hang killed at the limit and retried in its round;
    both arms keep every round, paired, the run complete, the retries in
    the JSON and in a note."""
    k = fake_kernel(tmp_path / "k")
    out = tmp_path / "r.json"
    env = {"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_HANG_BOOTS": "3,7", "FAKE_QEMU_COUNTER": str(tmp_path / "n"),
           "OPCOST_VM_BOOT_LIMIT": "2", "XDG_STATE_HOME": str(tmp_path / "state"),
           "OPCOST_VM_TALLY": str(tmp_path / "tally")}
    cp = run_cli("ab", "syscall.null", "--kernel", str(k), "--a", "cmdline=", "--b", "cmdline=quiet", "-p", "4", *FAST,
                 "--allow-emulated", "--json", str(out), timeout=120, env=env)
    assert cp.returncode in (0, 1), cp.stderr   # 1: a verdict of slower/faster is possible on the fake clock
    doc = json.loads(out.read_text())
    assert doc["comparisons"][0]["verdict"] is not None
    assert doc["a"]["run_id"] == doc["b"]["run_id"]   # interleaved: one run, both arms
    shown = run_cli("show", str(doc["a"]["run_id"]), "--json", str(tmp_path / "shown.json"), env=env)
    run = json.loads((tmp_path / "shown.json").read_text())
    assert run["status"] == "complete", run.get("status")
    rounds, retried = [], []
    for r in run["results"]:
        assert r["status"] == "ok", r.get("reason")
        rounds.append(sorted(p["round"] for p in r["processes"]))
        retried += [(p["round"], x) for p in r["processes"] for x in p["header"]["vm"]["retries"]]
    assert rounds == [[0, 1, 2, 3]] * 2, rounds
    assert "hung and were retried in their round" in shown.stdout
    assert len(retried) == 2 and all("did not reach opcost's init within 2 s" in x["cause"] for _, x in retried)
    assert (tmp_path / "n").read_text() == "b" * 12   # 2 preflights, 8 boots of the rounds, 2 retries
    assert "hung and were retried in their round" in cp.stdout   # the ab's own table says it too
    tally = [json.loads(x) for x in (tmp_path / "tally").read_text().splitlines()]   # what the suite sums
    assert [(t["stage"], t["lost"]) for t in tally] == [("preflight", False)] * 2 + [("run", False)] * 8
    assert sum(t["retried"] for t in tally) == 2 and {t["qemu"] for t in tally} == {FAKE.name}


def test_microvm_that_hangs_twice_is_given_up_for_pc_and_the_header_names_both(run_cli, tmp_path):
    """Issue 39 item 1: microvm (--vm-machine auto) hanging on boots 3 and 5
    (1 and 2 are the preflights) is given up for pc for the rest of the
    session: every later boot is pc, each process records its machine and
    why, a note says it, and the header names both guests arm A ran on
    (not only its first process's)."""
    k = fake_kernel(tmp_path / "k")
    out, log = tmp_path / "r.json", tmp_path / "argv.log"
    env = {"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_HANG_BOOTS": "3,5", "FAKE_QEMU_COUNTER": str(tmp_path / "n"),
           "FAKE_QEMU_ARGV": str(log), "OPCOST_VM_BOOT_LIMIT": "2", "XDG_STATE_HOME": str(tmp_path / "state")}
    cp = run_cli("ab", "syscall.null", "--kernel", str(k), "--a", "cmdline=", "--b", "cmdline=quiet", "-p", "4", *FAST,
                 "--allow-emulated", "--json", str(out), timeout=120, env=env)
    assert cp.returncode in (0, 1), cp.stderr
    tried = _machines_tried(log)
    assert tried[:5] == ["microvm"] * 5 and set(tried[5:]) == {"pc"} and len(tried) == 12, tried
    assert "microvm hung twice in this session: pc from now on" in cp.stdout
    run_cli("show", str(json.loads(out.read_text())["a"]["run_id"]), "--json", str(tmp_path / "shown.json"), env=env)
    run = json.loads((tmp_path / "shown.json").read_text())
    machines = {(r["key"], p["header"]["vm"]["machine"], p["header"]["vm"]["machine_why"])
                for r in run["results"] for p in r["processes"]}
    assert {m for _, m, _ in machines} == {"microvm", "pc"}
    assert all(why == "microvm hung twice in one session" for _, m, why in machines if m == "pc"), machines
    head = cp.stdout.split("\n\n")[0].splitlines()
    ran = [ln.split(", machine ")[1].split(",")[0] for ln in head if ln.startswith("A ran on: ")]
    assert ran == ["microvm", "pc"], head
    assert run["status"] == "complete"


def test_a_kernel_that_stops_booting_fails_its_arm_once_retried(run_cli, tmp_path):
    """A's kernel hangs on every boot after its preflight: its round's boot
    tried three times, then A fails: no verdict, the run stored `failed`,
    `--bisect` exits 125 (skip: a kernel that does not boot tells nothing);
    B's kernel boots throughout."""
    ka, kb = fake_kernel(tmp_path / "ka"), fake_kernel(tmp_path / "kb")
    out = tmp_path / "r.json"
    env = {"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_HANG_BOOTS": "3-", "FAKE_QEMU_HANG_KERNEL": str(ka),
           "FAKE_QEMU_COUNTER": str(tmp_path / "n"), "OPCOST_VM_BOOT_LIMIT": "1",
           "XDG_STATE_HOME": str(tmp_path / "state"), "OPCOST_VM_TALLY": str(tmp_path / "tally")}
    cp = run_cli("ab", "syscall.null", "--a", f"kernel={ka}", "--b", f"kernel={kb}", "-p", "4", *FAST,
                 "--allow-emulated", "--bisect", "--json", str(out), timeout=120, env=env)
    assert cp.returncode == 125, cp.stderr
    (e,) = json.loads(out.read_text())["comparisons"]
    assert e.get("verdict") is None and "after 2 retried boot(s)" in cp.stdout
    run_cli("show", "1", "--json", str(tmp_path / "shown.json"), env=env)
    run = json.loads((tmp_path / "shown.json").read_text())
    assert run["status"] == "failed"
    assert sorted((r["status"], len(r["processes"])) for r in run["results"]) == [("failed", 0), ("ok", 4)]
    lost = [json.loads(x) for x in (tmp_path / "tally").read_text().splitlines() if '"lost": true' in x]
    assert [(t["stage"], t["retried"]) for t in lost] == [("run", 2)] and "did not reach" in lost[0]["cause"]



def _elf_with_notes(notes: list[tuple[bytes, int]]) -> bytes:
    """A minimal x86_64 ELF: one PT_NOTE segment holding `notes` (name, type)."""
    import struct

    body = b"".join(struct.pack("<III", len(n) + 1, 4, t) + (n + b"\0").ljust((len(n) + 4) // 4 * 4, b"\0")
                    + b"\0" * 4 for n, t in notes)
    ehdr = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 64, 0, 0, 64, 56, 1,
                                                                         0, 0, 0)
    phdr = struct.pack("<IIQQQQQQ", 4, 4, 64 + 56, 0, 0, len(body), len(body), 4)
    return ehdr + phdr + body


def _bzimage_with(payload: bytes) -> bytes:
    """A bzImage header (protocol 2.15) whose payload is `payload`, as the boot protocol places it."""
    import struct

    setup = 1
    data = bytearray((setup + 1) * 512)
    data[0x1F1] = setup
    data[0x1FE:0x200] = b"\x55\xaa"
    data[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", data, 0x206, 0x20F)
    struct.pack_into("<II", data, 0x248, 16, len(payload))
    return bytes(data) + b"\0" * 16 + payload


@pytest.mark.parametrize("compress", ["gzip", "xz"])
def test_pvh_vmlinux_is_extracted_once_and_only_with_its_entry(tmp_path, compress):
    import gzip
    import lzma

    from opcost.targets.vm import image

    pack = gzip.compress if compress == "gzip" else (lambda b: lzma.compress(b, format=lzma.FORMAT_XZ))
    with_pvh = _elf_with_notes([(b"Xen", 6), (b"Xen", image.XEN_ELFNOTE_PHYS32_ENTRY)])
    k = tmp_path / "bz"
    k.write_bytes(_bzimage_with(pack(with_pvh)))
    got, why = image.pvh_vmlinux(k, "s1", tmp_path / "c")
    assert got is not None and got.read_bytes() == with_pvh and "PVH" in why and compress in why
    assert image.pvh_vmlinux(k, "s1", tmp_path / "c")[1].endswith("(remembered)")
    k.write_bytes(_bzimage_with(pack(_elf_with_notes([(b"Xen", 6), (b"GNU", 18)]))))
    got, why = image.pvh_vmlinux(k, "s2", tmp_path / "c")
    assert got is None and "no PVH entry" in why
    k.write_bytes(_bzimage_with(b"\x11\x22\x33\x44 not compressed"))
    assert image.pvh_vmlinux(k, "s3", tmp_path / "c") == (None, "its payload's compression is not known (11223344)")
    fake = fake_kernel(tmp_path / "k")   # the stand-in's kernels: protocol 0, no payload, booted as given
    assert image.pvh_vmlinux(fake, "s4", tmp_path / "c")[0] is None


@pytest.mark.parametrize("err, ext, want", [
    ("ENOENT", [], "shows no VMX or SVM"),
    ("ENOENT", ["vmx"], "modprobe kvm_intel"),
    ("ENOENT", ["svm"], "modprobe kvm_amd"),
    ("EACCES", ["vmx"], "usermod -aG kvm"),
])
def test_kvm_usable_says_why_not_and_what_to_do(monkeypatch, err, ext, want):
    import errno

    from opcost.targets.vm import host

    def refuse(path, flags):
        raise OSError(getattr(errno, err), os.strerror(getattr(errno, err)), path)

    monkeypatch.setattr(host.os, "open", refuse)
    monkeypatch.setattr(host, "virt_extensions", lambda: ext)
    assert want in host.kvm_usable()


def test_the_boot_limit_is_learned_from_this_sessions_boots(monkeypatch):
    from opcost.targets.vm.supervise import learned_limit

    monkeypatch.delenv("OPCOST_VM_BOOT_LIMIT", raising=False)
    seen = [{"accel": "tcg", "machine": "microvm", "boot_s": s} for s in (4.0, 5.0, 6.0)]
    assert learned_limit("tcg", "microvm", []) == 90.0                  # before the first boot: fixed
    assert learned_limit("tcg", "microvm", seen) == 20.0                # 4x the median
    assert learned_limit("tcg", "pc", seen) == 90.0                     # another machine type: not learned yet
    assert learned_limit("tcg", "microvm", [dict(seen[0], boot_s=1.0)]) == 15.0   # the floor
    assert learned_limit("tcg", "microvm", [dict(seen[0], boot_s=40.0)]) == 90.0                  # the ceiling
    assert learned_limit("kvm", "microvm", [dict(seen[0], accel="kvm", boot_s=0.3)]) == 5.0
    monkeypatch.setenv("OPCOST_VM_BOOT_LIMIT", "2")
    assert learned_limit("tcg", "microvm", seen) == 2.0


def test_speed_params_under_tcg_only_and_only_where_they_fit(tmp_path, monkeypatch):
    """qemu.TCG_CMDLINE and the lpj= a first boot said (Choice.lpj_for) are
    given under TCG (lpj= on microvm only), remembered per kernel, never under
    KVM, and dropped before they would cut the user's parameters (cmdline_size)."""
    from opcost.targets.vm import choice as choice_mod, supervise
    from opcost.targets.vm.qemu import TCG_CMDLINE, TCG_CMDLINE_MORE

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    k = fake_kernel(tmp_path / "k")   # protocol before 2.06: cmdline_size 255
    ch = choice_mod.Choice(vm.VmConfig(qemu=str(FAKE)), lambda *a: None)
    m = vm.Machine(k, "")
    assert supervise.speed_params(m, "tcg", "microvm", ch) == TCG_CMDLINE   # no boot said its lpj yet
    ch.lpj_found(m, "tcg", "microvm", {"lpj": "10384564"})
    ch.lpj_found(m, "tcg", "pc", {"lpj": "3322800"})   # pc calibrates its TSC each boot: not given back
    ch.lpj_found(vm.Machine(k, "lpj=5"), "tcg", "microvm", {"lpj": "5"})   # the user's own: not the kernel's
    assert supervise.speed_params(m, "tcg", "microvm", ch) == TCG_CMDLINE + " lpj=10384564"
    assert supervise.speed_params(m, "tcg", "pc", ch) == TCG_CMDLINE
    assert supervise.speed_params(m, "kvm", "microvm", ch) == ""
    again = choice_mod.Choice(vm.VmConfig(qemu=str(FAKE)), lambda *a: None)   # the next session: from the cache
    assert again.lpj_for(m, "tcg", "microvm") == "lpj=10384564" and again.lpj_for(m, "tcg", "pc") == ""
    long_user = vm.Machine(k, "x" * 100)   # 255 - 46 - 100 leaves room for lpj= only
    assert supervise.speed_params(long_user, "tcg", "pc", ch) == ""
    assert supervise.speed_params(long_user, "tcg", "microvm", ch) == "lpj=10384564"
    # a kernel of boot protocol 2.06+ saying cmdline_size 2048 (Debian's): TCG_CMDLINE_MORE too, last
    big = bytearray(fake_kernel(tmp_path / "k2048").read_bytes())
    big[0x206:0x208], big[0x238:0x23C] = (0x20F).to_bytes(2, "little"), (2048).to_bytes(4, "little")
    (tmp_path / "k2048").write_bytes(bytes(big))
    m2 = vm.Machine(tmp_path / "k2048", "")
    ch.lpj_found(m2, "tcg", "microvm", {"lpj": "10384564"})
    assert supervise.speed_params(m2, "tcg", "microvm", ch) == f"{TCG_CMDLINE} lpj=10384564 {TCG_CMDLINE_MORE}"
    assert supervise.speed_params(m2, "tcg", "pc", ch) == f"{TCG_CMDLINE} {TCG_CMDLINE_MORE}"
    assert supervise.speed_params(vm.Machine(m2.kernel, "x" * 1800), "tcg", "pc", ch) == TCG_CMDLINE   # no room left
    assert not set(TCG_CMDLINE.split("=")[1].split(",")) & set(TCG_CMDLINE_MORE.split("=")[1].split(","))
