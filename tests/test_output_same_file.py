"""Two outputs of one command to the same file (issue 26, item 6.8): the last
write silently replaced the first. Refused before anything is measured,
however the file is spelled: the same path, `./x`, an absolute path, a
symlink, another hard link. Standard output and devices may repeat."""

from __future__ import annotations

import os

import pytest

FAST = ["--fake-clock", "100", "-p", "2", "-n", "1", "-w", "0", "--target-ms", "1", "--no-progress"]


def _spellings(tmp_path):
    (tmp_path / "old").write_text("kept\n")
    os.symlink("old", tmp_path / "link")
    os.link(tmp_path / "old", tmp_path / "hard")
    return [("x", "x"), ("x", "./x"), ("x", str(tmp_path / "x")), ("old", "link"), ("old", "hard"),
            ("sub/../x", "x")]


@pytest.mark.parametrize("i", range(6))
def test_two_outputs_to_one_file_exit_2_before_measuring(run_cli, tmp_path, i):
    (tmp_path / "sub").mkdir()
    first, second = _spellings(tmp_path)[i]
    cp = run_cli("run", "syscall.null", *FAST, "--json", first, "--export", f"csv:{second}")
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.splitlines() == [f"opcost: --json {first} and --export csv:{second} are the same file: the "
                                      "second would replace the first; give each output its own file"]
    assert cp.stdout == ""
    assert not (tmp_path / "x").exists() and (tmp_path / "old").read_text() == "kept\n"
    assert not (tmp_path / "opcost" / "opcost.db").exists()   # nothing measured, nothing stored


def test_two_exports_and_other_commands(run_cli, tmp_path):
    cp = run_cli("ab", "syscall.null", "--a", "via=libc", "--b", "via=inline", *FAST,
                 "--export", "csv:y", "--export", "markdown:./y")
    assert cp.returncode == 2 and "are the same file" in cp.stderr and len(cp.stderr.splitlines()) == 1
    assert not (tmp_path / "y").exists()


def test_devices_and_distinct_files_are_fine(run_cli, tmp_path):
    cp = run_cli("run", "syscall.null", *FAST, "--json", os.devnull, "--export", f"csv:{os.devnull}",
                 "--export", "csv:a.csv", "--export", "markdown:a.md")
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "a.csv").stat().st_size > 0 and (tmp_path / "a.md").stat().st_size > 0
