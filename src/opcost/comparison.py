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
    e["flags"] = compare.arm_flags(sa, sb)
    e["savings"] = savings(sa, sb, switches)
    return e


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


def _host_arch() -> str:
    from .probe import host_arch

    return host_arch()


def variants_document(res: list[dict], *, delta: float, run_id, env) -> dict:
    """The `opcost.comparison/1` document of a variants run from its results:
    the builds in -D order, then (op mode) the empty-opcost_op reference, as
    `opcost variants` measures and stores them (so `show` rebuilds it). With
    several CPUs (--cpu 0-1) every build runs on each: each CPU's builds are
    compared with that CPU's first build, and net of that CPU's reference."""
    mine = [r for r in res if not r["params"].get("reference")]
    refs: dict = {}
    for r in res:
        if r["params"].get("reference"):
            refs.setdefault(r["params"].get("cpu"), r)
    cpus = list(dict.fromkeys(r["params"].get("cpu") for r in mine))
    groups = [[r for r in mine if r["params"].get("cpu") == c] for c in cpus]
    entries = [entry(g[0], r, delta=delta, key=r["key"]) for g in groups for r in g[1:]]
    entries, summary = finish(entries)

    def ref_ns(r: dict):
        ref = refs.get(r["params"].get("cpu"))
        return (ref.get("summary") or {}).get("median_ns") if ref else None

    builds = []
    for r in mine:
        s = r.get("summary") or {}
        d = {"name": r["key"], "status": r["status"], "median_ns": s.get("median_ns"),
             "median_cycles": s.get("median_cycles")}
        if len(cpus) > 1:
            d["cpu"] = r["params"].get("cpu")
        rn = ref_ns(r)
        if rn is not None and s.get("median_ns") is not None:
            d["net_median_ns"] = s["median_ns"] - rn
        builds.append(d)
    p = mine[0]["params"]
    ref0 = refs.get(p.get("cpu"))
    info = {"source": p["source"], "mode": p["mode"], "cc": p["cc"], "cflags": p["cflags"],
            "baseline": mine[0]["key"], "builds": builds,
            "call_overhead": None if ref0 is None else {
                "what": "an empty opcost_op (return x) built with the same compiler and flags, measured "
                        "interleaved; comparisons and medians include it, net_median_ns does not",
                "median_ns": ref_ns(mine[0]), "median_cycles": (ref0.get("summary") or {}).get("median_cycles")}}
    if len(cpus) > 1:
        info["cpus"] = cpus
        if refs:
            info["call_overhead"]["per_cpu"] = {c: (r.get("summary") or {}).get("median_ns") for c, r in refs.items()}
    if p.get("arch") and (p.get("emulated") or p["arch"] != _host_arch()):
        info["arch"] = p["arch"]   # built for another architecture than this machine's
    if p.get("emulated"):
        info["emulated"] = {"emulator": p["emulated"],
                            "what": f"built for {p.get('arch')}, run under {p['emulated']} (qemu user-mode "
                                    "emulation): the timings are the emulator's, not the CPU's cost; correctness only"}
    if p.get("ops"):
        info["ops"] = int(p["ops"])
    base = mine[0]["key"] if len(cpus) == 1 else f"{p.get('define', mine[0]['key'])} on each CPU"
    return document(kind="variants", interleaved=True, entries=entries, summary=summary, delta=delta,
                    a={"params": base, "run_id": run_id},
                    b={"params": ", ".join(r["key"] for g in groups for r in g[1:]), "run_id": run_id},
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
