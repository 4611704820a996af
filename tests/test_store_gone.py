"""A store removed or replaced while a run writes into it (issue 26, item 6.1):
the connection would go on committing into the unlinked file and the run
would end with "stored as run N", exit 0, having lost everything. opcost
checks the store's identity (device, inode) before each commit: a vanished
store is the rescue file's case, as for a locked one (exit 1, said).

No timing: the fake clock measures 400 processes in a few seconds at most;
the store is removed once it holds 2 of them (a bounded wait), long before
the end."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time

import pytest

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


def _remove_file(d):
    os.unlink(d / "s.db")


def _remove_dir(d):
    shutil.rmtree(d)


def _replace_dir(d):
    shutil.rmtree(d)
    d.mkdir()


@pytest.mark.parametrize("remove,rescued_in", [(_remove_file, "D"), (_remove_dir, "T"), (_replace_dir, "D")],
                         ids=["file-removed", "dir-removed", "dir-replaced"])
def test_store_removed_mid_run_goes_to_a_rescue_file_exit_1(tmp_path, probe_bin, remove, rescued_in):
    d = tmp_path / "D"
    db = d / "s.db"
    (tmp_path / "T").mkdir()   # the temporary directory: the next folder tried after the store's (issue 38)
    proc = subprocess.Popen(cli_argv("run", "syscall.null", *FAST, "--store", str(db)), cwd=tmp_path,
                            env=cli_env(tmp_path, TMPDIR=str(tmp_path / "T")), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _processes(db) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before its store could be removed"
    remove(d)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "stored as run" not in err
    assert f"store {db} was removed while opcost was using it" in err
    # issue 38: no run of that store is named (a new file there would hold another run of that id)
    assert "there is incomplete" not in err and "completes run" not in err, err
    folder = tmp_path / rescued_in
    rescue = list(folder.glob("opcost-unsaved-*.json"))
    assert len(rescue) == 1 and str(rescue[0]).endswith(rescue[0].name) and rescue[0].name in err
    doc = json.loads(rescue[0].read_text())
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == N
    assert doc["store_missed"]["processes"] >= 1
    assert "everything measured is in" in err


def test_store_replaced_by_another_file_mid_run(tmp_path, probe_bin):
    d = tmp_path / "D"
    db = d / "s.db"
    out = tmp_path / "out.json"
    proc = subprocess.Popen(cli_argv("run", "syscall.null", *FAST, "--store", str(db), "--json", str(out)),
                            cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    while _processes(db) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before its store could be replaced"
    shutil.copy(db, tmp_path / "copy.db")
    os.replace(tmp_path / "copy.db", db)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "stored as run" not in err
    assert f"store {db} was replaced by another file" in err
    assert "there is incomplete" not in err and "the file there now holds no part of it" in err, err
    doc = json.loads(out.read_text())
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == N
    assert not list(tmp_path.rglob("opcost-unsaved-*.json"))   # the --json file has it all


def test_store_kept_in_place_still_stores(run_cli, tmp_path):
    cp = run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "3", "-n", "3", "-w", "1",
                 "--target-ms", "1", "--store", str(tmp_path / "D" / "s.db"))
    assert cp.returncode == 0 and "stored as run 1" in cp.stderr, cp.stderr
