"""Builds `opcost.comparison/1` documents from pairs of results (measured
interleaved by `ab`, or loaded from the store by `compare`): the statistics
come from compare.py, this module only pairs, labels and tabulates. It
imports compare (numpy, scipy) only when it compares, so commands can pair
and check their input first."""

from __future__ import annotations

from .errors import UsageError
from .model import Comparison

# (column, summary key) of the measuring side's CPU time in the savings table
_CPU_PARTS = (("user", "user_ns_per_op"), ("system", "sys_ns_per_op"))


def savings(sa: dict, sb: dict, switches: int) -> dict:
    """Seed 000's table: per operation, for A, B, the difference A-B and the
    improvement (A-B)/A, of user, system, user+system and elapsed time, ns and
    cycles; per switch for switching benchmarks; and the whole system (both
    sides) where a helper takes part."""
    def row(s: dict) -> dict:
        r: dict = {name: s.get(key) for name, key in _CPU_PARTS}
        r["user+system"] = None if None in (r["user"], r["system"]) else r["user"] + r["system"]
        r["elapsed"] = s.get("median_ns")
        r["cycles"] = s.get("median_cycles")
        if "helper_user_ns_per_op" in s:
            r["whole system"] = s.get("cpu_ns_per_op")
        if switches:
            r["elapsed per switch"] = r["elapsed"] / switches if r["elapsed"] is not None else None
            r["cycles per switch"] = r["cycles"] / switches if r["cycles"] is not None else None
        return r

    a, b = row(sa), row(sb)
    diff = {k: (a[k] - b[k]) if a.get(k) is not None and b.get(k) is not None else None for k in a}
    pct = {k: (diff[k] / a[k]) if diff[k] is not None and a[k] else None for k in a}
    return {"A": a, "B": b, "difference": diff, "improvement": pct}


def entry(res_a: dict, res_b: dict, *, delta: float, key: str, switches: int = 0) -> dict:
    """One benchmark's comparison from two result documents (opcost.result/1
    `results[]` entries); `key` names the row. Verdicts come later, from
    `finish` (Holm across the report)."""
    sa, sb = res_a.get("summary") or {}, res_b.get("summary") or {}
    e = {"bench": res_a["bench"], "key": key, "op": res_a.get("op", ""),
         "a": {"params": res_a.get("params"), "summary": sa}, "b": {"params": res_b.get("params"), "summary": sb}}
    ma, mb = sa.get("process_medians_ns") or [], sb.get("process_medians_ns") or []
    if len(ma) < 2 or len(mb) < 2:
        why = [f"{arm}: {r.get('status')}" + (f" ({r['reason']})" if r.get("reason") else "")
               for arm, r, m in (("A", res_a, ma), ("B", res_b, mb)) if len(m) < 2]
        e.update(verdict=None, status="not compared: fewer than 2 processes in " + "; ".join(why))
        return e
    from . import compare

    e.update(compare.compare_arms(ma, mb, delta=delta))
    counted = counters_compared(res_a, res_b)
    if counted:
        e["counters"] = counted
    e["flags"] = compare.arm_flags(sa, sb)
    e["savings"] = savings(sa, sb, switches)
    return e


def counters_compared(res_a: dict, res_b: dict) -> dict:
    """Seed 001's counters, A against B: per event either arm counted (in
    the arms' order), per op, the medians over processes, the ratio B/A and
    the difference B-A with bootstrap CIs over processes
    (compare.counter_ratio: the resampling of the time ratio's CI); an
    event this machine could not count says so (status unsupported or not
    counted, with the probe's reason). {} when no counters were asked for."""
    from . import compare
    from .counters import is_helper
    from .stats import process_stats

    sa, sb = res_a.get("summary") or {}, res_b.get("summary") or {}
    ca, cb = sa.get("counters") or {}, sb.get("counters") or {}
    names = list(ca) + [n for n in cb if n not in ca]
    if not names:
        return {}
    # as asked for (the probe header's order): a stored summary comes back with its keys sorted
    asked = [c.get("name") for r in (res_a, res_b) for p in r.get("processes") or []
             for c in (p.get("header") or {}).get("counters") or []]
    rank = {n: i for i, n in reversed(list(enumerate(asked)))}
    names.sort(key=lambda n: rank.get(n, len(rank)))

    def per_process(res: dict) -> list[dict]:
        return [process_stats(p["samples"]).get("counters") or {} for p in res.get("processes") or []
                if p.get("samples")]

    pa, pb = per_process(res_a), per_process(res_b)
    reasons = {**(sb.get("counter_reasons") or {}), **(sa.get("counter_reasons") or {})}

    def numbers(procs: list[dict], n: str) -> list[float]:
        return [v for v in (p.get(n) for p in procs) if isinstance(v, (int, float)) and not isinstance(v, bool)]

    out = {}
    for n in names:
        d: dict = {"side": "helper" if is_helper(n) else "measuring"}
        if n not in ca or n not in cb:
            d.update(status=f"only in {'A' if n in ca else 'B'}", a=ca.get(n), b=cb.get(n))
        else:
            xa, xb = numbers(pa, n), numbers(pb, n)
            if xa and xb:
                d.update(status="ok", **compare.counter_ratio(xa, xb))
                short = [arm for arm, x, procs in (("A", xa, pa), ("B", xb, pb)) if len(x) < len(procs)]
                if short:
                    d["partial"] = f"not counted in every process of {' and '.join(short)}"
            else:
                unsupported = "<not supported>" in (ca[n], cb[n])
                d.update(status="unsupported" if unsupported else "not counted", a=ca[n], b=cb[n])
        if n in reasons:
            d["reason"] = reasons[n]
        out[n] = d
    return out


