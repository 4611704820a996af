"""What a kernel run says it ran (issue 39, items 5 and 6), with the stand-in
QEMU (fake_qemu.py: its boot log's mitigation lines follow -append as a 6.1
kernel's do): each arm's kernel, cmdline, machine, accelerator and guest
CPU model in the header of the table, `show`, markdown and html; the
mitigations only one arm's kernel logged; that the timings are emulated and
a verdict was given only because of --allow-emulated, in the header; the
first line saying whether KVM is used and why not; and the messages fixed
beside them (the one-benchmark summary, the html legend, `variants -p 3`
before measuring, the schedule note). The real kernel's boot log:
test_vm_boot.py."""

from __future__ import annotations

import copy
import json
import subprocess

import pytest

from opcost import abtest, guests
from opcost.commands.variants import compared
from opcost.model import Comparison, Entry, geomean_text
from opcost.tables import _mitigations_note
from opcost.targets.vm import kvmsay
from opcost.targets.vm.withhold import withhold_emulated

from conftest import cli_argv, cli_env
from test_vm import FAKE, FAST, fake_kernel

PTI = "Kernel/User page tables isolation: enabled"


@pytest.fixture(scope="module")
def study(tmp_path_factory, probe_bin):
    """An `ab --allow-emulated` of one kernel against another booted with
    pti=on, stored as run 1; and `cli(*args)` in the same store."""
    d = tmp_path_factory.mktemp("pti")

    def cli(*args):
        return subprocess.run(cli_argv(*args), env=cli_env(d, OPCOST_QEMU=str(FAKE)), cwd=d, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)

    k1, k2 = fake_kernel(d / "k1"), fake_kernel(d / "k2")
    cp = cli("ab", "syscall.null", "--a", f"kernel={k1}", "--b", f"kernel={k2},cmdline=pti=on", *FAST, "-p", "4",
             "--json", str(d / "ab.json"), "--allow-emulated")
    assert cp.returncode == 0, cp.stderr
    return cp, json.loads((d / "ab.json").read_text()), k1, k2, cli


def test_the_header_names_each_arms_kernel_and_the_boot_logs_difference(study):
    cp, doc, k1, k2, run_cli = study
    head = cp.stdout.split("\n\n")[0].splitlines()
    assert f"A ran on: kernel fake ({k1}), cmdline '', machine microvm, TCG (emulated), CPU max" in "\n".join(head)
    assert any(ln.startswith(f"B ran on: kernel fake ({k2}), cmdline 'pti=on', machine microvm, TCG (emulated), "
                             "CPU max") for ln in head), head
    mit = [ln for ln in head if ln.startswith("kernel boot logs differ in mitigations: only B: ")]
    assert len(mit) == 1 and PTI in mit[0] and "only A" not in mit[0]
    assert ("emulated (QEMU TCG): the timings are the emulator's, not this CPU's; verdicts are given only because "
            "--allow-emulated asked for them") in head
    (e,) = doc["comparisons"]
    assert e["guests"]["a"]["cmdline"] == "" and e["guests"]["b"]["cmdline"] == "pti=on"
    assert e["guests"]["boot_mitigations_differ"]["only_b"][-1] == PTI
    assert doc["emulated"] == {"benchmarks": ["syscall.null"], "allow_emulated": True}
    # show and markdown say the same, from the stored run (html: below)
    shown = run_cli("show", "1")
    assert shown.returncode == 0 and all(ln in shown.stdout for ln in head[3:]), shown.stdout
    md = run_cli("report", "1", "--format", "markdown").stdout
    b = [ln for ln in md.splitlines() if ln.startswith("- B ran on: kernel fake (")]   # paths escaped (_)
    assert len(b) == 1 and "cmdline 'pti=on', machine microvm, TCG (emulated), CPU max" in b[0] and PTI in md


def test_without_allow_emulated_the_header_says_no_verdict(study):
    doc = withhold_emulated(copy.deepcopy(study[1]), allow=False)
    assert doc["emulated"] == {"benchmarks": ["syscall.null"], "allow_emulated": False, "withheld": 1}
    assert doc["comparisons"][0]["verdict"] is None
    cmp = Comparison.from_json(doc)
    assert guests.header_lines(cmp.comparisons, cmp.context["emulated"])[-1] == ("emulated (QEMU TCG): the timings are the emulator's, not this CPU's; "
                                            "no verdict on cost (--allow-emulated gives one)")


def test_the_first_line_says_kvm_is_not_used_and_why(study):
    cp = study[0]
    first = cp.stderr.splitlines()[0]
    assert first.startswith("opcost: vm: KVM is not used: --accel tcg asked for emulation"), cp.stderr
    assert "verdicts are given on them only because of --allow-emulated" in first


@pytest.mark.parametrize("accel, why, want", [
    ("kvm", "a trial boot under KVM reached the init", "vm: KVM is used (a trial boot under KVM reached the init)"),
    ("kvm", "asked (--accel)", "vm: KVM is used (--accel kvm)"),
    ("tcg", "no permission to open /dev/kvm: add this user to its group (sudo usermod -aG kvm $USER, then log in "
            "again)", "vm: KVM is not used: no permission to open /dev/kvm: add this user to its group"),
    ("tcg", "a trial boot under KVM failed (QEMU did not start: error: failed to set MSR 0x10a) (remembered)",
     "failed (QEMU did not start: error: failed to set MSR 0x10a); remembered from an earlier run of this kernel on "
     "this host: delete "),
    ("tcg", "a trial boot under KVM failed (timeout)", "failed (timeout); remembered for the next runs"),
])
def test_the_kvm_line_for_each_answer(accel, why, want):
    line = kvmsay.accel_line({("k", ""): {"kernel": "k", "accel": accel, "accel_why": why}}, False)
    assert want in line
    assert ("so no verdict on cost (--allow-emulated gives one)" in line) == (accel == "tcg")
    assert kvmsay.accel_line({}, False) is None


