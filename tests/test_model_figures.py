"""The figures derived from a document are the model's, defined once (issue
24): the per-process median, a result's key, the refusal of runs from
different machines, the series schema, the summary read through `Summary`.
The source tree is searched so that a copy coming back fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from opcost.errors import UsageError
from opcost.model import (IDENTITY_FIELDS, SERIES_SCHEMA, Plan, Summary, machine_differences, plan_of,
                          process_median, process_medians, result_key, same_machine, switches_of)

SRC = Path(__file__).resolve().parents[1] / "src" / "opcost"


def _sources() -> dict[str, str]:
    return {str(p.relative_to(SRC)): p.read_text() for p in sorted(SRC.rglob("*.py"))}


def _defined(name: str) -> list[str]:
    """The modules that define a function or assign a module-level name `name`."""
    out = []
    for rel, text in _sources().items():
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                out.append(rel)
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                out.append(rel)
    return out


def _matching(pattern: str) -> list[str]:
    return [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}" for rel, text in _sources().items()
            for m in re.finditer(pattern, text)]


# --- one definition each -------------------------------------------------------------

def _files(pattern: str) -> list[str]:
    return sorted({m.split(":")[0] for m in _matching(pattern)})


def test_the_per_process_median_is_derived_in_one_place():
    assert _defined("process_median") == ["model.py"] and _defined("process_medians") == ["model.py"]
    # a median over a process's batches, or the summary's list read raw, anywhere but the model
    assert _files(r"median\(\s*\[\s*\w+\[\"ns_per_op\"\] for \w+ in") == ["model.py"]
    assert _files(r"\.get\(\"process_medians_ns\"\)") == ["model.py"]


def test_result_key_is_the_models():
    assert _defined("result_key") == ["model.py"]


def test_the_different_machines_refusal_is_the_models():
    assert _defined("IDENTITY_FIELDS") == ["model.py"]
    assert _files(r"ran on different machines") == ["model.py"]


def test_the_series_schema_is_named_once():
    assert _defined("SERIES_SCHEMA") == ["model.py"]
    # every document kind's name (result, comparison, series, fleet, ...) is set in the model alone
    named = [m.split(":")[0] for m in _matching(r"= \"opcost\.\w+/1\"")]
    assert len(named) >= 3 and set(named) == {"model.py"}


def test_a_summary_is_read_through_the_model():
    assert _matching(r"\.get\(\"summary\"\) or \{\}") == []
    assert _files(r"fill_summaries\(") == ["store/base.py", "summaries.py"]   # the store's load calls it
    assert _defined("fill_summaries") == ["summaries.py"]


def test_no_command_reparses_a_stored_command_line():
    assert _defined("_stored_args") == [] and _defined("switches_table") == []
    assert _files(r"\.parse_args\(") == ["cli.py", "store/recover.py"]


# --- the methods -----------------------------------------------------------------------

def test_process_medians_from_the_summary_or_the_samples():
    procs = [{"samples": [{"ns_per_op": x} for x in xs]} for xs in ([3, 1, 2], [4, 6], [])]
    assert process_median(procs[0]["samples"]) == 2.0 and process_median(procs[1]["samples"]) == 5.0
    assert process_medians({"processes": procs}) == [2.0, 5.0]                     # no summary yet
    assert process_medians({"processes": procs, "summary": {"process_medians_ns": [2, 5]}}) == [2.0, 5.0]
    # a summary behind its processes (a run interrupted in between) is not trusted
    assert process_medians({"processes": procs, "summary": {"process_medians_ns": [9]}}) == [2.0, 5.0]
    assert process_medians({"summary": {"process_medians_ns": [7.5, 8]}}) == [7.5, 8.0]   # a comparison's arm
    assert process_medians({}) == []


def test_summary_is_typed_and_reads_like_the_document():
    s = Summary.of({"summary": {"median_ns": 2.5, "n_processes": 3, "ci95_ns": [2, 3], "cpus": ["0"],
                                "process_medians_ns": [2, 2.5, "x"], "flags": [{"flag": "steal"}]}})
    assert (s.median_ns, s.n_processes, s.ci95_ns, s.cpus, s.process_medians) == (2.5, 3, [2, 3], ["0"], [2.0, 2.5])
    assert s["median_ns"] == 2.5 and s.get("nope") is None and "cpus" in s and len(s) == 6
    assert s.flags == [{"flag": "steal"}]
    empty = Summary.of({"summary": None})
    assert (empty.n_processes, empty.median_ns, empty.process_medians, dict(empty)) == (0, None, [], {})
    assert Summary.of(None).raw == {} and Summary.of({}).cpus == []


def test_result_key():
    assert result_key({"bench": "ctx.pipe", "key": "ctx.pipe:mode=thread"}) == "ctx.pipe:mode=thread"
    assert result_key({"bench": "ctx.pipe", "params": {"mode": "thread", "arch": "x86_64", "cpu": "1"}}) == \
        "ctx.pipe:mode=thread,cpu=1"
    assert result_key({"bench": "syscall.null", "params": {"arch": "x86_64"}}) == "syscall.null"


def test_same_machine_refuses_or_says_what_was_forced():
    env = {"arch": {"value": "x86_64"}, "cpu_model_name": {"value": "EPYC"}, "kernel": {"value": "6.1"}}
    other = {**env, "cpu_model_name": {"value": "Xeon"}, "kernel": {"value": "6.2"}}
    assert IDENTITY_FIELDS == ("arch", "cpu_model_name", "guest_cpu_model")   # guest: the vm target's
    assert machine_differences(env, other) == [("cpu_model_name", "EPYC", "Xeon")]   # the kernel may differ
    assert same_machine([(1, env), (2, {**env, "kernel": {"value": "6.9"}})], force=False, anyway="x") == []
    with pytest.raises(UsageError, match=r"runs 1 and 2 ran on different machines \(cpu_model_name: 'EPYC' vs "
                                         r"'Xeon'\); their costs are not comparable \(--force to do it\)"):
        same_machine([(1, env), (2, other)], force=False, anyway="--force to do it")
    assert same_machine([(1, env), (2, other)], force=True, anyway="x") == [(2, "cpu_model_name", "EPYC", "Xeon")]
    assert same_machine([], force=False, anyway="x") == []


def test_plan_round_trip_and_switches():
    p = Plan(kind="series", specs=["s"], delta=0.04, over={"param": "spin", "values": ["1", "2", "3"]},
             switches={"b": 2, "a": 0}, target="local")
    d = p.to_dict()
    assert list(d) == ["kind", "specs", "a", "b", "delta", "alpha", "over", "boundary", "stages", "switches", "ops",
                       "target"]
    assert list(d["switches"]) == ["a", "b"] and Plan.from_dict(d) == p
    assert plan_of({"plan": d}) == p and plan_of({}) is None
    assert switches_of(Plan(switches={"x": 2}), None, Plan(switches={"x": 4, "y": 2})) == {"x": 2, "y": 2}
    assert SERIES_SCHEMA == "opcost.series/1"
