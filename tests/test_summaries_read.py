"""Issue 38, item 6: a stored run without its summaries (killed before its
end, or an import of such a file) reads exactly as the same run with them:
`show`, `report` (text, markdown, csv) and `compare` print the same bytes
and `report -f json` the same document, on SQLite and PostgreSQL. `show`
and `report -f text|markdown|csv` compute the missing summaries one process
at a time (store/base.py's _digested, the processes' batches dropped into a
stats.Digest), never holding the run, and write nothing back: the store is
read, as it always was."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from opcost import cli
from opcost.store import open_store

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("large_run", ROOT / "benchmarks" / "large_run.py")
assert _spec is not None and _spec.loader is not None
large_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(large_run)

FAST = ["--fake-clock", "100", "-p", "4", "-n", "6", "-w", "1", "--target-ms", "1", "--no-progress"]


def opcost(capsys, *args) -> str:
    code = cli._main(list(args))   # _main: main() blocks and ignores the signals on its way out
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    return out


def readings(capsys, store: str) -> dict[str, str]:
    """Everything the readers print of runs 1 and 2 (and of 1 against 2)."""
    out = {"show": opcost(capsys, "show", "1", "--store", store),
           "show 2": opcost(capsys, "show", "2", "--store", store),
           "compare": opcost(capsys, "compare", "1", "2", "--store", store, "--force")}
    for fmt in ("text", "markdown", "csv", "json"):
        out[fmt] = opcost(capsys, "report", "1", "-f", fmt, "--store", store)
    return out


def test_a_run_without_its_summaries_reads_as_the_run_with_them(store_url, run_cli, capsys):
    """Two measured runs (a benchmark that blocks and one that does not:
    both figures), read; their stored summaries dropped, as a run killed
    before its end has none; read again: every output the same, byte for byte."""
    for _ in range(2):
        cp = run_cli("run", "syscall.null", "ctx.pipe", *FAST, "--store", store_url, timeout=120)
        assert cp.returncode == 0, cp.stderr
    before = readings(capsys, store_url)
    assert json.loads(before["json"])["results"][0]["summary"]["n_processes"] == 4
    with open_store(store_url) as store:
        store._run(store._db, "UPDATE results SET summary = NULL")
    with open_store(store_url, readonly=True) as store:     # committed: another connection sees none
        assert all(r["summary"] is None for i in (1, 2) for r in store.load_run(i)["results"])
    after = readings(capsys, store_url)
    # a summary computed has its keys in the order it was made, a stored one sorted (rows.encode): the same JSON
    assert json.loads(after.pop("json")) == json.loads(before.pop("json"))
    assert after == before


def test_show_summarizes_a_process_at_a_time_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """An imported run without summaries (large_run's, 6 processes of 20
    batches, and a second result): show decodes one process's measured
    batches at a time, never runs the whole run's sample query, prints what
    the run with its summaries prints, and leaves the store's bytes as they
    were, on a read-only file in a read-only folder."""
    from opcost.store import rows as store_rows

    store = tmp_path / "db" / "s.db"
    store.parent.mkdir()
    whole = large_run.document(6, 20)
    whole["results"].append(json.loads(json.dumps(whole["results"][0])) | {"key": "syscall.null:2"})
    bare = json.loads(json.dumps(whole)) | {"uuid": "6b3f1f7e-0000-4000-8000-0000000000e5", "run_id": 2}
    for r in bare["results"]:
        r["summary"] = None
    for i, d in enumerate((whole, bare)):
        (tmp_path / f"{i}.json").write_text(json.dumps(d))
        opcost(capsys, "import", str(tmp_path / f"{i}.json"), "--store", str(store))
    stored = opcost(capsys, "show", "1", "--store", str(store))
    digest = hashlib.sha256(store.read_bytes()).hexdigest()
    store.chmod(0o444)
    store.parent.chmod(0o555)
    batches: list[int] = []
    real_decode = store_rows.decode_samples
    monkeypatch.setattr(store_rows, "decode_samples", lambda ts: batches.append(len(t := list(ts))) or real_decode(t))
    try:
        computed = opcost(capsys, "show", "2", "--store", str(store))
        assert computed.split("\n", 1)[1] == stored.split("\n", 1)[1]
        assert batches == [20] * 12          # 2 results x 6 processes, each read alone
        assert hashlib.sha256(store.read_bytes()).hexdigest() == digest
        assert os.listdir(store.parent) == ["s.db"]      # no journal, nothing written beside it
    finally:
        store.parent.chmod(0o755)
        store.chmod(0o644)


def test_a_summary_behind_its_processes_is_computed_again_keeping_derived(tmp_path, capsys):
    """A run interrupted between storing a process and summarizing it: its
    stored summary counts fewer processes. The table's reading computes it
    from every process, as the whole reading (fill_summaries) does, and
    keeps what needs the run's plan (derived) as stored."""
    d = large_run.document(5, 12)
    full = d["results"][0]["summary"]
    from opcost.summaries import summarize_variant

    d["results"][0]["summary"] = summarize_variant(d["results"][0]["processes"][:3]) | {"derived": {"x": 1}}
    (tmp_path / "r.json").write_text(json.dumps(d))
    store = str(tmp_path / "s.db")
    opcost(capsys, "import", str(tmp_path / "r.json"), "--store", store)
    with open_store(store, readonly=True) as s:
        table = s.load_run(1, summaries=True, table_only=True)
        whole = s.load_run(1, summaries=True)
    assert table["results"][0]["summary"] == whole["results"][0]["summary"] == full | {"derived": {"x": 1}}
    assert all(p["samples"] == [] for p in table["results"][0]["processes"])