def finish(entries: list[dict]) -> tuple[list[dict], dict]:
    """Holm across the compared benchmarks, verdicts, and the report summary."""
    from . import compare

    idx = [i for i, e in enumerate(entries) if "ratio" in e]
    decided = compare.decide([entries[i] for i in idx]) if idx else []
    out = list(entries)
    for i, d in zip(idx, decided):
        out[i] = d
    return out, compare.summary(decided)


def document(*, kind: str, interleaved: bool, entries: list[dict], summary: dict, delta: float,
             a: dict, b: dict, aa: bool, **context) -> dict:
    return Comparison(kind, interleaved, aa, a, b, delta, entries, summary, context).to_json()


def ab_document(results: list[dict], *, a: str, b: str, delta: float, run_id, env,
                switches: dict[str, int] | None = None) -> dict:
    """The `opcost.comparison/1` document of an A/B run from its results, in
    pairs A, B per benchmark as `opcost ab` measures and stores them (so
    `show` rebuilds it from the store). `switches`: context switches per
    operation by benchmark (the seed-000 savings per switch). A run of the
    sequential design (its processes carry `stage`) is decided by replaying
    its looks (sequential.py); any other by the fixed design."""
    switches = switches or {}
    pairs = [(results[i], results[i + 1]) for i in range(0, len(results) - 1, 2)]
    entries = [entry(ra, rb, delta=delta, key=ra["bench"], switches=switches.get(ra["bench"], 0))
               for ra, rb in pairs]
    context: dict = {"env": env}
    if any("stage" in p for r in results for p in r.get("processes") or []):
        entries, summary, context["design"] = finish_sequential(entries, pairs, delta)
    else:
        entries, summary = finish(entries)
    return document(kind="ab", interleaved=True, entries=entries, summary=summary, delta=delta,
                    a={"params": a, "run_id": run_id}, b={"params": b, "run_id": run_id},
                    aa=all(ra["params"] == rb["params"] for ra, rb in pairs), **context)


def arms(procs_a: list[dict], procs_b: list[dict]):
    """sequential.Arms of one benchmark: the round and per-process median
    (stats.process_stats' median batch, the figure compare works on) of
    every process of A and of B that has samples."""
    from .stats import median

    def one(procs):
        kept = [p for p in procs if p.get("samples")]
        return [p["round"] for p in kept], [median([s["ns_per_op"] for s in p["samples"]]) for p in kept]

    (ra, ma), (rb, mb) = one(procs_a), one(procs_b)
    return ra, ma, rb, mb


def settled_after(pairs: list[tuple[list[dict], list[dict]]], *, delta: float, rounds: int) -> list[bool]:
    """The live look of a sequential `ab` after `rounds` rounds: per benchmark
    (its A and B processes), whether it is settled (the same replay as the
    final document's, so the two agree). One that cannot be compared (an
    arm failed or is unsupported) is settled: more rounds would not help."""
    from . import sequential

    got = [arms(pa, pb) for pa, pb in pairs]
    decided, _ = sequential.decide([g if min(len(g[1]), len(g[3])) >= 2 else None for g in got],
                                   delta=delta, rounds=rounds, final=False)
    return [d is None or bool(d["sequential"]["settled"]) for d in decided]


