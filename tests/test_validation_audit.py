"""validation/stats/audit.py, the statistical audit of issue 25: it runs in
its quick mode and prints every table. Its PASS/FAIL lines are the audit's
findings about the rules, not this test's: they are not asserted here
(simulated with a fixed seed, so the output never depends on this CPU's
timing either)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AUDIT = ROOT / "validation" / "stats" / "audit.py"


def _run(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(AUDIT), *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def test_audit_quick_runs_and_prints_its_tables():
    cp = _run("--quick")
    assert cp.returncode == 0, cp.stderr
    out = cp.stdout
    for section in ("== Fixed design (ab -p N)", "== Power:", "== Sequential design (ab)", "== Stored runs (compare)",
                    "== Series (series)", "== Issue 37: the sequential default", "== Issue 37: an order effect",
                    "== Issue 37: the `bimodal` flag", "== Issue 37: 16 benchmarks", "== The smallest p", "== Targets:"):
        assert section in out, (section, out)
    rows = out.splitlines()
    # every scenario and size of the fixed design, each with a verdict on its targets
    for name in ("normal", "lognormal", "bimodal", "pool", "drift"):
        for n in (6, 10, 20, 40):
            assert any(r.split()[:2] == [name, str(n)] and ("PASS" in r or "FAIL" in r) for r in rows), (name, n)
    for off in ("0.5%", "1.0%", "2.0%"):
        assert sum(r.split()[:1] == [off] for r in rows) == 4, off
    for case in ("offset:0.005", "offset:0.01", "offset:0.02", "bimodal"):
        assert any(r.startswith(case) and "flat" in r for r in rows), case
    # the smallest p at 3-6 per arm is printed (its value is a finding, not asserted)
    floor = next(r for r in rows if r.lstrip().startswith("n=3:"))
    assert "n=4:" in floor and "n=6:" in floor
    assert re.search(r"^== Targets: \d+ of \d+ hold", out, re.M), out


def test_audit_is_seeded():
    # the same output whatever the number of workers: each cell has its own seed
    argv = ("--reps", "4", "--seq-reps", "2", "--series-reps", "2", "--pw-reps", "2", "--resamples", "50")
    one, two = _run(*argv, "--workers", "1"), _run(*argv, "--workers", "2")
    assert one.returncode == 0, one.stderr
    strip = [x for x in one.stdout.splitlines() if not x.rstrip().endswith(" s")]
    assert strip == [x for x in two.stdout.splitlines() if not x.rstrip().endswith(" s")]


def test_audit_refuses_bad_input_in_one_line():
    cp = _run("--workers", "3")
    assert cp.returncode == 2
    assert "--workers must be 1 or 2" in cp.stderr and "Traceback" not in cp.stderr
    cp = _run("--pool", "nope", "--reps", "2")
    assert cp.returncode == 2, cp.stderr
    assert "no pool 'nope'" in cp.stderr and "Traceback" not in cp.stderr
    cp = _run("--src", str(ROOT / "tests"))
    assert cp.returncode == 2 and "holds no opcost package" in cp.stderr
    cp = _run("--only", "sequential,nope")
    assert cp.returncode == 2 and "--only takes sections among" in cp.stderr and "Traceback" not in cp.stderr


def test_audit_runs_one_section_alone():
    cp = _run("--only", "sequential", "--seq-reps", "2", "--resamples", "50")
    assert cp.returncode == 0, cp.stderr
    heads = [x for x in cp.stdout.splitlines() if x.startswith("== ")]
    assert [h.split(":")[0].split(" (")[0] for h in heads] == [
        "== Sequential design", "== The smallest p the fixed design's test can reach", "== Targets"], heads
