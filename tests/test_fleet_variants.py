"""`opcost fleet variants` on the three sshd "hosts" of tests/test_fleet.py
(its fixture, reused): the builds made here for each host's architecture,
uploaded beside the probe (checked by sha256), measured interleaved there
as `variants` does; one table per host and across hosts; the record shown
again as printed; nothing left behind.

The A/A pairs run on the fake clock (deterministic). A build made slower
runs on the real clock with a margin no noise closes: SLOW costs about a
thousand times FAST in op mode (2000 dependent multiply-adds against one
add) and tens of times in program mode (10 million dependent multiply-adds,
4 cycles a step on any x86_64, against an empty main: 23x measured on an AMD
EPYC Zen 2 host, where a start costs 0.5 ms; a `volatile` counting loop was
only 3.7x there, Zen 2 forwarding its memory operand, and failed a CI run
whose FAST side had one process slowed tenfold), so with 6 processes a side
every SLOW process median lies above every FAST one unless a process is
slowed over twentyfold for most of its batches. The verdict needs p < 0.05
(it is 2/924, doubled, at complete separation) and a CI beyond delta: the
false-failure rate of each host's verdict is far below 1e-4; its ratio > 5,
20x under the smallest measured, likewise needs FAST's processes slowed
twentyfold for most of their batches. Across hosts
(a t-interval over the hosts' log ratios) three hosts on the real clock
clear delta unless their ratios spread over more than tenfold; two hosts (one
unreachable) have one degree of freedom, so that test checks the rule, not
the verdict. Measured on CPU 0 (every machine has
one; it stays off the CPU real measurements use, the last)."""

from __future__ import annotations

import glob
import json
import re
import subprocess

import pytest

from conftest import cli_argv, cli_env
from test_fleet import _cli, fleet, fleet_up, processes_of, runs, settle  # noqa: F401 (fixtures, reused)

HOSTS = "fleet1,fleet2,fleet3"

OPERATION = r"""
#include <stdint.h>
uint64_t opcost_op(uint64_t x)
{
#ifdef SLOW
    for (int i = 0; i < 2000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
#endif
    return x + 1;
}
"""

PROGRAM = r"""
int main(void)
{
    unsigned long x = 1;
#ifdef SLOW
    for (unsigned long i = 0; i < 10000000ul; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
#endif
    return (int)(x & 0);
}
"""

OP_FAST = ["--cpu", "0", "-p", "6", "-n", "3", "-w", "1", "--target-ms", "1"]


