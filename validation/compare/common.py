"""Shared by the comparison validation scripts: how to call opcost, and
where the raw comparison documents are kept for later analysis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def opcost_cmd() -> tuple[list[str], dict]:
    """The opcost of this source tree (an installed one may be older)."""
    if not (ROOT / "probe" / "opcost-probe").exists():
        subprocess.run(["make", "-C", str(ROOT / "probe"), "-s"], check=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return [sys.executable, "-m", "opcost"], env


def ab(benches: list[str], a: str, b: str, extra: list[str]) -> dict:
    """One `opcost ab` run; returns its opcost.comparison/1 document."""
    cmd, env = opcost_cmd()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "cmp.json"
        cp = subprocess.run([*cmd, "ab", *benches, "--a", a, "--b", b, "--no-store", "--no-progress",
                             "--json", str(out), *extra], capture_output=True, text=True, env=env)
        if cp.returncode != 0:
            raise SystemExit(f"opcost ab failed ({cp.returncode}): {cp.stderr.strip()[-500:]}")
        return json.loads(out.read_text())


def probe_header(bench: str, spin: int, cpu: str) -> dict:
    """The probe's header for one variant: carries the spin's own cost."""
    opcost_cmd()  # builds the probe if needed
    exe = os.environ.get("OPCOST_PROBE") or ROOT / "probe" / "opcost-probe"
    cp = subprocess.run([str(exe), "run", bench, "--spin", str(spin), "--cpu", cpu, "--samples", "1",
                         "--warmup", "0", "--iters", "1"], capture_output=True, text=True, check=True)
    return json.loads(cp.stdout.splitlines()[0])
