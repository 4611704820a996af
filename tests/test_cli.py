"""The `opcost` command as a new user meets it: a run with trustworthy numbers,
value lists, the store, one clear line for every bad input, nothing lost when
something goes wrong (crash, hang, Ctrl-C, kill -9), no process left behind,
and a `--help` that does not pay for numpy.

Every opcost process runs from the source tree (`python -m opcost`) with
XDG_DATA_HOME in tmp_path. Timings come from `--fake-clock` wherever real
timing is not the point."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, cli_argv
from opcost.probe import host_arch

FAST = ["--fake-clock", "100", "-p", "2", "-n", "3", "-w", "1", "--target-ms", "1"]
SAMPLE_KEYS = {"iters", "ns_per_op", "tsc_per_op", "user_ns_per_op", "sys_ns_per_op"}


def two_cpus() -> bool:
    return {0, 1} <= os.sched_getaffinity(0)


needs_two_cpus = pytest.mark.skipif(not two_cpus(), reason="needs CPUs 0 and 1")


def no_traceback(cp_or_text) -> None:
    text = cp_or_text if isinstance(cp_or_text, str) else cp_or_text.stderr + cp_or_text.stdout
    assert "Traceback" not in text, text


def opcost_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("opcost:")]


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def history(run_cli) -> list[dict]:
    cp = run_cli("history", "--json")
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


# --- 1. happy path -------------------------------------------------------------

def test_run_fake_clock_result_document(run_cli, tmp_path):
    out = tmp_path / "F.json"
    cp = run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "3", "-n", "5", "-w", "1",
                 "--target-ms", "1", "--json", out)
    assert cp.returncode == 0, cp.stderr
    no_traceback(cp)
    assert opcost_lines(cp.stderr) == []
    rows = [ln for ln in cp.stdout.splitlines() if ln.startswith("syscall.null ")]
    assert len(rows) == 1 and "system call" in rows[0], cp.stdout
    assert re.search(r"stored as run \d+", cp.stderr)

    doc = load(out)
    assert doc["schema"] == "opcost.result/1"
    assert doc["status"] == "complete"
    assert len(doc["results"]) == 1
    r = doc["results"][0]
    assert r["bench"] == "syscall.null"
    assert r["op"] == "system call"
    assert r["unit"] == "ns"
    assert r["status"] == "ok"
    assert r["params"]["via"] == "libc"
    assert r["params"]["arch"] == host_arch()
    assert int(r["params"]["cpu"]) in os.sched_getaffinity(0)

    assert len(r["processes"]) == 3
    for p in r["processes"]:
        assert len(p["samples"]) == 5
        for s in p["samples"]:
            assert SAMPLE_KEYS <= set(s), s
            assert s["iters"] >= 1
            assert 99 <= s["ns_per_op"] <= 101                  # 100 ns +-1% jitter
            assert s["tsc_per_op"] == pytest.approx(2 * s["ns_per_op"], rel=1e-6)  # fake TSC: 2 GHz

    sm = r["summary"]
    assert sm["n_processes"] == 3
    assert sm["median_ns"] == pytest.approx(100, rel=0.01)
    assert sm["min_ns"] <= sm["median_ns"] <= sm["p90_ns"]
    lo, hi = sm["ci95_ns"]
    assert lo <= sm["median_ns"] <= hi
    assert 0 <= sm["cv"] < 0.02
    assert sm["median_cycles"] == pytest.approx(200, rel=0.01)
    # The median is over per-process medians, not over pooled batches.
    meds = sorted(sorted(s["ns_per_op"] for s in p["samples"])[2] for p in r["processes"])
    assert sm["median_ns"] == pytest.approx(meds[1])
    assert sm["min_ns"] == pytest.approx(meds[0])


def _summary(run_cli, tmp_path, seed: str, name: str) -> dict:
    out = tmp_path / name
    cp = run_cli("run", "syscall.null", *FAST, "--seed", seed, "--no-store", "--json", out)
    assert cp.returncode == 0, cp.stderr
    return load(out)["results"][0]["summary"]


def test_same_seed_same_summary_other_seed_differs(run_cli, tmp_path):
    a = _summary(run_cli, tmp_path, "7", "a.json")
    b = _summary(run_cli, tmp_path, "7", "b.json")
    c = _summary(run_cli, tmp_path, "8", "c.json")
    assert a == b
    assert a["process_medians_ns"] != c["process_medians_ns"]
    assert c["median_ns"] == pytest.approx(100, rel=0.01)


# --- 2. value lists and cpu=A,B ------------------------------------------------

def test_value_list_expands_into_variants(run_cli, tmp_path):
    out = tmp_path / "v.json"
    cp = run_cli("run", "ctx.pipe:mode=process|thread", *FAST, "--json", out)
    assert cp.returncode == 0, cp.stderr
    res = load(out)["results"]
    assert [r["params"]["mode"] for r in res] == ["process", "thread"]
    assert all(r["bench"] == "ctx.pipe" and r["status"] == "ok" for r in res)
    assert all(r["summary"]["n_processes"] == 2 for r in res)
    for mode in ("process", "thread"):
        assert any(ln.startswith(f"ctx.pipe:mode={mode} ") for ln in cp.stdout.splitlines()), cp.stdout


@needs_two_cpus
def test_cpu_pair_keeps_its_comma(run_cli, tmp_path):
    out = tmp_path / "c.json"
    cp = run_cli("run", "ctx.pipe:cpu=0,1,mode=thread", *FAST, "--json", out)
    assert cp.returncode == 0, cp.stderr
    res = load(out)["results"]
    assert len(res) == 1
    params = res[0]["params"]
    assert params["cpu"] == "0,1"
    assert params["placement"] == "core"
    assert params["mode"] == "thread"
    assert all(p["header"]["cpus"] == [0, 1] for p in res[0]["processes"])


# --- 3. store ------------------------------------------------------------------

def test_store_history_and_show(run_cli, tmp_path):
    out = tmp_path / "run.json"
    cp = run_cli("run", "ctx.pipe:mode=process|thread", *FAST, "--label", "base-1", "--json", out)
    assert cp.returncode == 0, cp.stderr
    run_id = load(out)["run_id"]
    assert isinstance(run_id, int)
    assert (tmp_path / "opcost" / "opcost.db").is_file()   # under XDG_DATA_HOME, nowhere else

    cp = run_cli("history")
    assert cp.returncode == 0, cp.stderr
    line = [ln for ln in cp.stdout.splitlines() if "base-1" in ln]
    assert len(line) == 1 and "complete" in line[0] and "ctx.pipe" in line[0], cp.stdout
    assert line[0].split()[0] == str(run_id)

    cp = run_cli("show", "base-1")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.startswith(f"run {run_id} (base-1)")
    assert sum(ln.startswith("ctx.pipe:") for ln in cp.stdout.splitlines()) == 2, cp.stdout

    cp = run_cli("show", "base-1", "--json", "-")
    assert cp.returncode == 0, cp.stderr
    shown, ran = json.loads(cp.stdout), load(out)
    assert shown["schema"] == "opcost.result/1"
    assert shown["status"] == "complete" and shown["label"] == "base-1"
    assert len(shown["results"]) == len(ran["results"]) == 2
    for s, r in zip(shown["results"], ran["results"]):
        for k in ("bench", "params", "op", "unit", "status", "reason", "summary"):
            assert s[k] == r[k], k
        assert [p["samples"] for p in s["processes"]] == [p["samples"] for p in r["processes"]]
        assert [p["header"] for p in s["processes"]] == [p["header"] for p in r["processes"]]

    # By id too, from a fresh process: the data survives.
    cp = run_cli("show", str(run_id), "--json", "-")
    assert cp.returncode == 0 and json.loads(cp.stdout)["results"] == shown["results"]


# --- 4. bad input: exit 2, one line, nothing on stdout -------------------------

NO_P = FAST[:2] + FAST[4:]   # FAST without -p

BAD_INPUTS = {
    "unknown benchmark": (["run", "nosuch.bench", *FAST],
                          ["unknown benchmark", "nosuch.bench", "syscall.null", "ctx.pipe"]),
    "unknown parameter": (["run", "syscall.null:foo=1", *FAST], ["foo", "via"]),
    "bad enum value": (["run", "syscall.null:via=bogus", *FAST], ["bogus", "libc|inline"]),
    "cpu=99": (["run", "syscall.null:cpu=99", *FAST], ["99", "valid CPUs"]),
    "-p -1": (["run", "syscall.null", *NO_P, "-p", "-1"], ["--processes -1"]),
    "-p 0": (["run", "syscall.null", *NO_P, "-p", "0"], ["--processes 0"]),
    "-p abc": (["run", "syscall.null", *NO_P, "-p", "abc"], ["abc"]),
    "-n 0": (["run", "syscall.null", *FAST, "-n", "0"], ["--samples 0"]),
    "--target-ms 0.5": (["run", "syscall.null", *FAST, "--target-ms", "0.5"], ["--target-ms 0.5"]),
    "--timeout nan": (["run", "syscall.null", *FAST, "--timeout", "nan"], ["--timeout", "nan"]),
    "--fake-clock inf": (["run", "syscall.null", *FAST, "--fake-clock", "inf"], ["--fake-clock", "inf"]),
    "history --limit -1": (["history", "--limit", "-1"], ["--limit -1"]),
    "unknown option": (["run", "syscall.null", *FAST, "--frobnicate"], ["--frobnicate"]),
    "json in missing dir": (["run", "syscall.null", *FAST, "--json", "/nonexistent/dir/x.json"],
                            ["/nonexistent/dir/x.json", "cannot be written"]),
    "json is a directory": (["run", "syscall.null", *FAST, "--json", "{tmp}"], ["{tmp}", "directory"]),
    "garbage store": (["run", "syscall.null", *FAST, "--store", "{tmp}/garbage.db"],
                      ["garbage.db", "not an SQLite database"]),
    "directory as store": (["run", "syscall.null", *FAST, "--store", "{tmp}"], ["{tmp}", "directory"]),
    "garbage store, history": (["history", "--store", "{tmp}/garbage.db"], ["not an SQLite database"]),
    "unknown counter": (["run", "syscall.null", *FAST, "--counters", "context-switches,bogus"],
                        ["'bogus'", "context-switches"]),
    "yield on two CPUs": (["run", "ctx.yield:cpu=0,1", *FAST], ["ctx.yield", "cpu"]),
    "stat of a missing path": (["run", "syscall.stat:path=/nonexistent", *FAST], ["/nonexistent"]),
    "missing path, with --json": (["run", "syscall.stat:path=/nonexistent", *FAST, "--json", "{tmp}/new.json"],
                                  ["/nonexistent"]),
    "arch=sparc": (["run", "syscall.null:arch=sparc", *FAST], ["arch=sparc", "available"]),
    "show unknown run": (["show", "999"], ["999"]),
    "SPEC without name": (["run", ":x=1", *FAST], ["no benchmark name"]),
    "param twice": (["run", "ctx.pipe:mode=thread,mode=process", *FAST], ["mode", "twice"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2(run_cli, tmp_path, case):
    args, expect = BAD_INPUTS[case]
    tmp = str(tmp_path)
    (tmp_path / "garbage.db").write_bytes(b"this is not a database\n" * 50)
    args = [a.replace("{tmp}", tmp) for a in args]
    cp = run_cli(*args)
    assert cp.returncode == 2, (cp.returncode, cp.stderr)
    assert cp.stdout == ""
    no_traceback(cp)
    lines = cp.stderr.splitlines()
    assert len(lines) == 1, cp.stderr
    assert lines[0].startswith("opcost: ")
    for word in expect:
        assert word.replace("{tmp}", tmp) in lines[0], (word, lines[0])
    # Nothing was stored, and a failed --json leaves no file behind.
    assert not list(tmp_path.glob("**/*.json")) and not list(tmp_path.glob("**/.*.json.*"))
    assert (tmp_path / "garbage.db").read_bytes().startswith(b"this is not a database")


def test_known_counter_not_countable_here_is_not_an_error(run_cli, tmp_path):
    out = tmp_path / "c.json"
    cp = run_cli("run", "syscall.null", *FAST, "--counters", "cycles,context-switches", "--json", out)
    assert cp.returncode == 0, cp.stderr
    no_traceback(cp)
    r = load(out)["results"][0]
    status = {c["name"]: c for c in r["processes"][0]["header"]["counters"]}
    if status["cycles"]["status"] == "ok":
        pytest.skip("this machine can count cycles")
    assert status["cycles"]["status"] == "<not supported>"
    assert status["cycles"]["reason"]                      # says why
    assert status["context-switches"]["status"] == "ok"
    for p in r["processes"]:
        for s in p["samples"]:
            assert s["counters"]["cycles"] == "<not supported>"
            assert isinstance(s["counters"]["context-switches"], (int, float))
    assert r["summary"]["counters"]["cycles"] == "<not supported>"
    assert isinstance(r["summary"]["counters"]["context-switches"], (int, float))
    assert r["summary"]["median_ns"] == pytest.approx(100, rel=0.01)   # timing goes on
    assert re.search(r"cycles.*<not supported>", cp.stdout), cp.stdout
    assert re.search(r"context-switches\s+[0-9.]", cp.stdout), cp.stdout   # counters table row


# --- 5. nothing lost after a usage error ---------------------------------------

def test_usage_errors_keep_earlier_results(run_cli, tmp_path):
    out = tmp_path / "keep.json"
    cp = run_cli("run", "syscall.null", *FAST, "--label", "keep", "--json", out)
    assert cp.returncode == 0, cp.stderr
    before = out.read_bytes()
    runs = history(run_cli)
    assert [(r["label"], r["status"]) for r in runs] == [("keep", "complete")]

    for bad in (["syscall.null:via=bogus"], ["syscall.stat:path=/nonexistent"], ["syscall.null", "-p", "0"],
                ["syscall.null", "--counters", "bogus"]):
        cp = run_cli("run", *FAST, "--label", "keep", "--json", out, *bad)
        assert cp.returncode == 2, cp.stderr
        assert out.read_bytes() == before          # the earlier --json file is untouched

    assert history(run_cli) == runs
    cp = run_cli("show", "keep", "--json", "-")
    assert cp.returncode == 0, cp.stderr
    r = json.loads(cp.stdout)["results"][0]
    assert r["status"] == "ok" and len(r["processes"]) == 2
    assert all(len(p["samples"]) == 3 for p in r["processes"])


# --- 6. a crashing or hanging probe ----------------------------------------------

FAKE_PROBE = """#!/bin/sh
# Behaves like the real probe except for a measuring `run`.
REAL={real}
if [ "$1" = run ]; then
    case " $* " in *" --check "*) exec "$REAL" "$@" ;; esac
    {on_run}
