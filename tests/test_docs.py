"""The documentation builds: `mkdocs build --strict` passes (test.sh runs it
too), fails on a broken link or a page left out of the nav, and the command
-line reference the hook generates has one page per subcommand, each what
`opcost NAME --help` prints."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def hook():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "docs" / "hooks" / "cli_reference.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cli_reference_has_a_page_per_subcommand():
    from opcost import commands

    pages = hook().pages()
    assert set(pages) == {f"cli/{c}.md" for c in commands.COMMANDS} | {"cli/index.md"}
    for name in commands.COMMANDS:
        page = pages[f"cli/{name}.md"]
        assert f"usage: opcost {name} [-h]" in page
        assert f"[`opcost {name}`]({name}.md)" in pages["cli/index.md"]
    assert "--timeout SEC" in pages["cli/run.md"] and "[>0..86400]" in pages["cli/run.md"]
    assert "## `opcost probe build`" in pages["cli/probe.md"]


def mkdocs(config_dir: Path, site: Path) -> subprocess.CompletedProcess:
    """Never --quiet: it drops the warnings that --strict counts (a broken
    link then passes)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=config_dir, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def have_mkdocs():
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install '.[test]')")


def test_mkdocs_build_strict(have_mkdocs, tmp_path):
    cp = mkdocs(ROOT, tmp_path / "site")
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "site" / "cli" / "run" / "index.html").is_file()
    assert (tmp_path / "site" / "commands" / "completion" / "index.html").is_file()


@pytest.mark.parametrize("damage, says", [
    ("[a link](nosuch.md)", "nosuch.md"),
    ("[an anchor](commands/run.md#nosuch)", "nosuch"),
    (None, "not included in the \"nav\""),
])
def test_mkdocs_strict_fails_on_a_broken_link_or_a_page_left_out(have_mkdocs, tmp_path, damage, says):
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    if damage:
        with open(copy / "docs" / "install.md", "a") as f:
            f.write(f"\n{damage}\n")
    else:
        (copy / "docs" / "orphan.md").write_text("# Not in the nav\n")
    cp = mkdocs(copy, tmp_path / "site")
    assert cp.returncode != 0
    assert says in cp.stderr, cp.stderr