def _env(tmp_path) -> dict:
    """The test's own TMPDIR: the local build directories it looks for are
    its own, not those of a test running beside it (pytest-xdist)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return cli_env(tmp_path, TMPDIR=str(tmp_path / "tmp"))


def fleet_variants(fleet, tmp_path, *args, timeout: float = 240):
    return subprocess.run(cli_argv("fleet", "variants", "--ssh-config", fleet.ssh_config, *args),
                          env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def no_local_builds(tmp_path) -> list[str]:
    return glob.glob(str(tmp_path / "tmp" / "opcost-variants-*"))


def _checked(fleet, tmp_path, text: str, *args, hosts: str = HOSTS, code: int = 0):
    """A fleet variants, its document, and what is stored: one variants run
    per host reached (labels host, fleet) and the fleet's record, which
    `show` and `report` print again as the run printed it (a host never
    reached is shown again as missing, nothing stored, as for fleet ab)."""
    src = tmp_path / "study.c"
    src.write_text(text)
    out = tmp_path / "fleet.json"
    before = set(no_local_builds(tmp_path))
    cp = fleet_variants(fleet, tmp_path, "--hosts", hosts, str(src), *args, "--json", str(out),
                        "--label", "kernel=test")
    assert cp.returncode == code, cp.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "opcost.fleet/1" and doc["kind"] == "variants"
    assert doc["source"] == str(src) and doc["baseline"] == "-D" + args[args.index("-D") + 1]
    assert [h["host"] for h in doc["hosts"]] == hosts.split(",")
    got = runs(tmp_path)
    (record,) = [r for r in got if r["kind"] == "fleet"]
    mine = [r for r in got if r["kind"] == "variants"]
    assert record["id"] == doc["run_id"]
    assert record["labels"] == {"fleet": doc["fleet"], "kernel": "test"}
    assert sorted(r["labels"]["host"] for r in mine) == sorted(h["host"] for h in doc["hosts"] if h["run_id"])
    for r in mine:
        assert r["labels"]["fleet"] == doc["fleet"] and r["status"] == "complete"
    # shown again: show (table and JSON), report text and json
    show = _cli(tmp_path, "show", str(doc["run_id"]))
    assert show.returncode == 0, show.stderr
    again = _cli(tmp_path, "show", str(doc["run_id"]), "--json", "-")
    assert again.returncode == 0, again.stderr
    rep = _cli(tmp_path, "report", str(doc["run_id"]), "-f", "text")
    assert rep.returncode == 0, rep.stderr
    rep_json = _cli(tmp_path, "report", str(doc["run_id"]), "-f", "json")
    assert rep_json.returncode == 0, rep_json.stderr
    if code == 0:
        assert show.stdout.split("\n", 1)[1] == cp.stdout
        assert json.loads(again.stdout) == doc
        assert rep.stdout.rstrip("\n") == cp.stdout.rstrip("\n")
        assert json.loads(rep_json.stdout) == doc
    else:
        back = json.loads(again.stdout)
        assert back["across"] == doc["across"] and json.loads(rep_json.stdout) == back
        assert [h["status"] for h in back["hosts"]] == [h["status"] if h["run_id"] else "missing"
                                                        for h in doc["hosts"]]
    # each host's run is its own variants run: show prints its comparison
    one = _cli(tmp_path, "show", str(mine[0]["id"]))
    assert one.returncode == 0 and "-D" in one.stdout, one.stderr
    assert settle() == {"files": [], "processes": []}
    assert set(no_local_builds(tmp_path)) <= before
    return doc, cp


def test_op_mode_slower_build_on_every_host(fleet_up, tmp_path):
    doc, cp = _checked(fleet_up, tmp_path, OPERATION, "-D", "FAST", "-D", "SLOW", *OP_FAST)
    for h in doc["hosts"]:
        (e,) = h["comparison"]["comparisons"]
        assert h["status"] == "ok" and e["verdict"] == "slower" and e["ratio"] > 10, e
        assert h["comparison"]["variants"]["mode"] == "op"
        assert processes_of(tmp_path, h["run_id"]) == 18   # FAST, SLOW and the empty reference, 6 each
    (x,) = doc["across"]
    assert x["key"] == "-DSLOW" and x["bench"] == "user.op"
    assert x["n_hosts"] == 3 and x["counts"]["slower"] == 3 and x["verdict"] == "slower" and x["ci95"][0] > 1
    assert re.search(r"-DSLOW: slower on 3 of 3 hosts, geometric mean \d+\.\d{4} \[", cp.stdout), cp.stdout
    assert re.search(r"^-DSLOW +across hosts +- +\d", cp.stdout, re.M), cp.stdout
    assert re.search(r"^variant +host +run +B/A +95% CI +verdict$", cp.stdout, re.M), cp.stdout
    assert re.search(r"the fleet stored as run \d+ \(fleet=[0-9a-f]{12}\)", cp.stderr), cp.stderr
    # the builds went up with the probe, checked: said on the way
    assert "building the probe with -DSLOW" in cp.stderr or "cached build" in cp.stderr, cp.stderr


def test_program_mode_aa_on_the_fake_clock(fleet_up, tmp_path):
    doc, cp = _checked(fleet_up, tmp_path, PROGRAM, "-D", "A", "-D", "B", "--cpu", "0", "-p", "6",
                       "--fake-clock", "1000000")
    for h in doc["hosts"]:
        (e,) = h["comparison"]["comparisons"]
        assert e["verdict"] not in ("slower", "faster"), e
        assert h["comparison"]["variants"]["mode"] == "program"
    (x,) = doc["across"]
    assert x["n_hosts"] == 3 and x["counts"]["slower"] == 0 and x["counts"]["faster"] == 0
    assert x["verdict"] in ("same", "negligible")
    assert "linking the x86_64 builds -static" in cp.stderr, cp.stderr


def test_program_mode_slower_and_a_host_unreachable(fleet_up, tmp_path):
    """A host that cannot be reached: one line, the others measured and put
    together, exit 1; shown again the same."""
    doc, cp = _checked(fleet_up, tmp_path, PROGRAM, "-D", "FAST", "-D", "SLOW", "--cpu", "0", "-p", "6",
                       hosts="fleet1,nowhere,fleet3", code=1)
    assert [h["status"] for h in doc["hosts"]] == ["ok", "failed", "ok"]
    bad = [ln for ln in cp.stderr.splitlines() if ln.startswith("opcost: nowhere:")]
    assert len(bad) == 1 and "cannot connect" in bad[0], cp.stderr
    for h in (doc["hosts"][0], doc["hosts"][2]):
        (e,) = h["comparison"]["comparisons"]
        assert e["verdict"] == "slower" and e["ratio"] > 5, e
    (x,) = doc["across"]
    assert x["n_hosts"] == 2 and x["counts"]["slower"] == 2
    # Two hosts leave the t-interval one degree of freedom (t = 12.7): on the
    # real clock it clears delta only when the hosts' ratios agree within
    # about 2x, which two loaded sshd "hosts" need not. What is checked is
    # that the two hosts reached are the ones put together, by the rule.
    import math

    from opcost.abtest import across_hosts
    want = across_hosts([math.log(h["ratio"]) for h in x["hosts"]], delta=x["delta"], alpha=x["alpha"])
    assert [h["host"] for h in x["hosts"]] == ["fleet1", "fleet3"]
    assert x["verdict"] == want["verdict"] and x["geomean_ratio"] == pytest.approx(want["geomean_ratio"]), (x, want)
    assert x["verdict"] in ("slower", "inconclusive"), x   # its size: each host's ratio > 5, above
    assert "-DSLOW: slower on 2 of 2 hosts, geometric mean" in cp.stdout


@pytest.mark.parametrize("args, want", [
    (["-D", "A", "--cflags-for", "B=-O3"], "B is not one of the -D variants"),
    (["-D", "A", "--label", "fleet=x"], "--label fleet=... is set by fleet variants itself"),
    (["-D", "A", "--export", "csv:x.csv"], "--export csv: this command writes a fleet document"),
    (["-D", "A", "--cpu", "0,1"], "a build runs on one CPU"),
    (["-D", "A", "--mode", "program", "--target-ms", "2"], "--target-ms applies to --mode op"),
    (["-D", "A", "--cc", "nosuchcc"], "not found"),
])
def test_bad_input_before_any_connection(tmp_path, args, want):
    src = tmp_path / "prog.c"
    src.write_text(PROGRAM)
    cp = subprocess.run(cli_argv("fleet", "variants", "--hosts", "fleet1", str(src), *args),
                        env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    err = cp.stderr.splitlines()
    assert cp.returncode == 2 and len(err) == 1 and want in err[0] and "Traceback" not in cp.stderr, cp.stderr
    assert not (tmp_path / "opcost").exists() and not (tmp_path / "x.csv").exists()


def test_compilers_for_the_hosts_architectures(monkeypatch):
    """A host of another architecture: its cross compiler, or one line
    naming the package; a given --cc is for this machine's only."""
    from opcost import crossprobe, probe
    from opcost.commands.fleet import compiler_for_hosts
    from opcost.errors import UsageError

    here = probe.host_arch()
    other = "aarch64" if here != "aarch64" else "x86_64"
    assert compiler_for_hosts(here, ["lab1"], None)[0] in ("cc",)
    assert compiler_for_hosts(here, ["lab1"], ["gcc", "-m64"]) == ["gcc", "-m64"]
    with pytest.raises(UsageError, match=rf"--cc gcc builds for this machine \({here}\) and host lab2 is {other}"):
        compiler_for_hosts(other, ["lab2"], ["gcc"])

    def missing(arch):
        raise UsageError("no compiler")

    monkeypatch.setattr(crossprobe, "default_cc", missing)
    pkg = crossprobe.cross_package(other)
    with pytest.raises(UsageError, match=rf"hosts lab2, lab3 are {other} and no compiler for {other} is installed "
                       rf"here: install {pkg} \(apt-get install {pkg}\)"):
        compiler_for_hosts(other, ["lab2", "lab3"], None)


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_stopped_mid_run_leaves_no_build_behind(fleet_up, tmp_path, how):
    """Stopped while the hosts measure: the builds go with each host's upload
    directory (SIGINT: opcost removes it, exit 130, the local build directory
    too; SIGKILL: each host removes it as its session ends, and the local
    build directory, whose owner is gone, is swept by the next variants)."""
    import os
    import shutil
    import signal

    from opcost import variantbuild
    from test_fleet import gone_from_the_hosts, until_stored

    src = tmp_path / "prog.c"
    src.write_text(PROGRAM)
    before = set(no_local_builds(tmp_path))
    proc = subprocess.Popen(cli_argv("fleet", "variants", "--ssh-config", fleet_up.ssh_config, "--hosts", HOSTS,
                                     str(src), "-D", "FAST", "-D", "SLOW", "--cpu", "0", "-p", "40"),
                            env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    try:
        until_stored(tmp_path, proc, "fleet1")
        mine = set(no_local_builds(tmp_path)) - before
        assert len(mine) == 1, mine   # one architecture here: one build directory
        proc.send_signal(getattr(signal, how))
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == "SIGINT":
        assert proc.returncode == 130 and "Traceback" not in err, err
        assert {r["status"] for r in runs(tmp_path)} == {"interrupted"}
        assert settle() == {"files": [], "processes": []}
        assert set(no_local_builds(tmp_path)) <= before
        return
    left = gone_from_the_hosts()
    for d in (f for f in left["files"] if "opcost-ssh-" in f):
        shutil.rmtree(d)   # the local control directory, with the master's log
    assert set(no_local_builds(tmp_path)) - before == mine and all(os.path.isdir(d) for d in mine)
    variantbuild.sweep_stale_workdirs(tmp_path / "tmp")
    assert not set(no_local_builds(tmp_path)) & mine


def test_a_build_runs_as_its_uploaded_copy():
    """On an ssh host a request for a build runs its copy in the upload
    directory (op mode: instead of the probe; program mode: under the
    probe's `time`); a build never uploaded there is refused."""
    from opcost import probe
    from opcost.errors import UsageError
    from opcost.targets.ssh import SshTarget

    t = SshTarget("lab1")
    t.ssh.master.ctl_dir = "/nonexistent"   # no connection: only the command line is made
    t.remote_probe = "/tmp/opcost-fleet.X/opcost-probe-x86_64"
    t.upload.builds = {"/here/v0_A": "/tmp/opcost-fleet.X/build-1", "/here/probe-B": "/tmp/opcost-fleet.X/build-2"}
    prog = probe.ProbeRequest(bench="program", params={}, arch="x86_64", program=("/here/v0_A",))
    line = t.launch(prog, prog.argv(check=True))[-1]
    assert "/tmp/opcost-fleet.X/opcost-probe-x86_64 time " in line and line.endswith("-- /tmp/opcost-fleet.X/build-1")
    assert "/here/" not in line
    op = probe.ProbeRequest(bench="user.op", params={}, arch="x86_64", exe="/here/probe-B")
    line = t.launch(op, op.argv())[-1]
    assert "/tmp/opcost-fleet.X/build-2 run user.op" in line and "opcost-probe-x86_64" not in line
    for bad in (probe.ProbeRequest(bench="user.op", params={}, arch="x86_64", exe="/here/other"),
                probe.ProbeRequest(bench="user.op", params={}, arch="arm", exe="/here/probe-B", emulator="qemu-arm")):
        with pytest.raises(UsageError, match="only the probe's own benchmarks and the builds of"):
            t.launch(bad, bad.argv())
