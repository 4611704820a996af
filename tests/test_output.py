"""Every file opcost writes goes through opcost.output: what is at the path is
never destroyed. A device stays a device (checked on device nodes this test
makes, never the system's), a FIFO gets the document once, a symlink stays a
link and its target gets the data, `-` is stdout, an existing file keeps its
mode, a new one follows the umask."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading

import pytest

from conftest import cli_argv, cli_env

FAST = ["--fake-clock", "100", "-p", "2", "-n", "3", "-w", "1", "--target-ms", "1"]


def make_device(path, minor: int):
    """A character device like /dev/null (1,3) or /dev/full (1,7), ours to break."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


needs_mknod = pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")


@needs_mknod
@pytest.mark.parametrize("cmd", [["run", "syscall.null", *FAST],
                                 ["ab", "syscall.null", "--a", "spin=1", "--b", "spin=2", *FAST]])
def test_json_to_a_null_device_leaves_the_device(run_cli, tmp_path, cmd):
    dev = make_device(tmp_path / "null", 3)
    cp = run_cli(*cmd, "--json", str(dev))
    assert cp.returncode == 0, cp.stderr
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".null.")]   # no temp file left


@needs_mknod
def test_json_to_a_full_device_fails_at_the_end_and_keeps_the_device(run_cli, tmp_path):
    dev = make_device(tmp_path / "full", 7)
    cp = run_cli("run", "syscall.null", *FAST, "--json", str(dev))
    assert cp.returncode == 1, cp.stderr
    assert "Traceback" not in cp.stderr and "No space left" in cp.stderr
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 7)
    # what was measured is in the store, final
    h = json.loads(run_cli("history", "--json").stdout)
    assert h[0]["status"] == "complete" and h[0]["n_results"] == 1


def test_json_to_a_fifo_with_a_reader_gets_one_document(tmp_path, probe_bin):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    cp = subprocess.run(cli_argv("run", "syscall.null", "signal.install", *FAST, "--json", str(fifo)),
                        env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    reader.join(30)
    assert cp.returncode == 0, cp.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    doc = json.loads(got[0])            # exactly one document, the final one
    assert doc["status"] == "complete" and len(doc["results"]) == 2


def test_json_through_a_symlink_writes_its_target(run_cli, tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    cp = run_cli("run", "syscall.null", *FAST, "--json", str(link))
    assert cp.returncode == 0, cp.stderr
    assert link.is_symlink() and os.readlink(link) == target.name
    assert json.loads(target.read_text())["status"] == "complete"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640   # an existing file keeps its mode


def test_json_dash_is_stdout_and_the_table_goes_to_stderr(run_cli):
    cp = run_cli("run", "syscall.null", *FAST, "--json", "-")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)         # stdout is the document alone
    assert doc["schema"] == "opcost.result/1" and doc["status"] == "complete"
    assert "median" in cp.stderr and "syscall.null" in cp.stderr


def test_json_dash_for_ab_and_compare(run_cli):
    cp = run_cli("ab", "syscall.null", "--a", "spin=1", "--b", "spin=2", *FAST, "--json", "-")
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["schema"] == "opcost.comparison/1"
    run_cli("run", "syscall.null", *FAST, "--label", "one")
    run_cli("run", "syscall.null", *FAST, "--label", "two")
    cp = run_cli("compare", "one", "two", "--json", "-")
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["kind"] == "compare"


def test_new_file_follows_the_umask(tmp_path, probe_bin):
    out = tmp_path / "new.json"
    cp = subprocess.run(["sh", "-c", 'umask 027 && exec "$@"', "sh",
                         *cli_argv("run", "syscall.null", *FAST, "--json", str(out))],
                        env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640


@pytest.mark.parametrize("bad, why", [("", "needs a file path"), ("   ", "needs a file path"),
                                      (".", "is a directory"), ("nodir/x.json", "cannot be written")])
def test_bad_json_paths_are_usage_errors(run_cli, tmp_path, bad, why):
    cp = run_cli("run", "syscall.null", *FAST, "--json", bad)
    assert cp.returncode == 2 and why in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "opcost" / "opcost.db").exists()   # nothing stored


def test_the_writer_unit(tmp_path, monkeypatch):
    from opcost import output
    from opcost.errors import UsageError

    f = tmp_path / "a.json"
    output.write(str(f), b"1")
    os.chmod(f, 0o600)
    output.write(str(f), b"2")
    assert f.read_bytes() == b"2" and stat.S_IMODE(os.stat(f).st_mode) == 0o600
    assert output.is_stream("-") and not output.is_stream(str(f)) and not output.is_stream(str(tmp_path / "no"))
    with pytest.raises(UsageError):
        output.check_target(str(tmp_path), "--export")
    output.check_target("-")
