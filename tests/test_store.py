"""The result store: round trip, lookup, migrations, and every way a --store
path can be unusable turning into one StoreError line."""

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

try:
    import opcost  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from opcost.errors import StoreError, UnknownRun, UsageError
from opcost.history import EMPTY_STORE_MESSAGE, format_history
from opcost.store import BACKENDS, SqliteStore, default_store_path, open_store
from opcost.store import sqlite as sqlite_backend
from opcost.store import sqlite_schema

ENV = {"arch": "x86_64", "kernel": "6.8.0", "cpus": 8}
ARGV = ["opcost", "run", "ctx.pipe:cpu=0|1"]


def sample(i, warmup=False):
    s = {"iters": 1000 + i, "ns_per_op": 1.5 + i, "tsc_per_op": 4.0 + i,
         "user_ns_per_op": 0.25, "sys_ns_per_op": 1.0,
         "counters": {"cycles": 4.0 + i, "cache-misses": "<not supported>"}}
    if warmup:
        s["warmup"] = True
    return s


def make_run(store, label="base", n_results=2, n_processes=2, finish=True):
    """A run as the runner would store it; returns (run_id, expected results)."""
    run_id = store.create_run(label=label, env=ENV, argv=ARGV, opcost_version="0.1.0")
    expected = []
    for pos in range(n_results):
        params = {"cpu": str(pos), "arch": "native", "size": 64}
        rid = store.add_result(run_id, position=pos, bench="ctx.pipe" if pos % 2 == 0 else "sys.null",
                               params=params, op="round trip", unit="ns")
        procs = []
        for idx in range(n_processes):
            header = {"schema": "opcost.probe/1", "tsc_hz": 3.0e9, "pid": 100 + idx}
            warm = [sample(k, warmup=True) for k in range(3)]
            meas = [sample(k) for k in range(5)]
            trailer = {"ok": True, "samples": 5}
            store.add_process(rid, idx=idx, header=header, samples=warm + meas, trailer=trailer)
            procs.append({"index": idx, "header": header, "trailer": trailer,
                          "samples": meas, "warmup": warm})
        summary = {"median_ns": 2.5, "min_ns": 1.5, "p90_ns": 3.0, "ci95_ns": [2.0, 3.0],
                   "cv": 0.1, "median_cycles": 7.0, "n_processes": n_processes}
        if finish:
            store.set_result(rid, status="ok", summary=summary)
        expected.append({"bench": "ctx.pipe" if pos % 2 == 0 else "sys.null", "params": params,
                         "op": "round trip", "unit": "ns",
                         "status": "ok" if finish else "pending", "reason": None,
                         "summary": summary if finish else None, "processes": procs})
    if finish:
        store.finish_run(run_id, "complete")
    return run_id, expected


@pytest.fixture
def db(tmp_path):
    return tmp_path / "data" / "opcost.db"  # parent does not exist yet


def test_round_trip(db):
    with open_store(str(db)) as store:
        run_id, expected = make_run(store)
        doc = store.load_run(run_id)
    assert doc["schema"] == "opcost.result/1"
    assert doc["run_id"] == run_id and doc["label"] == "base" and doc["kind"] == "run"
    assert doc["status"] == "complete" and doc["finished"]
    assert doc["opcost_version"] == "0.1.0"
    assert doc["env"] == ENV and doc["argv"] == ARGV
    assert doc["created"].endswith("Z")
    assert doc["results"] == expected
    json.dumps(doc)  # a plain JSON document

    # Survives closing and reopening (data was committed, not just cached).
    with open_store(f"sqlite:///{db}") as store:
        assert store.load_run(str(run_id))["results"] == expected


