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
    assert IDENTITY_FIELDS == ("arch", "cpu_model_name", "guest_cpu_model", "guest_cpus")   # guest: the vm target's
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


# --- the typed documents (issue 33): a comparison's entries, the series ----------------------

def _methods(name: str) -> list[str]:
    """The modules that define a function, method or property `name` anywhere."""
    return sorted({rel for rel, text in _sources().items() for node in ast.walk(ast.parse(text))
                   if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name})


def test_an_entrys_derived_figures_are_the_models():
    # the B/A a verdict rests on (the estimate, else the ratio of medians), defined once as a property
    assert _methods("verdict_ratio") == ["model.py"] and _methods("verdict_estimate") == []
    assert _files(r"get\(\"estimate\", ") == [] and _files(r"\"ci95_estimate\"\) if \"estimate\" in") == []
    assert _files(r"\"estimate\" in self\.raw") == ["model.py"]
    # whether the run is the unit, and the methods of a table, read through the model
    assert _files(r"get\(\"unit\"\) [!=]= (\"run\"|replicates\.UNIT)") == ["model.py"]
    assert _methods("methods_text") == [] and _files(r"dict\.fromkeys\(e\[\"estimator\"\]") == []
    # a series label's flag names and whether a label is emulated: the model's and withhold's
    assert _methods("flag_names") == ["model.py"]


def test_the_consumers_read_entries_as_attributes():
    """No renderer walks a comparison's entries or a series' labels as dicts."""
    walked = _matching(r"for \w+ in (doc|cdoc)(\[\"comparisons\"\]|\.get\(\"comparisons\"\))") + \
        _matching(r"for \w+ in doc(\[\"labels\"\]|\.get\(\"labels\"\))")
    assert walked == []


def _ab_doc() -> dict:
    from opcost.model import COMPARISON_SCHEMA
    entry = {"bench": "b", "key": "b:x=1", "op": "call", "a": {"params": {"x": "1"}, "summary": {"median_ns": 10.0}},
             "b": {"params": {"x": "2"}, "summary": {"median_ns": 11.0}}, "median_a": 10.0, "median_b": 11.0,
             "ratio": 1.1, "ci95_ratio": [1.05, 1.15], "estimate": 1.09, "ci95_estimate": [1.04, 1.14],
             "estimator": "HL", "test": "MWU", "p_value": 0.01, "p_adjusted": 0.02, "delta": 0.02,
             "verdict": "slower", "flags": [{"arm": "A", "flag": "emulated", "detail": "x (TCG)", "text": "A: e"}]}
    return {"schema": COMPARISON_SCHEMA, "opcost_version": "0", "kind": "ab", "interleaved": True, "aa": False,
            "a": {"params": "x=1"}, "b": {"params": "x=2"}, "delta_requested": 0.02, "env": {"k": 1},
            "system_wide": [], "comparisons": [entry, {"bench": "c", "key": "c", "op": "", "status": "failed"}],
            "summary": {"geomean_ratio": 1.1, "n": 1, "counts": {"slower": 1, "same": 0}}}


def test_a_comparison_round_trips_in_its_order_and_reads_typed():
    import json

    from opcost.model import Comparison, Entry

    doc = _ab_doc()
    text = json.dumps(doc)
    c = Comparison.from_json(json.loads(text))
    assert json.dumps(c.to_json()) == text                                   # byte-identical, in its order
    e, failed = c.comparisons
    assert (e.bench, e.key, e.op, e.verdict, e.p_adjusted, e.delta, e.compared, e.run_level) == \
        ("b", "b:x=1", "call", "slower", 0.02, 0.02, True, False)
    assert e.verdict_ratio == (1.09, [1.04, 1.14]) and e.summary_b.median_ns == 11.0 and e.params_a == {"x": "1"}
    assert (failed.compared, failed.status, failed.verdict, failed.verdict_ratio, failed.p_floor) == \
        (False, "failed", None, (None, None), 0.0)
    assert Entry({"bench": "d", "ratio": 1.2, "ci95_ratio": [1, 2]}).verdict_ratio == (1.2, [1, 2])   # from before
    assert (c.methods, c.geomean_ratio, c.counts, c.sequential) == ("B/A: HL; p: MWU", 1.1, {"slower": 1, "same": 0},
                                                                    False)
    assert list(c.context) == ["env", "system_wide"]
    # an entry is the document's object: a change through it is a change of the document
    e.verdict, e.withheld = None, "why"
    assert c.to_json()["comparisons"][0]["verdict"] is None and c.to_json()["comparisons"][0]["withheld"] == "why"
    assert failed.flags == [] and failed.flags is not Entry({"bench": "x"}).flags     # a fresh empty list each time


