"""The runner and the recorder in one process, against a replay target
(targets/replay.py: the real probe's table, scripted outcomes): no probe, no
subprocess, so every ending of a run can be set up exactly and checked in
both places a run goes, the store and the --json file."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from opcost import interrupts
from opcost.errors import NothingMeasured
from opcost.protocol import Protocol
from opcost.record import Recorder
from opcost.runner import RunOptions, Runner
from opcost.spec import expand
from opcost.store import SqliteStore
from opcost.targets.base import Target
from opcost.targets.local import LocalTarget
from opcost.targets.replay import ReplayTarget, Reply

TABLE = Path(__file__).parent / "data" / "replay" / "table.json"   # probe/opcost-probe list --json
PROCESS_FIELDS = ("index", "round", "seq", "pad_bytes", "wall_s", "header", "samples", "warmup", "trailer")


@pytest.fixture(autouse=True)
def no_subprocess(monkeypatch):
    """Any attempt to start a process (a probe) fails the test."""
    def refuse(*a, **kw):
        raise AssertionError(f"a replay test started a process: {a[:1]}")
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)
    yield
    interrupts.reset()   # the runner holds signals once a run finishes


def target(script=None, **kw) -> ReplayTarget:
    return ReplayTarget.from_file(TABLE, script, **kw)


def variants(t: ReplayTarget, *specs: str) -> list:
    return [v for s in specs for v in expand(s, t)]


def measure(tmp_path: Path, t: ReplayTarget, vs: list, *, processes: int = 3, samples: int = 3, warmup: int = 1,
            seed: int = 0, parallel: int = 1, name: str = "run", store: str | None = None):
    """Preflight and run as session.measure does, recording into a SQLite
    store (a file in tmp_path unless `store` names another, ":memory:") and a
    --json file in tmp_path: (outcome, stored doc, JSON doc, warnings)."""
    warnings: list[str] = []
    store = SqliteStore(store or tmp_path / f"{name}.db")
    json_path = tmp_path / f"{name}.json"
    opts = RunOptions(protocol=Protocol(processes=processes, samples=samples, warmup=warmup, target_ms=1,
                                        seed=seed), parallel=parallel)
    runner = Runner(vs, opts, target=t, warn=warnings.append)
    try:
        runner.preflight()
        runner.recorder = Recorder(store=store, json_path=str(json_path), env=t.env(), argv=["opcost", "run"],
                                   label=name, warn=warnings.append)
        outcome = runner.run()
        stored = store.load_run(runner.recorder.run_id)
    finally:
        store.close()
    return outcome, stored, json.loads(json_path.read_text()), warnings


def ident(bench: str, params: dict) -> tuple:
    return bench, tuple(sorted(params.items()))


def assert_agree(stored: dict, doc: dict) -> None:
    """The store and the JSON file hold the same run: status, and per variant
    its status, reason, summary and every process as it was kept."""
    assert stored["status"] == doc["status"]
    assert len(stored["results"]) == len(doc["results"])
    for s, j in zip(stored["results"], doc["results"]):
        for k in ("bench", "key", "params", "op", "status", "reason"):
            assert s[k] == j[k], (k, s[k], j[k])
        # a variant without processes: null in the store, {"n_processes": 0} in the document
        assert s["summary"] == j["summary"] or (not s["processes"] and s["summary"] is None
                                                 and j["summary"] == {"n_processes": 0})
        assert [{k: p[k] for k in PROCESS_FIELDS} for p in s["processes"]] == \
               [{k: p[k] for k in PROCESS_FIELDS} for p in j["processes"]]


def test_the_local_and_the_replay_target_have_the_whole_interface():
    assert isinstance(LocalTarget(), Target) and isinstance(target(), Target)


def test_every_round_runs_every_variant_once_shuffled_by_the_seed(tmp_path):
    specs = ("syscall.null:via=libc|inline", "ctx.pipe:mode=process|thread", "signal.install")
    orders = {}
    for seed, name in ((7, "a"), (7, "b"), (8, "c")):
        t = target()
        vs = variants(t, *specs)
        outcome, _, doc, _ = measure(tmp_path, t, vs, processes=6, seed=seed, name=name, store=":memory:")
        assert outcome.status == "complete" and outcome.exit_code == 0
        started = [ident(r.bench, r.params) for r in t.started]
        rounds = [started[i:i + len(vs)] for i in range(0, len(started), len(vs))]
        assert len(rounds) == 6
        assert all(sorted(r) == sorted(ident(v.bench, v.probe_params()) for v in vs) for r in rounds)
        assert len({tuple(r) for r in rounds}) > 1, "every round in the same order: not shuffled"
        # the kept processes say the same: seq is the order of starting, round its round
        seqs = sorted((p["seq"], p["round"], ident(r["bench"], p["header"]["params"]))
                      for r in doc["results"] for p in r["processes"])
        assert [(s, rnd) for s, rnd, _ in seqs] == [(i + 1, i // len(vs)) for i in range(len(started))]
        assert [x for _, _, x in seqs] == started
        orders[name] = started
    assert orders["a"] == orders["b"] and orders["a"] != orders["c"]


def test_store_and_json_agree_after_a_complete_run(tmp_path):
    t = target({"ctx.pipe": Reply(ns_per_op=2000.0), "ctx.pipe:mode=thread": Reply(ns_per_op=2500.0)})
    vs = variants(t, "syscall.null", "ctx.pipe:mode=process|thread")
    outcome, stored, doc, warnings = measure(tmp_path, t, vs, processes=4)
    assert outcome.status == "complete" and outcome.exit_code == 0 and not warnings
    assert doc["status"] == "complete" and doc["env"] == stored["env"] == t.env()
    assert_agree(stored, doc)
    medians = [r["summary"]["median_ns"] for r in doc["results"]]
    assert [r["summary"]["n_processes"] for r in doc["results"]] == [4, 4, 4]
    for got, want in zip(medians, (100.0, 2000.0, 2500.0)):
        assert got == pytest.approx(want, rel=0.01)


def test_an_unsupported_variant_is_listed_and_the_others_measured(tmp_path):
    reason = "placement=smt: CPU 1 has no SMT sibling (thread_siblings_list=1)"
    t = target({"ctx.pipe:placement=smt": Reply(unsupported=reason)})
    vs = variants(t, "syscall.null", "ctx.pipe:placement=smt", "signal.install")
    outcome, stored, doc, warnings = measure(tmp_path, t, vs)
    assert warnings == [f"ctx.pipe:placement=smt: cannot be measured here: {reason}"]
    assert outcome.exit_code == 0
    assert [(r["status"], r["reason"], len(r["processes"])) for r in doc["results"]] == [
        ("ok", None, 3), ("unsupported", reason, 0), ("ok", None, 3)]
    assert "ctx.pipe" not in {r.bench for r in t.started}
    assert_agree(stored, doc)


def test_nothing_measured_is_exit_1(tmp_path):
    t = target(default=Reply(unsupported="not on this machine"))
    outcome, stored, doc, warnings = measure(tmp_path, t, variants(t, "syscall.null", "signal.install"))
    assert isinstance(outcome.error, NothingMeasured) and outcome.exit_code == 1
    assert len(warnings) == 2 and not t.started
    assert stored["status"] == doc["status"] == "failed"
    assert_agree(stored, doc)


def test_a_probe_crash_fails_its_variant_and_the_run_goes_on(tmp_path):
    t = target({"signal.install": Reply(crash="killed by signal SIGSEGV", crash_after=1)})
    vs = variants(t, "syscall.null", "signal.install", "signal.catch")
    outcome, stored, doc, warnings = measure(tmp_path, t, vs, processes=4)
    assert outcome.status == "complete" and outcome.exit_code == 1
    assert warnings == ["signal.install: probe failed: killed by signal SIGSEGV"]
    assert [(r["status"], len(r["processes"])) for r in doc["results"]] == [("ok", 4), ("failed", 1), ("ok", 4)]
    assert doc["results"][1]["reason"] == "probe failed: killed by signal SIGSEGV"
    assert doc["results"][1]["summary"]["n_processes"] == 1
    assert_agree(stored, doc)


def test_a_probe_slower_than_the_timeout_fails_its_variant_with_exit_124(tmp_path):
    t = target({"signal.install": Reply(delay=0.2)})
    vs = variants(t, "syscall.null", "signal.install")
    warnings: list[str] = []
    runner = Runner(vs, RunOptions(protocol=Protocol(processes=2, samples=1, warmup=0, timeout=0.02)), target=t,
                    warn=warnings.append)
    outcome = runner.run()
    assert outcome.status == "complete" and outcome.exit_code == 124
    assert [(r.status, len(r.processes)) for r in outcome.results] == [("ok", 2), ("failed", 0)]
    assert warnings == ["signal.install: probe did not finish within 0.02 s (killed); raise --timeout if it is "
                        "just slow"]


@pytest.mark.parametrize("k", [1, 2, 5, 9])
def test_an_interrupt_at_process_k_keeps_exactly_the_k_minus_1_before_it(tmp_path, k):
    t = target(interrupt_at=k)
    vs = variants(t, "syscall.null", "ctx.pipe:mode=process|thread")
    outcome, stored, doc, _ = measure(tmp_path, t, vs, processes=4)
    assert outcome.status == "interrupted" and outcome.exit_code == 130
    assert len(t.started) == k
    assert stored["status"] == doc["status"] == "interrupted"
    kept = sorted((p["seq"], ident(r["bench"], p["header"]["params"])) for r in doc["results"] for p in r["processes"])
    assert kept == [(i + 1, ident(r.bench, r.params)) for i, r in enumerate(t.started[:k - 1])]
    for r in doc["results"]:
        n = len(r["processes"])
        assert (r["summary"] or {}).get("n_processes", 0) == n
        assert r["status"] == ("ok" if n else "pending")
    assert_agree(stored, doc)


def test_parallel_copies_go_through_run_concurrent(tmp_path):
    t = target({"syscall.null": Reply(ns_per_op=80.0)})
    batches = []
    run_concurrent = t.run_concurrent
    t.run_concurrent = lambda reqs, timeout, on_line=None: (batches.append([r.cpus for r in reqs]),
                                                            run_concurrent(reqs, timeout, on_line))[1]
    outcome, stored, doc, _ = measure(tmp_path, t, variants(t, "syscall.null"), processes=3, parallel=2)
    assert outcome.exit_code == 0
    assert batches == [["0", "1"]] * 3
    assert len(t.started) == 3 + 3 * 2
    par = doc["results"][0]["parallel"]
    assert (par["copies"], par["cpus"], par["wrapped"], par["n_rounds"]) == (2, [0, 1], False, 3)
    assert par["efficiency"] == pytest.approx(1.0, rel=0.02) and par["overlap"] > 0.9
    assert par["total_ops_per_s"] == pytest.approx(2 * 1e9 / 80.0, rel=0.02)
    assert_agree(stored, doc)


def test_recording_grows_linearly_with_the_processes(tmp_path):
    """The front end's cost per process stays constant (record.py's spaced
    --json writes): the part that grows with the processes, (t(300) - t(1)) /
    (t(150) - t(1)), printed, never asserted (the machine is shared);
    benchmarks/frontend_scaling.py does the same through the command line.
    The store is in memory: a file's sync per process (constant, milliseconds
    on this disk) would be most of the time and take seconds."""
    took = {}
    for n in (0, 1, 150, 300):   # 0: -p 1 untimed, the imports and first-time costs
        t = target()
        t0 = time.perf_counter()
        outcome, _, doc, _ = measure(tmp_path, t, variants(t, "syscall.null"), processes=max(n, 1), samples=1,
                                     warmup=0, name=f"p{n}", store=":memory:")
        took[n] = time.perf_counter() - t0
        assert outcome.exit_code == 0 and len(doc["results"][0]["processes"]) == max(n, 1)
    print(f"\nrecording: -p 1 {took[1] * 1e3:.0f} ms, -p 150 {took[150] * 1e3:.0f} ms, -p 300 {took[300] * 1e3:.0f} ms;"
          f" growing part 300/150 = {(took[300] - took[1]) / (took[150] - took[1]):.2f} (2.0: linear)")
