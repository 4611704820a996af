"""Exact kernel counts in a guest under TCG (issue 34): Debian's 6.1.0-50
cloud kernel, booted with opcost's counting plugin in qemu-system-x86_64
(-accel tcg,thread=single, one window over all vCPUs). Counts are the
guest's executed instructions, exact: with 1 ms batches most windows hold
no timer interrupt, so each process's smallest batch (its figure for a
count) is exact and the same in every boot; nothing here depends on this
CPU's timing.

Few boots (each 4-8 s of TCG here): the preflight boot of each arm and two
rounds. Skipped without QEMU or the kernels unless OPCOST_REQUIRE_VM=1."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT

# the kernels, or skip (fail under OPCOST_REQUIRE_VM=1); its name puts these tests in the
# qemu-boots xdist group (conftest.py)
from test_vm_boot import kernel_pair  # noqa: E402,F401


def test_pti_adds_kernel_instructions_and_two_cr3_writes_per_syscall(run_cli, tmp_path, kernel_pair):
    """PTI A/B on counts: B-A on instructions:k positive and exact (each
    process's smallest batch), CR3 writes 0 in A and 2 in B, user
    instructions the same, the verdict not withheld under TCG (it rests on
    counts), and the per-function difference names the entry/exit path."""
    k = kernel_pair[0]
    out = tmp_path / "ab.json"
    cp = run_cli("ab", "syscall.null", "--kernel", str(k), "--accel", "tcg", "--a", "cmdline=", "--b", "cmdline=pti=on",
                 "--counters", "instructions:k,cr3-writes:k,instructions:u", "--verdict-on", "instructions:k",
                 "-p", "2", "--samples", "11", "--warmup", "1", "--target-ms", "1", "--json", str(out), timeout=900)
    assert cp.returncode == 0, cp.stderr
    (e,) = json.loads(out.read_text())["comparisons"]
    on = e["decided_on"]
    assert on["source"] == "emulator" and "withheld" not in e
    # exact: the median window of every process holds no timer interrupt
    assert on["a"] == round(on["a"]) and on["b"] == round(on["b"]), on
    assert 5 <= on["difference"] <= 30, on
    # each arm's guest said which mitigations it runs; -cpu max reports the same in both
    assert {"meltdown", "spectre_v2"} <= set(e["mitigations"]["a"]) and e["mitigations"]["differ"] == []
    assert "guest mitigations (/sys/devices/system/cpu/vulnerabilities): the same in A and B" in cp.stdout
    c = e["counters"]
    assert c["cr3-writes:k"]["a"] == 0 and c["cr3-writes:k"]["b"] == 2, c["cr3-writes:k"]
    # user code: the same loop in both arms, the window's fixed part taken off
    assert abs(c["instructions:u"]["difference"]) < 0.01, c["instructions:u"]
    fn = run_cli("show", str(json.loads(out.read_text())["a"]["run_id"]), "--functions", "5", timeout=120)
    assert fn.returncode == 0, fn.stderr
    changed = [ln.split()[0] for ln in fn.stdout.splitlines()[2:] if abs(float(ln.split()[3])) > 0.5]
    assert changed and set(changed) <= {"entry_SYSCALL_64", "entry_SYSCALL_64_after_hwframe",
                                        "entry_SYSCALL_64_safe_stack", "syscall_return_via_sysret",
                                        "entry_SYSRETQ_unsafe_stack", "entry_SYSRETQ_end"}, fn.stdout


def test_spin_adds_an_exact_linear_count_in_a_guest(run_cli, tmp_path, kernel_pair):
    """The must-hold inside a guest: spin=11 against spin=1 adds 10 steps of
    the probe's chain, 3 user instructions each (add, dec, jnz: the same
    figure qemu-user gives, test_counts.py), within 0.01 instructions/op,
    though the window now holds every vCPU and the kernel's entry and exit.
    Two processes per arm (one boot each, 1 ms batches): enough for the
    difference, which is exact; the p-value at that size cannot decide, so
    the verdict is not asserted."""
    out = tmp_path / "ab.json"
    cp = run_cli("ab", "syscall.null", "--kernel", str(kernel_pair[0]), "--accel", "tcg", "--a", "spin=1",
                 "--b", "spin=11", "--counters", "instructions:u", "--verdict-on", "instructions:u",
                 "-p", "2", "--samples", "11", "--warmup", "1", "--target-ms", "1", "--json", str(out), timeout=600)
    assert cp.returncode == 0, cp.stderr
    (e,) = json.loads(out.read_text())["comparisons"]
    on = e["decided_on"]
    assert on["counter"] == "instructions:u" and on["source"] == "emulator" and "withheld" not in e, e
    assert abs(on["difference"] - 30.0) < 0.01, on
    assert all(abs(x - 30.0) < 0.01 for x in on["ci95_difference"]), on
    assert "B-A +30.000 instructions/op" in cp.stdout, cp.stdout


def test_git_bisect_run_on_counts_names_the_commit_that_turns_pti_on(tmp_path, kernel_pair):
    """The must-hold's bisect under TCG: a 12-commit repository whose file
    holds B's kernel command line, `pti=on` from commit 8 (the known-good
    A is the same kernel with none); every step of `git bisect run` runs
    `ab ... --counters instructions:k --verdict-on instructions:k --bisect`
    on real boots. Exact counts settle each step at its only look (4
    processes per arm, the fewest whose p can fall under 0.05), so bisect
    names commit 8 and no step is skipped (125 never returned). 41 batches
    of 1 ms per process: under load TCG runs slower and a timer tick falls
    in most windows; with 11, a process had none clean often enough that a
    step (PTI's +8 of 321, 2.5% against delta 2%) came out inconclusive,
    125. 3-4 steps of
    a preflight and 8 boots each: 276 s at load 10 on the 2-core VM, over
    the ~120 s a test should take; it runs in the qemu-boots xdist group
    (one worker, one boot at a time), skipped without the kernels."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    commits = []
    for n in range(1, 13):
        (repo / "cmdline").write_text("pti=on\n" if n >= 8 else "\n")
        (repo / "log").write_text(f"commit {n}\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"commit {n}")
        commits.append(git("rev-parse", "HEAD").strip())
    codes = tmp_path / "codes"
    script = tmp_path / "step.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'{sys.executable} -m opcost ab syscall.null --kernel {kernel_pair[0]} --accel tcg --a cmdline= '
        '--b "cmdline=$(cat cmdline)" --counters instructions:k --verdict-on instructions:k '
        "-p 4 --samples 41 --warmup 1 --target-ms 1 --no-store --no-progress --bisect\n"
        f'rc=$?; echo "$(cat log) $rc" >> {codes}; exit $rc\n')
    script.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "XDG_DATA_HOME": str(tmp_path / "data")}
    git("bisect", "start", commits[-1], commits[0])
    cp = subprocess.run(["git", "-C", str(repo), "bisect", "run", str(script)], capture_output=True, text=True,
                        env=env, timeout=1200)
    steps = codes.read_text().splitlines()
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert f"{commits[7]} is the first bad commit" in cp.stdout, (steps, cp.stdout)
    assert steps and all(s.split()[-1] in ("0", "1") for s in steps), steps
    # each step's code is the commit's truth: good before commit 8, bad from it
    assert all((int(s.split()[1]) >= 8) == (s.split()[-1] == "1") for s in steps), steps


