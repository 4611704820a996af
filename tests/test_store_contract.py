"""The contract every store backend keeps: the whole `Store` interface
(store/base.py), run against each backend of store.BACKENDS through the
fixture factory it registers here with @factory(scheme). A new backend adds
its factory below; no test changes. A factory takes the test's tmp_path and
its pytest request (for fixtures: the PostgreSQL server) and gives:
- url(name): the URL of a new, empty store;
- hold_lock(url): a context manager in which another connection holds the
  store's write lock, as another program would.
It may pytest.skip() where the backend cannot run (no server here)."""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from opcost import interrupts
from opcost.errors import StoreError, StoreLocked, UnknownRun
from opcost.model import Plan
from opcost.store import BACKENDS, Store, base, open_store, owner

FACTORIES: dict[str, Callable[[Path], Any]] = {}


def factory(scheme: str):
    def register(cls):
        cls.scheme = scheme
        FACTORIES[scheme] = cls
        return cls
    return register


@factory("sqlite")
class SqliteFactory:
    def __init__(self, tmp_path: Path, request: Any = None):
        self.dir = tmp_path

    def url(self, name: str = "opcost") -> str:
        return f"sqlite://{self.dir / name}.db"

    @contextlib.contextmanager
    def hold_lock(self, url: str) -> Iterator[None]:
        conn = sqlite3.connect(url.removeprefix("sqlite://"), isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()


@factory("postgresql")
class PostgresFactory:
    """A new database on the session's server (tests/pgserver.py) per name,
    the password from PGPASSFILE; skipped where no server can be started."""

    def __init__(self, tmp_path: Path, request: Any):
        self.server = request.getfixturevalue("postgres_server")
        self.urls: dict[str, str] = {}

    def url(self, name: str = "opcost") -> str:
        if name not in self.urls:
            self.urls[name] = self.server.url(self.server.new_database(name[:8]))
        return self.urls[name]

    @contextlib.contextmanager
    def hold_lock(self, url: str) -> Iterator[None]:
        import psycopg

        from opcost.store.postgresql import PostgresStore
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (PostgresStore.LOCK_KEY,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (PostgresStore.LOCK_KEY,))


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, tmp_path):
    make = FACTORIES.get(request.param)
    assert make is not None, f"backend {request.param} registers no factory in {Path(__file__).name}"
    return make(tmp_path, request)


ENV = {"arch": "x86_64", "cpus": 2, "kernel": "6.18"}
ARGV = ["opcost", "run", "ctx.pipe:mode=process|thread"]
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def sample(i: int, warmup: bool = False) -> dict:
    s: dict[str, Any] = {"iters": 100 + i, "ns_per_op": 2.5 + i, "tsc_per_op": 6.0 + i,
                         "counters": {"cycles": 6.0 + i, "cache-misses": "<not supported>"}}
    if warmup:
        s["warmup"] = True
    return s