def test_results_and_processes_ordered_by_position_and_idx(db):
    with open_store(str(db)) as store:
        run_id = store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0", kind="ab")
        r2 = store.add_result(run_id, position=2, bench="b2", params={}, op="op", unit="ns")
        r0 = store.add_result(run_id, position=0, bench="b0", params={}, op="op", unit="ns")
        for idx in (3, 1, 2):
            store.add_process(r0, idx=idx, header={"i": idx}, samples=[sample(idx)], trailer=None)
        doc = store.load_run(run_id)
    assert [r["bench"] for r in doc["results"]] == ["b0", "b2"]
    assert [p["index"] for p in doc["results"][0]["processes"]] == [1, 2, 3]
    assert doc["results"][0]["processes"][0]["trailer"] is None
    assert doc["results"][1]["processes"] == []
    assert doc["kind"] == "ab" and doc["label"] is None and doc["status"] == "running"
    assert r2 != r0


def test_params_stored_with_sorted_keys(db):
    with open_store(str(db)) as store:
        run_id = store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0")
        store.add_result(run_id, position=0, bench="b", params={"z": 1, "a": 2}, op="o", unit="ns")
    text = sqlite3.connect(db).execute("SELECT params FROM results").fetchone()[0]
    assert text == '{"a":2,"z":1}'


def test_label_resolves_to_latest(db):
    with open_store(str(db)) as store:
        first, _ = make_run(store, label="base", n_results=1, n_processes=1)
        other, _ = make_run(store, label="patched", n_results=1, n_processes=1)
        latest, _ = make_run(store, label="base", n_results=1, n_processes=1)
        assert store.resolve("base") == latest
        assert store.resolve("patched") == other
        assert store.resolve(str(first)) == first
        assert store.load_run("base")["run_id"] == latest


def test_digit_label_falls_back_when_no_such_id(db):
    with open_store(str(db)) as store:
        run_id = store.create_run(label="2024", env={}, argv=[], opcost_version="0.1.0")
        assert store.resolve("2024") == run_id


def test_unknown_ref(db):
    with open_store(str(db)) as store:
        make_run(store, n_results=1, n_processes=1)
        for ref in ("nope", "999", ""):
            with pytest.raises(UnknownRun) as e:
                store.resolve(ref)
            assert f"'{ref}'" in str(e.value) and "opcost history" in str(e.value)
        with pytest.raises(UnknownRun):
            store.load_run("nope")
    assert issubclass(UnknownRun, UsageError)


def test_list_runs(db):
    with open_store(str(db)) as store:
        assert store.list_runs() == []
        a, _ = make_run(store, label="a", n_results=3, n_processes=1)
        b = store.create_run(label=None, env={}, argv=[], opcost_version="0.2.0")
        runs = store.list_runs()
        assert [r["id"] for r in runs] == [b, a]
        assert runs[1]["n_results"] == 3 and runs[1]["benches"] == ["ctx.pipe", "sys.null"]
        assert runs[1]["status"] == "complete" and runs[1]["label"] == "a"
        assert runs[0]["n_results"] == 0 and runs[0]["benches"] == []
        assert runs[0]["status"] == "running" and runs[0]["opcost_version"] == "0.2.0"
        assert [r["id"] for r in store.list_runs(limit=1)] == [b]
        assert store.list_runs(limit=0) == []


def test_migrations_on_empty_file(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()  # a zero-byte file is a valid, empty SQLite database
    with open_store(str(path)) as store:
        make_run(store, n_results=1, n_processes=1)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_backend.LATEST_VERSION
    assert conn.execute("PRAGMA application_id").fetchone()[0] == sqlite_backend.APPLICATION_ID
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "results", "processes", "samples"} <= tables
    # Reopening an up-to-date store is a no-op.
    SqliteStore(path).close()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_backend.LATEST_VERSION


def test_migration_list_is_ordered_from_one():
    versions = [v for v, _ in sqlite_backend.MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))