fi
exec "$REAL" "$@"
"""


def fake_probe(tmp_path: Path, probe_bin: Path, name: str, on_run: str) -> Path:
    p = tmp_path / name
    p.write_text(FAKE_PROBE.format(real=probe_bin, on_run=on_run))
    p.chmod(0o755)
    return p


def test_crashing_probe(run_cli, tmp_path, probe_bin):
    exe = fake_probe(tmp_path, probe_bin, "crash.sh", 'kill -SEGV $$')
    out = tmp_path / "x.json"
    cp = run_cli("run", "syscall.null", "ctx.pipe:mode=thread", *FAST, "--json", out,
                 env={"OPCOST_PROBE": str(exe)})
    assert cp.returncode == 1, cp.stderr
    no_traceback(cp)
    lines = opcost_lines(cp.stderr)
    assert 1 <= len(lines) <= 3, cp.stderr                 # a warning per variant, then the final line
    assert all("probe failed" in ln and "SIGSEGV" in ln for ln in lines), cp.stderr
    assert any(ln.startswith("opcost: syscall.null:") for ln in lines)
    assert any(ln.startswith("opcost: ctx.pipe:mode=thread:") for ln in lines)
    assert not any(re.search(r"(\S+): \1:", ln) for ln in lines), lines   # the name once, not twice
    doc = load(out)
    assert doc["status"] == "failed"
    assert [r["status"] for r in doc["results"]] == ["failed", "failed"]
    assert all("SIGSEGV" in r["reason"] for r in doc["results"])
    assert history(run_cli)[0]["status"] == "failed"


@pytest.mark.parametrize("output, message", [
    ("echo 'hello, world'", "not JSON"),
    ("""echo '{"type":"sample","i":0,"iters":10,"ns_per_op":null,"tsc_per_op":null}'""",
     "ns_per_op=null, not a finite number"),
    ("exit 0", "ended early"),
])
def test_probe_printing_garbage_is_a_failure_not_a_traceback(run_cli, tmp_path, probe_bin, output, message):
    exe = fake_probe(tmp_path, probe_bin, "garbage.sh", output)
    out = tmp_path / "g.json"
    cp = run_cli("run", "syscall.null", *FAST, "--json", out, env={"OPCOST_PROBE": str(exe)})
    assert cp.returncode == 1, cp.stderr
    no_traceback(cp)
    lines = opcost_lines(cp.stderr)
    assert lines and all(message in ln for ln in lines), cp.stderr
    r = load(out)["results"][0]
    assert r["status"] == "failed" and message in r["reason"]


def test_hanging_probe_times_out_and_keeps_what_it_had(run_cli, tmp_path, probe_bin):
    # The first measuring process is real; the second hangs.
    mark = tmp_path / "ran-once"
    exe = fake_probe(tmp_path, probe_bin, "hang.sh",
                     f'if [ -e {mark} ]; then exec sleep 60; fi; touch {mark}; exec "$REAL" "$@"')
    out = tmp_path / "h.json"
    t0 = time.monotonic()
    cp = run_cli("run", "syscall.null", *FAST, "--timeout", "2", "--label", "hung", "--json", out,
                 env={"OPCOST_PROBE": str(exe)})
    took = time.monotonic() - t0
    assert cp.returncode == 124, cp.stderr
    no_traceback(cp)
    assert took < 20
    lines = opcost_lines(cp.stderr)
    assert lines and all(re.search(r"did not finish within 2 s|timed out", ln) for ln in lines), cp.stderr
    doc = load(out)
    r = doc["results"][0]
    assert len(r["processes"]) == 1 and len(r["processes"][0]["samples"]) == 3
    assert r["summary"]["n_processes"] == 1
    cp = run_cli("show", "hung", "--json", "-")
    assert cp.returncode == 0, cp.stderr
    stored = json.loads(cp.stdout)
    assert stored["status"] == doc["status"] == "failed"
    assert [p["samples"] for p in stored["results"][0]["processes"]] == [r["processes"][0]["samples"]]
    assert stored["results"][0]["summary"] == r["summary"]


# --- 7. Ctrl-C -----------------------------------------------------------------

def _default_sigint() -> None:
    # pytest itself may run with SIGINT ignored (a background job of a
    # non-interactive shell); the child would inherit that and never see Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_keeps_what_was_measured(cli_environ, tmp_path):
    out = tmp_path / "i.json"
    proc = subprocess.Popen(cli_argv("run", "ctx.pipe", "syscall.null", "-p", "200", "--json", out), cwd=tmp_path,
                            env=cli_environ(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        time.sleep(2.5)
        deadline = time.monotonic() + 15          # a slow machine: wait for the first process
        while time.monotonic() < deadline and not (
                out.exists() and any(r["processes"] for r in load(out)["results"])):
            time.sleep(0.1)
        assert proc.poll() is None, "a 200-process run ended before Ctrl-C"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    no_traceback(stderr)
    assert re.search(r"interrupted.*kept", stderr), stderr
    doc = load(out)
    assert doc["status"] == "interrupted"
    assert sum(len(r["processes"]) for r in doc["results"]) >= 1
    assert all(len(p["samples"]) == 20 for r in doc["results"] for p in r["processes"])  # whole ones only
    runs = subprocess.run(cli_argv("history", "--json"), env=cli_environ(), capture_output=True, text=True)
    assert [(r["id"], r["status"]) for r in json.loads(runs.stdout)] == [(doc["run_id"], "interrupted")]


# --- 8. no process left behind -------------------------------------------------

def live_procs(name: str) -> list[dict]:
    """Non-zombie processes whose command line mentions `name`."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
            stat = Path(f"/proc/{d}/stat").read_text()
            threads = len(os.listdir(f"/proc/{d}/task"))
        except OSError:
            continue
        if name.encode() not in cmd:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            found.append({"pid": int(d), "ppid": int(ppid), "argv": cmd.decode().split("\0"),
                          "threads": threads})
    return found


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def uniq_probe(tmp_path, probe_bin) -> Path:
    p = tmp_path / f"uniqprobe-{uuid.uuid4().hex[:12]}"
    shutil.copy2(probe_bin, p)
    return p


