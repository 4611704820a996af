"""Issue 35 item 2: `opcost env --check` (pyperf's `system show`), `--apply`
and `--reset` (its `system tune`/`reset`).

Made-up /sys and /proc trees (`--root`): a machine where everything is as a
measurement wants it checks ok, exit 0; each change that should warn makes
its row warn (and that row only), exit 1. KVM, QEMU and the compilers are
given by the test (envcheck.Tools). --apply and --reset write the tree only.
And on this machine: each row's status is what the machine has."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opcost import cli, envcheck

OK_TREE = {
    "proc/cmdline": "console=ttyS0 isolcpus=1 nohz_full=1",
    "proc/loadavg": "0.01 0.02 0.00 1/100 1234",
    "proc/stat": "cpu  1000 0 500 100000 10 0 5 0 0 0\ncpu0 500 0 250 50000 5 0 2 0 0 0\n",
    "proc/sys/kernel/perf_event_paranoid": "1",
    "proc/sys/kernel/randomize_va_space": "2",
    "proc/irq/default_smp_affinity": "1",
    "proc/irq/5/smp_affinity_list": "0",
    "proc/irq/9/smp_affinity_list": "0",
    "sys/devices/system/cpu/online": "0-1",
    "sys/devices/system/cpu/isolated": "1",
    "sys/devices/system/cpu/nohz_full": "1",
    "sys/devices/system/cpu/cpufreq/boost": "0",
    "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance",
    "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "performance",
    "sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0",
    "sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "1",
    "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never",
    "sys/bus/event_source/devices/cpu/type": "4",
    "sys/bus/event_source/devices/software/type": "1",
}


def tree(root: Path, changes: dict[str, str | None] | None = None) -> Path:
    files = {**OK_TREE, **(changes or {})}
    for rel, text in files.items():
        if text is None:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")
    return root


def tools(**over) -> envcheck.Tools:
    t = envcheck.Tools(kvm=lambda: None, which=lambda name: f"/usr/bin/{name}", qemu_plugins=lambda q: None)
    for k, v in over.items():
        setattr(t, k, v)
    return t


def check(monkeypatch, capsys, root: Path, t: envcheck.Tools | None = None, *extra: str) -> tuple[int, str]:
    monkeypatch.setattr(envcheck.Tools, "here", staticmethod(lambda: t or tools()))
    code = cli._main(["env", "--check", "--root", str(root), *extra])
    return code, capsys.readouterr().out


def test_an_ok_machine_exits_0(monkeypatch, capsys, tmp_path):
    code, out = check(monkeypatch, capsys, tree(tmp_path))
    assert code == 0, out
    assert "what this machine offers a measurement on cpu1" in out and "all 14 ok" in out
    code, out = check(monkeypatch, capsys, tmp_path, None, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] and {r["status"] for r in doc["rows"]} == {"ok"} and len(doc["rows"]) == 14


WARNS = [
    ("cpufreq governor", {"sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "powersave"}, {}, "cpu1: powersave"),
    ("turbo/boost", {"sys/devices/system/cpu/cpufreq/boost": "1"}, {}, "on"),
    ("SMT siblings", {"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "0-1"}, {},
     "cpu1 shares its core with cpu0"),
    ("isolated CPU", {"sys/devices/system/cpu/isolated": "", "sys/devices/system/cpu/nohz_full": ""}, {},
     "isolcpus=- nohz_full=-"),
    ("IRQ affinity", {"proc/irq/9/smp_affinity_list": "0-1"}, {}, "1 of 2 interrupts may land on cpu1"),
    ("load now", {"proc/loadavg": "3.50 2.00 1.00 3/100 1234"}, {}, "3.50 (1-min average, 2 CPUs)"),
    ("hypervisor steal", {"proc/stat": "cpu  1000 0 500 10000 10 0 5 900 0 0"}, {}, "7.2% of CPU time (since boot)"),
    ("transparent hugepages", {"sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never"}, {}, "always"),
    ("ASLR", {"proc/sys/kernel/randomize_va_space": "0"}, {}, "off"),
    ("perf_event_paranoid", {"proc/sys/kernel/perf_event_paranoid": "3"}, {}, "3"),
    ("hardware PMU", {"sys/bus/event_source/devices/cpu/type": None}, {}, "no hardware PMU"),
    ("KVM", {}, {"kvm": lambda: "/dev/kvm cannot be opened (No such file or directory)"},
     "not usable: /dev/kvm cannot be opened"),
    ("QEMU", {}, {"qemu_plugins": lambda q: "built without TCG plugin support"}, "built without TCG plugin support"),
    ("cross compilers, qemu-user", {}, {"which": lambda n: None if n.startswith("qemu-arm") else f"/usr/bin/{n}"},
     "missing qemu-user"),
]


@pytest.mark.parametrize("row, changes, over, here", WARNS, ids=[w[0] for w in WARNS])
def test_each_warn_row(monkeypatch, capsys, tmp_path, row, changes, over, here):
    code, out = check(monkeypatch, capsys, tree(tmp_path, changes), tools(**over), "--json")
    doc = json.loads(out)
    warned = [r for r in doc["rows"] if r["status"] == "warn"]
    assert code == 1 and [r["check"] for r in warned] == [row], warned
    assert here in warned[0]["here"] and warned[0]["fix"], warned[0]
    assert {r["check"] for r in doc["rows"]} == {w[0] for w in WARNS}    # one row per thing checked


def test_a_vm_without_the_knobs(monkeypatch, capsys, tmp_path):
    """No cpufreq at all (a VM): the governor and turbo rows warn with why,
    and --apply says each knob is absent rather than failing."""
    root = tree(tmp_path, {"sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": None,
                           "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": None,
                           "sys/devices/system/cpu/cpufreq/boost": None})
    code, out = check(monkeypatch, capsys, root)
    assert code == 1
    assert "cpufreq governor            warn    none: no cpufreq policy" in out
    assert "turbo/boost                 warn    not visible" in out
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert cli._main(["env", "--apply", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "cpufreq governor: absent here" in out and "turbo/boost: absent here" in out


def test_apply_then_reset_restores(monkeypatch, capsys, tmp_path):
    root = tree(tmp_path / "t", {"sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "powersave",
                                 "sys/devices/system/cpu/cpufreq/boost": "1",
                                 "sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never",
                                 "proc/sys/kernel/perf_event_paranoid": "2"})
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    before = {p: p.read_text() for p in root.rglob("*") if p.is_file()}
    assert cli._main(["env", "--apply", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "cpu1/cpufreq/scaling_governor: powersave -> performance" in out and "opcost env --reset restores the 4" in out
    monkeypatch.setattr(envcheck.Tools, "here", staticmethod(tools))
    assert cli._main(["env", "--check", "--root", str(root)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert cli._main(["env", "--apply", "--root", str(root)]) == 2      # once: the saved values are not overwritten
    assert "already applied" in capsys.readouterr().err
    assert cli._main(["env", "--reset"]) == 0
    capsys.readouterr()
    after = {p: p.read_text() for p in root.rglob("*") if p.is_file()}
    assert {p: t.split() for p, t in after.items()} == {p: t.split() for p, t in before.items()} or \
        after[root / "sys/kernel/mm/transparent_hugepage/enabled"].strip() == "always"
    assert after[root / "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"].strip() == "powersave"
    assert after[root / "proc/sys/kernel/perf_event_paranoid"].strip() == "2"
    assert cli._main(["env", "--reset"]) == 2 and "nothing to restore" in capsys.readouterr().err


def test_apply_refused_where_not_root(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli._main(["env", "--apply", "--root", str(tree(tmp_path))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["opcost: env --apply writes /sys and /proc/sys: run it as root (sudo opcost env --apply)"]


def test_this_machine_rows_match_it(run_cli):
    """`opcost env --check` here: the governor, PMU and KVM rows say what
    this machine has (read here independently), and exit 1 when a row warns."""
    cp = run_cli("env", "--check", "--json", timeout=60)
    doc = json.loads(cp.stdout)
    rows = {r["check"]: r for r in doc["rows"]}
    governors = list(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"))
    assert (rows["cpufreq governor"]["status"] == "ok") == (
        bool(governors) and all(g.read_text().strip() == "performance" for g in governors))
    pmus = os.listdir("/sys/bus/event_source/devices") if os.path.isdir("/sys/bus/event_source/devices") else []
    assert (rows["hardware PMU"]["status"] == "ok") == any(d in ("cpu", "cpu_core") or d.startswith("armv") for d in pmus)
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert rows["KVM"]["status"] == "warn"
    assert cp.returncode == (0 if all(r["status"] == "ok" for r in doc["rows"]) else 1)


def test_kvm_needs_qemu_to_start_a_guest_not_only_dev_kvm(tmp_path):
    """/dev/kvm opening is not enough (on this VM it opens and QEMU then
    aborts on the host CPU's MSRs): the row starts QEMU with -accel kvm
    -cpu host, paused, and takes it as usable when it is still running."""
    aborts = tmp_path / "qemu-aborts"
    aborts.write_text("#!/bin/sh\necho \"$(basename \"$0\"): error: failed to set MSR 0x10a to 0x69\" >&2\nexit 134\n")
    runs = tmp_path / "qemu-runs"
    runs.write_text("#!/bin/sh\nexec sleep 30\n")
    for f in (aborts, runs):
        f.chmod(0o755)
    why = envcheck._qemu_kvm_starts(str(aborts), wait=5)
    assert why is not None and why.startswith("/dev/kvm opens, but QEMU -accel kvm -cpu host exits 134: "
                                              "failed to set MSR 0x10a to 0x69"), why
    assert envcheck._qemu_kvm_starts(str(runs), wait=0.5) is None


def test_plain_env_ends_with_whether_kvm_is_usable_and_what_to_do(monkeypatch, capsys):
    """Issue 39 item 6: `opcost env` itself (not only --check) says whether KVM
    is usable here and, if not, why and what to do; --json (the environment
    stored with runs) does not carry it."""
    why = "no /dev/kvm: this CPU shows no VMX or SVM"
    monkeypatch.setattr(envcheck.Tools, "here", staticmethod(lambda: tools(kvm=lambda: why)))
    assert cli._main(["env"]) == 0
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert last.startswith("kvm:") and f"not usable: {why}. What to do: {envcheck.KVM_FIX}" in last, last
    monkeypatch.setattr(envcheck.Tools, "here", staticmethod(lambda: tools()))
    assert cli._main(["env"]) == 0
    assert capsys.readouterr().out.rstrip("\n").splitlines()[-1].split()[:2] == ["kvm:", "usable"]
    assert cli._main(["env", "--json"]) == 0
    assert "kvm" not in json.loads(capsys.readouterr().out)
