"""Several writers at once into one SQLite store (issue 14): nothing lost, no
"database is locked" shown, and the file intact after a writer is killed -9
in the middle of a write. The store is WAL, every write a short transaction,
and a write that finds the lock taken waits (store/base.py _retry)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT, cli_argv, cli_env

from opcost.store import open_store

FAST = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "-p", "3", "--no-progress"]

# One writer: N runs as the recorder writes them (run, result, processes with
# their samples, statuses), labelled writer=W and seq=J; the store's lock-wait
# notices go to stderr, where the test looks for them.
WRITER = r"""
import sys
from opcost.store import open_store
path, writer, n, procs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def said(msg):
    print("opcost: " + msg, file=sys.stderr, flush=True)
with open_store(path, on_wait=said) as store:
    for j in range(n):
        rid = store.create_run(labels={"writer": writer, "seq": str(j)}, env={"w": writer}, argv=["opcost"],
                               opcost_version="0.1.0")
        res = store.add_result(rid, position=0, bench="syscall.null", params={"cpu": "1"}, op="system call",
                               unit="ns", key="syscall.null")
        for idx in range(procs):
            samples = [{"iters": 1000, "ns_per_op": 50.0 + k, "tsc_per_op": 150.0 + k, "pad": "x" * 200}
                       for k in range(20)]
            store.add_process(res, idx=idx, header={"pid": idx}, samples=samples, trailer={"ok": True},
                              meta={"round": idx})
        store.set_result(res, status="ok", summary={"median_ns": 50.0, "n_processes": procs})
        store.finish_run(rid, "complete")
        print(rid, flush=True)
"""


def _writers(db: Path | str, n_writers: int, runs: int, procs: int) -> list[subprocess.Popen]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return [subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(w), str(runs), str(procs)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for w in range(n_writers)]


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def check_8_writers_of_100(store_ref: str, timeout: float) -> None:
    """8 writer programs x 100 runs each into store_ref (a path or URL, the
    store already created): every writer ends well and never says "locked",
    every run is stored, complete, with its own id, and whole. For every
    backend (test_store_postgresql.py runs it against PostgreSQL)."""
    procs = _writers(store_ref, 8, 100, 2)
    outs = [p.communicate(timeout=timeout) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "locked" not in err.lower() and "Traceback" not in err, err
        assert len(out.split()) == 100
    ids = [int(x) for out, _ in outs for x in out.split()]
    assert len(set(ids)) == 800                      # every run got its own id
    with open_store(store_ref, readonly=True) as store:
        runs = store.list_runs()
        assert len(runs) == 800 and {r["status"] for r in runs} == {"complete"}
        assert {(r["labels"]["writer"], r["labels"]["seq"]) for r in runs} == {
            (str(w), str(j)) for w in range(8) for j in range(100)}
        for rid in ids[::37]:                        # spot checks, whole documents
            doc = store.load_run(rid)
            assert [len(p["samples"]) for p in doc["results"][0]["processes"]] == [20, 20]


def test_8_writers_of_100_runs_each_lose_nothing(tmp_path):
    db = tmp_path / "opcost.db"
    open_store(str(db)).close()                      # created (and WAL) before the writers race
    check_8_writers_of_100(str(db), 600)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM processes").fetchone()[0] == 1600
    assert conn.execute("SELECT count(*) FROM samples").fetchone()[0] == 1600 * 20
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"   # at rest: back to one file
    conn.close()
    assert _integrity(db) == "ok"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["opcost.db"]


def test_real_runs_at_once_into_one_store(tmp_path, probe_bin):
    procs = [subprocess.Popen(cli_argv("run", "syscall.null", *FAST, "--label", f"writer={i}"), cwd=tmp_path,
                              env=cli_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "locked" not in err.lower(), err
    with open_store(str(tmp_path / "opcost" / "opcost.db"), readonly=True) as store:
        runs = store.list_runs()
        assert sorted(r["labels"]["writer"] for r in runs) == ["0", "1", "2", "3"]
        for r in runs:
            doc = store.load_run(r["id"])
            assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 3


def test_kill_9_in_the_middle_of_writes_leaves_the_store_intact(tmp_path):
    db = tmp_path / "opcost.db"
    open_store(str(db)).close()
    for attempt in range(3):
        procs = _writers(db, 3, 1000, 4)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:           # until each has stored a few runs
            time.sleep(0.05 + 0.07 * attempt)
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
            n = conn.execute("SELECT count(*) FROM runs WHERE status = 'complete'").fetchone()[0]
            conn.close()
            if n >= 5 * (attempt + 1):
                break
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)           # mid-write: they write without pause
        for p in procs:
            p.communicate(timeout=60)
            assert p.returncode == -signal.SIGKILL
        assert _integrity(db) == "ok"
    with open_store(str(db)) as store:               # opens, and takes new runs
        store.create_run(label="after", env={}, argv=[], opcost_version="0.1.0")
        for r in store.list_runs():
            doc = store.load_run(r["id"])
            if r["status"] == "complete":            # a finished run is whole
                assert [len(p["samples"]) for p in doc["results"][0]["processes"]] == [20] * 4
    assert _integrity(db) == "ok"
