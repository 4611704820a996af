"""Rows to documents, and back to JSON columns: the one place that knows what a
stored row means, for every backend.

JSON columns hold what the probe and the runner produced, unchanged, so a
stored run always turns back into the exact `opcost.result/1` document. The
readers of store/base.py select the columns each function below names, in
that order; a column an older schema lacks is selected as NULL. Each level (a
process, a result, a run) is built by its own function, so that it can turn
into a model object without touching the queries.
"""

from __future__ import annotations

import json
from itertools import repeat
from typing import Callable, Any, Iterable, Sequence

from ..model import Plan, Process, Result, Run
from .owner import shown_status

Row = Sequence[Any]


def encode(value: Any) -> str:
    """A JSON column's text. sort_keys: params must compare equal as text too
    (same variant, same JSON)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def decode_samples(texts: Iterable[str]) -> list[Any]:
    """Samples' JSON columns, read by orjson (several times faster than
    json: a reader summarizing a run of 10^6 samples); what orjson refuses
    and json reads (NaN, an integer beyond 64 bits) by json. Both round
    every number correctly: the same values."""
    import orjson     # only when a run's samples are summarized as they are read: not for every command

    out = []
    for text in texts:
        try:
            out.append(orjson.loads(text))
        except orjson.JSONDecodeError:
            out.append(json.loads(text))
    return out


# --- history ----------------------------------------------------------------------

def run_entries(runs: Iterable[Row], benches: Iterable[Row], labels: Iterable[Row] = ()) -> list[dict[str, Any]]:
    """`list_runs` entries. runs: (id, created, finished, label, kind, status,
    opcost_version, number of results, owner, uuid), in the order listed;
    benches: (run_id, bench, first position), ordered by run and first
    position; labels: (run_id, key, value), ordered by run and key."""
    names: dict[int, list[str]] = {}
    for run_id, bench, _ in benches:
        names.setdefault(run_id, []).append(bench)
    tags: dict[int, dict[str, str]] = {}
    for run_id, key, value in labels:
        tags.setdefault(run_id, {})[key] = value
    return [
        {"id": rid, "created": created, "finished": finished, "label": label, "kind": kind,
         "status": shown_status(status, decode(owner)), "opcost_version": version, "n_results": n,
         "benches": names.get(rid, []), "labels": tags.get(rid, {}), "uuid": ident}
        for rid, created, finished, label, kind, status, version, n, owner, ident in runs
    ]


# --- one run: opcost.result/1, through the model ----------------------------------

def process(row: Row) -> Process:
    """row: (idx, header, trailer, meta); samples and warm-up filled in later."""
    idx, header, trailer, meta = row
    return Process(idx, decode(header), [], [], decode(trailer), decode(meta) if meta else {})


def result(row: Row, processes: list[Process]) -> Result:
    """row: (bench, params, op, unit, status, reason, summary, key)."""
    bench, params, op, unit, status, reason, summary, key = row
    summary = decode(summary)
    return Result(bench, key or None, decode(params), op, unit, status, reason, processes, summary,
                  summary.get("parallel") if isinstance(summary, dict) else None)


def plain_samples(samples: Iterable[Row]) -> Iterable[Row]:
    """(process_id, warmup, iters, ns_per_op, tsc_per_op) rows as `run_document`
    takes samples, each sample only those columns (its JSON not read)."""
    for pid, warmup, iters, ns, tsc in samples:
        yield pid, warmup, {"iters": iters, "ns_per_op": ns, "tsc_per_op": tsc}


def run_document(run_id: int, run: Row, results: Iterable[Row], processes: Iterable[Row],
                 samples: Iterable[Row], labels: Iterable[Row] = (),
                 recover_plan: Callable[..., Plan | None] | None = None) -> dict[str, Any]:
    """The run as an `opcost.result/1` document (plus store fields: run_id,
    created, finished, label, kind, status, argv), from three bulk reads rather
    than one query per process:
    run: (created, finished, label, kind, status, opcost_version, argv, env, owner, uuid, plan),
    plan the JSON text (null: none) or NULL (never stored: recovered from argv);
    labels: (key, value) (a store before version 4: none, the name is label);
    results: (id, *result's row), in position order;
    processes: (id, result_id, *process's row), in result and idx order;
    samples: (process_id, warmup, data), in process and idx order; data is
    a JSON text, or the sample already as a dict (plain_samples).
    Each process splits its samples into measured ("samples") and "warmup"."""
    by_id: dict[int, Process] = {}
    by_result: dict[int, list[Process]] = {}
    for pid, result_id, *rest in processes:
        proc = process(rest)
        by_id[pid] = proc
        by_result.setdefault(result_id, []).append(proc)
    for pid, warmup, data in samples:
        (by_id[pid].warmup if warmup else by_id[pid].samples).append(data if isinstance(data, dict) else decode(data))

    created, finished, label, kind, status, version, argv, env, owner, ident, plan = run
    res = [result(rest, by_result.get(rid, [])) for rid, *rest in results]
    if plan is None and recover_plan is not None:    # a store never migrated to schema 5
        got = recover_plan(decode(argv), kind, [{"bench": r.bench, "processes": [p.meta for p in r.processes]}
                                                for r in res])
    else:
        stored = None if plan is None else decode(plan)
        got = None if stored is None else Plan.from_dict(stored)
    return Run(res, decode(env), decode(argv),
               shown_status(status, decode(owner)), run_id, label, version,
               stored={"created": created, "finished": finished, "kind": kind},
               labels={k: v for k, v in labels}, uuid=ident, plan=got).to_json()


def recovered_plans(query: Callable[[str], list],
                    recover_plan: Callable[..., Plan | None]) -> list[tuple[str, int]]:
    """(plan JSON, run id) of every run of a store migrating to schema 5
    (`query(sql)` gives the rows of a SELECT): recovered from its argv, the
    JSON null when it cannot be (recover_plan: store/recover.py's)."""
    results: dict[int, dict[int, dict]] = {}
    for run_id, result_id, bench, meta in query(
            "SELECT r.run_id, r.id, r.bench, p.meta FROM results r LEFT JOIN processes p ON p.result_id = r.id"
            " ORDER BY r.run_id, r.position, p.idx"):
        res = results.setdefault(run_id, {}).setdefault(result_id, {"bench": bench, "processes": []})
        if meta:
            res["processes"].append(decode(meta))
    out = []
    for run_id, kind, argv in query("SELECT id, kind, argv FROM runs"):
        plan = recover_plan(decode(argv), kind, list(results.get(run_id, {}).values()))
        out.append((encode(None if plan is None else plan.to_dict()), run_id))
    return out


def sample_columns(warmup: list[dict[str, Any]], samples: list[dict[str, Any]], plain: bool) -> tuple:
    """The columns of a process's sample rows, warmup first: (warmup count,
    iters, ns_per_op, tsc_per_op, data); data encoded in one call when
    every sample is plain (docschema.plain_samples), else one by one."""
    batch = warmup + samples
    cols = (list(map(dict.get, batch, repeat(k))) for k in ("iters", "ns_per_op", "tsc_per_op"))
    return (len(warmup), *cols, encode_plain(batch) if plain else list(map(encode, batch)))


def encode_plain(samples: list[dict[str, Any]]) -> list[str]:
    """encode() of each sample, in one call: only for samples whose keys and
    values are plain (docschema.plain_samples: numbers, booleans and the word
    "sample"), whose JSON cannot hold "},{" but between two samples. orjson
    writes it ten times faster than json (a float may read 1e-5 for 1e-05:
    the same number); json writes what orjson cannot (an integer beyond 64 bits)."""
    if not samples:
        return []
    import orjson     # only when a large file is imported: not for every command

    try:
        text = orjson.dumps(samples, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:
        text = json.dumps(samples, sort_keys=True, separators=(",", ":"))
    return ["{" + part + "}" for part in text[2:-2].split("},{")]
