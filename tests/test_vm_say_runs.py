"""What a plain kernel run and a comparison of stored kernel runs say they
ran (issue 39, items 3 and 5, what `ab` already said): `run --kernel K`,
its `show`, markdown and html name the guest (kernel release and path,
cmdline, machine, accelerator, CPU model) and say the timings are
emulated; `compare` of stored TCG runs names what each side ran on and
gives no verdict on emulated timings unless --allow-emulated, as `ab`.
With the stand-in QEMU (fake_qemu.py: its boot log's mitigation lines
follow -append as a 6.1 kernel's do); the real kernels: test_vm_boot.py."""

from __future__ import annotations

import json
import subprocess

import pytest

from opcost import docschema, guests
from opcost.model import Entry, Series

from conftest import cli_argv, cli_env
from test_vm import FAKE, FAST, fake_kernel

PTI = "Kernel/User page tables isolation: enabled"
EMULATED = "emulated (QEMU TCG): the timings are the emulator's, not this CPU's"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, probe_bin):
    """Four stored `run syscall.null --kernel K` of one kernel: runs 1 and 3
    with no parameters, 2 and 4 with pti=on; (the first run's output, K,
    cli(*args) in the same store)."""
    d = tmp_path_factory.mktemp("runs")

    def cli(*args):
        return subprocess.run(cli_argv(*args), env=cli_env(d, OPCOST_QEMU=str(FAKE)), cwd=d, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)

    k = fake_kernel(d / "k")
    first = None
    for i, cmdline in enumerate(("", "pti=on", "", "pti=on"), 1):
        cp = cli("run", "syscall.null", "--kernel", k, *FAST, "-p", "3", "--label", f"r{i}",
                 *(["--kernel-cmdline", cmdline] if cmdline else []))
        assert cp.returncode == 0, cp.stderr
        first = first or cp
    return first, k, cli


def ran_on(k, cmdline: str) -> str:
    return f"ran on: kernel fake ({k}), cmdline {cmdline!r}, machine microvm, TCG (emulated), CPU max"


def test_run_says_what_it_ran_on_and_that_it_was_emulated(runs):
    cp, k, cli = runs
    head = cp.stdout.split("\n\n")[0].splitlines()
    assert len(head) == 2 and head[0].startswith(ran_on(k, "")) and head[1] == EMULATED, cp.stdout
    shown = cli("show", "r2").stdout.split("\n\n")[0].splitlines()   # show: under its run line, from the store
    assert shown[0].startswith("run 2 (r2)") and shown[1].startswith(ran_on(k, "pti=on")) and shown[2] == EMULATED
    local = cli("run", "syscall.null", *FAST[:-4], "-p", "2", "--no-store")   # not a guest: nothing said
    assert local.returncode == 0 and "ran on:" not in local.stdout and "emulated" not in local.stdout


def test_run_markdown_says_what_it_ran_on(runs):
    _, k, cli = runs
    md = cli("report", "r2", "--format", "markdown").stdout.splitlines()
    said = [ln for ln in md if ln.startswith("- ")][:2]
    assert "ran on: kernel fake (" in said[0] and "cmdline 'pti=on', machine microvm, TCG (emulated)" in said[0]
    assert said[1] == "- " + EMULATED.replace("_", "\\_")


def test_csv_says_what_each_row_ran_on(runs):
    """CSV has no header lines: each row names its guest (`ran_on`; a
    comparison's `ran_on_a` and `ran_on_b`), empty outside a vm."""
    import csv
    import io

    _, k, cli = runs
    (row,) = csv.DictReader(io.StringIO(cli("report", "r2", "-f", "csv").stdout))
    assert row["ran_on"].startswith(ran_on(k, "pti=on").removeprefix("ran on: ")), row
    assert "emulated" in row["flags"]
    (row,) = csv.DictReader(io.StringIO(cli("report", "--compare", "r1", "r2,r4", "-f", "csv").stdout))
    assert row["ran_on_a"].startswith(ran_on(k, "").removeprefix("ran on: ")), row
    assert row["ran_on_b"].startswith(ran_on(k, "pti=on").removeprefix("ran on: ")) and ";" not in row["ran_on_b"]
    local = cli("run", "syscall.null", *FAST[:-4], "-p", "2", "--no-store", "--export", "csv:-")
    assert [r["ran_on"] for r in csv.DictReader(io.StringIO(local.stdout.split("\n\n")[0]))] == [""], local.stdout


def test_run_html_says_what_it_ran_on(runs):
    _, k, cli = runs
    html = cli("report", "r1", "--format", "html").stdout
    note = html[html.index("<p class=note>ran on: "):]
    note = note[:note.index("</p>")]
    assert f"kernel fake ({k}), cmdline &#x27;&#x27;, machine microvm, TCG (emulated), CPU max" in note, note
    assert "<br>emulated (QEMU TCG): the timings are the emulator&#x27;s, not this CPU&#x27;s" in note
    assert html.index("<p class=note>ran on: ") < html.index("<h2>Summary</h2>")   # in the header


