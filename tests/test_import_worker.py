"""Issue 38, item 6: a streamed file's processes are parsed, checked and
turned into sample rows by a worker process (transfer.ProcessParser) while
the importing process stores the one before. What it stores and what it
refuses (words, JSON path, order of the problems) are the single reading's;
a signal mid-import leaves no worker behind, stores nothing and says so; a
file that is not streamed starts no process. The threshold is lowered here
(as in test_import_large.py) so that small files take that path."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opcost import cli, docschema, transfer

from test_import_large import doc, rows

ROOT = Path(__file__).resolve().parents[1]


def _import(capsys, f: Path, db: Path) -> tuple[int, str, str]:
    code = cli._main(["import", str(f), "--store", str(db)])   # _main: see test_import_large.opcost
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


def _text(processes: int) -> str:
    d = doc(processes, 5)
    d["results"].append(json.loads(json.dumps(d["results"][0])) | {"key": "syscall.null:2", "params": {"via": "raw"}})
    return json.dumps(d, separators=(",", ":"))


def _starts(t: str) -> list[int]:
    """Where each process of the file begins."""
    out, i = [], t.find('{"index":')
    while i >= 0:
        out.append(i)
        i = t.find('{"index":', i + 1)
    return out


def _at(t: str, j: int, old: str, new: str) -> str:
    """t with `old` replaced by `new` once, inside the j-th process of the file."""
    i = t.index(old, _starts(t)[j])
    return t[:i] + new + t[i + len(old):]


_BAD = {   # name: (process (of 16: 8 per result), the change)
    "schema": lambda t, j: _at(t, j, '"iters":10000', '"iters":-1'),
    "surrogate (orjson refuses)": lambda t, j: _at(t, j, '"nvcsw":0', '"nvcsw":0,"note":"\\ud800"'),
    "a split inside a string": lambda t, j: _at(t, j, '"bench":"syscall.null"', '"bench":"a},{\\"index\\":1"'),
    "syntax": lambda t, j: _at(t, j, '"ns":', '"ns"'),
    "nan": lambda t, j: _at(t, j, '"ns_per_op":', '"ns_per_op":NaN,"x":'),
    "duplicate index": lambda t, j: _at(t, j, f'"index":{j % 8}', '"index":0' if j % 8 else '"index":1'),
    "big integer": lambda t, j: _at(t, j, '"nvcsw":0', '"nvcsw":123456789012345678901234567890'),
    "truncated": lambda t, j: t[:_starts(t)[j] + 40],
}


@pytest.mark.parametrize("bad", sorted(_BAD))
def test_the_worker_stores_and_refuses_what_the_single_reading_does(tmp_path, capsys, monkeypatch, bad):
    monkeypatch.setattr(docschema, "STREAM_FROM", 2048)
    real = transfer.stream_file
    t = _text(8)
    for j in (0, 1, 4, 6, 7, 8, 14, 15):       # first, inside, last-but-one and last of each result
        f = tmp_path / f"bad{j}.json"
        f.write_bytes(_BAD[bad](t, j).encode() + b"\n" + b"\xff" * (j % 2))   # and bad UTF-8 after it, at times
        got = []
        for worker in (True, False):
            monkeypatch.setattr(transfer, "stream_file", real if worker else
                                lambda path, heads, parser=None: real(path, heads))
            db = tmp_path / f"{j}-{worker}.db"
            code, out, err = _import(capsys, f, db)
            got.append((code, out, err, rows(db) if db.exists() else None))
        assert got[0] == got[1], (j, got[0][:3], got[1][:3])
        code, _, err, stored = got[0]
        if code:      # refused: one line, nothing stored
            assert code == 2 and err.count("\n") == 1 and (stored is None or stored[0] == []), (code, err)


def test_a_file_that_is_not_streamed_starts_no_process(tmp_path, capsys, monkeypatch):
    def no(*a):
        raise AssertionError("a worker process for a small file")

    monkeypatch.setattr(transfer.ProcessParser, "submit", no)
    f = tmp_path / "small.json"
    f.write_text(_text(8))
    assert f.stat().st_size <= docschema.STREAM_FROM
    code, out, _ = _import(capsys, f, tmp_path / "s.db")
    assert code == 0 and "imported 1 run(s)" in out


_SIGNALLED = """
import os, signal, sqlite3, sys
from opcost import cli, docschema, transfer
from opcost.store.base import SqlStore
docschema.STREAM_FROM = 2048
mode, at, pidfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
real_prepare, real_insert = transfer._prepare, SqlStore._insert_samples
calls = []
def prepare(text, where):          # in the worker (a fork: its own calls)
    with open(pidfile, "w") as f:
        f.write(str(os.getpid()))
    calls.append(1)
    if len(calls) == at and mode == "SIGTERM to the importer from its worker":
        os.kill(os.getppid(), signal.SIGTERM)
    if len(calls) == at and mode == "SIGINT to the process group (Ctrl-C)":
        os.killpg(0, signal.SIGINT)
    return real_prepare(text, where)