def test_withholding_an_emulated_verdict_goes_through_the_entries():
    from opcost.targets.vm.withhold import WITHHELD, withhold_emulated

    doc = withhold_emulated(_ab_doc(), False)
    assert doc["comparisons"][0]["verdict"] is None and doc["comparisons"][0]["withheld"] == WITHHELD
    assert doc["summary"]["counts"] == {"slower": 0, "same": 0}
    allowed = withhold_emulated(_ab_doc(), True)   # verdicts kept; the header's `emulated` says why (issue 39)
    assert allowed.pop("emulated") == {"allow_emulated": True, "benchmarks": ["b:x=1"]} and allowed == _ab_doc()
    counted = _ab_doc()   # decided on the emulator's exact counts (--verdict-on): counts are not timings, it stands
    counted["comparisons"][0]["decided_on"] = {"counter": "instructions:k", "source": "emulator"}
    assert withhold_emulated(counted, False)["comparisons"][0]["verdict"] == "slower"


def _series_doc() -> dict:
    lb = [{"value": v, "runs": [1], "pooled": False, "params": {"p": v}, "n_processes": 3, "median_ns": m,
           "ci95_ns": [m - 1, m + 1], "vs_previous": None, "vs_first": None, "change_point": v == "c",
           "flags": [{"flag": "emulated", "detail": "QEMU (TCG)"}] if v == "b" else [], "process_medians_ns": [m] * 3}
          for v, m in (("a", 10.0), ("b", 10.1), ("c", 12.0))]
    cp = {"index": 2, "label": "c", "previous": "b", "change": 0.19, "ci95_change": [0.1, 0.2], "ratio": 1.19,
          "ci95_ratio": [1.1, 1.2], "p_value": 0.01, "p_adjusted": 0.01, "delta": 0.02, "verdict": "slower",
          "left": {}, "right": {}, "neighbours": None, "unconfirmed": True, "confirm": "again"}
    return {"schema": SERIES_SCHEMA, "opcost_version": "0", "kind": "measured", "interleaved": True, "bench": "b",
            "spec": "b", "by": "p", "order": "over", "differing": {}, "labels": lb, "noise": {}, "candidates": {},
            "unit": "process", "change_points": [cp], "rejected": [dict(cp, why="small")], "delta_requested": 0.02,
            "alpha": 0.05, "notes": [], "run_id": 3, "env": {}}


def test_a_series_round_trips_in_its_order_reads_typed_and_withholds():
    import json

    from opcost.model import Series
    from opcost.targets.vm.withhold import withhold_emulated_series

    text = json.dumps(_series_doc())
    s = Series.from_json(json.loads(text))
    assert json.dumps(s.to_json()) == text
    assert [lb.value for lb in s.labels] == ["a", "b", "c"] and s.labels[2].change_point and s.flagged
    assert s.labels[1].flag_names == ["emulated"] and s.labels[0].process_medians == [10.0] * 3
    c = s.change_points[0]
    assert (c.index, c.label, c.previous, c.verdict, c.unconfirmed, c.confirm, c.why) == \
        (2, "c", "b", "slower", True, "again", None)
    assert s.rejected[0].why == "small" and s.withheld is None and not s.run_level
    held = withhold_emulated_series(s, False).to_json()
    assert held["change_points"] == [] and [lb["change_point"] for lb in held["labels"]] == [False] * 3
    assert [lb["emulated"] for lb in held["labels"]] == [False, True, False]
    assert held["withheld_change_points"][0]["index"] == 2 and held["withheld"].startswith("1 of 3 labels emulated")
    assert list(held)[-4:] == ["env", "allow_emulated", "withheld", "withheld_change_points"]
    kept = withhold_emulated_series(Series.from_json(_series_doc()), True).to_json()
    assert kept["change_points"] and kept["allow_emulated"] is True and "withheld" not in kept
