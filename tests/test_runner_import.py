"""The statistics' import during a target's preflight boots (the vm
target's `prepare`: seconds of QEMU in which nothing is measured): it runs
in a thread while the boots run, it is over before anything is measured,
and it imports abtest (scipy) only for a command that compares. Each case in
a fresh interpreter: the test process has numpy and scipy imported already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, sys, threading, time
from opcost.protocol import Protocol
from opcost.runner import RunOptions, Runner
from opcost.spec import expand
from opcost.targets.replay import ReplayTarget

import opcost.runner as runner_mod

seen = {}
go = threading.Event()
real_import = runner_mod._import_quietly

def held_import(names):   # the thread's import held until the boots have begun: the order is certain
    go.wait(60)
    real_import(names)

runner_mod._import_quietly = held_import

class Booting(ReplayTarget):
    def prepare(self, reqs, begin=None):
        seen["not_before_checks"] = not any(t.name == "opcost-import" for t in threading.enumerate())
        begin()   # the requests passed the checks made before any boot
        importer = [t for t in threading.enumerate() if t.name == "opcost-import"]
        seen["importing_while_preparing"] = bool(importer) and importer[0].is_alive()
        seen["stats_before"] = "opcost.stats" in sys.modules
        go.set()

cls = Booting if sys.argv[1] == "prepare" else ReplayTarget
t = cls.from_file(sys.argv[2])
vs = list(expand("syscall.null", t))
runner = Runner(vs, RunOptions(protocol=Protocol(processes=1, samples=1, warmup=0), compares=sys.argv[3] == "1"),
                target=t)
runner.preflight()
seen["importer_alive_after"] = any(t.name == "opcost-import" and t.is_alive() for t in threading.enumerate())
seen["stats"] = "opcost.stats" in sys.modules
seen["abtest"] = "opcost.abtest" in sys.modules
seen["scipy"] = "scipy.stats" in sys.modules
print(json.dumps(seen))
"""


def preflight(kind: str, compares: bool) -> dict:
    table = ROOT / "tests" / "data" / "replay" / "table.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cp = subprocess.run([sys.executable, "-c", SCRIPT, kind, str(table), "1" if compares else "0"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


@pytest.mark.parametrize("compares", [True, False])
def test_statistics_imported_while_the_preflight_boots(compares):
    seen = preflight("prepare", compares)
    assert seen["not_before_checks"], seen   # a refusal before any boot imports nothing heavy
    assert seen["importing_while_preparing"] and not seen["stats_before"], seen   # started by begin(), imports meanwhile
    assert not seen["importer_alive_after"], seen                                # joined before any measuring
    assert seen["stats"], seen
    assert seen["abtest"] is compares and seen["scipy"] is compares, seen        # scipy only for a comparison


def test_no_preflight_boots_no_early_import():
    """A target without preflight boots (local, ssh): nothing imported at
    the preflight (the run's own start imports, as before)."""
    seen = preflight("plain", True)
    assert not seen["abtest"] and not seen["scipy"] and not seen["importer_alive_after"], seen
