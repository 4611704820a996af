"""How many CPUs a guest gets without --vm-cpus (targets/vm/vcpus.py): one
when every process of the run (both arms of an `ab`) runs on one CPU, two
when one needs a second (a helper on another CPU, --parallel, a benchmark
that spreads its tasks); an explicit --vm-cpus or cpus= always wins; a
one-CPU x86_64 guest keeps its SMP code (`noreplace-smp`). With the stand-in
QEMU (fake_qemu.py), which records every argv; the counts that show the
guest's code unchanged are in docs/kernels.md (a real boot's job)."""

from __future__ import annotations

import json
import os

import pytest

from opcost import probe
from opcost.errors import UsageError
from opcost.targets import vm
from opcost.targets.vm.vcpus import cpus_needed, smp_cmdline

from test_vm import FAKE, fake_kernel, one_error_line

QUICK = ["--fake-clock", "10", "-n", "2", "-w", "0", "--target-ms", "1", "-p", "1", "--accel", "tcg", "--no-progress"]


def req(bench: str, cpus: str | None = "0", **params: str) -> probe.ProbeRequest:
    return probe.ProbeRequest(bench=bench, params=params, arch="x86_64", cpus=cpus)


def test_which_runs_need_a_second_cpu():
    assert cpus_needed([req("syscall.null"), req("ctx.pipe", placement="same"), req("thread.create")])[0] == 1
    assert cpus_needed([req("msg.hackbench", workers_on="pinned")])[0] == 1
    for reqs, why in (([req("syscall.null"), req("ctx.pipe", placement="core")], "placement=core"),
                      ([req("ctx.pipe", "0,1", placement="core")], "guest CPU(s) 0,1"),
                      ([req("syscall.null", "1")], "guest CPU(s) 1"),
                      ([req("msg.hackbench", workers_on="all")], "spreads"),
                      ([req("msg.hackbench")], "spreads")):   # its default is workers_on=all
        n, said = cpus_needed(reqs)
        assert n == 2 and why in said, (reqs, said)
    assert smp_cmdline(1, "x86_64") == "noreplace-smp"
    assert smp_cmdline(2, "x86_64") == smp_cmdline(1, "aarch64") == ""   # arm64 does not patch its atomics