def test_a_run_from_before_says_its_boot_logs_were_not_read():
    g = {"kernel": "/k", "release": "6.1", "cmdline": "", "machine": "pc", "accel": "tcg", "cpu_model": "max",
         "cpu_brand": None, "boot_mitigations": None}
    entries = [Entry({"key": "x", "guests": {"a": g, "b": dict(g, cmdline="pti=on")}})]
    lines = guests.header_lines(entries, None)
    assert lines == ["A ran on: kernel 6.1 (/k), cmdline '', machine pc, TCG (emulated), CPU max",
                     "B ran on: kernel 6.1 (/k), cmdline 'pti=on', machine pc, TCG (emulated), CPU max",
                     "kernel boot logs: not read (a run from before opcost read them)"]
    assert guests.header_lines([Entry({"key": "x"})], None) == []   # not a guest: nothing said


def test_one_benchmark_has_one_b_over_a_and_several_are_labelled():
    s = {"geomean_ratio": 26.30, "n": 1, "counts": {"slower": 1, "same": 0}}
    assert geomean_text(s, [{"estimate": 24.23}]) == "1 benchmark (slower 1); its B/A is the table's"
    s2 = dict(s, n=2, counts={"slower": 2})
    assert geomean_text(s2, [{"estimate": 24.23}, {"estimate": 2.0}]) == (
        "geometric mean of the ratios of medians B/A: 26.3000 over 2 benchmarks (slower 2)")
    assert geomean_text(s2, [{"ratio": 2.0}]).startswith("geometric mean of B/A: ")   # before estimates


def test_html_legend_names_only_the_test_used(study):
    html = study[4]("report", "1", "--format", "html").stdout
    assert "B ran on: kernel fake" in html and "verdicts are given only because --allow-emulated" in html   # header
    assert "p: permutation min-p" in html or "p: Mann-Whitney" in html
    assert not ("Mann-Whitney" in html and "min-p" in html), "two tests described for one p"


def test_the_schedule_note_says_the_processes_once():
    c = {"delta": 0.02, "ratio": 1.005, "estimate": 1.005, "change": 0.005, "n_a": 10, "n_b": 10,
         "ci95_estimate": [0.90, 1.12]}
    a = abtest.advice(c)
    assert a["schedule"] is None and str(a["processes_needed"]) not in a["schedule_note"]
    assert a["schedule_note"].startswith("beyond the declared schedule")


def test_variants_says_before_measuring_that_p3_cannot_show_a_difference(run_cli, src):
    # the builds fail their check run: nothing is measured, yet the warning was said first
    prog = src("int main(void) { return 3; }\n")
    cp = run_cli("variants", str(prog), "-D", "A", "-D", "B", "-p", "3", "--fake-clock", "1e6", "-n", "2", "-w", "0",
                 "--no-store")
    err = cp.stderr.splitlines()
    assert cp.returncode != 0, cp.stdout
    assert err[0].startswith("opcost: -p 3: the smallest p 3 processes per arm can give is 0.1"), err
    assert len(err) >= 2 and "-p 4 or more can show one" in err[0]


def test_sysfs_the_same_but_boot_logs_differing_is_said_beside_the_row():
    same = {"meltdown": "Not affected"}
    e = {"mitigations": {"a": same, "b": same, "differ": []},
         "guests": {"boot_mitigations_differ": {"only_a": [], "only_b": [PTI]}}}
    assert _mitigations_note(e) == ("guest mitigations (/sys/devices/system/cpu/vulnerabilities): the same in A and "
                                    "B, but the kernels' boot logs differ (see above)")
    e["guests"]["boot_mitigations_differ"]["only_b"] = []
    assert _mitigations_note(e).endswith("the same in A and B")


def test_variants_counts_its_comparisons_as_its_document_makes_them():
    class V:   # what compared() reads of a spec.Variant
        def __init__(self, define, machine=(), cpu="0", reference=False):
            self.params = {"define": define, **({"reference": "empty opcost_op"} if reference else {})}
            self.machine, self.cpu = machine, cpu

        def all_params(self):
            return {**self.params, "cpu": self.cpu}

    k1, k2 = (("kernel", "k1"),), (("kernel", "k2"),)
    assert compared([V("-DA")]) == 0                                    # one build: nothing compared, nothing said
    assert compared([V("-DA"), V("-DB"), V("", reference=True)]) == 1
    assert compared([V("-DA", k1), V("-DB", k1), V("-DA", k2), V("-DB", k2)]) == 2   # within each machine
    assert compared([V("-DA", k1), V("-DA", k2)]) == 1                  # one -D: kernel against kernel


def test_typed_entries_are_read_alike():
    g = {"kernel": "/k", "release": "6.1", "cmdline": "", "machine": "pc", "accel": "tcg", "cpu_model": "max",
         "boot_mitigations": []}
    e = Entry({"key": "x", "estimate": 2.0, "guests": {"a": g, "b": g, "boot_mitigations_differ": {}}})
    assert guests.header_lines([e], None)[0].startswith("A ran on: kernel 6.1 (/k)")
    assert guests.header_lines([e], None)[-1] == "kernel boot logs: the same mitigations in A and B"
    s = {"geomean_ratio": 2.0, "n": 2, "counts": {}}
    assert geomean_text(s, [e, e]).startswith("geometric mean of the ratios of medians")
    assert geomean_text(s, [{"estimate": 2.0}]).startswith("geometric mean of the ratios of medians")
