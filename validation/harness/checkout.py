"""opcost from this checkout: `python -m opcost` with this source tree's src/
first on PYTHONPATH (and, when asked, its probe/opcost-probe), the opcost on
PATH as the alternative, and the two calls the compare/ scripts make: one
`opcost ab` and one probe header."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
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


def build_probe() -> Path:
    """This checkout's probe, built first if it is not there."""
    if not PROBE.exists():
        subprocess.run(["make", "-C", str(REPO / "probe"), "-s"], check=True)
    return PROBE


def ab(benches: list[str], a: str, b: str, extra: list[str]) -> dict:
    """One `opcost ab` run of this checkout; returns its opcost.comparison/1 document."""
    build_probe()
    cmd, env, _ = checkout_opcost()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "cmp.json"
        cp = subprocess.run([*cmd, "ab", *benches, "--a", a, "--b", b, "--no-store", "--no-progress",
                             "--json", str(out), *extra], capture_output=True, text=True, env=env)
        if cp.returncode != 0:
            raise SystemExit(f"opcost ab failed ({cp.returncode}): {cp.stderr.strip()[-500:]}")
        return json.loads(out.read_text())


def probe_header(bench: str, spin: int, cpu: str, fake_clock: str | None = None) -> dict:
    """The probe's header for one variant: carries the spin's own cost
    (under fake_clock, the fake one: one tick, 0.5 ns, per add, so that a
    calibration on the fake clock does not start from this CPU's speed)."""
    built = build_probe()
    exe = os.environ.get("OPCOST_PROBE") or built
    fake = ["--fake-clock", fake_clock] if fake_clock else []
    cp = subprocess.run([str(exe), "run", bench, "--spin", str(spin), "--cpu", cpu, "--samples", "1",
                         "--warmup", "0", "--iters", "1", *fake], capture_output=True, text=True, check=True)
    return json.loads(cp.stdout.splitlines()[0])
