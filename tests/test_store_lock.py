"""A store locked by another program is not bad input (issue: exit 2, run
marked failed, the store behind the JSON). opcost waits, saying so; if the
lock goes away it carries on storing; if not, it keeps measuring into --json
(or a rescue file), says the store missed it, and exits 1."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time

from conftest import cli_argv, cli_env

FAST = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "--no-progress"]


def _processes(db) -> int:
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        return c.execute("SELECT count(*) FROM processes").fetchone()[0]
    except sqlite3.Error:
        return 0


def _start(tmp_path, *args, wait: float):
    return subprocess.Popen(cli_argv("run", "syscall.null", *FAST, *args), cwd=tmp_path,
                            env=cli_env(tmp_path, OPCOST_STORE_WAIT=str(wait)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lock_after_first_processes(db, proc, before: int = 1):
    """Lock once the new run has stored 2 processes (the store held `before`)."""
    deadline = time.monotonic() + 60
    while _processes(db) < before + 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    conn = sqlite3.connect(db, isolation_level=None, timeout=10)
    conn.execute("BEGIN EXCLUSIVE")
    return conn


def test_lock_held_to_the_end_the_run_goes_on_into_json(run_cli, tmp_path, probe_bin):
    assert run_cli("run", "syscall.null", *FAST, "-p", "1").returncode == 0   # the store exists
    db = tmp_path / "opcost" / "opcost.db"
    out = tmp_path / "out.json"
    proc = _start(tmp_path, "-p", "40", "--json", str(out), wait=1)
    conn = _lock_after_first_processes(db, proc)
    _, err = proc.communicate(timeout=120)
    conn.execute("ROLLBACK")
    conn.close()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "locked by another program; waiting up to 1 s" in err
    assert "the store missed" in err and str(out) in err
    doc = json.loads(out.read_text())
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 40
    assert doc["store_missed"]["processes"] >= 1
    stored = json.loads(run_cli("show", str(doc["run_id"]), "--json", "-").stdout)
    assert 2 <= len(stored["results"][0]["processes"]) < 40
    # still locked at its end: it could not be marked final, and its opcost is gone
    assert stored["status"] == "abandoned"
    cp = run_cli("history", "clean")
    assert cp.returncode == 0 and str(doc["run_id"]) in cp.stdout
    assert json.loads(run_cli("history", "--json").stdout)[0]["status"] == "abandoned"
    assert stored["results"][0]["summary"]["n_processes"] == len(stored["results"][0]["processes"])


def test_lock_held_to_the_end_without_json_writes_a_rescue_file(run_cli, tmp_path, probe_bin):
    assert run_cli("run", "syscall.null", *FAST, "-p", "1").returncode == 0
    db = tmp_path / "opcost" / "opcost.db"
    proc = _start(tmp_path, "-p", "30", wait=1)
    conn = _lock_after_first_processes(db, proc)
    _, err = proc.communicate(timeout=120)
    conn.execute("ROLLBACK")
    assert proc.returncode == 1, err
    rescue = list((tmp_path / "opcost").glob("opcost-unsaved-*.json"))
    assert len(rescue) == 1 and str(rescue[0]) in err
    doc = json.loads(rescue[0].read_text())
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 30
    # issue 38, item 2: the rescue file completes the run in place, keeping its id
    rid = doc["run_id"]
    assert f"`opcost import {rescue[0]} --store {db}` completes run {rid} there" in err, err
    before = json.loads(run_cli("show", f"id:{rid}", "--json", "-").stdout)
    have = len(before["results"][0]["processes"])
    assert 2 <= have < 30 and before["status"] in ("failed", "abandoned")
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(doc | {"label": "other"}))
    cp = run_cli("import", str(tampered))
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1, cp.stderr
    assert f"run {rid} in the store has this file's identity (uuid) but not its content: its label" in cp.stderr
    edited = json.loads(json.dumps(doc))   # one figure of a process the store holds, its count unchanged
    edited["results"][0]["processes"][1]["samples"][2]["ns_per_op"] += 1.0
    tampered.write_text(json.dumps(edited))
    cp = run_cli("import", str(tampered))
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1, cp.stderr
    assert "results[0] process 1's sample 2 ns_per_op is '" in cp.stderr, cp.stderr
    assert len(json.loads(run_cli("show", f"id:{rid}", "--json", "-").stdout)["results"][0]["processes"]) == have
    cp = run_cli("import", str(rescue[0]))
    assert cp.returncode == 0, cp.stderr
    assert f"run {rid}: {30 - have} process(es) added, now complete" in cp.stdout, cp.stdout
    after = json.loads(run_cli("show", f"id:{rid}", "--json", "-").stdout)
    assert after["status"] == "complete" and len(after["results"][0]["processes"]) == 30
    assert [p["samples"] for p in after["results"][0]["processes"]] == \
        [p["samples"] for p in doc["results"][0]["processes"]]
    cp = run_cli("import", str(rescue[0]))
    assert cp.returncode == 0 and "imported 0 run(s); 1 already stored" in cp.stdout, cp.stdout
    assert json.loads(run_cli("show", f"id:{rid}", "--json", "-").stdout) == after


def test_lock_released_while_waiting_loses_nothing(run_cli, tmp_path, probe_bin):
    assert run_cli("run", "syscall.null", *FAST, "-p", "1").returncode == 0
    db = tmp_path / "opcost" / "opcost.db"
    # Waiting up to 6 s, it says so after 3 s (half its budget; 10 s at most,
    # so that writers taking turns at the lock say nothing): held 4 s here.
    proc = _start(tmp_path, "-p", "30", "--label", "patient", wait=6)
    conn = _lock_after_first_processes(db, proc)
    time.sleep(4)
    conn.execute("ROLLBACK")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "locked by another program; waiting" in err
    doc = json.loads(run_cli("show", "patient", "--json", "-").stdout)
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 30


def test_store_locked_from_the_start_is_exit_1_not_2(run_cli, tmp_path):
    assert run_cli("run", "syscall.null", *FAST, "-p", "1").returncode == 0
    conn = sqlite3.connect(tmp_path / "opcost" / "opcost.db", isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    cp = run_cli("run", "syscall.null", *FAST, "-p", "2", env={"OPCOST_STORE_WAIT": "1"})
    conn.execute("ROLLBACK")
    assert cp.returncode == 1, cp.stderr
    assert "locked by another program" in cp.stderr and "Traceback" not in cp.stderr