def test_one_vcpu_keeps_the_smp_kernels_atomics(run_cli, tmp_path, kernel_pair):
    """Without --vm-cpus, signal.catch boots one vCPU (it needs no other),
    with noreplace-smp: the kernel keeps its SMP `lock` prefixes, which a
    kernel booted on one CPU would patch into `ds` (instructions:k stays the
    same either way; the `locked` class sees it). Measured (docs/kernels.md):
    17 locked kernel instructions per signal with 2 vCPUs and with 1 vCPU and
    noreplace-smp, 0 with 1 vCPU without it."""
    out = tmp_path / "r.json"
    cp = run_cli("run", "signal.catch", "--kernel", str(kernel_pair[0]), "--accel", "tcg",
                 "--counters", "instructions:k,locked:k", "-p", "1", "--samples", "11", "--warmup", "1",
                 "--target-ms", "1", "--json", str(out), timeout=600)
    assert cp.returncode == 0, cp.stderr
    (p,) = json.loads(out.read_text())["results"][0]["processes"]
    vm = p["header"]["vm"]
    argv = vm["qemu_argv"]
    assert vm["cpus"] == 1 and argv[argv.index("-smp") + 1].startswith("1,"), vm["cpus_why"]
    assert "noreplace-smp" in argv[argv.index("-append") + 1].split()
    # one round: its boot is the machine's only one, so no snapshot is saved for a restore
    assert vm["restore"] == {"way": "fresh", "why": "one round: no later boot to restore"}, vm["restore"]
    locked = min(s["counters"]["locked:k"] for s in p["samples"])
    assert locked == round(locked) and locked >= 5, locked   # the UP-patched kernel: 0
    assert "1 vCPU" in cp.stdout


