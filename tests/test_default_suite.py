"""`opcost run` with no SPEC measures the default suite: a named subset of
the table (every name in it exists), shown by `opcost list`."""

from __future__ import annotations

import json

from opcost.session import DEFAULT_SUITE

FAST = ["--fake-clock", "100", "-p", "1", "-n", "1", "-w", "0", "--target-ms", "1", "--no-store"]


def test_every_suite_member_is_a_benchmark(run_cli):
    t = json.loads(run_cli("list", "--json").stdout)
    names = [b["name"] for b in t["benchmarks"]]
    assert set(DEFAULT_SUITE) <= set(names)
    assert t["default_suite"] == list(DEFAULT_SUITE)
    assert "msg.hackbench" not in DEFAULT_SUITE  # whole hackbench runs: asked for by name
    assert "default suite (`opcost run` with no SPEC): " + " ".join(DEFAULT_SUITE) in run_cli("list").stdout


def test_run_without_spec_runs_exactly_the_suite(run_cli, tmp_path):
    cp = run_cli("run", *FAST, "--json", "all.json", timeout=300)
    assert cp.returncode == 0, cp.stderr
    doc = json.loads((tmp_path / "all.json").read_text())
    assert [r["bench"] for r in doc["results"]] == list(DEFAULT_SUITE)
