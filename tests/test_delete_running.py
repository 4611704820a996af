"""`history delete --yes` of a run still being measured (issue 26, item 6.6):
it was deleted, and the measuring opcost then failed with a FOREIGN KEY
error. A running run whose opcost is alive is refused (exit 2, one line,
nothing deleted), and the run goes on to the end, stored whole.

No timing: the fake clock measures 400 processes; the delete is tried once the
run has stored 2 of them (a bounded wait), and the run is not stopped."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time

from conftest import cli_argv, cli_env

N = 400
FAST = ["--fake-clock", "100", "-p", str(N), "-n", "3", "-w", "1", "--target-ms", "1", "--no-progress"]


def _processes(db) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return 0
    try:
        return conn.execute("SELECT count(*) FROM processes").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def test_a_run_being_measured_is_not_deleted(run_cli, tmp_path, probe_bin):
    assert run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "1", "-n", "3", "-w", "1",
                   "--target-ms", "1", "--label", "done").returncode == 0
    db = tmp_path / "opcost" / "opcost.db"
    proc = subprocess.Popen(cli_argv("run", "syscall.null", *FAST, "--label", "busy"), cwd=tmp_path,
                            env=cli_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _processes(db) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before the delete could be tried"
    cp = run_cli("history", "delete", "done", "busy", "--yes")
    still = proc.poll() is None
    _, err = proc.communicate(timeout=120)
    assert still, "the run ended while the delete was tried: the test proved nothing"
    assert cp.returncode == 2, cp.stderr
    assert len(cp.stderr.splitlines()) == 1 and cp.stdout == ""
    assert cp.stderr.startswith("opcost: run 2 is still being measured (opcost pid ")
    assert cp.stderr.rstrip().endswith("nothing was deleted")
    assert proc.returncode == 0, err
    runs = {r["id"]: r["status"] for r in json.loads(run_cli("history", "--json").stdout)}
    assert runs == {1: "complete", 2: "complete"}   # neither deleted (all or nothing)
    doc = json.loads(run_cli("show", "busy", "--json", "-").stdout)
    assert len(doc["results"][0]["processes"]) == N
    # Once it has ended it can be deleted.
    cp = run_cli("history", "delete", "busy", "--yes")
    assert cp.returncode == 0 and "deleted 1 run(s): 2" in cp.stdout, cp.stderr