def test_compare_of_one_run_a_side_names_each_side_and_says_emulated(runs):
    _, k, cli = runs
    cp = cli("compare", "r1", "r2", "--json", "cmp.json")
    head = cp.stdout.split("\n\n")[0].splitlines()
    assert any(ln.startswith("A " + ran_on(k, "")) for ln in head), head
    assert any(ln.startswith("B " + ran_on(k, "pti=on")) for ln in head), head
    mit = [ln for ln in head if ln.startswith("kernel boot logs differ in mitigations: only B: ")]
    assert len(mit) == 1 and PTI in mit[0]
    # one run a side gives no verdict anyway: the header does not promise one with --allow-emulated
    assert head[-1] == EMULATED + "; no verdict is given on them"
    doc = json.loads((runs[1].parent / "cmp.json").read_text())
    assert doc["emulated"] == {"benchmarks": ["syscall.null"], "allow_emulated": False, "withheld": 0}
    doc["emulated"]["allow_emulated"] = True   # what --allow-emulated makes of it: no verdict given all the same
    assert guests.emulated_line(doc["emulated"], 1, [Entry(e) for e in doc["comparisons"]]) == (
        EMULATED + "; --allow-emulated allows verdicts on them, but none is given here (each row says why)")


def test_compare_of_several_runs_a_side_withholds_the_verdict_as_ab_does(runs, tmp_path):
    _, k, cli = runs
    cp = cli("compare", "r1,r3", "r2,r4", "--json", str(tmp_path / "w.json"))
    assert cp.returncode == 0, cp.stderr
    doc = json.loads((tmp_path / "w.json").read_text())
    assert docschema.problem(doc, doc["schema"]) is None
    (e,) = doc["comparisons"]
    assert e["verdict"] is None and e["withheld"].startswith("emulated (QEMU TCG)")
    assert doc["emulated"] == {"benchmarks": ["syscall.null"], "allow_emulated": False, "withheld": 1}
    assert e["guests"]["a"]["cmdline"] == "" and [g["cmdline"] for g in e["guests"]["b_runs"]] == ["pti=on"]
    assert PTI in e["guests"]["boot_mitigations_differ"]["only_b"]
    head = cp.stdout.split("\n\n")[0].splitlines()
    assert head[-1] == EMULATED + "; no verdict on cost (--allow-emulated gives one)", head
    assert sum(ln.startswith("A ran on: ") for ln in head) == 1   # two runs of one guest: said once
    allowed = cli("compare", "r1,r3", "r2,r4", "--allow-emulated", "--json", str(tmp_path / "a.json"))
    doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["comparisons"][0]["verdict"] is not None and doc["emulated"]["allow_emulated"] is True
    assert allowed.stdout.split("\n\n")[0].splitlines()[-1] == (
        EMULATED + "; verdicts are given only because --allow-emulated asked for them")
    md = cli("report", "--compare", "r1,r3", "r2,r4", "--allow-emulated", "-f", "markdown").stdout
    assert "- B ran on: kernel fake (" in md and "verdicts are given only because" in md


def test_a_side_of_runs_on_different_guests_names_each():
    g = {"kernel": "/k", "release": "6.1", "cmdline": "", "machine": "pc", "accel": "tcg", "cpu_model": "max",
         "cpu_brand": None, "boot_mitigations": ["a"], "vcpus": 1}
    res = [{"processes": [{"header": {"vm": {"kernel": "/k", "cmdline": c, "machine": "pc", "accel": "tcg",
                                             "qemu_argv": ["-cpu", "max", "-smp", f"{n},sockets=1,cores={n},threads=1"],
                                             "guest": {"release": "6.1", "boot_mitigations": m}}}}]}
           for c, m, n in (("", ["a"], 1), ("quiet", ["a", "x"], 2), ("", ["a"], 1))]
    got = guests.guests_of_sides(res[:2], res[2:])
    assert got is not None and got["a"] == g and got["a_runs"][0]["cmdline"] == "quiet" and "b_runs" not in got
    assert got["boot_mitigations_differ"] == {"only_a": ["x"], "only_b": []}
    lines = guests.header_lines([Entry({"key": "x", "guests": got})], None)
    assert lines[:3] == ["A ran on: kernel 6.1 (/k), cmdline '', machine pc, TCG (emulated), CPU max, 1 vCPU",
                         "A ran on: kernel 6.1 (/k), cmdline 'quiet', machine pc, TCG (emulated), CPU max, 2 vCPUs",
                         "B ran on: kernel 6.1 (/k), cmdline '', machine pc, TCG (emulated), CPU max, 1 vCPU"]
    assert guests.guests_of_sides(res[:1], [{"processes": []}]) is None   # a side not in a guest: nothing said
    assert guests.result_lines([{"key": "x", "processes": []}]) == []
    # a run whose variants ran on two guests (cmdline=|quiet): one line each, with its variants
    two = guests.result_lines([dict(r, key=k) for r, k in zip(res[:2], ("x:cmdline=", "x:cmdline=quiet"))])
    assert two == ["x:cmdline= ran on: kernel 6.1 (/k), cmdline '', machine pc, TCG (emulated), CPU max, 1 vCPU",
                   "x:cmdline=quiet ran on: kernel 6.1 (/k), cmdline 'quiet', machine pc, TCG (emulated), CPU max, "
                   "2 vCPUs",
                   "emulated (QEMU TCG): the timings are the emulator's, not this CPU's"]