@pytest.mark.parametrize("victim", ["opcost", "probe"])
@pytest.mark.parametrize("mode", ["process", "thread"])
def test_kill_9_leaves_no_process_behind(cli_environ, tmp_path, uniq_probe, mode, victim):
    name = uniq_probe.name
    proc = subprocess.Popen(cli_argv("run", f"ctx.pipe:mode={mode}", "--no-store", "--no-progress"),
                            cwd=tmp_path, env=cli_environ(OPCOST_PROBE=str(uniq_probe)),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def measuring():
            ps = live_procs(name)
            probes = [p for p in ps if p["ppid"] == proc.pid and "--check" not in p["argv"]]
            for pr in probes:
                helper = ([p for p in ps if p["ppid"] == pr["pid"]] if mode == "process"
                          else pr["threads"] >= 2)
                if helper:
                    return pr
            return None

        probe_proc = wait_for(measuring, 15, "the probe and its helper")
        gone_by = time.monotonic() + 2
        if victim == "opcost":
            proc.kill()
            proc.wait()
            stdout, stderr = "", ""
        else:
            os.kill(probe_proc["pid"], signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=30)
        while time.monotonic() < gone_by and live_procs(name):
            time.sleep(0.02)
        left = live_procs(name)
        assert left == [], f"still running after 2 s: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in live_procs(name):
            os.kill(p["pid"], signal.SIGKILL)
    if victim == "probe":
        assert proc.returncode == 1, stderr
        no_traceback(stderr)
        lines = opcost_lines(stderr)
        assert lines and all("SIGKILL" in ln for ln in lines), stderr
        assert f"ctx.pipe:mode={mode}: failed" in stdout, stdout


# --- 9. --help is light ----------------------------------------------------------

def test_help_imports_no_heavy_modules(cli_environ, tmp_path):
    cp = subprocess.run([*cli_argv()[:1], "-X", "importtime", *cli_argv("--help")[1:]], cwd=tmp_path,
                        env=cli_environ(), capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.startswith("usage: opcost")
    assert "run" in cp.stdout and "history" in cp.stdout
    mods = {ln.rsplit("|", 1)[1].strip() for ln in cp.stderr.splitlines() if ln.startswith("import time:")}
    assert "opcost.cli" in mods                              # we did read the import list
    heavy = sorted(m for m in mods if m.split(".")[0] in {"numpy", "scipy", "rich", "matplotlib", "psycopg",
                                                        "jsonschema", "referencing"})
    assert heavy == []


# --- 10. list and env ------------------------------------------------------------

def test_list_json_has_every_benchmark_with_params(run_cli):
    cp = run_cli("list", "--json")
    assert cp.returncode == 0, cp.stderr
    table = json.loads(cp.stdout)
    sources = (ROOT / "probe" / "bench").glob("*.c")
    expected = {m for f in sources for m in re.findall(r'\.name\s*=\s*"([^"]+)"', f.read_text())}
    assert {"syscall.null", "ctx.pipe", "ctx.yield"} <= expected
    names = [b["name"] for b in table["benchmarks"]]
    assert sorted(names) == sorted(expected)
    for b in table["benchmarks"]:
        assert b["summary"] and b["op"], b
        assert isinstance(b["params"], list)
        for p in b["params"]:
            assert {"name", "type", "default", "help"} <= set(p), (b["name"], p)
            if p["type"] == "enum":
                assert p["default"] in p["choices"], (b["name"], p)
    by_name = {b["name"]: b for b in table["benchmarks"]}
    assert {p["name"] for p in by_name["ctx.pipe"]["params"]} >= {"mode", "placement"}
    assert [g["name"] for g in table["generic_params"]] == ["cpu", "arch"]
    assert {"cycles", "context-switches"} <= set(table["counters"])

    cp = run_cli("list")                                   # the text form names them all too
    assert cp.returncode == 0
    for n in names:
        assert re.search(rf"^{re.escape(n)}\s", cp.stdout, re.M), n


def test_env_json_every_field_has_value_and_source(run_cli):
    cp = run_cli("env", "--json")
    assert cp.returncode == 0, cp.stderr
    env = json.loads(cp.stdout)
    assert len(env) >= 10
    for name, field in env.items():
        assert "value" in field and "source" in field, name
        assert isinstance(field["source"], str) and field["source"], name
        if field["value"] is None:
            assert field.get("reason"), name
    assert env["arch"]["value"] in (os.uname().machine, host_arch())