def write_run(store: Store, label: str | None = "base", kind: str = "run",
              labels: dict[str, str] | None = None, bench3: str = "syscall.null") -> tuple[int, dict]:
    """A run as the recorder writes it (keys, process meta, warm-up first, its
    plan); returns its id and the document load_run must give back, key for key."""
    ident = str(uuid.uuid4())
    plan = Plan(kind=kind, specs=ARGV[2:], switches={"ctx.pipe": 2}, target="local").to_dict()
    run_id = store.create_run(label=label, env=ENV, argv=ARGV, opcost_version="0.1.0", kind=kind,
                              labels=labels, uuid=ident, plan=plan)
    results = []
    for pos, (bench, key, status, reason) in enumerate([
            ("ctx.pipe", "ctx.pipe:mode=process", "ok", None),
            ("ctx.pipe", "ctx.pipe:mode=thread", "unsupported", "placement=smt: no SMT sibling"),
            (bench3, None, "failed", "probe exited 1")]):
        params = {"mode": key.rpartition("=")[2] if key else "", "cpu": "1", "arch": "x86_64"}
        rid = store.add_result(run_id, position=pos, bench=bench, params=params, op="round trip", unit="ns",
                               key=key)
        processes = []
        for idx in range(2 if status == "ok" else 0):
            header = {"schema": "opcost.probe/1", "tsc_hz": 2.9e9, "pid": 4000 + idx}
            warm, meas = [sample(k, True) for k in range(2)], [sample(k) for k in range(3)]
            meta = {"round": idx, "seq": 7 * idx, "pad_bytes": 100 + idx, "wall_s": 0.25}
            store.add_process(rid, idx=idx, header=header, samples=warm + meas, trailer={"ok": True}, meta=meta)
            processes.append({"index": idx, **dict(sorted(meta.items())), "header": header, "samples": meas,
                              "warmup": warm, "trailer": {"ok": True}})
        summary = {"median_ns": 2.5, "n_processes": 2} if status == "ok" else None
        store.set_result(rid, status=status, reason=reason, summary=summary)
        # the model's one shape (model.Result): a variant without processes reads {"n_processes": 0}
        results.append({"bench": bench, **({"key": key} if key else {}), "params": params, "op": "round trip",
                        "unit": "ns", "status": status, "reason": reason, "processes": processes,
                        "summary": summary if processes else {"n_processes": 0}})
    names = {**({"name": label} if label is not None else {}), **(labels or {})}
    return run_id, {"schema": "opcost.result/1", "opcost_version": "0.1.0", "run_id": run_id, "uuid": ident,
                    "label": names.get("name"), "labels": dict(sorted(names.items())), "kind": kind, "status": "running", "argv": ARGV, "plan": plan, "env": ENV,
                    "results": results}


def same_document(doc: dict, want: dict) -> None:
    """Equal, with the timestamps the store set, and the keys of the run, each
    result and each process in the order `show --json` prints them (what was
    stored as JSON comes back with sorted keys)."""
    assert STAMP.match(doc["created"]) and (doc["finished"] is None or STAMP.match(doc["finished"]))
    assert doc == {**want, "created": doc["created"], "finished": doc["finished"]}
    assert list(doc) == [k for k in ["schema", "opcost_version", "run_id", "uuid", "created", "finished", "label",
                                     "labels", "kind", "status", "argv", "plan", "env", "results"] if k in want or k in (
                                         "created", "finished")]
    for result, wanted in zip(doc["results"], want["results"]):
        assert list(result) == list(wanted)
        for process, wanted_process in zip(result["processes"], wanted["processes"]):
            assert list(process) == list(wanted_process)