SERIES_WITHHELD = EMULATED + "; no change point on cost (--allow-emulated gives them)"


def test_measured_series_says_what_it_ran_on(runs, tmp_path):
    """`series --run` of a kernel: its table's header names the guest and
    says the timings are emulated, as a plain run's does; so do show, the
    text, markdown and html reports of the stored run (one function,
    guests.series_lines, from the series document's labels[].guests)."""
    _, k, cli = runs
    cp = cli("series", "--run", "syscall.null", "--over", "via=libc|libc|inline", "--kernel", k, *FAST,
             "-p", "2", "--label", "s1", "--json", str(tmp_path / "s.json"))
    assert cp.returncode == 0, cp.stderr
    head = cp.stdout.split("\n\n")[0].splitlines()
    assert head[0].startswith(ran_on(k, "")) and head[1] == SERIES_WITHHELD, cp.stdout
    doc = json.loads((tmp_path / "s.json").read_text())
    assert docschema.problem(doc, doc["schema"]) is None
    assert [[g["cmdline"] for g in lb["guests"]] for lb in doc["labels"]] == [[""], [""], [""]]
    assert guests.series_lines(doc, Series.from_json(doc).labels) == head
    shown = cli("show", "s1").stdout   # show replays it from the store: the same lines
    assert shown.split("\n", 1)[1].split("\n\n")[0].splitlines() == head, shown
    text = cli("report", "s1", "-f", "text").stdout
    assert text.split("\n", 1)[1].split("\n\n")[0].splitlines() == head, text
    md = cli("report", "s1", "-f", "markdown").stdout.split("\n\n")
    assert md[1].splitlines() == ["- " + ln.replace("_", "\\_") for ln in head], md[:3]
    html = cli("report", "s1", "-f", "html").stdout
    note = html[html.index("<p class=note>ran on: "):]
    note = note[:note.index("</p>")]
    assert f"kernel fake ({k}), cmdline &#x27;&#x27;, machine microvm, TCG (emulated), CPU max" in note, note
    assert "<br>emulated (QEMU TCG): the timings are the emulator&#x27;s" in note
    assert "no change point on cost (--allow-emulated gives them)" in note
    assert html.index("<p class=note>ran on: ") < html.index("<table")   # above the table
    local = cli("series", "--run", "syscall.null", "--over", "via=libc|libc|inline", *FAST[:-4], "-p", "2",
                "--no-store")
    assert local.returncode == 0 and "ran on:" not in local.stdout and "emulated" not in local.stdout, local.stdout


def test_stored_series_of_kernel_runs_names_each_guest_with_its_labels(runs):
    """`series BENCH --by KEY` over stored kernel runs (runs 1 and 3 with no
    parameters, 2 with pti=on): one `ran on:` line per guest naming its
    labels, and the emulation line, in text and markdown."""
    _, k, cli = runs
    cp = cli("series", "syscall.null", "--by", "name", "--order", "r1,r2,r3", "--allow-emulated")
    assert cp.returncode == 0, cp.stderr
    head = cp.stdout.split("\n\n")[0].splitlines()
    said = [f"name=r1, name=r3 {ran_on(k, '')}", f"name=r2 {ran_on(k, 'pti=on')}",   # (then the CPU's brand)
            EMULATED + "; change points are sought on them only because --allow-emulated asked for it"]
    assert len(head) == 3 and all(ln.startswith(s) for ln, s in zip(head, said)), head
    md = cli("report", "--series", "syscall.null", "--by", "name", "--order", "r1,r2,r3", "-f", "markdown").stdout
    said[2] = SERIES_WITHHELD.replace("_", "\\_")
    assert all(ln.startswith("- " + s) for ln, s in zip(md.splitlines()[:3], said)), md
