"""`pip install .` never ships a broken probe: setup.py's build step runs
what it ships (`opcost-probe version`), rebuilds a probe that does not run
(an empty one newer than its sources, as a killed link or a full disk
leaves, is "up to date" for make), and fails in one line when even the
rebuilt one does not run. Run on a copy of the source tree in tmp_path
(setup.py's build_py into a private directory: nothing is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# setup.py's build_py with the extra architectures (i386, arm: tens of
# seconds each) left out: what is checked is the host probe's path
DRIVER = r"""
import sys
sys.argv = ["setup.py", "-q", "build_py", "--build-lib", sys.argv[1]]
import setup as S
S.BuildProbe._try_i386 = staticmethod(lambda here: None)
S.BuildProbe._try_arm = staticmethod(lambda here: None)
S.setup(cmdclass={"build_py": S.BuildProbe}, distclass=S.BinaryDistribution)
"""


def _tree(tmp_path: Path) -> Path:
    """The source tree without its builds."""
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("build", "opcost-probe", "opcost-probe-*", "__pycache__", "tests", ".git",
                                    "*.egg-info")
    for name in ("setup.py", "pyproject.toml", "README.md"):
        tree.mkdir(exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=ignore)
    shutil.copytree(ROOT / "probe", tree / "probe", ignore=ignore)
    (tree / "driver.py").write_text(DRIVER)
    return tree


def _build(tree: Path, lib: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "driver.py", str(lib)], cwd=tree, capture_output=True, text=True,
                          timeout=900, env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def _arch() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from opcost.probe import host_arch
    return host_arch()


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None, reason="needs make and cc")
def test_an_empty_probe_newer_than_its_sources_is_rebuilt(tmp_path):
    tree, lib, arch = _tree(tmp_path), tmp_path / "lib", _arch()
    stale = tree / "probe" / "build" / f"opcost-probe-{arch}"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"")
    later = time.time() + 3600
    os.utime(stale, (later, later))
    cp = _build(tree, lib)
    assert cp.returncode == 0, cp.stderr
    assert f"the {arch} probe {stale} does not run" in cp.stdout and "rebuilt the" in cp.stdout, cp.stdout
    shipped = lib / "opcost" / "_probe" / f"opcost-probe-{arch}"
    v = subprocess.run([str(shipped), "version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.startswith("opcost-probe "), v
    assert stale.stat().st_size > 0      # rebuilt in place: the next build finds it good
    # the counting plugin (issue 34) and its sources ship beside the probe
    assert (lib / "opcost" / "_probe" / "opcost-count.so").is_file()
    assert (lib / "opcost" / "_probe" / "src" / "plugin" / "opcount.c").is_file()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_a_probe_that_does_not_run_even_rebuilt_fails_the_install_in_one_line(tmp_path):
    tree, lib, arch = _tree(tmp_path), tmp_path / "lib", _arch()
    # a "compiler" that leaves garbage where the probe should be, and says nothing
    cc = tmp_path / "badcc"
    cc.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && printf "garbage" > "$2"; shift; done\n')
    cc.chmod(0o755)
    cp = _build(tree, lib, CC=str(cc))
    assert cp.returncode != 0
    assert "Traceback" not in cp.stderr
    # one line of ours, the last (setuptools may warn about its own things before it)
    err = [ln for ln in cp.stderr.strip().splitlines() if ln.strip()]
    assert [ln for ln in err if "opcost" in ln] == err[-1:], cp.stderr
    assert err[-1].startswith(f"opcost: the {arch} probe does not run even rebuilt (") and "nothing installed" in err[-1]
    assert not (lib / "opcost" / "_probe" / f"opcost-probe-{arch}").exists()
