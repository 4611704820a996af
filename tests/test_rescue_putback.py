"""Issue 38, items 2 and 4 on a real PostgreSQL server: its postmaster
killed mid-run (an immediate shutdown: every backend gone, no checkpoint),
the run goes on into a rescue file; the server restarted, `opcost import`
of that file completes the stored run in place (same id, every process,
`complete`), a second import changes nothing, a tampered file is refused.
And an import or a copy interrupted just after a commit tells what the
store holds, read back. SQLite: tests/test_store_lock.py (the rescue put
back) and tests/test_interrupted_copy.py (the read-back)."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from conftest import cli_argv, cli_env
from test_interrupted_copy import _interrupt_after_commit

from opcost import cli, interrupts

FAST = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "--no-progress"]


def _processes(url: str) -> int:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM processes").fetchone()[0]
    except psycopg.Error:
        return 0


N = 300


def test_postmaster_killed_mid_run_then_the_rescue_completes_the_run(postgres_server, tmp_path, probe_bin):
    pg = postgres_server
    url = pg.url(pg.new_database("crash"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    def opcost(*args):
        cp = subprocess.run(cli_argv(*args, "--store", url), env=cli_env(tmp_path), cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert "Traceback" not in cp.stderr, cp.stderr
        return cp

    assert opcost("run", "syscall.null", *FAST, "-p", "1").returncode == 0
    # 300 processes: enough that the run is still going when the server is killed, on a quiet machine
    # too (60 ended first in a CI run); the fake clock keeps each one short
    proc = subprocess.Popen(cli_argv("run", "syscall.null", *FAST, "-p", str(N), "--store", url), cwd=tmp_path,
                            env=cli_env(tmp_path, OPCOST_STORE_WAIT="1", TMPDIR=str(tmp)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _processes(url) < 4 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)   # the test server commits asynchronously: let its WAL writer flush (200 ms)
    assert proc.poll() is None, "the run ended before the server could be killed"
    try:
        pg.crash()
        _, err = proc.communicate(timeout=120)
    finally:
        pg.restart()
    assert proc.returncode == 1 and "Traceback" not in err, err
    rescue = list(tmp.glob("opcost-unsaved-*.json"))
    assert len(rescue) == 1 and str(rescue[0]) in err, err
    doc = json.loads(rescue[0].read_text())
    rid = doc["run_id"]
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == N
    assert f"`opcost import {rescue[0]} --store " in err and f"completes run {rid} there" in err, err
    before = json.loads(opcost("show", f"id:{rid}", "--json", "-").stdout)
    have = len(before["results"][0]["processes"])
    assert 1 <= have < N and before["status"] != "complete"

    tampered = tmp_path / "tampered.json"
    bad = json.loads(json.dumps(doc))
    bad["results"][0]["processes"][0]["samples"][0]["ns_per_op"] += 1.0
    bad["results"][0]["processes"][0]["samples"].pop()
    tampered.write_text(json.dumps(bad))
    cp = opcost("import", str(tampered))
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1, cp.stderr
    assert "results[0] process 0's header and samples" in cp.stderr, cp.stderr
    bad["results"][0]["processes"][0]["samples"] = doc["results"][0]["processes"][0]["samples"][:]
    bad["results"][0]["processes"][0]["samples"][1] = dict(bad["results"][0]["processes"][0]["samples"][1], iters=7)
    tampered.write_text(json.dumps(bad))   # a figure changed, the count kept
    cp = opcost("import", str(tampered))
    assert cp.returncode == 2 and "results[0] process 0's sample 1 iters is '" in cp.stderr, cp.stderr

    cp = opcost("import", str(rescue[0]))
    assert cp.returncode == 0, cp.stderr
    assert f"run {rid}: {N - have} process(es) added, now complete" in cp.stdout, cp.stdout
    after = json.loads(opcost("show", f"id:{rid}", "--json", "-").stdout)
    assert after["status"] == "complete" and after["run_id"] == rid
    assert [p["samples"] for p in after["results"][0]["processes"]] == \
        [p["samples"] for p in doc["results"][0]["processes"]]
    cp = opcost("import", str(rescue[0]))
    assert cp.returncode == 0 and "imported 0 run(s); 1 already stored" in cp.stdout, cp.stdout
    assert json.loads(opcost("show", f"id:{rid}", "--json", "-").stdout) == after
    assert [r["id"] for r in json.loads(opcost("history", "--json").stdout)] == [rid, 1]


def test_import_and_copy_interrupted_after_a_commit_read_the_store_back(postgres_server, tmp_path,
                                                                       monkeypatch, capsys, probe_bin):
    from opcost.commands import store as store_cmd

    pg = postgres_server
    url = pg.url(pg.new_database("signal"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    try:
        assert cli._main(["run", "syscall.null", *FAST, "-p", "1", "--store", "one.db"]) == 0
        assert cli._main(["export", "--store", "one.db", "1", "-o", "one.json"]) == 0
        base = json.loads((tmp_path / "one.json").read_text())
        n = store_cmd.BATCH + 2
        docs = [base | {"uuid": f"00000000-0000-4000-8000-{i:012d}", "run_id": i + 1} for i in range(n)]
        (tmp_path / "a.json").write_text(json.dumps(docs[0]))
        (tmp_path / "b.json").write_text(json.dumps(docs[1]))
        capsys.readouterr()
        _interrupt_after_commit(monkeypatch, 1)
        assert cli._main(["import", "a.json", "b.json", "--store", url]) == 128 + signal.SIGTERM
        err = capsys.readouterr().err
        assert "read back after the signal, the store holds 1 of the 2 run(s) given; 1 not stored" in err, err
        interrupts.reset()
        (tmp_path / "all.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
        assert cli._main(["import", "all.jsonl", "--store", "src.db"]) == 0
        _interrupt_after_commit(monkeypatch, 1)
        copy_url = pg.url(pg.new_database("copy"))
        assert cli._main(["store", "copy", "src.db", copy_url]) == 128 + signal.SIGTERM
        err = capsys.readouterr().err
        assert f"it holds {store_cmd.BATCH} of the {n} run(s) given; 2 not stored" in err, err
    finally:
        interrupts.reset()


def test_a_live_run_is_copied_as_a_snapshot_then_completed_in_place(tmp_path, probe_bin):
    """Issue 38, item 3 (SQLite): `store copy` of a run still being measured
    copies what it has, marked interrupted (never running in DST), says so;
    copying again once the run has ended completes it in place, same id."""
    import sqlite3

    def opcost(*args):
        cp = subprocess.run(cli_argv(*args), env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL)
        assert "Traceback" not in cp.stderr, cp.stderr
        return cp

    def processes(db):
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
                return c.execute("SELECT count(*) FROM processes").fetchone()[0]
        except sqlite3.Error:
            return 0

    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    proc = subprocess.Popen(cli_argv("run", "syscall.null", *FAST, "-p", "150", "--store", str(src)), cwd=tmp_path,
                            env=cli_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while processes(src) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    cp = opcost("store", "copy", str(src), str(dst))
    live = proc.poll() is None
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    if not live:
        pytest.skip("the run ended before it could be copied live (a very slow machine)")
    assert cp.returncode == 0 and "run 1 is still being measured: copied as a partial snapshot" in cp.stderr, cp
    first = json.loads(opcost("show", "id:1", "--json", "-", "--store", str(dst)).stdout)
    assert first["status"] == "interrupted" and len(first["results"][0]["processes"]) < 150
    cp = opcost("store", "copy", str(src), str(dst))
    assert cp.returncode == 0 and "run 1:" in cp.stdout + cp.stderr, cp
    done = json.loads(opcost("show", "id:1", "--json", "-", "--store", str(dst)).stdout)
    assert done["status"] == "complete" and len(done["results"][0]["processes"]) == 150
    assert [r["id"] for r in json.loads(opcost("history", "--json", "--store", str(dst)).stdout)] == [1]
