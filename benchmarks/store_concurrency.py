#!/usr/bin/env python3
"""Several writers into one SQLite store at once (issue 14): W processes each
write R runs through the store API as the recorder writes them (a run, a
result, 2 processes of 20 samples, statuses: 6 transactions per run), all at
once, against a reference measured in the same invocation: one writer alone
writing R runs. Prints the runs stored (must be W*R), the lock-wait notices
shown (must be 0), the wall time of the W writers as a ratio to W times the
lone writer (1.0: writing at once costs nothing over writing one after the
other), and the longest single store call of any writer (the notice comes
after 10 s). Bounded: 300 s. Prints, never fails on the figures (a shared
machine: read them, do not gate on them).

With --store URL (a PostgreSQL store, e.g. postgresql://HOST/DB, password
from ~/.pgpass or PGPASSFILE; its runs are labelled bench=ref-PID and
bench=many-PID, so an empty database is best): the same figures for that
store, measured after SQLite's in the same invocation, and the ratio of the
W writers' wall time there to SQLite's.

--pg-server instead: a throwaway local server started for it by the tests'
helper (tests/pgserver.py, Debian's postgresql; fsync on, as a real server
keeps it), stopped at the end; if none can be started, it says so and
prints SQLite's figures only.

usage: benchmarks/store_concurrency.py [--store URL | --pg-server] [WRITERS [RUNS]]   (default 8 100)"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WRITER = r"""
import sys, time
from opcost.store import open_store
path, writer, n, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
worst = 0.0
def said(msg):
    print("opcost: " + msg, file=sys.stderr, flush=True)
def timed(fn, *a, **k):
    global worst
    t = time.monotonic()
    r = fn(*a, **k)
    worst = max(worst, time.monotonic() - t)
    return r
with open_store(path, on_wait=said) as store:
    for j in range(n):
        rid = timed(store.create_run, labels={"writer": writer, "seq": str(j), "bench": tag}, env={}, argv=["opcost"],
                    opcost_version="0")
        res = timed(store.add_result, rid, position=0, bench="syscall.null", params={}, op="", unit="ns")
        for idx in range(2):
            timed(store.add_process, res, idx=idx, header={}, trailer=None,
                  samples=[{"iters": 1000, "ns_per_op": 50.0 + k, "pad": "x" * 200} for k in range(20)])
        timed(store.set_result, res, status="ok", summary={"n_processes": 2})
        timed(store.finish_run, rid, "complete")
print(f"{worst:.4f}")
"""


def writers(db: Path | str, n: int, runs: int, tag: str = "") -> tuple[float, list[float], list[str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(w), str(runs), tag], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(n)]
    outs = [p.communicate(timeout=300) for p in procs]
    wall = time.perf_counter() - t
    worst = [float(o.split()[-1]) for o, _ in outs if o.split()]
    notices = [ln for _, e in outs for ln in e.splitlines() if ln.strip()]
    return wall, worst, notices


def count(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM runs WHERE status = 'complete'").fetchone()[0])
    finally:
        conn.close()


def report(name: str, n: int, runs: int, ref: tuple, many: tuple, stored: int, extra: str = "") -> float:
    (ref_wall, ref_worst, _), (wall, worst, notices) = ref, many
    print(f"{name}: one writer alone:   {runs} runs in {ref_wall:6.2f} s, longest store call {max(ref_worst):.3f} s")
    print(f"{name}: {n} writers at once: {n * runs} runs in {wall:6.2f} s, longest store call {max(worst):.3f} s")
    print(f"{name}: runs stored {stored} of {n * runs} (lost {n * runs - stored}); lock notices shown "
          f"{len(notices)}{extra}")
    print(f"{name}: ratio wall({n} at once) / ({n} x one alone) {wall / (n * ref_wall):.2f}")
    for line in notices[:3]:
        print("  notice:", line)
    return float(wall)


def main() -> int:
    args = sys.argv[1:]
    url = None
    server = None
    if args[:1] == ["--store"] and len(args) > 1:
        url, args = args[1], args[2:]
    elif args[:1] == ["--pg-server"]:
        args = args[1:]
        sys.path.insert(0, str(ROOT / "tests"))
        import pgserver

        bindir = pgserver._bindir()
        try:
            if bindir is None:
                raise RuntimeError("no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)")
            server = pgserver.Server(bindir, durable=True)
            server.start()
            os.environ["PGPASSFILE"] = str(server.passfile)
            url = server.url(server.new_database("bench"))
        except (RuntimeError, OSError, KeyError, subprocess.SubprocessError) as e:
            print(f"no PostgreSQL server here ({e}): SQLite only")
            if server is not None:
                server.stop()
            server = None
    try:
        return measure(url, args)
    finally:
        if server is not None:
            server.stop()


def measure(url: str | None, args: list[str]) -> int:
    n = int(args[0]) if len(args) > 0 else 8
    runs = int(args[1]) if len(args) > 1 else 100
    sys.path.insert(0, str(ROOT / "src"))
    from opcost.redact import redact
    from opcost.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        ref_db, db = Path(tmp, "ref.db"), Path(tmp, "many.db")
        for p in (ref_db, db):
            open_store(str(p)).close()
        ref = writers(ref_db, 1, runs)
        many = writers(db, n, runs)
        stored = count(db)
        conn = sqlite3.connect(db)
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        conn.close()
    lite_wall = report("sqlite", n, runs, ref, many, stored, f"; integrity_check {integrity}")
    if url is None:
        return 0
    open_store(url).close()
    tag = str(os.getpid())
    ref = writers(url, 1, runs, f"ref-{tag}")
    many = writers(url, n, runs, f"many-{tag}")
    with open_store(url, readonly=True) as store:
        stored = sum(r["status"] == "complete" for r in store.find_runs(where={"bench": f"many-{tag}"}))
    pg_wall = report(redact(url).split("://", 1)[0], n, runs, ref, many, stored)
    print(f"ratio wall({n} at once) {redact(url).split('://', 1)[0]} / sqlite {pg_wall / lite_wall:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