def insert(self, db, rows, plain):
    calls.append(1)
    if len(calls) == at and mode == "SIGTERM while storing":
        os.kill(os.getpid(), signal.SIGTERM)
    if len(calls) == at and mode == "SIGKILL while storing":
        os.kill(os.getpid(), signal.SIGKILL)
    return real_insert(self, db, rows, plain)
transfer._prepare, SqlStore._insert_samples = prepare, insert
sys.exit(cli.main(sys.argv[4:]))
"""


@pytest.mark.parametrize("mode,signum", [("SIGTERM to the importer from its worker", signal.SIGTERM),
                                         ("SIGINT to the process group (Ctrl-C)", signal.SIGINT),
                                         ("SIGTERM while storing", signal.SIGTERM)])
def test_a_signal_mid_import_leaves_no_worker_and_stores_nothing(tmp_path, mode, signum):
    f = tmp_path / "run.json"
    f.write_text(_text(30))
    db, pidfile = tmp_path / "s.db", tmp_path / "worker.pid"
    p = subprocess.run([sys.executable, "-c", _SIGNALLED, mode, "6", str(pidfile), "import", str(f), "--store",
                        str(db)], capture_output=True, text=True, timeout=120, start_new_session=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert p.returncode == 128 + signum, p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"interrupted ({signal.Signals(signum).name})" in p.stderr and \
        "the store holds 0 of the 1 run(s) given" in p.stderr, p.stderr
    worker = int(pidfile.read_text())
    assert not Path(f"/proc/{worker}").exists(), "the worker process was left behind"
    if db.exists():
        con = sqlite3.connect(db)
        try:
            assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
            assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 0
        finally:
            con.close()


def test_an_importer_killed_outright_leaves_no_worker(tmp_path):
    """SIGKILL: nothing of opcost runs; the worker (which holds its own
    queue's writing end, so it never reads an end) sees its parent gone."""
    f = tmp_path / "run.json"
    f.write_text(_text(30))
    db, pidfile = tmp_path / "s.db", tmp_path / "worker.pid"
    with open(tmp_path / "err", "w") as err:     # not a pipe: a worker left behind would hold it open
        p = subprocess.run([sys.executable, "-c", _SIGNALLED, "SIGKILL while storing", "6", str(pidfile), "import",
                            str(f), "--store", str(db)], stderr=err, stdout=subprocess.DEVNULL, timeout=120,
                           start_new_session=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert p.returncode == -signal.SIGKILL
    worker = int(pidfile.read_text())
    deadline = time.monotonic() + 10        # it looks every 0.2 s; 10 s for a loaded machine
    while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = Path(f"/proc/{worker}").exists()
    if left:
        os.kill(worker, signal.SIGKILL)
    assert not left, "the worker process outlived its importer"
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    finally:
        con.close()


@pytest.mark.parametrize("worker", [True, False], ids=["worker", "single"])
def test_a_syntax_error_names_its_column_in_the_line_after_the_line_start_was_read_past(
        tmp_path, capsys, monkeypatch, worker):
    # Text is read in chunks and what is behind the reading dropped: the
    # column counts from the line's start, not from the text still held.
    monkeypatch.setattr(docschema, "STREAM_FROM", 2048)
    monkeypatch.setattr(docschema, "_STREAM_CHUNK", 512)
    if not worker:
        real = transfer.stream_file
        monkeypatch.setattr(transfer, "stream_file", lambda path, heads, parser=None: real(path, heads))
    t = _at(_text(8), 13, '"ns":', '"ns"')
    try:
        json.loads(t)
    except json.JSONDecodeError as e:
        col = e.colno
    f = tmp_path / "bad.json"
    f.write_text(t)
    code, _, err = _import(capsys, f, tmp_path / "s.db")
    assert col > 5000 and code == 2 and f"line 1: not JSON (Expecting ':' delimiter: column {col});" in err, err