def boots(path) -> list[list[str]]:
    """Every argv the stand-in QEMU was started with (the preflight's first)."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def smp_and_append(argv: list[str]) -> tuple[str, str]:
    return argv[argv.index("-smp") + 1], argv[argv.index("-append") + 1]


@pytest.mark.parametrize("args, cpus", [
    (["syscall.null", "ctx.pipe"], 1),                        # both on guest CPU 0
    (["syscall.null", "ctx.pipe:placement=core"], 2),         # one helper on another CPU: every boot has two
    (["syscall.null", "--vm-cpus", "2"], 2),                  # given: wins
])
def test_run_boots_what_its_benchmarks_need(run_cli, tmp_path, args, cpus):
    k = fake_kernel(tmp_path / "k")
    log, out = tmp_path / "argv.jsonl", tmp_path / "r.json"
    cp = run_cli("run", *args, "--kernel", str(k), *QUICK, "--json", str(out),
                 env={"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_ARGV": str(log)})
    assert cp.returncode == 0, cp.stderr
    argvs = boots(log)
    assert len(argvs) >= 2   # the preflight and the measuring boots: all alike
    for a in argvs:
        smp, append = smp_and_append(a)
        assert smp == f"{cpus},sockets=1,cores={cpus},threads=1"
        assert ("noreplace-smp" in append.split()) == (cpus == 1)
    doc = json.loads(out.read_text())
    assert doc["env"]["vm"]["value"]["cpus"] == cpus
    for r in doc["results"]:
        for p in r["processes"]:
            assert p["header"]["vm"]["cpus"] == cpus
            assert ("given" in p["header"]["vm"]["cpus_why"]) == ("--vm-cpus" in args)
    if "--vm-cpus" not in args:   # the measuring side on CPU 0, the one always there
        assert [r["params"]["cpu"] for r in doc["results"]] == ["0", "0"]
    said = f"{cpus} vCPU{'s' if cpus > 1 else ''}"
    assert said in cp.stdout.split("\n\n")[0], cp.stdout   # the header says it


def test_ab_gives_both_arms_the_cpus_either_needs(run_cli, tmp_path):
    """Arm A alone would need one CPU, arm B two: both arms boot two."""
    k = fake_kernel(tmp_path / "k")
    log = tmp_path / "argv.jsonl"
    cp = run_cli("ab", "ctx.pipe", "--a", "placement=same", "--b", "placement=core", "--kernel", str(k),
                 *QUICK[:-3], "-p", "2", "--accel", "tcg", "--no-progress",
                 env={"OPCOST_QEMU": str(FAKE), "FAKE_QEMU_ARGV": str(log)})
    assert cp.returncode == 0, cp.stderr
    assert {smp_and_append(a)[0] for a in boots(log)} == {"2,sockets=1,cores=2,threads=1"}
    assert "A ran on: " in cp.stdout and "2 vCPUs" in cp.stdout


def test_vm_spec_cpus(tmp_path):
    k = fake_kernel(tmp_path / "k")
    t = vm.open_vm_spec(f"vm:{k}?accel=tcg")
    assert t.cfg.cpus_auto and t.allowed_cpus() == [0, 1] and t.default_cpu() == 0   # not settled yet
    t.fit_cpus([req("syscall.null")])
    assert t.cfg.cpus == 1 and t.allowed_cpus() == [0] and "one CPU" in t.cfg.cpus_why
    t.fit_cpus([req("ctx.pipe", placement="core")])   # once: the run's first decision holds
    assert t.cfg.cpus == 1
    given = vm.open_vm_spec(f"vm:{k}?cpus=2&accel=tcg")
    given.fit_cpus([req("syscall.null")])
    assert given.cfg.cpus == 2 and given.default_cpu() == 1 and not given.cfg.cpus_auto
    with pytest.raises(UsageError, match=r"cpus=0: a guest has at least one CPU"):
        vm.open_vm_spec(f"vm:{k}?cpus=0&accel=tcg")


def test_a_run_that_needs_two_cpus_on_one_host_cpu_says_why(run_cli, tmp_path):
    """Under TCG each vCPU is a host thread: a run whose helper needs a second
    guest CPU, where opcost may use one host CPU, is refused before any boot,
    naming the benchmark that needs it."""
    k = fake_kernel(tmp_path / "k")
    one = min(os.sched_getaffinity(0))
    cp = run_cli("run", "ctx.pipe:placement=core", "--kernel", str(k), *QUICK,
                 env={"OPCOST_QEMU": str(FAKE)}, preexec_fn=lambda: os.sched_setaffinity(0, {one}))
    line = one_error_line(cp)
    assert "ctx.pipe placement=core puts its helper on another CPU, so its guests need 2 CPUs" in line, line
    assert "opcost may use 1 host CPU(s) here" in line and "--vm-cpus 1 or fewer" in line, line


def test_compare_refuses_guests_of_different_cpu_counts(run_cli, tmp_path):
    """The kernel sizes its per-CPU caches by its CPUs (mem.pagefault differs
    by up to 6% between 1 and 2 vCPUs, docs/kernels.md): runs whose guests had
    different counts are different machines to `compare`, as different CPU
    models are; a run stored before `guest_cpus` is read from its env.vm."""
    k = fake_kernel(tmp_path / "k")
    env = {"OPCOST_QEMU": str(FAKE)}
    for more in ([], ["--vm-cpus", "2"], ["--vm-cpus", "1"]):
        cp = run_cli("run", "syscall.null", "--kernel", str(k), *QUICK, *more, env=env)
        assert cp.returncode == 0, cp.stderr
    line = one_error_line(run_cli("compare", "1", "2", env=env))
    assert "different machines" in line and "guest_cpus: 1 vs 2" in line, line
    same = run_cli("compare", "1", "3", env=env)   # auto's one CPU and --vm-cpus 1: the same machine
    assert same.returncode == 0, same.stderr


def test_a_run_stored_before_guest_cpus_is_read_from_its_vm_record():
    from opcost.model import machine_differences
    old, new = {"vm": {"value": {"cpus": 2}}}, {"guest_cpus": {"value": 1}, "vm": {"value": {"cpus": 1}}}
    assert machine_differences(old, new) == [("guest_cpus", 2, 1)]
    assert machine_differences({"vm": {"value": {"cpus": 1}}}, new) == []
    assert machine_differences({}, {}) == []   # neither a guest
