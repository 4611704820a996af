"""The SQLite schema: its DDL as append-only migrations, and what each version
added. store/sqlite.py runs them; nothing else here.

Layout: runs 1-n results (one per variant, in run order) 1-n processes (one per
probe process) 1-n samples (one per batch, warm-up included and flagged).
JSON columns hold what the probe and the runner produced, unchanged; the few
plain columns next to them (status, bench, iters, ns_per_op...) exist so SQL
can filter and list without parsing JSON.
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import Callable, Union

from .recover import recover_plan
from .rows import recovered_plans

# Stamped into the file header by migration 1 (PRAGMA application_id, "opco"), so
# that we recognise our own stores and refuse to add tables to another program's
# database that happens to have a user_version.
APPLICATION_ID = 0x6F70636F

# Statuses are validated in Python rather than with CHECK constraints: SQLite
# cannot alter a CHECK without rebuilding the table, and new statuses are likely.
# The UNIQUE / PRIMARY KEY constraints double as the indices on the foreign keys
# (their first column is the parent id). runs.id is AUTOINCREMENT so that an id,
# once printed to a user, never comes back for a different run after a deletion.
V1 = """
CREATE TABLE runs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    created        TEXT NOT NULL,
    finished       TEXT,
    label          TEXT,
    kind           TEXT NOT NULL DEFAULT 'run',
    status         TEXT NOT NULL DEFAULT 'running',
    opcost_version TEXT NOT NULL,
    argv           TEXT NOT NULL,
    env            TEXT NOT NULL
);
CREATE INDEX runs_label ON runs (label);
CREATE TABLE results (
    id       INTEGER PRIMARY KEY,
    run_id   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    bench    TEXT NOT NULL,
    params   TEXT NOT NULL,
    op       TEXT NOT NULL,
    unit     TEXT NOT NULL,
    status   TEXT NOT NULL DEFAULT 'pending',
    reason   TEXT,
    summary  TEXT,
    UNIQUE (run_id, position)
);
CREATE INDEX results_bench ON results (bench);
CREATE TABLE processes (
    id        INTEGER PRIMARY KEY,
    result_id INTEGER NOT NULL REFERENCES results (id) ON DELETE CASCADE,
    idx       INTEGER NOT NULL,
    header    TEXT NOT NULL,
    trailer   TEXT,
    UNIQUE (result_id, idx)
);
CREATE TABLE samples (
    process_id INTEGER NOT NULL REFERENCES processes (id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,
    warmup     INTEGER NOT NULL DEFAULT 0,
    iters      INTEGER,
    ns_per_op  REAL,
    tsc_per_op REAL,
    data       TEXT NOT NULL,
    PRIMARY KEY (process_id, idx)
) WITHOUT ROWID;
PRAGMA application_id = %d;
""" % APPLICATION_ID

Step = Union[str, Callable[[sqlite3.Connection], None]]

# Ordered (version, step). A step is an SQL script (statements end at the end of
# a line; no executescript, which would commit behind our back) or a function of
# the connection. Each step runs in its own transaction together with the
# `PRAGMA user_version` bump, so a store is always at exactly one version.
# Append only: never edit a step that has shipped.
# Version 2: the display key of a result (`ctx.pipe:mode=thread`) and the
# runner's per-process facts (round, pad_bytes, wall_s) as JSON.
V2 = """
ALTER TABLE results ADD COLUMN key TEXT;
ALTER TABLE processes ADD COLUMN meta TEXT;
"""

# Version 3: who runs a run (host, pid and the pid's start time), so a run left
# "running" by an opcost that is gone reads as abandoned.
V3 = """
ALTER TABLE runs ADD COLUMN owner TEXT;
"""

# Version 4 (issue 14): labels as key=value, one row per label (a run's name,
# the old runs.label, becomes name=...; runs.label stays, as the name, for
# `label:TEXT` and older readers), and a uuid per run: its identity across
# stores, so that importing a run twice stores it once. Old runs get a new
# uuid4 each.
V4 = """
CREATE TABLE run_labels (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE INDEX run_labels_key_value ON run_labels (key, value);
INSERT INTO run_labels (run_id, key, value) SELECT id, 'name', label FROM runs WHERE label IS NOT NULL;
ALTER TABLE runs ADD COLUMN uuid TEXT;
"""


def _v4(db: sqlite3.Connection) -> None:
    for statement in statements(V4):
        db.execute(statement)
    ids = [r[0] for r in db.execute("SELECT id FROM runs WHERE uuid IS NULL")]
    db.executemany("UPDATE runs SET uuid = ? WHERE id = ?", [(str(uuid.uuid4()), i) for i in ids])
    db.execute("CREATE UNIQUE INDEX runs_uuid ON runs (uuid)")


# Version 5 (issue 24): the plan of a run (model.Plan as JSON: kind, arms,
# delta, --over, the sequential design, switches per operation, the target),
# so that `show` and `compare` rebuild a run's comparison from the store
# alone. Older runs get theirs recovered once from their argv (store/recover.py),
# or the JSON null when it cannot be told; a NULL column (a store read as it is,
# never migrated) is recovered when read.
def _v5(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE runs ADD COLUMN plan TEXT")
    db.executemany("UPDATE runs SET plan = ? WHERE id = ?", recovered_plans(lambda sql: db.execute(sql).fetchall(), recover_plan))


def statements(script: str) -> list[str]:
    """An SQL script as its statements (sqlite3.complete_statement decides
    where one ends); an unfinished last statement is an error."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf.strip()[:60]!r}")
    return out


MIGRATIONS: list[tuple[int, Step]] = [
    (1, V1),
    (2, V2),
    (3, V3),
    (4, _v4),
    (5, _v5),
]
LATEST_VERSION = MIGRATIONS[-1][0]

# Columns that a later version added, with that version: a store read as it is
# (read-only, never migrated) may be older, and its readers select NULL instead.
ADDED_IN = {"results.key": 2, "processes.meta": 2, "runs.owner": 3, "runs.uuid": 4, "run_labels": 4, "runs.plan": 5}
