"""opcost from this checkout: `python -m opcost` with this source tree's src/
first on PYTHONPATH (and, when asked, its probe/opcost-probe), and the
opcost on PATH as the alternative."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "probe" / "opcost-probe"

# (argv prefix, environment, description for the log and --json)
Command = tuple[list[str], dict[str, str], str]


def checkout_opcost(probe: bool = False) -> Command:
    """`python -m opcost` from this checkout (an installed one may be older);
    probe: also this checkout's probe, via OPCOST_PROBE."""
    env = dict(os.environ)
    src = str(REPO / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if probe:
        env["OPCOST_PROBE"] = str(PROBE)
    return [sys.executable, "-m", "opcost"], env, f"{Path(sys.executable).name} -m opcost (PYTHONPATH={src})"


def installed_opcost() -> Command | None:
    """The opcost on PATH, None when there is none."""
    exe = shutil.which("opcost")
    return ([exe], dict(os.environ), exe) if exe else None

