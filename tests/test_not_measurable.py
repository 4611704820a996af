"""Issue 36 item 1: a validation script given a figure <= 0 (a net figure
whose subtracted overhead is larger than the operation, as a cold-cache
fxsave on a host with AMX) prints its table with that row marked "not
measurable here (overhead larger than the operation)", the other rows as
usual, and exits 0: no traceback (it was `ValueError: math domain error` in
distributions.hodges_lehmann). Stand-in sides, as tests/test_interleave.py
does: nothing is built, run or timed."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from validation.anchors import run as anchors_run  # noqa: E402
from validation.harness import distributions, refcompare  # noqa: E402
from validation.instructions import run as instructions_run  # noqa: E402
from validation.overhead import run as overhead_run  # noqa: E402

MARK = distributions.NOT_MEASURABLE


def stand_in_refcompare(monkeypatch, negative: str):
    """opcost and reference sides that give figures at once: the operation
    `negative` nets below zero (and to 0) in some of opcost's processes."""
    counter = itertools.count()

    def run_opcost(cmd, env, spec, cpu, work):
        k = next(counter)
        ns = (-13.0 if k % 3 == 0 else 0.0 if k % 3 == 1 else 40.0) if spec == negative else 100.0 + k % 4
        return {"median_ns": ns, "iters": 1000, "batches_ns": [ns] * 3, "cpu_share": 1.0,
                "overhead_ns": 50.0, "aux_ns": 10.0}

    def run_ref(exe, op, iters, cpu, rng):
        return {"median_ns": 100.0 + rng.random(), "iters": iters, "batches_ns": [100.0] * 3, "flush_ns": 5.0,
                "cpu_share": 1.0}

    monkeypatch.setattr(refcompare, "build_ref", lambda *a, **k: Path("/nonexistent/ref"))
    monkeypatch.setattr(refcompare, "run_opcost", run_opcost)
    monkeypatch.setattr(refcompare, "run_ref", run_ref)


@pytest.mark.parametrize("mod, ops, negative", [
    (instructions_run, "fxsave cold,xsave hot", "xstate.fxsave:cache=cold"),
    (overhead_run, "ctx.yield,syscall.null", "ctx.yield"),
])
def test_refcompare_script_marks_the_row_and_prints_the_rest(mod, ops, negative, monkeypatch, capsys, tmp_path):
    stand_in_refcompare(monkeypatch, negative)
    monkeypatch.setattr(mod, "opcost_command", lambda: (["opcost"], {}, "stand-in opcost"))
    out_json = tmp_path / "out.json"
    assert mod.main(["--rounds", "4", "--ops", ops, "--json", str(out_json), "--check"]) == 0
    out = capsys.readouterr().out
    bad, good = ops.split(",")
    bad_lines = [ln for ln in out.splitlines() if ln.startswith(bad + " ")]
    good_lines = [ln for ln in out.splitlines() if ln.startswith(good + " ")]
    # the figures table, then the distribution table: the row marked in both, the other judged
    assert len(bad_lines) == len(good_lines) == 2
    assert MARK in bad_lines[0] and "of 4 rounds" in bad_lines[0] and MARK in bad_lines[1]
    assert "PASS" in good_lines[0] and "no slower" in good_lines[1]
    assert not any(MARK in ln for ln in good_lines)
    import json
    rows = {r["operation"]: r for r in json.loads(out_json.read_text())["operations"]}
    assert rows[bad]["ratio"] is None and rows[bad]["pass"] is None and rows[bad]["not_measurable"] == MARK
    assert rows[bad]["rounds_not_measurable"] >= 1 and rows[good]["pass"] is True


def test_distributions_compare_refuses_no_figure_it_cannot_log():
    d = distributions.compare([100.0, -1.0, 90.0], [100.0, 100.0, 100.0], 1.05, 0)
    assert d["not_measurable"] == MARK and d["slower_at"] == [] and "hl_ratio" not in d
    assert distributions.ratio(0.0, 1.0) is None and distributions.ratio(2.0, 1.0) == 2.0
    assert distributions.ratio(float("nan"), 1.0) is None


def test_anchors_script_marks_the_row_and_prints_the_rest(monkeypatch, capsys, tmp_path):
    """syscall.null nets below zero (a subtracted overhead larger than it),
    ctx.pipe process measures: the first is marked, the second judged."""
    bad, good = "syscall.null", "ctx.pipe process"

    def resolve_rows(rows, benches, cfg):
        return {r.name: {"status": "ok", "spec": r.name.split()[0], "minus_spec": None, "minus_div": 1,
                         "anchor": None, "why": None, "dropped_params": [], "sized": None, "placed": None}
                for r in rows}

    def run_opcost(cmd, env, spec, cpu, extra, work, **kw):
        return {"ns_per_op": -5.0 if spec == bad else 1000.0, "wall_s": 0.1, "cpu_share": 1.0}

    monkeypatch.setattr(anchors_run, "opcost_command", lambda: (["opcost"], {}, "stand-in opcost"))
    monkeypatch.setattr(anchors_run, "opcost_benches", lambda cmd, env: {})
    monkeypatch.setattr(anchors_run, "resolve_rows", resolve_rows)
    monkeypatch.setattr(anchors_run, "size_rows", lambda *a, **k: None)
    monkeypatch.setattr(anchors_run, "place_rows", lambda *a, **k: None)
    monkeypatch.setattr(anchors_run, "run_opcost", run_opcost)
    monkeypatch.setattr(anchors_run, "run_anchor", lambda anchor, cpu: {"ns_per_op": 1000.0, "wall_s": 0.1,
                                                                        "cpu_share": 1.0})
    out_json = tmp_path / "out.json"
    assert anchors_run.main(["--runs", "3", "--ops", f"{bad},{good}", "--json", str(out_json), "--check"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| `")]
    marked = [ln for ln in rows if ln.startswith(f"| `{bad}` |")]
    assert len(marked) == 1 and len(rows) >= 2      # --ops syscall.null also picks lmbench's lat_syscall null
    assert MARK in marked[0] and "-5.0 ns" in marked[0] and "(3 of 3 runs)" in marked[0]
    assert all("PASS" in ln and "1.000" in ln for ln in rows if ln not in marked)
    assert "could not run" not in out
    import json
    got = {r["operation"]: r for r in json.loads(out_json.read_text())["operations"]}
    assert got[bad]["status"] == "not measurable" and "ratio" not in got[bad]
    assert all(run["ratio"] is None for run in got[bad]["runs"])
