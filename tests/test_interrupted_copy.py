"""An interrupted `store copy` or `import` (issue 26, item 6.7) says what it
had copied, not "interrupted before anything was measured": the batches (copy)
or files (import) committed before the signal are named, the one being stored
is not (each is one transaction).

The signal is raised at a chosen point, in process: the second transaction of
the destination raises Interrupted (as the handler would), so what was
committed before it is known exactly. No timing."""

from __future__ import annotations

import json
import signal
import sqlite3
import uuid

import pytest

from opcost import cli, interrupts
from opcost.commands import store as store_cmd
from opcost.store.base import SqlStore

FAST = ["--fake-clock", "100", "-p", "2", "-n", "1", "-w", "0", "--target-ms", "1", "--no-progress"]


@pytest.fixture
def docs(tmp_path, monkeypatch, probe_bin, capsys):
    """A JSON-lines file of N runs (one run measured, copied under new uuids)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cli._main(["run", "syscall.null", *FAST, "--store", "one.db"]) == 0
    assert cli._main(["export", "--store", "one.db", "1", "-o", "one.json"]) == 0
    capsys.readouterr()
    base = json.loads((tmp_path / "one.json").read_text())
    yield lambda n: [base | {"uuid": str(uuid.UUID(int=i + 1, version=4)), "run_id": i + 1} for i in range(n)]
    interrupts.reset()


def _interrupt_at(monkeypatch, call: int, signum=signal.SIGTERM) -> None:
    real = SqlStore.import_runs
    calls = []

    def import_runs(self, docs):
        calls.append(1)
        if len(calls) == call:
            interrupts._s.first = signum          # as the handler notes it
            raise interrupts.Interrupted(signum)
        return real(self, docs)

    monkeypatch.setattr(SqlStore, "import_runs", import_runs)


def _runs(db) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        conn.close()


def test_interrupted_store_copy_says_what_was_copied(tmp_path, docs, monkeypatch, capsys):
    n = store_cmd.BATCH + 5
    (tmp_path / "all.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs(n)))
    assert cli._main(["import", "all.jsonl", "--store", "src.db"]) == 0
    capsys.readouterr()
    _interrupt_at(monkeypatch, 2)
    assert cli._main(["store", "copy", "src.db", "dst.db"]) == 128 + signal.SIGTERM
    err = capsys.readouterr().err.splitlines()
    assert err == [f"opcost: interrupted (SIGTERM); dst.db: read back after the signal, it holds "
                   f"{store_cmd.BATCH} of the {n} run(s) given; 5 not stored (run the same command again to "
                   "store them)"]
    assert _runs(tmp_path / "dst.db") == store_cmd.BATCH


def test_store_copy_interrupted_at_its_first_batch_copied_nothing(tmp_path, docs, monkeypatch, capsys):
    (tmp_path / "all.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs(3)))
    assert cli._main(["import", "all.jsonl", "--store", "src.db"]) == 0
    capsys.readouterr()
    _interrupt_at(monkeypatch, 1, signal.SIGINT)
    assert cli._main(["store", "copy", "src.db", "dst.db"]) == 130
    assert capsys.readouterr().err.splitlines() == [
        "opcost: interrupted (SIGINT); dst.db: read back after the signal, it holds 0 of the 3 run(s) given; "
        "3 not stored (run the same command again to store them)"]
    assert _runs(tmp_path / "dst.db") == 0


def test_interrupted_import_says_which_files_were_imported(tmp_path, docs, monkeypatch, capsys):
    a, b, c = docs(3)
    for name, d in (("a.json", a), ("b.json", b), ("c.json", c)):
        (tmp_path / name).write_text(json.dumps(d) + "\n")
    _interrupt_at(monkeypatch, 2)
    assert cli._main(["import", "a.json", "b.json", "c.json", "--store", "dst.db"]) == 128 + signal.SIGTERM
    out = capsys.readouterr()
    assert out.out.splitlines() == ["a.json: imported 1 run(s) (1)"]
    assert out.err.splitlines() == ["opcost: interrupted (SIGTERM); read back after the signal, the store holds 1 "
                                    "of the 3 run(s) given; 2 not stored (run the same command again to store "
                                    "them) (each file is stored whole or not at all)"]
    assert _runs(tmp_path / "dst.db") == 1


def _interrupt_after_commit(monkeypatch, call: int, signum=signal.SIGTERM) -> None:
    """The signal comes just after the call-th import_runs committed, before
    the command could count it (issue 38, item 4: it said "nothing was imported")."""
    real = SqlStore.import_runs
    calls = []

    def import_runs(self, docs):
        out = real(self, docs)
        calls.append(1)
        if len(calls) == call:
            interrupts._s.first = signum
            raise interrupts.Interrupted(signum)
        return out

    monkeypatch.setattr(SqlStore, "import_runs", import_runs)


def test_a_signal_just_after_a_commit_is_told_from_the_store(tmp_path, docs, monkeypatch, capsys):
    a, b = docs(2)
    for name, d in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(d) + "\n")
    _interrupt_after_commit(monkeypatch, 1)
    assert cli._main(["import", "a.json", "b.json", "--store", "dst.db"]) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert "the store holds 1 of the 2 run(s) given; 1 not stored" in err, err
    assert _runs(tmp_path / "dst.db") == 1
    n = store_cmd.BATCH + 3
    (tmp_path / "all.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs(n)))
    interrupts.reset()   # the first wrapper lets every later call through
    assert cli._main(["import", "all.jsonl", "--store", "src.db"]) == 0
    _interrupt_after_commit(monkeypatch, 1)
    assert cli._main(["store", "copy", "src.db", "dst.db"]) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert f"dst.db: read back after the signal, it holds {store_cmd.BATCH} of the {n} run(s) given" in err, err