def test_failed_migration_rolls_back(tmp_path, monkeypatch):
    def boom(conn):
        conn.execute("CREATE TABLE half_done (x)")
        raise sqlite3.OperationalError("simulated failure")
    last = sqlite_backend.LATEST_VERSION
    path = tmp_path / "m.db"
    new = tmp_path / "new.db"
    SqliteStore(path).close()                 # a store of the latest version, then one more step that fails
    monkeypatch.setattr(SqliteStore, "migrations", [*SqliteStore.migrations, (last + 1, boom)])
    with pytest.raises(StoreError, match=f"migrating to schema version {last + 1}"):
        SqliteStore(path)
    # A store being created that fails leaves no file at all (issue 26, 6.3).
    with pytest.raises(StoreError, match=f"migrating to schema version {last + 1}"):
        SqliteStore(new)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == last  # earlier steps committed, the bad one not
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name='half_done'").fetchone()


def test_newer_schema_version(db):
    SqliteStore(db).close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError) as e:
        open_store(str(db))
    msg = str(e.value)
    assert msg == (f"store {db} has schema version 99, this opcost knows up to "
                   f"{sqlite_backend.LATEST_VERSION}: upgrade opcost")


@pytest.mark.parametrize("content", [os.urandom(4096), b"hello, not a database\n"])
def test_garbage_file(tmp_path, content):
    path = tmp_path / "garbage.db"
    path.write_bytes(content)
    with pytest.raises(StoreError) as e:
        open_store(str(path))
    msg = str(e.value)
    assert "not an SQLite database" in msg and str(path) in msg and "--no-store" in msg
    assert "\n" not in msg
    assert path.read_bytes() == content  # left alone


