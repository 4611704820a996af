"""Reading the store back (issue 11): `show` prints an ab or variants run as
the comparison its command printed; labels reach their runs (`label:1`) and
print escaped; history/show/compare read without writing, so an old (v1)
store on a read-only mount is read as it is."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from opcost.store import SqliteStore
from test_store import _v1_store

FAST = ["--fake-clock", "100", "-p", "3", "-n", "2", "-w", "0", "--target-ms", "1", "--no-progress"]


def ok(cp) -> str:
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def test_show_of_an_ab_run_prints_its_comparison(run_cli):
    measured = ok(run_cli("ab", "syscall.null", "signal.install", "--a", "", "--b", "spin=4", *FAST,
                          "--delta", "5", "--label", "ab-run"))
    shown = ok(run_cli("show", "ab-run"))
    head, _, body = shown.partition("\n")
    assert head.startswith("run 1 (ab-run), ") and head.endswith(", ab")
    assert "verdict" in body and "B/A" in body
    assert body.strip() == measured.strip()          # rebuilt from the store: the same comparison, --delta 5 too
    assert "5.0%" in body


def test_show_of_a_variants_run_prints_its_comparison(run_cli, src):
    prog = src("#include <stdlib.h>\nint main(void) { return 0; }\n")
    measured = ok(run_cli("variants", prog.name, "-DA", "-DB", "-p", "3", "--fake-clock", "5e6", "--no-progress",
                          "--label", "v", timeout=240))
    shown = ok(run_cli("show", "v"))
    head, _, body = shown.partition("\n")
    assert head.endswith(", variants")
    assert body.strip() == measured.strip()
    assert "A (baseline): -DA" in body


def test_show_of_a_plain_run_is_its_table(run_cli):
    ok(run_cli("run", "syscall.null", *FAST, "--label", "r"))
    shown = ok(run_cli("show", "r"))
    assert shown.splitlines()[0].endswith(", complete")   # no kind for a plain run
    assert any(ln.startswith("syscall.null ") for ln in shown.splitlines())


def test_a_run_labelled_with_a_number_is_reached_with_label(run_cli):
    ok(run_cli("run", "syscall.null", *FAST, "--label", "first"))
    ok(run_cli("run", "signal.install", *FAST, "--label", "1"))
    assert ok(run_cli("show", "1")).startswith("run 1 (first)")       # a number is an id first
    assert ok(run_cli("show", "label:1")).startswith("run 2 (1)")
    assert ok(run_cli("show", "id:2")).startswith("run 2 (1)")
    assert "label:TEXT" in run_cli("show", "--help").stdout.replace("\n", " ")


def _store_with_labels(data_home: Path, labels: list[str]) -> None:
    with SqliteStore(data_home / "opcost" / "opcost.db") as store:
        for label in labels:
            run_id = store.create_run(label=label, env={}, argv=["opcost"], opcost_version="0.1.0")
            store.add_result(run_id, position=0, bench="syscall.null", params={}, op="system call", unit="ns")
            store.finish_run(run_id, "complete")


def test_history_escapes_control_characters_in_labels(run_cli, tmp_path):
    _store_with_labels(tmp_path, ["two\nlines", "\x1b[2J\x1b[31mred", "tab\there", "bidi\u202eevil"])
    out = ok(run_cli("history"))
    lines = out.splitlines()
    assert len(lines) == 5, out                               # header + one line per run
    assert "\x1b" not in out and "\t" not in out and "\u202e" not in out
    for shown in ("two\\nlines", "\\x1b[2J\\x1b[31mred", "tab\\there", "bidi\\u202eevil"):
        assert any(shown in ln for ln in lines), (shown, out)
    assert "\x1b" not in ok(run_cli("show", "id:2"))
    assert json.loads(ok(run_cli("history", "--json")))[3]["label"] == "two\nlines"   # data stays as stored


@pytest.fixture
def ro_mount(tmp_path):
    """A read-only bind mount of a fresh directory (root can write through
    file permissions, not through a read-only mount); unmounted afterwards."""
    d = tmp_path / "ro"
    d.mkdir()

    def mount():
        for args in (["mount", "--bind", str(d), str(d)], ["mount", "-o", "remount,ro,bind", str(d)]):
            cp = subprocess.run(args, capture_output=True, text=True)
            if cp.returncode != 0:
                subprocess.run(["umount", str(d)], capture_output=True)
                pytest.skip(f"cannot make a read-only bind mount here: {cp.stderr.strip()}")
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a read-only bind mount needs root")
    yield d, mount
    if subprocess.run(["umount", str(d)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)   # busy: detach now, free when closed


def test_v1_store_on_a_read_only_mount_is_read_not_migrated(run_cli, ro_mount):
    d, mount = ro_mount
    path = d / "old.db"
    _v1_store(path)
    conn = sqlite3.connect(path)      # a second run, so that compare has two
    conn.execute("INSERT INTO runs (created, label, kind, status, opcost_version, argv, env) "
                 "SELECT '2024-05-02T12:00:00Z', 'newer', kind, status, opcost_version, argv, env FROM runs")
    conn.execute("INSERT INTO results (run_id, position, bench, params, op, unit, status, summary) "
                 "SELECT 2, position, bench, params, op, unit, status, summary FROM results")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    mount()
    with pytest.raises(OSError):
        (d / "probe-write").write_text("x")                   # the mount is read-only, even for root
    out = ok(run_cli("history", "--store", str(path)))
    assert "old" in out and "newer" in out
    assert "syscall.null" in ok(run_cli("show", "old", "--store", str(path)))
    assert "syscall.null" in ok(run_cli("compare", "old", "newer", "--store", str(path)))
    assert path.read_bytes() == before
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()