def finish_sequential(entries: list[dict], pairs: list[tuple[dict, dict]], delta: float) -> tuple[list[dict], dict, dict]:
    """The verdicts of a sequential `ab`: its looks replayed from the rounds
    of its processes; each compared benchmark's statistics are those of the
    look that settled it (in a run that measured it no more after that,
    which is how `ab` runs, the same processes as its summaries). Returns
    the entries, the summary and the design record."""
    from . import compare, sequential

    got = [arms(ra.get("processes") or [], rb.get("processes") or []) if "ratio" in e else None
           for e, (ra, rb) in zip(entries, pairs)]
    rounds = max((r + 1 for g in got if g for r in g[0] + g[2]), default=0)
    decided, done = sequential.decide(got, delta=delta, rounds=rounds, final=True)
    out = [dict(e, **d) if d is not None else e for e, d in zip(entries, decided)]
    planned = sequential.looks(sequential.STAGES)
    last = done[-1] if done else None
    design = {"kind": "sequential", "spending": sequential.SPENDING, "test": sequential.TEST, "alpha": sequential.ALPHA,
              "stages": list(sequential.STAGES), "planned": [lk.to_json() for lk in planned],
              "looks": [lk.to_json() for lk in done], "looks_done": len(done),
              "stopped": {"look": last.number if last else None,
                          "processes_per_arm": last.processes if last else 0,
                          "reason": sequential.stop_reason(decided, done)}}
    return out, compare.summary([e for e in out if "ratio" in e]), design


def variants_document(res: list[dict], *, delta: float, run_id, env) -> dict:
    """The `opcost.comparison/1` document of a variants run from its results:
    the builds in -D order, then (op mode) the empty-opcost_op reference, as
    `opcost variants` measures and stores them (so `show` rebuilds it)."""
    mine = [r for r in res if not r["params"].get("reference")]
    ref = next((r for r in res if r["params"].get("reference")), None)
    entries = [entry(mine[0], r, delta=delta, key=r["key"]) for r in mine[1:]]
    entries, summary = finish(entries)
    ref_ns = (ref.get("summary") or {}).get("median_ns") if ref else None
    builds = []
    for r in mine:
        s = r.get("summary") or {}
        d = {"name": r["key"], "status": r["status"], "median_ns": s.get("median_ns"),
             "median_cycles": s.get("median_cycles")}
        if ref_ns is not None and s.get("median_ns") is not None:
            d["net_median_ns"] = s["median_ns"] - ref_ns
        builds.append(d)
    p = mine[0]["params"]
    info = {"source": p["source"], "mode": p["mode"], "cc": p["cc"], "cflags": p["cflags"],
            "baseline": mine[0]["key"], "builds": builds,
            "call_overhead": None if ref is None else {
                "what": "an empty opcost_op (return x) built with the same compiler and flags, measured "
                        "interleaved; comparisons and medians include it, net_median_ns does not",
                "median_ns": ref_ns, "median_cycles": (ref.get("summary") or {}).get("median_cycles")}}
    return document(kind="variants", interleaved=True, entries=entries, summary=summary, delta=delta,
                    a={"params": mine[0]["key"], "run_id": run_id},
                    b={"params": ", ".join(r["key"] for r in mine[1:]), "run_id": run_id},
                    aa=False, env=env, variants=info)


def pair_results(run_a: dict, run_b: dict) -> tuple[list[tuple[dict, dict]], list[str]]:
    """Two stored runs' results matched by key, and the keys in only one;
    UsageError when they share none."""
    from .report import result_key

    by_key_b = {result_key(r): r for r in run_b["results"]}
    pairs = [(r, by_key_b[result_key(r)]) for r in run_a["results"] if result_key(r) in by_key_b]
    if not pairs:
        ka = ", ".join(result_key(r) for r in run_a["results"]) or "none"
        kb = ", ".join(result_key(r) for r in run_b["results"]) or "none"
        raise UsageError(f"runs {run_a['run_id']} and {run_b['run_id']} share no benchmark variant "
                         f"(A: {ka}; B: {kb}); compare runs of the same benchmarks and parameters")
    matched = {result_key(a) for a, _ in pairs}
    return pairs, [result_key(r) for r in run_a["results"] + run_b["results"] if result_key(r) not in matched]


def stored_document(run_a: dict, run_b: dict, *, delta: float, switches: dict[str, int], diffs: list) -> dict:
    """The `opcost.comparison/1` document of two stored runs (`opcost
    compare`): their results matched by key, the rest listed as unmatched.
    `diffs`: env.differences of the two runs."""
    from .report import result_key

    pairs, unmatched = pair_results(run_a, run_b)
    id_a, id_b = run_a["run_id"], run_b["run_id"]
    entries = [entry(a, b, delta=delta, key=result_key(a), switches=switches.get(a["bench"], 0)) for a, b in pairs]
    entries, summary = finish(entries)
    return document(
        kind="compare", interleaved=False, entries=entries, summary=summary, delta=delta,
        a={"run_id": id_a, "label": run_a.get("label"), "created": run_a.get("created")},
        b={"run_id": id_b, "label": run_b.get("label"), "created": run_b.get("created")}, aa=False,
        env_differences=[{"field": f, "a": a, "b": b} for f, a, b in diffs], unmatched=unmatched,
        env_a=run_a.get("env"), env_b=run_b.get("env"))