def test_corrupt_sqlite_file(tmp_path):
    """Right magic, garbage after it: SQLite's own error, still one StoreError line."""
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    with pytest.raises(StoreError) as e:
        open_store(str(path))
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_foreign_sqlite_database_left_alone(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not an opcost store"):
        open_store(str(path))
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert tables == {"contacts"}


def test_path_under_regular_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for path in (blocker / "opcost.db", blocker / "sub" / "opcost.db"):
        with pytest.raises(StoreError) as e:
            open_store(str(path))
        assert "--no-store" in str(e.value) and "\n" not in str(e.value)


def test_path_is_directory(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        open_store(str(tmp_path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(StoreError) as e:
            with open_store(str(ro / "opcost.db")) as store:
                store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0")
        assert "--no-store" in str(e.value)
    finally:
        ro.chmod(0o755)


def test_crashed_run_is_loadable(db):
    """A run whose opcost died mid-way: still 'running', processes so far kept."""
    store = open_store(str(db))
    run_id, expected = make_run(store, label="crash", n_results=1, n_processes=2, finish=False)
    # Simulate the crash: no set_result, no finish_run, no close; just drop it.
    del store
    with open_store(str(db)) as store:
        doc = store.load_run("crash")
        assert doc["status"] == "running" and doc["finished"] is None
        assert doc["results"] == expected
        assert doc["results"][0]["status"] == "pending"
        assert len(doc["results"][0]["processes"]) == 2
        assert store.list_runs()[0]["status"] == "running"


def test_interrupt_during_add_process_rolls_back(db):
    """Ctrl-C between the process row and its samples: neither is kept, and the
    store can still mark the run interrupted."""
    with open_store(str(db)) as store:
        run_id = store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0")
        rid = store.add_result(run_id, position=0, bench="b", params={}, op="o", unit="ns")
        store.add_process(rid, idx=0, header={}, samples=[sample(0)], trailer=None)
        real = store._conn

        class InterruptingCursor:
            def __init__(self):
                self.cursor = real.cursor()

            def __getattr__(self, name):
                return getattr(self.cursor, name)

            def executemany(self, *a):
                raise KeyboardInterrupt

        class Interrupting:
            def __getattr__(self, name):
                return getattr(real, name)

            def cursor(self):
                return InterruptingCursor()

        store._conn = Interrupting()
        with pytest.raises(KeyboardInterrupt):
            store.add_process(rid, idx=1, header={}, samples=[sample(1)], trailer=None)
        store._conn = real
        assert not real.in_transaction
        store.finish_run(run_id, "interrupted")  # connection still usable
        doc = store.load_run(run_id)
    assert doc["status"] == "interrupted"
    assert [p["index"] for p in doc["results"][0]["processes"]] == [0]


def test_bad_status_values(db):
    with open_store(str(db)) as store:
        run_id = store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0")
        rid = store.add_result(run_id, position=0, bench="b", params={}, op="o", unit="ns")
        with pytest.raises(ValueError):
            store.set_result(rid, status="great")
        with pytest.raises(ValueError):
            store.finish_run(run_id, "running")
        store.set_result(rid, status="unsupported", reason="no such instruction")
        assert store.load_run(run_id)["results"][0]["reason"] == "no such instruction"


@pytest.mark.parametrize("url", ["postgresql://user:secret@127.0.0.1:1/opcost",
                                 "postgres://user@127.0.0.1:1/opcost?password=secret"])
def test_postgresql_unreachable_is_one_line_without_the_password(url):
    pytest.importorskip("psycopg")
    with pytest.raises(StoreError) as e:
        open_store(url)
    msg = str(e.value)
    assert "cannot be reached" in msg and "127.0.0.1" in msg and "\n" not in msg
    assert "secret" not in msg  # never echo credentials


def test_unknown_scheme_and_empty_url():
    with pytest.raises(StoreError, match="unknown store scheme 'mysql://'"):
        open_store("mysql://x/y")
    with pytest.raises(StoreError):
        open_store("")
    with pytest.raises(StoreError):
        open_store("sqlite://")
    assert set(BACKENDS) == {"sqlite", "postgresql"}


def test_url_forms(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite://rel/dir/a.db") as s:
        assert s.path == Path("rel/dir/a.db")
    assert (tmp_path / "rel" / "dir" / "a.db").is_file()
    with open_store(f"sqlite://{tmp_path}/abs.db") as s:  # sqlite:/// + absolute path
        assert s.path == tmp_path / "abs.db"
    with open_store("plain.db") as s:
        assert s.path == Path("plain.db")
    assert (tmp_path / "plain.db").is_file()


def test_default_store_path(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_store_path() == tmp_path / "xdg" / "opcost" / "opcost.db"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for value in ("", "relative/dir"):  # unset-equivalent; relative is ignored per XDG
        monkeypatch.setenv("XDG_DATA_HOME", value)
        assert default_store_path() == tmp_path / "home" / ".local" / "share" / "opcost" / "opcost.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    with open_store(None) as s:
        assert s.path == tmp_path / "home" / ".local" / "share" / "opcost" / "opcost.db"
    assert s.path.is_file()


def test_closed_store_raises(db):
    store = open_store(str(db))
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.list_runs()


# --- history -------------------------------------------------------------------

def test_history_empty():
    assert format_history([]) == EMPTY_STORE_MESSAGE


def test_history_table(db):
    with open_store(str(db)) as store:
        make_run(store, label="base", n_results=2, n_processes=1)
        rid = store.create_run(label="x" * 60, env={}, argv=[], opcost_version="0.1.0")
        for pos in range(40):
            store.add_result(rid, position=pos, bench=f"bench.number{pos}", params={}, op="o",
                             unit="ns")
        text = format_history(store.list_runs())
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["ID", "CREATED", "(UTC)"]
    assert lines[1].split()[0] == "2" and "running" in lines[1] and "+" in lines[1]
    assert "x" * 60 not in lines[1] and "..." in lines[1]
    assert "ctx.pipe, sys.null" in lines[2] and "complete" in lines[2]
    assert all(len(line) <= 100 for line in lines[:3])
    assert any(line.startswith("running:") for line in lines)
    assert not any(line != line.rstrip() for line in lines)


def test_v1_store_upgrades_and_keeps_its_runs(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    # A store written by the first release: only migration 1 existed.
    monkeypatch.setattr(SqliteStore, "migrations", SqliteStore.migrations[:1])
    with SqliteStore(path) as old:
        # the run row as the first release wrote it (no owner column then)
        run_id = old._execute("creating a run",
                              "INSERT INTO runs (created, label, kind, status, opcost_version, argv, env) "
                              "VALUES ('2024-01-01T00:00:00Z', 'before', 'run', 'running', '0.0.1', "
                              "'[\"opcost\"]', '{}')").lastrowid
        rid = old._execute("adding a result",
                           "INSERT INTO results (run_id, position, bench, params, op, unit, status) "
                           "VALUES (?, 0, 'syscall.null', '{}', 'system call', 'ns', 'ok')", (run_id,)).lastrowid
        old._execute("adding a process", "INSERT INTO processes (result_id, idx, header) VALUES (?, 0, '{}')",
                     (rid,))
        old.finish_run(run_id, "complete")
    monkeypatch.undo()
    with SqliteStore(path) as new:
        doc = new.load_run("before")
        assert doc["results"][0]["bench"] == "syscall.null" and "key" not in doc["results"][0]
        assert doc["results"][0]["processes"][0]["index"] == 0
        r2 = new.add_result(doc["run_id"], position=1, bench="ctx.pipe", params={}, op="round trip", unit="ns",
                            key="ctx.pipe:mode=thread")
        new.add_process(r2, idx=0, header={}, samples=[], trailer=None, meta={"round": 3, "pad_bytes": 17})
        again = new.load_run(doc["run_id"])
    assert again["results"][1]["key"] == "ctx.pipe:mode=thread"
    assert again["results"][1]["processes"][0]["round"] == 3
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == sqlite_backend.LATEST_VERSION


# --- issue 11: wrong hints, run references, reading without writing -----------

def damage(path: Path) -> bytes:
    """Every page of an SQLite file after the header page overwritten at its
    start: SQLite then says 'database disk image is malformed'."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for off in range(page, len(data), page):
        data[off:off + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    return bytes(data)


def _damaged_store(path: Path) -> bytes:
    with open_store(str(path)) as store:
        for label in ("a", "b", "c"):
            make_run(store, label=label, n_results=1, n_processes=1)
    return damage(path)


@pytest.mark.parametrize("readonly", [False, True])
def test_damaged_store_is_not_a_valid_store_not_a_full_disk(tmp_path, readonly):
    path = tmp_path / "damaged.db"
    before = _damaged_store(path)
    with pytest.raises(StoreError) as e:
        with open_store(str(path), readonly=readonly) as store:
            store.list_runs()
    msg = str(e.value)
    assert "malformed" in msg                                  # SQLite's own words, in brackets
    assert "not a valid opcost store" in msg and "disk space" not in msg
    assert f"mv {path} {path}.damaged" in msg and "\n" not in msg
    assert path.read_bytes() == before


def test_store_errors_hinted_by_sqlite_code_not_by_wording(tmp_path):
    store = SqliteStore(tmp_path / "x.db")
    for code, text, want in ((13, "database or disk is full", "free disk space"),
                             (11, "database disk image is malformed", "not a valid opcost store"),
                             (26, "file is not a database", "not a valid opcost store"),
                             (8, "attempt to write a readonly database", "is read-only")):
        err = sqlite3.DatabaseError(text)
        err.sqlite_errorcode = code
        with pytest.raises(StoreError) as e:
            with store._guard("testing"):
                raise err
        assert want in str(e.value), (code, str(e.value))
    store.close()


def test_run_reference_beyond_sqlite_integers_is_unknown_not_overflow(db):
    with open_store(str(db)) as store:
        make_run(store, n_results=1, n_processes=1)
        for ref in ("99999999999999999999999", str(2**63), "id:" + "9" * 40):
            with pytest.raises(UnknownRun):
                store.resolve(ref)


def test_explicit_id_and_label_references(db):
    with open_store(str(db)) as store:
        first, _ = make_run(store, label="2", n_results=1, n_processes=1)
        second, _ = make_run(store, label="1", n_results=1, n_processes=1)
        assert store.resolve("1") == first                 # bare digits: an id first
        assert store.resolve("label:1") == second          # the run labelled 1
        assert store.resolve("id:2") == second
        assert store.resolve("label:2") == first
        odd = store.create_run(label="id:2", env={}, argv=[], opcost_version="0.1.0")
        assert store.resolve("label:id:2") == odd and store.resolve("id:2") == second
        with pytest.raises(UnknownRun, match="label '3'"):
            store.resolve("label:3")
        with pytest.raises(UnknownRun, match="id '1000'"):
            store.resolve("id:1000")
        with pytest.raises(UnknownRun, match="an id is a number"):
            store.resolve("id:x")
        with pytest.raises(UnknownRun) as e:
            store.resolve("nope")
        assert "id:N" in str(e.value) and "label:TEXT" in str(e.value)


def _v1_store(path: Path) -> int:
    """A store as the first release wrote it, built from the v1 schema itself."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in sqlite_schema.statements(sqlite_schema.V1):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    run_id = conn.execute("INSERT INTO runs (created, label, kind, status, opcost_version, argv, env) VALUES "
                          "('2024-05-01T12:00:00Z', 'old', 'run', 'complete', '0.0.1', '[\"opcost\"]', '{}')"
                          ).lastrowid
    rid = conn.execute("INSERT INTO results (run_id, position, bench, params, op, unit, status, summary) "
                       "VALUES (?, 0, 'syscall.null', '{\"via\":\"libc\"}', 'system call', 'ns', 'ok', "
                       "'{\"n_processes\":1,\"median_ns\":95.0}')", (run_id,)).lastrowid
    pid = conn.execute("INSERT INTO processes (result_id, idx, header) VALUES (?, 0, '{}')", (rid,)).lastrowid
    conn.execute("INSERT INTO samples (process_id, idx, data) VALUES (?, 0, '{\"ns_per_op\":95.0}')", (pid,))
    conn.close()
    return run_id


def test_v1_store_is_read_without_migrating(tmp_path):
    path = tmp_path / "v1.db"
    run_id = _v1_store(path)
    before = path.read_bytes()
    with open_store(str(path), readonly=True) as store:
        assert [(r["id"], r["label"], r["benches"]) for r in store.list_runs()] == [(run_id, "old", ["syscall.null"])]
        doc = store.load_run("old")
    r = doc["results"][0]
    assert r["bench"] == "syscall.null" and "key" not in r and r["summary"]["median_ns"] == 95.0
    assert r["processes"][0]["samples"] == [{"ns_per_op": 95.0}]
    assert path.read_bytes() == before                    # not migrated, not touched
    assert not list(tmp_path.glob("v1.db-*"))             # no journal left either


def test_read_only_store_cannot_write(db):
    """mode=ro: even root, who ignores file permissions, cannot write through it."""
    with open_store(str(db)) as store:
        make_run(store, n_results=1, n_processes=1)
    with open_store(str(db), readonly=True) as store:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._db.execute("CREATE TABLE x (a)")
        with pytest.raises(StoreError, match="read-only"):
            store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0")


def test_reading_a_missing_store_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with open_store(None, readonly=True) as store:        # the default store, not there yet: empty
        assert store.list_runs() == []
        with pytest.raises(UnknownRun):
            store.resolve("1")
    missing = tmp_path / "no" / "such" / "opcost.db"
    with pytest.raises(StoreError, match="does not exist"):
        open_store(str(missing), readonly=True)
    assert list(tmp_path.iterdir()) == []