def dead_owner() -> dict:
    """The owner record of an opcost that has exited (a child, reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = owner._start_ticks(child.pid)       # readable until reaped
    child.wait()
    return {"host": owner.owner_here()["host"], "pid": child.pid, "start": start}


# --- the interface ---------------------------------------------------------------

def test_every_backend_registers_a_factory():
    assert set(FACTORIES) == set(BACKENDS)


@pytest.mark.parametrize("scheme", sorted(BACKENDS))
def test_backend_methods_are_the_protocols(scheme):
    """Same parameters, kinds and defaults as `Store` (mypy checks the types)."""
    cls = BACKENDS[scheme]
    for name, want in inspect.getmembers(Store, inspect.isfunction):
        if name.startswith("_") and name not in ("__enter__", "__exit__"):
            continue
        got = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(cls, name)).parameters.values()]
        assert got == [(p.name, p.kind, p.default) for p in inspect.signature(want).parameters.values()], name


def test_attributes_the_callers_read(backend):
    seen = []
    with open_store(backend.url(), on_wait=seen.append) as store:
        assert store.on_wait == seen.append and store.lock_wait == base.DEFAULT_LOCK_WAIT_S
        assert str(store.path)
    with pytest.raises(StoreError, match="closed"):
        store.list_runs()
    store.close()                                # twice is fine


# --- writing and reading back ------------------------------------------------------

def test_round_trip_gives_the_exact_document(backend):
    url = backend.url()
    with open_store(url) as store:
        run_id, want = write_run(store)
        same_document(store.load_run(run_id), want)
        store.finish_run(run_id, "complete")
        doc = store.load_run(run_id)
    assert STAMP.match(doc["finished"])
    with open_store(url, readonly=True) as store:      # committed, and read back read-only alike
        same_document(store.load_run(str(run_id)), {**want, "status": "complete"})
        assert store.list_runs() == [
            {"id": run_id, "created": doc["created"], "finished": doc["finished"], "label": "base", "kind": "run",
             "status": "complete", "opcost_version": "0.1.0", "n_results": 3, "benches": ["ctx.pipe", "syscall.null"],
                 "labels": {"name": "base"}, "uuid": doc["uuid"]}]


def test_runs_are_listed_newest_first_with_a_limit(backend):
    with open_store(backend.url()) as store:
        assert store.list_runs() == []
        ids = [write_run(store, label=f"r{i}", kind=kind)[0] for i, kind in enumerate(("run", "ab", "variants"))]
        assert [r["id"] for r in store.list_runs()] == ids[::-1]
        assert [(r["label"], r["kind"]) for r in store.list_runs(2)] == [("r2", "variants"), ("r1", "ab")]
        assert store.list_runs(0) == []
        assert len(store.list_runs(2**70)) == 3
        with pytest.raises(ValueError):
            store.list_runs(-1)


def test_statuses(backend):
    with open_store(backend.url()) as store:
        finals = {}
        for status in base.FINAL_RUN_STATUSES:
            run_id = store.create_run(label=status, env={}, argv=[], opcost_version="0.1.0")
            store.finish_run(run_id, status)
            finals[run_id] = status
        running = store.create_run(label="running", env={}, argv=[], opcost_version="0.1.0")
        rid = store.add_result(running, position=0, bench="b", params={}, op="o", unit="ns")
        assert store.load_run(running)["results"][0]["status"] == "pending"
        for status in base.RESULT_STATUSES:
            store.set_result(rid, status=status, reason=f"because {status}")
            r = store.load_run(running)["results"][0]
            assert (r["status"], r["reason"], r["summary"]) == (status, f"because {status}", {"n_processes": 0})
        assert {r["id"]: r["status"] for r in store.list_runs()} == {**finals, running: "running"}
        with pytest.raises(ValueError):
            store.set_result(rid, status="great")
        with pytest.raises(ValueError):
            store.finish_run(running, "running")
        with pytest.raises(StoreError, match=f"holds no result with id {rid + 1000}"):
            store.set_result(rid + 1000, status="ok")
        with pytest.raises(StoreError, match=f"holds no run with id {running + 1000}"):
            store.finish_run(running + 1000, "complete")


def test_runs_of_a_dead_owner_read_abandoned_and_clean_stores_it(backend, monkeypatch):
    with open_store(backend.url()) as store:
        alive = store.create_run(label="alive", env={}, argv=[], opcost_version="0.1.0")   # ours
        monkeypatch.setattr(base, "owner_here", dead_owner)
        gone = store.create_run(label="gone", env={}, argv=[], opcost_version="0.1.0")
        monkeypatch.setattr(base, "owner_here", lambda: {"host": "elsewhere.invalid", "pid": 1, "start": 1})
        elsewhere = store.create_run(label="elsewhere", env={}, argv=[], opcost_version="0.1.0")
        done = store.create_run(label="done", env={}, argv=[], opcost_version="0.1.0")
        store.finish_run(done, "complete")
        shown = {r["id"]: r["status"] for r in store.list_runs()}
        assert shown == {alive: "running", gone: "abandoned", elsewhere: "running", done: "complete"}
        assert store.load_run(gone)["status"] == "abandoned" and store.load_run(gone)["finished"] is None
        assert store.clean_abandoned() == [gone]
        assert STAMP.match(store.load_run(gone)["finished"])
        assert store.clean_abandoned() == []
        assert {r["id"]: r["status"] for r in store.list_runs()} == shown


def test_run_references(backend):
    with open_store(backend.url()) as store:
        first = store.create_run(label="2", env={}, argv=[], opcost_version="0.1.0")
        second = store.create_run(label="1", env={}, argv=[], opcost_version="0.1.0")
        latest_2 = store.create_run(label="2", env={}, argv=[], opcost_version="0.1.0")
        odd = store.create_run(label="id:2", env={}, argv=[], opcost_version="0.1.0")
        assert store.resolve("1") == first                     # bare digits: an id first
        assert store.resolve("label:1") == second
        assert store.resolve("id:2") == second
        assert store.resolve("2") == second and store.resolve("label:2") == latest_2
        assert store.resolve("label:id:2") == odd
        assert store.load_run("label:2")["run_id"] == latest_2 and store.load_run(first)["run_id"] == first
        for ref, message in (("label:3", "no stored run with label '3'"), ("id:1000", "no stored run with id '1000'"),
                             ("nope", "no stored run with id or label 'nope'"), ("", "id or label ''"),
                             (str(2**63), "id or label"), ("id:" + "9" * 40, "no stored run with id"),
                             ("id:x", "an id is a number"), ("bad\x1b", "'bad\\x1b'")):
            with pytest.raises(UnknownRun) as e:
                store.resolve(ref)
            assert message in str(e.value) and "\n" not in str(e.value), ref
        with pytest.raises(UnknownRun):
            store.load_run("nope")


def test_a_process_interrupted_while_stored_is_not_kept(backend):
    """Ctrl-C between a process's row and its samples: neither is kept, and
    the store can still mark the run interrupted."""
    with open_store(backend.url()) as store:
        run_id = store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0")
        rid = store.add_result(run_id, position=0, bench="b", params={}, op="o", unit="ns")
        store.add_process(rid, idx=0, header={}, samples=[sample(0)], trailer=None)
        real = store._conn

        class Cursor:
            def __init__(self):
                self.cursor = real.cursor()

            def __getattr__(self, name):
                return getattr(self.cursor, name)

            def executemany(self, *args):
                raise KeyboardInterrupt

        class Connection:
            def __getattr__(self, name):
                return getattr(real, name)

            def cursor(self):
                return Cursor()

        store._conn = Connection()
        with pytest.raises(KeyboardInterrupt):
            store.add_process(rid, idx=1, header={}, samples=[sample(1)], trailer=None)
        store._conn = real
        store.finish_run(run_id, "interrupted")
        doc = store.load_run(run_id)
    assert doc["status"] == "interrupted"
    assert [(p["index"], len(p["samples"])) for p in doc["results"][0]["processes"]] == [(0, 1)]


# --- reading without writing ---------------------------------------------------------

def test_read_only_store_refuses_every_write(backend):
    url = backend.url()
    with open_store(url) as store:
        run_id, want = write_run(store)
        rid = store.add_result(run_id, position=9, bench="b", params={}, op="o", unit="ns")
    want["results"].append({"bench": "b", "params": {}, "op": "o", "unit": "ns", "status": "pending",
                            "reason": None, "processes": [], "summary": {"n_processes": 0}})
    with open_store(url, readonly=True) as store:
        writes = {
            "creating a run": lambda: store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0"),
            "adding a result": lambda: store.add_result(run_id, position=10, bench="b", params={}, op="o",
                                                        unit="ns"),
            "adding a process": lambda: store.add_process(rid, idx=0, header={}, samples=[sample(0)], trailer=None),
            "updating a result": lambda: store.set_result(rid, status="ok"),
            "finishing a run": lambda: store.finish_run(run_id, "complete"),
        }
        for doing, write in writes.items():
            with pytest.raises(StoreError, match=f"is read-only while {doing}"):
                write()
        same_document(store.load_run(run_id), want)


# --- another program's lock ----------------------------------------------------------

def test_a_locked_store_is_waited_for_then_given_up(backend, monkeypatch):
    monkeypatch.setenv("OPCOST_STORE_WAIT", "1.5")
    url = backend.url()
    said = []
    with open_store(url, on_wait=said.append) as store:
        assert store.lock_wait == 1.5
        with backend.hold_lock(url):
            t0 = time.monotonic()
            with pytest.raises(StoreLocked) as e:
                store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0")
            waited = time.monotonic() - t0
        assert str(e.value) == (f"store {store.path} is locked by another program while creating a run: "
                                "retry when it has finished, or use another --store")
        assert said == [f"store {store.path} is locked by another program; waiting up to 1.5 s while "
                        "creating a run (OPCOST_STORE_WAIT)"]
        assert 1.5 <= waited < 30
        assert store.create_run(label="after", env={}, argv=[], opcost_version="0.1.0")   # usable again


@pytest.mark.parametrize("notice_after", [0.5, base.NOTICE_AFTER_S])
def test_a_lock_released_while_waiting_loses_nothing(backend, monkeypatch, notice_after):
    """Said once when the wait is long (here: over 0.5 s); a wait shorter than
    NOTICE_AFTER_S (writers taking turns) is not worth a line."""
    monkeypatch.setenv("OPCOST_STORE_WAIT", "60")
    monkeypatch.setattr(base, "NOTICE_AFTER_S", notice_after)
    url = backend.url()
    said: list[str] = []
    with open_store(url, on_wait=said.append) as store:
        run_id = store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0")
        rid = store.add_result(run_id, position=0, bench="b", params={}, op="o", unit="ns")
        held = threading.Event()

        def hold() -> None:
            with backend.hold_lock(url):
                held.set()
                time.sleep(1.2)
        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(30)
        store.add_process(rid, idx=0, header={}, samples=[sample(0), sample(1)], trailer=None)
        holder.join()
        if notice_after < 1.2:
            assert len(said) == 1 and "while adding a process" in said[0]
        else:
            assert said == []
        assert len(store.load_run(run_id)["results"][0]["processes"][0]["samples"]) == 2


def test_a_pending_signal_stops_the_wait(backend, monkeypatch):
    monkeypatch.setenv("OPCOST_STORE_WAIT", "600")
    url = backend.url()
    with open_store(url) as store:
        monkeypatch.setattr(interrupts, "pending", lambda: True)
        with backend.hold_lock(url):
            t0 = time.monotonic()
            with pytest.raises(StoreLocked):
                store.create_run(label=None, env={}, argv=[], opcost_version="0.1.0")
            assert time.monotonic() - t0 < 30


# --- schema versions ---------------------------------------------------------------------

def test_a_store_of_the_oldest_schema_is_read_as_it_is_then_migrated(backend, monkeypatch):
    cls = BACKENDS[backend.scheme]
    url = backend.url("old")
    monkeypatch.setattr(cls, "migrations", cls.migrations[:1])
    with open_store(url) as old:
        # A run as the first release wrote it: no key, process meta nor owner then.
        old._execute("creating a run",
                     "INSERT INTO runs (created, label, kind, status, opcost_version, argv, env) "
                     "VALUES ('2024-05-01T12:00:00Z', 'before', 'run', 'complete', '0.0.1', ?, '{}')",
                     (json.dumps(["opcost"]),))
        run_id = old.resolve("before")
        old._execute("adding a result",
                     "INSERT INTO results (run_id, position, bench, params, op, unit, status, summary) "
                     "VALUES (?, 0, 'syscall.null', '{\"via\":\"libc\"}', 'system call', 'ns', 'ok', "
                     "'{\"median_ns\":95.0}')", (run_id,))
        assert old.load_run(run_id)["label"] == "before"
    monkeypatch.undo()
    want = {"schema": "opcost.result/1", "opcost_version": "0.0.1", "run_id": run_id, "label": "before",
            "labels": {"name": "before"}, "kind": "run", "status": "complete", "argv": ["opcost"], "env": {},
            "results": [{"bench": "syscall.null", "params": {"via": "libc"}, "op": "system call", "unit": "ns",
                         "status": "ok", "reason": None, "processes": [], "summary": {"median_ns": 95.0}}]}
    with open_store(url, readonly=True) as store:
        assert store.version == 1
        same_document(store.load_run("before"), want)
        assert [(r["id"], r["benches"]) for r in store.list_runs()] == [(run_id, ["syscall.null"])]
    with open_store(url, readonly=True) as store:
        assert store.version == 1                        # reading did not migrate it
    with open_store(url) as store:
        assert store.version == cls.migrations[-1][0]
        doc = store.load_run(run_id)
        assert uuid.UUID(doc["uuid"])                    # migration 4 gave the old run an identity
        same_document(doc, {**dict(list(want.items())[:3]), "uuid": doc["uuid"], **want})
        rid = store.add_result(run_id, position=1, bench="ctx.pipe", params={}, op="round trip", unit="ns",
                               key="ctx.pipe:mode=thread")
        store.add_process(rid, idx=0, header={}, samples=[], trailer=None, meta={"round": 3})
        r = store.load_run(run_id)["results"][1]
    assert r["key"] == "ctx.pipe:mode=thread" and r["processes"][0]["round"] == 3


def test_migrations_are_append_only_from_one(backend):
    cls = BACKENDS[backend.scheme]
    assert [v for v, _ in cls.migrations] == list(range(1, len(cls.migrations) + 1))
    with open_store(backend.url()) as store:
        assert store.version == cls.migrations[-1][0]


# --- labels (issue 14): key=value per run, searched by find_runs ------------------------

def test_labels_are_stored_listed_and_found(backend):
    with open_store(backend.url()) as store:
        a, want_a = write_run(store, "base", labels={"kernel": "6.18-rc3", "commit": "abc123"})
        b, _ = write_run(store, None, labels={"kernel": "6.18-rc3", "commit": "def456"}, bench3="signal.catch")
        c, _ = write_run(store, "other", bench3="signal.catch")
        same_document(store.load_run(a), want_a)
        assert store.load_run(b)["label"] is None and store.load_run(b)["labels"] == {
            "commit": "def456", "kernel": "6.18-rc3"}
        listed = {r["id"]: r["labels"] for r in store.list_runs()}
        assert listed == {a: {"commit": "abc123", "kernel": "6.18-rc3", "name": "base"},
                          b: {"commit": "def456", "kernel": "6.18-rc3"}, c: {"name": "other"}}

        def ids(**kw):
            return [r["id"] for r in store.find_runs(**kw)]
        assert ids() == [c, b, a]                                   # newest first, like list_runs
        assert ids(where={"commit": "abc123"}) == [a]
        assert ids(where={"kernel": "6.18-rc3"}) == [b, a]
        assert ids(where={"kernel": "6.18-rc3", "commit": "def456"}) == [b]       # AND
        assert ids(where={"kernel": "6.18-rc3", "commit": "nope"}) == []
        assert ids(where={"name": "base"}) == [a]
        assert ids(key="commit") == [b, a]
        assert ids(key="name") == [c, a]
        assert ids(bench="signal.catch") == [c, b]
        assert ids(key="commit", bench="signal.catch") == [b]
        assert ids(bench="ctx.pipe", where={"commit": "abc123"}) == [a]
        found = store.find_runs(where={"commit": "abc123"})[0]
        assert found == [r for r in store.list_runs() if r["id"] == a][0]
        assert store.resolve("label:base") == a                   # the name label is the run's label


def test_label_keys_are_checked(backend):
    from opcost.errors import UsageError
    with open_store(backend.url()) as store:
        for bad in ("", "has space", "-lead", "k=v", "x" * 65, "é"):
            with pytest.raises(UsageError, match="key"):
                store.create_run(labels={bad: "v"}, env={}, argv=[], opcost_version="0.1.0")
        assert store.list_runs() == []                            # nothing half-created
        rid = store.create_run(labels={"k": "any text: 1=2, ünïcode ok"}, env={}, argv=[], opcost_version="0.1.0")
        assert store.load_run(rid)["labels"] == {"k": "any text: 1=2, ünïcode ok"}


def test_delete_runs_removes_everything_they_measured(backend):
    with open_store(backend.url()) as store:
        a, _ = write_run(store, "a", labels={"commit": "x"})
        b, want_b = write_run(store, "b")
        assert store.delete_runs([a, 999]) == [a]
        with pytest.raises(UnknownRun):
            store.load_run(a)
        assert store.find_runs(where={"commit": "x"}) == []
        same_document(store.load_run(b), want_b)
        c = store.create_run(env={}, argv=[], opcost_version="0.1.0")
        assert c > b                                              # an id never comes back


def test_import_stores_a_document_once_and_gives_it_back(backend, tmp_path):
    src, dst = backend.url("src"), backend.url("dst")
    with open_store(src) as store:
        a, _ = write_run(store, "base", labels={"commit": "abc"})
        store.finish_run(a, "complete")
        b, _ = write_run(store, None, kind="ab", labels={"commit": "def"})
        docs = [store.load_run(a), store.load_run(b)]
    with open_store(dst) as store:
        assert store.import_runs(docs) == [(a, True), (b, True)]     # ids kept: never given here
        assert [store.load_run(d["run_id"]) for d in docs] == docs   # lossless, times and status too
        assert store.import_runs(docs[::-1]) == [(b, False), (a, False)]   # once only
        assert len(store.list_runs()) == 2
        assert [r["id"] for r in store.find_runs(where={"commit": "def"})] == [b]


def test_import_is_all_or_nothing_and_never_reuses_an_id(backend):
    with open_store(backend.url("src")) as store:
        a, _ = write_run(store, "a")
        doc = store.load_run(a)
    with open_store(backend.url("dst")) as store:
        first = store.create_run(env={}, argv=[], opcost_version="0.1.0")
        store.delete_runs([first])
        bad = {**doc, "uuid": str(uuid.uuid4()), "status": "weird"}
        with pytest.raises(StoreError):
            store.import_runs([doc, bad])
        assert store.list_runs() == []                            # the good one rolled back with it
        [(rid, new)] = store.import_runs([doc])
        assert new and rid != first                               # id 1 was given once already
        assert {**store.load_run(rid), "run_id": a} == doc


def test_a_document_without_uuid_is_known_by_its_content(backend):
    with open_store(backend.url("src")) as store:
        a, _ = write_run(store, "a")
        doc = {k: v for k, v in store.load_run(a).items() if k != "uuid"}
    with open_store(backend.url("dst")) as store:
        [(rid, new)] = store.import_runs([doc])
        assert new and uuid.UUID(store.load_run(rid)["uuid"])
        assert store.import_runs([{**doc, "run_id": 77}]) == [(rid, False)]
        assert store.import_runs([{**doc, "label": "changed"}])[0][1] is True


def test_a_version_3_store_migrates_its_labels(backend, monkeypatch):
    cls = BACKENDS[backend.scheme]
    url = backend.url("v3")
    monkeypatch.setattr(cls, "migrations", cls.migrations[:3])
    with open_store(url) as old:
        assert old.version == 3
        for label in ("base", None, "6.18 lazy fpu", "base"):
            old._execute("creating a run", "INSERT INTO runs (created, label, kind, status, opcost_version, argv,"
                         " env) VALUES ('2024-05-01T12:00:00Z', ?, 'run', 'complete', '0.1.0', '[]', '{}')",
                         (label,))
    monkeypatch.undo()
    with open_store(url, readonly=True) as store:                 # read as it is: the name label only
        assert store.version == 3
        assert [r["labels"] for r in store.list_runs()] == [{"name": "base"}, {"name": "6.18 lazy fpu"}, {},
                                                            {"name": "base"}]
        assert [r["id"] for r in store.find_runs(where={"name": "base"})] == [4, 1]
        assert store.find_runs(where={"commit": "x"}) == [] and store.find_runs(key="commit") == []
        assert [r["id"] for r in store.find_runs(key="name")] == [4, 3, 1]
        assert "uuid" not in store.load_run(1)
    with open_store(url) as store:
        assert store.version == cls.migrations[-1][0]
        runs = store.list_runs()
        assert [r["labels"] for r in runs] == [{"name": "base"}, {"name": "6.18 lazy fpu"}, {}, {"name": "base"}]
        assert [r["label"] for r in runs] == ["base", "6.18 lazy fpu", None, "base"]
        assert len({uuid.UUID(r["uuid"]) for r in runs}) == 4     # each its own identity
        assert [r["id"] for r in store.find_runs(where={"name": "base"})] == [4, 1]
        doc = store.load_run(3)
        assert doc["labels"] == {"name": "6.18 lazy fpu"} and doc["label"] == "6.18 lazy fpu"
        rid = store.create_run(label="new", labels={"commit": "abc"}, env={}, argv=[], opcost_version="0.1.0")
        assert store.find_runs(where={"commit": "abc", "name": "new"})[0]["id"] == rid


# --- plans (issue 24): stored with a run; an older run's recovered from its argv ---------

AB_ARGV = ["opcost", "ab", "ctx.pipe", "--a", "mode=process", "--b", "mode=thread", "--delta", "5", "-p", "2"]


def test_a_version_4_store_migrates_with_its_plans_recovered(backend, monkeypatch):
    cls = BACKENDS[backend.scheme]
    url = backend.url("v4")
    monkeypatch.setattr(cls, "migrations", cls.migrations[:4])
    with open_store(url) as old:
        assert old.version == 4
        for label, argv in (("ab", AB_ARGV), ("odd", ["opcost", "ab", "x", "--gone-option"])):
            old._execute("creating a run", "INSERT INTO runs (created, label, kind, status, opcost_version, argv,"
                         " env) VALUES ('2024-05-01T12:00:00Z', ?, 'ab', 'complete', '0.1.0', ?, '{}')",
                         (label, json.dumps(argv)))
        ab, odd = old.resolve("ab"), old.resolve("odd")
        for pos, mode in enumerate(("process", "thread")):
            rid = old.add_result(ab, position=pos, bench="ctx.pipe", params={"mode": mode}, op="round trip",
                                 unit="ns")
            old.add_process(rid, idx=0, header={}, samples=[sample(0)], trailer=None, meta={"round": 0})
    monkeypatch.undo()
    want = Plan(kind="ab", specs=["ctx.pipe"], a="mode=process", b="mode=thread", delta=0.05,
                switches={"ctx.pipe": 2}, target="local", recovered=True).to_dict()
    with open_store(url, readonly=True) as store:                 # read as it is: recovered when read
        assert store.version == 4
        doc = store.load_run(ab)
        assert doc["plan"] == want and list(doc).index("plan") == list(doc).index("argv") + 1
        assert "plan" not in store.load_run(odd)                  # a command line that does not parse: none
    with open_store(url) as store:
        assert store.version == cls.migrations[-1][0]
        column = store._execute("reading", "SELECT id, plan FROM runs ORDER BY id").fetchall()
        assert [(i, json.loads(p)) for i, p in column] == [(ab, want), (odd, None)]   # stored once
        assert store.load_run(ab)["plan"] == want and "plan" not in store.load_run(odd)


def test_an_imported_document_without_a_plan_gets_it_from_its_argv(backend):
    with open_store(backend.url("src")) as store:
        a, _ = write_run(store, "a", kind="ab")
        doc = store.load_run(a)
    doc = {**{k: v for k, v in doc.items() if k != "plan"}, "argv": AB_ARGV}
    with open_store(backend.url("dst")) as store:
        [(rid, new)] = store.import_runs([doc])
        assert new and store.load_run(rid)["plan"] == {**Plan(
            kind="ab", specs=["ctx.pipe"], a="mode=process", b="mode=thread", delta=0.05, switches={"ctx.pipe": 2},
            target="local").to_dict(), "recovered": True}
        [(rid2, _)] = store.import_runs([{**doc, "uuid": str(uuid.uuid4()), "plan": {"kind": "ab", "delta": 0.1}}])
        assert store.load_run(rid2)["plan"]["delta"] == 0.1        # a document's own plan is kept as it is