def test_a_restored_guest_counts_exactly_what_a_fresh_boot_counts(run_cli, tmp_path, kernel_pair):
    """--vm-restore (issue 39): a counting run's first round boots the guest,
    which waits for its job while QEMU saves it; the next rounds are restored
    from that snapshot and sent their jobs on the data port. The restored
    guests' smallest batch of kernel and user instructions per call is exactly
    that of a run whose every round boots fresh (--vm-restore off), and no
    process counts less; the restores are recorded and noted, and the
    snapshots' directory is gone after the run. Asserted on counts and
    records, never on time. A timer interrupt only adds to a window: the
    test fails falsely only if all 30 batches of one side (15 a process, 2
    processes) hold one (seen under load 10: about half of them do; 0.5^30)."""
    k = kernel_pair[0]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    common = ["syscall.null", "--kernel", str(k), "--accel", "tcg", "--vm-cpus", "1", "--vm-mem", "256",
              "--counters", "instructions:k,instructions:u", "--samples", "15", "--warmup", "1", "--target-ms", "1"]
    runs = {}
    for mode, procs in (("auto", "3"), ("off", "2")):
        out = tmp_path / f"{mode}.json"
        cp = run_cli("run", *common, "-p", procs, "--vm-restore", mode, "--json", str(out), timeout=600,
                     env={"TMPDIR": str(tmp)})
        assert cp.returncode == 0, cp.stderr
        doc = json.loads(out.read_text())
        (r,) = doc["results"]
        runs[mode] = (r, cp.stdout, doc["run_id"])
    ways = [p["header"]["vm"]["restore"] for p in runs["auto"][0]["processes"]]
    assert ways[0]["way"] == "fresh" and ways[0]["snapshot_mib"] > 1, ways
    assert [w["way"] for w in ways[1:]] == ["restored", "restored"], ways
    assert [p["header"]["vm"]["restore"] for p in runs["off"][0]["processes"]] == [
        {"way": "fresh", "why": "--vm-restore off"}] * 2
    assert "boot restored: 2 of 3 process(es) ran in a guest restored" in runs["auto"][1]
    shown = run_cli("show", str(runs["auto"][2]), timeout=120)   # stored: show says it as the run did
    assert shown.returncode == 0 and "boot restored: 2 of 3 process(es)" in shown.stdout, shown.stderr
    for event in ("instructions:k", "instructions:u"):
        def smallest(procs):
            return min(b["counters"][event] for p in procs for b in p["samples"])

        fresh = smallest(runs["off"][0]["processes"])
        assert fresh == round(fresh) > 0, (event, fresh)   # exact
        assert smallest(runs["auto"][0]["processes"][1:]) == fresh, event   # the restored guests'
        assert smallest(runs["auto"][0]["processes"][:1]) >= fresh, event
    assert not list(tmp.glob("opcost-vmsnap-*")), list(tmp.iterdir())   # the snapshots removed
