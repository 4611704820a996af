"""A full disk (issue 26, items 6.3, 6.9 and 6.11): on a small tmpfs filled
to a few KiB free, a store that cannot be created leaves nothing behind (no
.db, -wal, -shm, -journal); a store that fills up mid-run moves the rescue
file on to where it can be written (the temporary directory, else standard
error) and says where, exit 1; an output that cannot be written at the end
is one line, exit 1, the old file kept. A device or FIFO given as the store
is refused without a -journal beside it.

The tmpfs needs root (mount); without it those tests are skipped, saying so.
No timing: the fake clock measures; the disk fills by its size alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli_argv, cli_env

FAST = ["--fake-clock", "100", "-n", "5", "-w", "1", "--target-ms", "1", "--no-progress"]
SIZE_K = 512


@pytest.fixture
def disk(tmp_path):
    """A 512 KiB tmpfs; disk.fill(free_k) leaves about free_k KiB free."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cp = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE_K}k", "tmpfs", str(mnt)],
                        capture_output=True, text=True)
    if cp.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {cp.stderr.strip()}")

    class Disk:
        path = mnt

        @staticmethod
        def fill(free_k: int) -> None:
            st = os.statvfs(mnt)
            avail = st.f_bavail * st.f_frsize
            with open(mnt / "fill", "wb") as f:
                f.write(b"\0" * max(0, avail - free_k * 1024))

        @staticmethod
        def files() -> list[str]:
            return sorted(p.name for p in mnt.iterdir() if p.name != "fill")

    try:
        yield Disk
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _run(tmp_path, *args, env=None, timeout=120):
    env = {"TMPDIR": str(tmp_path), **(env or {})}   # a rescue file never lands in the real /tmp
    return subprocess.run(cli_argv(*args), env=cli_env(tmp_path, **env), cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("free_k", [16, 40, 64, 96])
def test_a_store_that_cannot_be_created_leaves_no_file(disk, tmp_path, probe_bin, free_k):
    disk.fill(free_k)
    cp = _run(tmp_path, "run", "syscall.null", "-p", "3", *FAST, "--store", str(disk.path / "s.db"))
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.count("\n") == 1 and "Traceback" not in cp.stderr, cp.stderr
    assert "the disk is full" in cp.stderr and "free disk space" in cp.stderr, cp.stderr
    assert disk.files() == [], "left behind by a store that could not be created"


@pytest.mark.parametrize("free_k", [8, 24, 40, 64])
def test_an_existing_store_on_a_full_disk_keeps_no_run_without_results(disk, tmp_path, probe_bin, free_k):
    """A store that exists, the disk nearly full: the run and its results go
    in as one transaction, so a store that fails there keeps nothing of the
    run (exit 2, nothing measured); one that fails later keeps a run marked
    failed, with its results (exit 1, the rest rescued; when even that
    final status cannot be written, `history` shows the run abandoned, its
    processes kept). Never a run with no results."""
    store = str(disk.path / "s.db")
    assert _run(tmp_path, "run", "syscall.null", "-p", "2", *FAST, "--store", store).returncode == 0
    disk.fill(free_k)
    cp = _run(tmp_path, "run", "syscall.null", "-p", "3", *FAST, "--store", store)
    assert cp.returncode in (1, 2) and "Traceback" not in cp.stderr, cp.stderr
    assert "the disk is full" in cp.stderr, cp.stderr
    if cp.returncode == 2:
        assert cp.stderr.count("\n") == 1, cp.stderr
    os.unlink(disk.path / "fill")
    shown = _run(tmp_path, "history", "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    got = {r["id"]: r for r in json.loads(shown.stdout)}
    assert got[1]["status"] == "complete"
    for r in got.values():
        assert r["status"] in ("complete", "failed", "abandoned") and r["n_results"] >= 1, (free_k, r, cp.stderr)
    assert len(got) == (1 if cp.returncode == 2 else 2), (got, cp.stderr)


def test_full_disk_mid_run_rescue_goes_to_the_temporary_directory(disk, tmp_path, probe_bin):
    disk.fill(200)
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    cp = _run(tmp_path, "run", "syscall.null", "-p", "60", *FAST, "--store", str(disk.path / "s.db"),
              env={"TMPDIR": str(tmp)})
    assert cp.returncode == 1, cp.stderr
    assert "Traceback" not in cp.stderr
    assert "the disk is full" in cp.stderr, cp.stderr
    rescued = list(tmp.glob("opcost-unsaved-*.json"))
    assert len(rescued) == 1, (cp.stderr, list(tmp.iterdir()))
    assert f"the run goes to {rescued[0]} instead" in cp.stderr, cp.stderr
    last = cp.stderr.rstrip().splitlines()[-1]
    assert f"everything measured is in {rescued[0]} (`opcost import {rescued[0]} --store " in last, cp.stderr
    doc = json.loads(rescued[0].read_text())
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 60
    assert doc["store_missed"]["processes"] > 0
    assert not [f for f in disk.files() if f.startswith("opcost-unsaved")], disk.files()


def test_full_disk_everywhere_the_run_goes_to_standard_output(disk, tmp_path, probe_bin):
    """The temporary directory, the working directory and the state directory
    full too: the document is printed on standard output (not a terminal)
    at the end, and the last line says so (issue 38, item 1)."""
    disk.fill(200)
    code = ("import runpy, sys, tempfile; tempfile.tempdir = sys.argv.pop(1); "
            "sys.argv[0] = 'opcost'; runpy.run_module('opcost', run_name='__main__')")
    argv = [sys.executable, "-c", code, str(disk.path), "run", "syscall.null", "-p", "60", *FAST,
            "--store", str(disk.path / "s.db")]
    cp = subprocess.run(argv, env=cli_env(tmp_path, XDG_STATE_HOME=str(disk.path / "state")), cwd=disk.path,
                        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert cp.returncode == 1, cp.stderr[-3000:]
    assert "no other folder takes it" in cp.stderr
    assert "its result document (opcost.result/1) goes to standard output" in cp.stderr
    doc, end = json.JSONDecoder().raw_decode(cp.stdout)
    assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 60
    assert cp.stderr.rstrip().splitlines()[-1].endswith(
        "everything measured is in the result document printed on standard output (save it: no file could be "
        "written)"), cp.stderr[-2000:]


def test_no_store_json_on_a_full_disk_is_rescued_whole(disk, tmp_path, probe_bin):
    """`--no-store --json FILE` on a full disk, and `--json /dev/full`: the
    whole document goes to a rescue file in $TMPDIR, named on stderr; exit 1
    (issue 38, item 1: it used to be lost)."""
    disk.fill(0)
    for target in (str(disk.path / "x.json"), "/dev/full"):
        tmp = tmp_path / ("t" + str(len(target)))
        tmp.mkdir()
        cp = _run(tmp_path, "run", "syscall.null", "-p", "3", *FAST, "--no-store", "--json", target,
                  env={"TMPDIR": str(tmp)})
        assert cp.returncode == 1 and "Traceback" not in cp.stderr, cp.stderr
        rescued = list(tmp.glob("opcost-unsaved-*.json"))
        assert len(rescued) == 1, (cp.stderr, list(tmp.iterdir()))
        last = cp.stderr.rstrip().splitlines()[-1]
        assert last.startswith(f"opcost: cannot write {target} (No space left on device)"), cp.stderr
        assert last.endswith(f"everything measured is in {rescued[0]} (`opcost import {rescued[0]}` stores it)"), \
            cp.stderr
        # said once as it happened (where the run goes), once at the end: no line twice
        assert cp.stderr.count("\n") == 2 and (f"; the whole run goes to {rescued[0]}\n" in cp.stderr or
                                                f"; the run goes to {rescued[0]} instead\n" in cp.stderr), cp.stderr
        doc = json.loads(rescued[0].read_text())
        assert doc["status"] == "complete" and len(doc["results"][0]["processes"]) == 3
        assert all(len(p["samples"]) == 5 for p in doc["results"][0]["processes"])
    assert disk.files() == []


def test_outputs_on_a_full_disk_are_one_line_and_keep_the_old_file(disk, tmp_path, probe_bin):
    assert _run(tmp_path, "run", "syscall.null", "-p", "2", *FAST, "--label", "base").returncode == 0
    for name in ("a.json", "b.txt", "c.jsonl", "d.html"):
        (disk.path / name).write_text("old\n")
    disk.fill(0)
    cases = [("show", "base", "--json", "a.json"), ("report", "base", "-o", "b.txt", "--force"),
             ("export", "base", "-o", "c.jsonl", "--force"), ("report", "base", "-f", "html", "-o", "d.html", "--force"),
             ("run", "syscall.null", "-p", "2", *FAST, "--no-store", "--json", "a.json")]
    for args in cases:
        out = args[args.index("--json" if "--json" in args else "-o") + 1]
        argv = [str(disk.path / a) if a == out else a for a in args]
        cp = _run(tmp_path, *argv, env={"TMPDIR": str(tmp_path)})
        assert cp.returncode == 1, (args, cp.stderr)
        lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
        assert "Traceback" not in cp.stderr, cp.stderr
        assert lines[-1].startswith(f"opcost: cannot write {disk.path / out} (No space left on device)"), cp.stderr
        if args[0] != "run":
            assert len(lines) == 1 and lines[0].endswith("is as it was"), cp.stderr
    assert disk.files() == ["a.json", "b.txt", "c.jsonl", "d.html"]
    assert all((disk.path / n).read_text() == "old\n" for n in disk.files())


@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_a_device_or_fifo_as_the_store_is_refused_leaving_nothing(tmp_path, probe_bin, kind):
    d = tmp_path / "d"
    d.mkdir()
    store = d / "s.db"
    if kind == "fifo":
        os.mkfifo(store)
    else:
        store.symlink_to("/dev/null")
    journal_before = os.path.lexists("/dev/null-journal")
    for args in (["run", "syscall.null", "-p", "2", *FAST], ["history"]):
        cp = _run(tmp_path, *args, "--store", str(store), timeout=60)
        want = "a FIFO" if kind == "fifo" else "a character device"
        assert cp.returncode == 2, cp.stderr
        assert cp.stderr.splitlines() == [f"opcost: store {store} is {want}, not a file: --store PATH must be an "
                                          "SQLite file (an existing store or a new path), or use --no-store"]
    assert sorted(p.name for p in d.iterdir()) == ["s.db"]
    assert os.path.lexists("/dev/null-journal") == journal_before
    assert Path(store).is_fifo() if kind == "fifo" else Path(store).is_symlink()
