"""An output that is a FIFO (issue 26, item 6.2): with no reader, open()
blocked forever after the run, and SIGINT/SIGTERM/SIGHUP were noted but never
obeyed (the run is finishing: signals are held). Now the FIFO is opened
without blocking: a reader is waited for at most OPCOST_OUTPUT_WAIT seconds,
and a signal ends the wait; the run stays stored and says so.

No timing: every wait here is bounded (communicate timeouts), and the signal
is sent once the run is final in the store, which is before the FIFO is
opened (a signal that comes earlier is held, and ends the wait as well)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time

import pytest

from conftest import cli_argv, cli_env
from opcost import output

FAST = ["--fake-clock", "100", "-p", "2", "-n", "3", "-w", "1", "--target-ms", "1", "--no-progress"]


def _final_runs(db) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return 0
    try:
        return conn.execute("SELECT count(*) FROM runs WHERE status != 'running'").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def _start(tmp_path, *args, **env):
    return subprocess.Popen(cli_argv("run", "syscall.null", *FAST, *args), cwd=tmp_path,
                            env=cli_env(tmp_path, **env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_fifo_without_reader_a_signal_ends_the_wait(tmp_path, probe_bin, sig):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    proc = _start(tmp_path, "--json", str(fifo))
    db = tmp_path / "opcost" / "opcost.db"
    deadline = time.monotonic() + 60
    while _final_runs(db) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)     # it hung forever before
    # the signal came while the run was finishing: it decides the exit code (128 + it), said
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err
    assert f"opcost: {signal.Signals(sig).name} came as the run was finishing" in err
    assert "stored as run 1" in err
    assert f"opcost: cannot write {fifo} (stopped by a signal while waiting for a program to open the FIFO)" in err


def test_fifo_without_reader_is_waited_for_a_bounded_time(tmp_path, probe_bin):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    proc = _start(tmp_path, "--export", f"csv:{fifo}", OPCOST_OUTPUT_WAIT="0.2")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "stored as run 1" in err
    assert "no program came to open the FIFO within 0.2 s (OPCOST_OUTPUT_WAIT)" in err


def test_fifo_with_a_reader_gets_the_document(tmp_path, probe_bin):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    got: list[bytes] = []
    proc = _start(tmp_path, "--json", str(fifo))
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    _, err = proc.communicate(timeout=60)
    reader.join(timeout=30)
    assert proc.returncode == 0, err
    doc = json.loads(got[0])
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 2


def test_bad_output_wait_is_refused_before_measuring(run_cli, tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    cp = run_cli("run", "syscall.null", *FAST, "--json", str(fifo), env={"OPCOST_OUTPUT_WAIT": "abc"})
    assert cp.returncode == 2
    assert cp.stderr.strip() == ("opcost: OPCOST_OUTPUT_WAIT=abc: give how many seconds a FIFO output waits "
                                 "for its reader, a number >= 0 (default 60)")
    assert not (tmp_path / "opcost" / "opcost.db").exists() or _final_runs(tmp_path / "opcost" / "opcost.db") == 0


def test_write_gives_up_at_once_when_told(tmp_path, monkeypatch):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    monkeypatch.setenv("OPCOST_OUTPUT_WAIT", "600")
    with pytest.raises(OSError, match="stopped by a signal"):
        output.write(str(fifo), b"x", give_up=lambda: True)


def test_write_to_a_fifo_larger_than_its_buffer(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    data = os.urandom(1 << 20)   # 16 times a pipe's default buffer: the writer waits for the reader
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    output.write(str(fifo), data)
    reader.join(timeout=30)
    assert got == [data]
