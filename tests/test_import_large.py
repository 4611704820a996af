"""Issue 38, item 6: a file over docschema.STREAM_FROM is imported as it is
read (transfer.stream_file, RunImporting.import_files), never held whole;
a stored plain run's table reads no sample (`load_run(table_only=True)`).
The threshold is lowered here so that files of a few hundred KiB take that
path: what it stores is what the whole reading stores, row for row; what it
refuses it refuses in the same words, with the JSON path into the whole
document, and nothing is stored. benchmarks/large_run.py measures a run of
10^6 samples."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import random
import sqlite3
from pathlib import Path

import pytest

from opcost import cli, docschema, transfer

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("large_run", ROOT / "benchmarks" / "large_run.py")
assert _spec is not None and _spec.loader is not None
large_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(large_run)


@pytest.fixture
def streaming(monkeypatch):
    """Every file over 2 KiB streamed."""
    monkeypatch.setattr(docschema, "STREAM_FROM", 2048)


def doc(processes=6, samples=20, summary=True):
    return large_run.document(processes, samples, summary)


def write(path: Path, d: dict, indent=None) -> str:
    path.write_text(json.dumps(d, indent=indent, separators=None if indent else (",", ":")) + "\n")
    return str(path)


def opcost(capsys, *args) -> tuple[int, str, str]:
    code = cli._main(list(args))   # _main: main() blocks and ignores the signals on its way out, which would leave this worker (and every child it starts) deaf to them
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


def rows(db: Path) -> list:
    con = sqlite3.connect(db)
    try:
        return [con.execute(q).fetchall() for q in (
            "SELECT id, created, finished, label, kind, status, opcost_version, argv, env, uuid, plan FROM runs",
            "SELECT run_id, position, bench, params, op, unit, status, reason, summary, key FROM results",
            "SELECT result_id, idx, header, trailer, meta FROM processes ORDER BY result_id, idx",
            "SELECT process_id, idx, warmup, iters, ns_per_op, tsc_per_op, data FROM samples "
            "ORDER BY process_id, idx",
            "SELECT run_id, key, value FROM run_labels ORDER BY run_id, key")]
    finally:
        con.close()


def decoded(table: list) -> list:
    """Sample rows with their JSON decoded (orjson may write 1e-5 where json writes 1e-05)."""
    return [(*r[:-1], json.loads(r[-1])) for r in table]


@pytest.mark.parametrize("indent", [None, 1], ids=["compact", "indented"])
def test_a_streamed_file_stores_what_the_whole_reading_stores(tmp_path, capsys, monkeypatch, indent):
    d = doc()
    d["results"].append(copy.deepcopy(d["results"][0]) | {"key": "syscall.null:2", "params": {"via": "raw"}})
    f = write(tmp_path / "run.json", d, indent)
    code, out, _ = opcost(capsys, "import", f, "--store", str(tmp_path / "whole.db"))
    assert code == 0 and "imported 1 run(s) (1)" in out
    monkeypatch.setattr(docschema, "STREAM_FROM", 2048)
    read, processes = [], []
    real, real_process = docschema.Stream.value, docschema.Stream.process
    monkeypatch.setattr(docschema.Stream, "value", lambda self, fast=False: read.append(fast) or real(self, fast))
    monkeypatch.setattr(docschema.Stream, "process", lambda self: processes.append(1) or real_process(self))
    real_submit = transfer.ProcessParser.submit
    monkeypatch.setattr(transfer.ProcessParser, "submit", lambda self, *a: apart.append(1) or real_submit(self, *a))
    apart: list = []
    code, out, _ = opcost(capsys, "import", f, "--store", str(tmp_path / "streamed.db"))
    assert code == 0 and "imported 1 run(s) (1)" in out
    # every process was read as a stream, one at a time: parsed by the worker process, but the last of
    # each result (no `},{"index":` after it: read here; the first result's is split off up to the second's
    # first process, which orjson refuses as one value, and then read here; the one split off after that
    # slice, while the worker parsed it, is dropped and split off again: _AHEAD - 1 of them)
    assert len(processes) == 1 and len(apart) == 11 + transfer._AHEAD - 1
    assert read.count(True) == 2           # by orjson, but the last of each result (json's scanner: no end found)
    whole, streamed = rows(tmp_path / "whole.db"), rows(tmp_path / "streamed.db")
    assert whole[:3] == streamed[:3] and whole[4] == streamed[4]
    assert decoded(whole[3]) == decoded(streamed[3]) and len(whole[3]) == 2 * 6 * 21
    for name in ("whole", "streamed"):
        assert opcost(capsys, "export", "1", "--store", str(tmp_path / f"{name}.db"), "-o",
                      str(tmp_path / f"{name}.out"))[0] == 0
    assert (tmp_path / "whole.out").read_text() == (tmp_path / "streamed.out").read_text()
    # a second import stores nothing again
    code, out, _ = opcost(capsys, "import", f, "--store", str(tmp_path / "streamed.db"))
    assert code == 0 and "imported 0 run(s); 1 already stored (1)" in out and rows(tmp_path / "streamed.db") == streamed


def test_json_lines_and_small_files_go_in_one_transaction(tmp_path, capsys, streaming):
    a, b = doc(3, 10), doc(3, 10)
    b["uuid"], b["run_id"] = "6b3f1f7e-0000-4000-8000-0000000000b2", 2
    lines = tmp_path / "two.jsonl"
    lines.write_text(json.dumps(a) + "\n" + json.dumps(b) + "\n")
    small = doc(1, 1)
    small["uuid"], small["run_id"] = "6b3f1f7e-0000-4000-8000-0000000000c3", 3
    small_f = write(tmp_path / "small.json", small, 1)
    assert Path(small_f).stat().st_size < 2048 * 4
    store = str(tmp_path / "s.db")
    code, out, _ = opcost(capsys, "import", str(lines), small_f, "--store", store)
    assert code == 0, out
    assert "two.jsonl: imported 2 run(s) (1, 2)" in out and "imported 1 run(s) (3)" in out
    assert len(rows(tmp_path / "s.db")[2]) == 7


BAD = [
    # (what is changed in process 1 of result 0, words of the refusal)
    (lambda p: p["samples"][2].__setitem__("ns_per_op", "fast"),
     "$.results[0].processes[1].samples[2].ns_per_op: 'fast' is not of type 'number'"),
    (lambda p: p["samples"][3].__setitem__("iters", -1),
     "$.results[0].processes[1].samples[3].iters: -1 is less than the minimum of 0"),
    (lambda p: p["header"].__setitem__("bench", "a\u0000b"),
     "$.results[0].processes[1].header.bench: text with NUL (\\u0000), which a PostgreSQL store cannot hold"),
    (lambda p: p["warmup"][0].__setitem__("note", "\ud800"),
     "$.results[0].processes[1].warmup[0].note: text with a lone surrogate"),
    (lambda p: p.__setitem__("index", 0), "results[0] has two processes with the same index"),
]


@pytest.mark.parametrize("change,said", BAD, ids=["type", "minimum", "nul", "surrogate", "index"])
def test_a_bad_process_is_refused_in_the_whole_readings_words_and_nothing_is_stored(tmp_path, capsys, streaming,
                                                                                     change, said):
    d = doc()
    change(d["results"][0]["processes"][1])
    f = write(tmp_path / "bad.json", d)
    ok = write(tmp_path / "ok.json", doc(2, 2) | {"uuid": "6b3f1f7e-0000-4000-8000-00000000000f", "run_id": 9})
    code, _, err = opcost(capsys, "import", ok, f, "--store", str(tmp_path / "s.db"))
    assert code == 2 and said in err and err.count("\n") == 1, err
    assert f"{f} line 1: " in err
    assert not (tmp_path / "s.db").exists() or rows(tmp_path / "s.db")[0] == []   # nothing, not even ok.json


@pytest.mark.parametrize("text,said", [
    (lambda t: t[:len(t) // 2], "line 1: truncated JSON"),
    (lambda t: t.replace('"ns":', '"ns"', 1), "line 1: not JSON (Expecting ':' delimiter: column"),
    (lambda t: t.replace('"ns_per_op":', '"ns_per_op":NaN,"x":', 7), "NaN is not a JSON number"),
    (lambda t: t.replace('"ns":', '"ns":1e400,"y":', 9), "1e400 is beyond a double"),
], ids=["truncated", "syntax", "nan", "inf"])
def test_bad_json_in_a_streamed_file(tmp_path, capsys, streaming, text, said):
    f = tmp_path / "bad.json"
    f.write_text(text(json.dumps(doc(), separators=(",", ":"))))
    code, _, err = opcost(capsys, "import", str(f), "--store", str(tmp_path / "s.db"))
    assert code == 2 and said in err and err.count("\n") == 1, err


def test_a_file_without_uuid_first_is_read_whole_as_before(tmp_path, capsys, streaming):
    d = doc(2, 5)
    del d["uuid"]
    f = write(tmp_path / "old.json", d)
    code, out, _ = opcost(capsys, "import", str(f), "--store", str(tmp_path / "s.db"))
    assert code == 0 and "imported 1 run(s)" in out and len(rows(tmp_path / "s.db")[2]) == 2


def test_a_streamed_rescue_completes_the_stored_run_in_place(tmp_path, capsys, streaming, monkeypatch):
    full = doc(6, 10)
    part = copy.deepcopy(full)
    part["status"] = "abandoned"
    part["results"][0]["processes"] = part["results"][0]["processes"][:2]
    part["results"][0]["summary"] = None
    store = str(tmp_path / "s.db")
    monkeypatch.setattr(docschema, "STREAM_FROM", 10**9)
    assert opcost(capsys, "import", write(tmp_path / "part.json", part), "--store", store)[0] == 0
    monkeypatch.setattr(docschema, "STREAM_FROM", 2048)
    tampered = copy.deepcopy(full)
    tampered["results"][0]["processes"][1]["samples"].pop()
    code, _, err = opcost(capsys, "import", write(tmp_path / "t.json", tampered), "--store", store)
    assert code == 2 and "results[0] process 1's header and samples" in err, err
    tampered = copy.deepcopy(full)   # a figure changed, the count kept: refused as well
    tampered["results"][0]["processes"][0]["warmup"][0]["iters"] += 1
    code, _, err = opcost(capsys, "import", write(tmp_path / "t.json", tampered), "--store", store)
    assert code == 2 and "results[0] process 0's warmup 0 iters is '" in err, err
    f = write(tmp_path / "rescue.json", full, 1)
    code, out, _ = opcost(capsys, "import", f, "--store", store)
    assert code == 0 and "run 1: 4 process(es) added, now complete" in out, out
    before = rows(tmp_path / "s.db")
    assert len(before[2]) == 6 and before[0][0][5] == "complete"
    code, out, _ = opcost(capsys, "import", f, "--store", store)
    assert code == 0 and "1 already stored (1)" in out and rows(tmp_path / "s.db") == before


def _sample(rng: random.Random) -> dict:
    s = large_run.document(1, 1, False)["results"][0]["processes"][0]["samples"][0]
    return dict(rng.sample(sorted(s.items()), rng.randint(1, len(s))))


ODD = [None, True, False, -1, 0, 2**63, 2**63 - 1, -(2**63), 10**40, 1e300, 1e39, -3.5, "x", "sample", [], {}, 1.5]


def test_plain_samples_never_vouches_for_what_the_schema_refuses():
    """plain_samples is a fast pre-check: when it says True the schema must
    agree (random samples with one field set to an odd value: 600 cases)."""
    rng = random.Random(38)
    validator = docschema._process_validator()
    vouched = 0
    for _ in range(600):
        samples = [_sample(rng) | {"ns_per_op": 1.0} for _ in range(3)]
        k = rng.choice(sorted(samples[0]) + ["counters", "helper", "new"])
        samples[rng.randrange(3)][k] = rng.choice(ODD)
        if docschema.plain_samples(samples):
            vouched += 1
            assert validator.is_valid({"index": 0, "samples": samples}), samples
            assert all("\0" not in json.dumps(s) and "},{" not in json.dumps(s) for s in samples)
    assert vouched > 100
    assert docschema.plain_samples(doc(1, 50)["results"][0]["processes"][0]["samples"])


def test_plain_samples_of_one_shape_never_vouch_for_what_the_schema_refuses():
    """Samples with the same keys in the same order are checked column by
    column: one field of one sample set to an odd value (600 cases); what
    is vouched for validates, and has no number orjson reads otherwise
    than json (magnitude 2^63 or more)."""
    rng = random.Random(3838)
    validator = docschema._process_validator()
    vouched = 0
    for _ in range(600):
        one = _sample(rng) | {"ns_per_op": 1.0}
        samples = [dict(one) for _ in range(4)]
        k = rng.choice(sorted(one))
        samples[rng.randrange(4)][k] = rng.choice(ODD + [float("nan"), float("inf"), -(2**63) + 1, 2.0**63])
        if rng.random() < 0.2:     # one sample's keys in another order, or one key fewer: not one shape
            j = rng.randrange(4)
            items = list(samples[j].items())
            samples[j] = dict(items[1:] + items[:1] if rng.random() < 0.5 else items[1:])
        if docschema.plain_samples(samples):
            vouched += 1
            assert validator.is_valid({"index": 0, "samples": samples}), samples
            assert all(abs(v) < 2**63 for s in samples for v in s.values() if type(v) in (int, float)), samples
    assert vouched > 100


def _odd_numbers(d: dict) -> dict:
    """Values orjson reads otherwise than json (integers beyond 64 bits
    become floats), floats of every length, and text that looks like the
    next process's start or a sample with an index: the streamed import
    must store what the whole reading stores all the same."""
    procs = d["results"][0]["processes"]
    procs[0]["samples"][1]["ns"] = 2**70
    procs[1]["header"]["tsc_hz"] = 10**25
    procs[1]["samples"][0]["start_raw_ns"] = -(2**63) - 1
    procs[2]["samples"][2]["user_ns"] = 18446744073709551615
    procs[2]["header"]["op"] = 'odd},{"index": 7, "samples": [{'
    procs[3]["samples"][0]["index"] = 1
    rng = random.Random(38)
    for k, p in enumerate(procs[4:], 4):      # 4: floats of 2^63 and more (not plain); 5, 6: plain
        for smp in p["samples"]:
            smp["ns_per_op"] = rng.choice([5e-324, 2.2250738585072014e-308, 0.1 + 0.2, 1 / 3, -0.0, 9.2e18,
                                           rng.random() * 10 ** rng.randint(-20, 18)])
    procs[4]["samples"][0]["ns_per_op"], procs[4]["samples"][1]["ns_per_op"] = 1e22, 9.3e18
    for smp in procs[6]["samples"]:      # NULL columns (PostgreSQL's COPY writes them \\N)
        del smp["iters"]
        smp["tsc_per_op"] = None
    assert [docschema.plain_samples(p["samples"]) for p in procs[4:]] == [False, True, True]
    return d


@pytest.mark.parametrize("indent", [None, 1], ids=["compact", "indented"])
def test_what_orjson_reads_otherwise_is_stored_as_the_whole_reading_stores_it(tmp_path, capsys, monkeypatch, indent):
    d = _odd_numbers(doc(7, 5))
    f = write(tmp_path / "run.json", d, indent)
    assert opcost(capsys, "import", f, "--store", str(tmp_path / "whole.db"))[0] == 0
    monkeypatch.setattr(docschema, "STREAM_FROM", 2048)
    assert opcost(capsys, "import", f, "--store", str(tmp_path / "streamed.db"))[0] == 0
    whole, streamed = rows(tmp_path / "whole.db"), rows(tmp_path / "streamed.db")
    assert whole[:3] == streamed[:3] and decoded(whole[3]) == decoded(streamed[3])
    big = [json.loads(r[-1]) for r in streamed[3]]
    assert {2**70, -(2**63) - 1, 18446744073709551615} <= {v for smp in big for v in smp.values()}   # whole integers
    assert '"tsc_hz":10000000000000000000000' in streamed[2][1][2]


def test_show_reads_no_sample_when_the_summaries_are_stored(tmp_path, capsys, monkeypatch):
    from opcost.store import rows as store_rows

    store = str(tmp_path / "s.db")
    with_summary = doc(4, 30)
    without = doc(4, 30, summary=False) | {"uuid": "6b3f1f7e-0000-4000-8000-0000000000d4", "run_id": 2}
    for i, d in enumerate((with_summary, without)):
        assert opcost(capsys, "import", write(tmp_path / f"{i}.json", d), "--store", store)[0] == 0
    decoded_samples = []
    real, real_many = store_rows.decode, store_rows.decode_samples
    monkeypatch.setattr(store_rows, "decode", lambda t: decoded_samples.append(t) or real(t))
    monkeypatch.setattr(store_rows, "decode_samples", lambda ts: real_many(decoded_samples.append(t) or t for t in ts))
    code, table, _ = opcost(capsys, "show", "1", "--store", store)
    assert code == 0 and "syscall.null" in table
    assert not any(t and '"ns_per_op"' in t for t in decoded_samples)     # no sample read
    code, computed, _ = opcost(capsys, "show", "2", "--store", store)
    assert any(t and '"ns_per_op"' in t for t in decoded_samples)         # no summary: from the samples
    # the same table either way: the stored summary is the one the samples give
    assert table.split("\n", 1)[1] == computed.split("\n", 1)[1]


@pytest.mark.parametrize("odd", [False, True], ids=["plain", "odd-numbers"])
def test_streamed_import_on_each_backend_exports_what_was_given(store_url, tmp_path, capsys, monkeypatch, odd):
    """SQLite and PostgreSQL (its plain samples by COPY): a streamed import,
    exported again, is the whole reading's export (into SQLite) byte for
    byte, odd numbers too (5e-324, -0.0, integers beyond 64 bits)."""
    f = write(tmp_path / "run.json", _odd_numbers(doc(7, 5)) if odd else doc(5, 8))
    ref = str(tmp_path / "ref.db")
    assert opcost(capsys, "import", f, "--store", ref)[0] == 0
    monkeypatch.setattr(docschema, "STREAM_FROM", 2048)
    code, out, _ = opcost(capsys, "import", f, "--store", store_url)
    assert code == 0 and "imported 1 run(s) (1)" in out, out
    for name, store in (("ref", ref), ("got", store_url)):
        assert opcost(capsys, "export", "1", "--store", store, "-o", str(tmp_path / f"{name}.out"))[0] == 0
    assert (tmp_path / "ref.out").read_text() == (tmp_path / "got.out").read_text()


def test_an_imports_transaction_settings_are_put_back(tmp_path):
    """SQLite: the import's one transaction runs with a 64 MiB cache and,
    in WAL mode, synchronous NORMAL (1); the connection has its own again
    after it, whatever happened inside."""
    from opcost.store import open_store

    with open_store(str(tmp_path / "s.db")) as store:
        db = store._db

        def now() -> tuple:
            return tuple(db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("journal_mode", "synchronous", "cache_size"))

        before = now()
        assert before[0] == "wal"       # a store being written (its schema just made)
        with pytest.raises(ZeroDivisionError):
            with store._bulk_load():
                assert now() == ("wal", 1, -65536)
                1 / 0
        assert now() == before and before[1] != 1


@pytest.mark.parametrize("others", [False, True], ids=["alone", "beside-a-reader"])
def test_a_streamed_import_uses_the_rollback_journal_only_when_it_has_the_store_alone(
        tmp_path, capsys, monkeypatch, streaming, others):
    # WAL writes each new page twice (the -wal file, then the checkpoint): a
    # streamed import that has the store to itself writes it once, under the
    # rollback journal; beside another connection it stays in WAL (which that
    # connection may read during the import) and still stores the run.
    from opcost.store import sqlite as sqlite_store

    db = tmp_path / "s.db"
    f = write(tmp_path / "small.json", doc(2, 5))
    assert opcost(capsys, "import", f, "--store", str(db))[0] == 0     # the store made, WAL while written
    seen = []
    real = sqlite_store.SqliteStore._bulk_load

    @contextlib.contextmanager
    def watched(self, alone=False):
        with real(self, alone):
            seen.append((alone, self._db.execute("PRAGMA journal_mode").fetchone()[0]))
            yield

    monkeypatch.setattr(sqlite_store.SqliteStore, "_bulk_load", watched)
    other = sqlite3.connect(db)
    try:
        if others:
            other.execute("PRAGMA journal_mode = WAL")
            assert other.execute("SELECT count(*) FROM runs").fetchone() == (1,)
        else:
            other.close()
        d = doc(3, 20)
        d["uuid"] = "another-run"
        code, out, _ = opcost(capsys, "import", write(tmp_path / "run.json", d), "--store", str(db))
        assert code == 0 and "imported 1 run(s) (2)" in out
        assert seen == [(True, "wal" if others else "delete")]
        if others:
            assert other.execute("SELECT count(*) FROM runs").fetchone() == (2,)
    finally:
        other.close()
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == (2 * 6 + 3 * 21)
