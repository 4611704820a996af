"""`opcost variants`: the build directory of an opcost killed with SIGKILL
(no clean-up runs) is removed by the next `opcost variants`; `--cflags -O3`
takes a value that starts with '-'."""

import os
import signal
import subprocess
import sys
import time

from opcost.cli import _glue_flag_values
from opcost.variantbuild import WORKDIR_PREFIX, sweep_stale_workdirs


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_sweep_removes_only_directories_of_dead_owners(tmp_path):
    dead = tmp_path / f"{WORKDIR_PREFIX}{dead_pid()}-abc"
    live = tmp_path / f"{WORKDIR_PREFIX}{os.getpid()}-def"
    other = tmp_path / "opcost-variants-notapid"
    for d in (dead, live, other):
        d.mkdir()
        (d / "a.out").write_text("x")
    assert sweep_stale_workdirs(tmp_path) == [dead]
    assert not dead.exists() and live.exists() and other.exists()


def test_sigkilled_variants_leaves_a_directory_the_next_run_removes(cli_environ, src, tmp_path):
    marker = tmp_path / "started"
    p = src('#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n'
            f' FILE *f = fopen("{marker}", "a"); fputs("x", f); fclose(f);\n'
            ' usleep(100000); return 0; }\n')
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    env = cli_environ(TMPDIR=str(tmpdir))
    proc = subprocess.Popen([sys.executable, "-m", "opcost", "variants", str(p), "-DA", "-DB", "-p", "30",
                             "--no-store", "--no-progress"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while (not marker.exists() or len(marker.read_text()) < 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    left = [d.name for d in tmpdir.iterdir()]
    assert len(left) == 1 and left[0].startswith(f"{WORKDIR_PREFIX}{proc.pid}-"), left
    cp = subprocess.run([sys.executable, "-m", "opcost", "variants", str(p), "-DA", "-n", "1", "-p", "1",
                         "--no-store", "--no-progress"], env=env, cwd=tmp_path, capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert list(tmpdir.iterdir()) == []


def test_cflags_value_may_start_with_a_dash():
    assert _glue_flag_values(["variants", "x.c", "-DA", "--cflags", "-O3", "--cc", "gcc"]) == \
        ["variants", "x.c", "-DA", "--cflags=-O3", "--cc=gcc"]
    assert _glue_flag_values(["run", "--cflags", "-O3"]) == ["run", "--cflags", "-O3"]
