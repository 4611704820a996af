"""Issue 35 item 4: `./test.sh` on a clone anywhere. What lives in the
shared directory beside the checkout (../shared, or $OPCOST_SHARED) is
optional: test.sh requires hyperfine's scripts from it only where they are
(OPCOST_REQUIRE_TOOLS names hyperfine-scripts then), and otherwise says so
and lets those tests skip. Run here: test.sh's own lines that decide it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _require_lines() -> str:
    text = (ROOT / "test.sh").read_text()
    m = re.search(r"^export OPCOST_REQUIRE_TOOLS=.*?^fi$", text, re.S | re.M)
    assert m, "test.sh sets OPCOST_REQUIRE_TOOLS, then adds hyperfine-scripts where the shared directory has them"
    return m.group(0)


def _decide(cwd: Path, shared: Path | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OPCOST_SHARED"}
    if shared is not None:
        env["OPCOST_SHARED"] = str(shared)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", _require_lines() + '\necho "$OPCOST_REQUIRE_TOOLS"'],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=30)


def test_hyperfine_scripts_required_only_where_the_shared_directory_has_them(tmp_path):
    clone = tmp_path / "clone"
    clone.mkdir()
    cp = _decide(clone, None)          # nothing beside the clone
    assert cp.returncode == 0 and cp.stdout.split() == ["benchstat,hyperfine,zsh"], cp
    assert f"no {tmp_path}/shared/anchors/hyperfine-scripts" in cp.stderr and "skip" in cp.stderr
    scripts = tmp_path / "shared" / "anchors" / "hyperfine-scripts"
    scripts.mkdir(parents=True)
    (scripts / "advanced_statistics.py").write_text("")
    cp = _decide(clone, None)          # ../shared beside the clone
    assert cp.stdout.split() == ["benchstat,hyperfine,zsh,hyperfine-scripts"] and not cp.stderr, cp
    cp = _decide(clone, tmp_path / "elsewhere")        # $OPCOST_SHARED wins
    assert cp.stdout.split() == ["benchstat,hyperfine,zsh"], cp
