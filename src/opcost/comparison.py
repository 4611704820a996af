"""Builds `opcost.comparison/1` documents from pairs of results (measured
interleaved by `ab`, or loaded from the store by `compare`): the statistics
come from abtest.py, this module only pairs, labels and tabulates. It
imports compare (numpy, scipy) only when it compares, so commands can pair
and check their input first."""

from __future__ import annotations

import math
import statistics
from contextlib import contextmanager
from contextvars import ContextVar

from . import __version__
from .counters import is_helper
from .env import differences
from .errors import UnknownRun, UsageError
from .guests import guests_entry, guests_of_sides
from .model import (FLEET_SCHEMA, Comparison, Entry, Summary, plan_of, process_median, result_key, same_machine,
                    switches_of)
from .probe import host_arch
from .safetext import printable
from .targets.vm.withhold import withhold_emulated

# (column, summary key) of the measuring side's CPU time in the savings table
_CPU_PARTS = (("user", "user_ns_per_op"), ("system", "sys_ns_per_op"))


def _add(*xs):
    return None if any(x is None for x in xs) else sum(xs)


def _process_columns(procs: list[dict]) -> dict[str, list]:
    """Per process (stats.process_stats), the savings table's quantities per
    operation: user, system, user+system, elapsed (its median batch), cycles,
    and the whole system (both sides' user+system) where a helper takes part;
    a process without one is left out of that column."""
    from .stats import process_stats   # numpy (stats): only when it compares

    cols: dict[str, list] = {k: [] for k in ("user", "system", "user+system", "elapsed", "cycles", "whole system")}
    for p in procs:
        if not p.get("samples"):
            continue
        ps = process_stats(p["samples"], p.get("header"))
        u, sy = ps.get("user_ns_per_op"), ps.get("sys_ns_per_op")
        vals = {"user": u, "system": sy, "user+system": _add(u, sy), "elapsed": ps["median_ns"],
                "cycles": ps["median_tsc"],
                "whole system": _add(u, sy, ps.get("helper_user_ns_per_op"), ps.get("helper_sys_ns_per_op"))}
        for k, v in vals.items():
            if v is not None:
                cols[k].append(v)
    return cols


def _tsc_hz(procs: list[dict]) -> float | None:
    hz = sorted(p["header"]["tsc_hz"] for p in procs if (p.get("header") or {}).get("tsc_hz"))
    return hz[len(hz) // 2] if hz else None


def savings(sa: dict, sb: dict, switches: int, procs_a: list[dict] | None = None,
            procs_b: list[dict] | None = None) -> dict:
    """Seed 000's table: per operation, for A, B, the difference A-B and the
    improvement (A-B)/A, of user, system, user+system and elapsed time, ns and
    cycles; per switch for switching benchmarks; and the whole system (both
    sides) where a helper takes part. With the processes of both arms, every
    figure is the median over processes with a 95% bootstrap CI of the
    difference and of the improvement (abtest.saving_ci: each arm resampled
    over its processes), "spans_zero" where the difference's CI contains 0;
    and "seed": the seed's own headline, the user+system saving per switch in
    ns and in cycles (at the TSC rate), with its CI."""
    ca = _process_columns(procs_a or [])
    cb = _process_columns(procs_b or [])
    per_process = bool(ca["elapsed"] and cb["elapsed"])

    def row(s: dict, cols: dict) -> dict:
        from .stats import median   # numpy (stats): only when it compares

        if per_process:
            r = {k: (median(v) if v else None) for k, v in cols.items()}
            if "helper_user_ns_per_op" not in s:
                r.pop("whole system")
        else:
            r = {name: s.get(key) for name, key in _CPU_PARTS}
            r["user+system"] = _add(r["user"], r["system"])
            r["elapsed"] = s.get("median_ns")
            r["cycles"] = s.get("median_cycles")
            if "helper_user_ns_per_op" in s:
                r["whole system"] = s.get("cpu_ns_per_op")
        if switches:
            r["elapsed per switch"] = r["elapsed"] / switches if r["elapsed"] is not None else None
            r["cycles per switch"] = r["cycles"] / switches if r["cycles"] is not None else None
        return r

    a, b = row(sa, ca), row(sb, cb)
    diff = {k: (a[k] - b[k]) if a.get(k) is not None and b.get(k) is not None else None for k in a}
    pct = {k: (diff[k] / a[k]) if diff[k] is not None and a[k] else None for k in a}
    out: dict = {"A": a, "B": b, "difference": diff, "improvement": pct}
    if not per_process:
        return out
    from . import abtest   # numpy, scipy: only when it compares; commands pair and check their input first

    ci_d: dict = {}
    ci_i: dict = {}
    span: dict = {}
    for k in a:
        base, scale = (k.removesuffix(" per switch"), switches) if k.endswith(" per switch") else (k, 1)
        if not ca.get(base) or not cb.get(base):
            ci_d[k] = ci_i[k] = span[k] = None
            continue
        sv = abtest.saving_ci([(ca[base], cb[base])])
        ci_d[k] = [x / scale for x in sv["ci95"]] if sv["ci95"] else None
        ci_i[k] = sv["ci95_improvement"]
        span[k] = sv["spans_zero"]
    out.update(ci95_difference=ci_d, ci95_improvement=ci_i, spans_zero=span)
    hz = _tsc_hz((procs_a or []) + (procs_b or []))
    if ca["user+system"] and cb["user+system"]:
        n = switches or 1
        sv = abtest.saving_ci([(ca["user+system"], cb["user+system"])])
        out["seed"] = _seed_figure(sv, n, hz, per="switch" if switches else "op")
    return out


def _seed_figure(sv: dict, n: int, hz: float | None, per: str) -> dict:
    """A user+system saving as the seed states it: ns and cycles per switch
    (per op where the operation is not a switch), with the CI."""
    d = {"per": per, "switches_per_op": n if per == "switch" else 0,
         "saving_ns": sv["saving"] / n, "ci95_ns": [x / n for x in sv["ci95"]] if sv["ci95"] else None,
         "improvement": sv["improvement"], "ci95_improvement": sv["ci95_improvement"],
         "spans_zero": sv["spans_zero"], "tsc_hz": hz}
    if hz:
        c = hz / 1e9
        d["saving_cycles"] = d["saving_ns"] * c
        d["ci95_cycles"] = [x * c for x in d["ci95_ns"]] if d["ci95_ns"] else None
    return d


def system_wide(triples: list[tuple[dict, dict, dict]], switches: dict[str, int]) -> list[dict]:
    """Seed 000's system-wide estimate: "sum the results of child-fp and
    parent-fp" (the parent's accounting moves part of the cost to the
    process that does not use the FPU). For every benchmark compared with
    both `fp=child` and `fp=parent` and otherwise the same parameters: the
    user+system saved per operation over the two variants together (the
    seed's 5.52 s / 10,000,000 iterations), per switch, in cycles, and as a
    share of B's user+system over both (the seed's 5.8%: 5.52 s / 95.24 s)
    and of A's, each with its bootstrap CI over the four arms' processes.
    triples: (entry, result A, result B) of the compared benchmarks."""
    from . import abtest   # numpy, scipy: only when it compares; commands pair and check their input first

    groups: dict[tuple, dict] = {}
    for e, ra, rb in triples:
        pa, pb = ra.get("params") or {}, rb.get("params") or {}
        fp = pa.get("fp")
        if fp not in ("child", "parent") or pb.get("fp") != fp or "savings" not in e:
            continue
        rest = (e["bench"], tuple(sorted((k, str(v)) for k, v in pa.items() if k != "fp")),
                tuple(sorted((k, str(v)) for k, v in pb.items() if k != "fp")))
        groups.setdefault(rest, {})[fp] = (e, ra, rb)
    out = []
    for (bench, _, _), g in groups.items():
        if set(g) != {"child", "parent"}:
            continue
        pairs = []
        for fp in ("child", "parent"):
            _, ra, rb = g[fp]
            ca, cb = _process_columns(ra.get("processes") or []), _process_columns(rb.get("processes") or [])
            pairs.append((ca["user+system"], cb["user+system"]))
        if any(not x for pair in pairs for x in pair):
            continue
        sv = abtest.saving_ci(pairs)
        sw = switches.get(bench, 0)
        # two variants' operations: the saving per operation of both is half the summed per-op saving
        per_op = {"saving": sv["saving"] / 2, "ci95": [x / 2 for x in sv["ci95"]] if sv["ci95"] else None,
                  "improvement": sv["improvement"], "ci95_improvement": sv["ci95_improvement"],
                  "spans_zero": sv["spans_zero"]}
        procs = [p for fp in ("child", "parent") for r in g[fp][1:] for p in r.get("processes") or []]
        fig = _seed_figure(per_op, sw or 1, _tsc_hz(procs), per="switch" if sw else "op")
        fig.update(bench=bench, child=g["child"][0]["key"], parent=g["parent"][0]["key"],
                   saving_ns_per_op=per_op["saving"], ci95_ns_per_op=per_op["ci95"],
                   of_b=sv["of_b"], ci95_of_b=sv["ci95_of_b"])
        out.append(fig)
    return out


def rounds_of(res_a: dict, res_b: dict, ma: list, mb: list):
    """The rounds of the processes behind the per-process medians ma, mb of
    one interleaved run (its processes with samples, in order, each with
    "round"): the pairing of paired rounds; None when they do not line up."""
    def one(res: dict, meds: list):
        kept = [p for p in res.get("processes") or [] if p.get("samples")]
        if len(kept) != len(meds) or not all(isinstance(p.get("round"), int) for p in kept):
            return None
        return [p["round"] for p in kept]

    ra, rb = one(res_a, ma), one(res_b, mb)
    return None if ra is None or rb is None else (ra, rb)


# --- the figure a comparison decides on: time, or one recorded counter (--verdict-on) ---

_DECIDE_ON: ContextVar[str | None] = ContextVar("opcost_decide_on", default=None)


@contextmanager
def deciding_on(counter: str | None):
    """Within: every comparison (entry, the sequential looks' arms) decides on
    `counter`, per process that process's median batch of the counter per op,
    instead of time; None: on time, as always. The hook that picks the
    figure: the decision code (abtest, sequential) is the same for both."""
    token = _DECIDE_ON.set(counter)
    try:
        yield
    finally:
        _DECIDE_ON.reset(token)


def decided_counter() -> str | None:
    """The counter the comparisons decide on now (deciding_on), or None: time."""
    return _DECIDE_ON.get()


def counter_median(p: dict, counter: str) -> float | None:
    """One process's figure of `counter` per op: its median batch; for an
    exact count from the emulator its smallest batch (what else runs in a
    window, a timer interrupt above all, only adds instructions: the
    smallest window is the operation's own count, exact when one window in
    the process was clean). None when not counted."""
    vals = [(s.get("counters") or {}).get(counter) for s in p.get("samples") or []]
    nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not nums or len(nums) != len(vals):
        return None
    exact = any(c.get("name") == counter and c.get("source") == "emulator"
                for c in (p.get("header") or {}).get("counters") or [])
    return float(min(nums)) if exact else float(statistics.median(nums))


def _figures(res: dict, counter: str) -> list[float]:
    got = [counter_median(p, counter) for p in res.get("processes") or [] if p.get("samples")]
    return [v for v in got if v is not None]


def entry(res_a: dict, res_b: dict, *, delta: float, key: str, switches: int = 0,
          interleaved: bool = False) -> dict:
    """One benchmark's comparison from two result documents (opcost.result/1
    `results[]` entries); `key` names the row. Verdicts come later, from
    `finish` (Holm across the report). interleaved: A and B were measured
    in the same rounds of one run (ab, variants), so complete rounds pair
    them (abtest.test_and_estimate); two stored runs never pair."""
    sa, sb = Summary.of(res_a), Summary.of(res_b)
    e = {"bench": res_a["bench"], "key": key, "op": res_a.get("op", ""),
         "a": {"params": res_a.get("params"), "summary": sa.raw},
         "b": {"params": res_b.get("params"), "summary": sb.raw}}
    ma, mb = sa.process_medians, sb.process_medians
    on = _DECIDE_ON.get()
    if on is not None:
        ma, mb = _figures(res_a, on), _figures(res_b, on)
    if len(ma) < 2 or len(mb) < 2:
        why = [f"{arm}: {r.get('status')}" + (f" ({r['reason']})" if r.get("reason") else "")
               for arm, r, m in (("A", res_a, ma), ("B", res_b, mb)) if len(m) < 2]
        e.update(verdict=None, status="not compared: fewer than 2 processes in " + "; ".join(why))
        return e
    from . import abtest   # numpy, scipy: only when it compares; commands pair and check their input first

    e.update(abtest.compare_arms(ma, mb, delta=delta, rounds=rounds_of(res_a, res_b, ma, mb) if interleaved else None))
    if on is not None:
        # the absolute difference per op beside the ratio: "+30.000 instructions/op [29.999, 30.001]"
        d = abtest.counter_ratio(ma, mb)
        e["decided_on"] = {"counter": on, "a": d["a"], "b": d["b"], "difference": d["difference"],
                           "ci95_difference": d["ci95_difference"], "source": _source(res_a, on)}
    counted = counters_compared(res_a, res_b)
    if counted:
        e["counters"] = counted
    va, vb = _vulnerabilities(res_a), _vulnerabilities(res_b)
    if va is not None and vb is not None:   # guests: which mitigations each arm's kernel reported
        e["mitigations"] = {"a": va, "b": vb,
                            "differ": sorted(k for k in set(va) | set(vb) if va.get(k) != vb.get(k))}
    guests = guests_entry(res_a, res_b)   # each arm's kernel, machine, CPU model and boot-log mitigations
    if guests is not None:
        e["guests"] = guests
    e["flags"] = abtest.arm_flags(sa.raw, sb.raw)
    e["savings"] = savings(sa.raw, sb.raw, switches, res_a.get("processes"), res_b.get("processes"))
    return e


def _vulnerabilities(res: dict) -> dict | None:
    """What a guest's /sys/devices/system/cpu/vulnerabilities/* said (the
    vm target's first process of this result), or None: not a guest."""
    for p in res.get("processes") or []:
        v = (((p.get("header") or {}).get("vm") or {}).get("guest") or {}).get("vulnerabilities")
        if isinstance(v, dict):
            return {str(k): str(x) for k, x in v.items()}
    return None


def _source(res: dict, counter: str) -> str:
    """Where a counter's figures came from: `emulator` (exact) or `perf`."""
    for p in res.get("processes") or []:
        for c in (p.get("header") or {}).get("counters") or []:
            if c.get("name") == counter:
                return c.get("source") or "perf"
    return "perf"


def counters_compared(res_a: dict, res_b: dict) -> dict:
    """Seed 001's counters, A against B: per event either arm counted (in
    the arms' order), per op, the medians over processes, the ratio B/A and
    the difference B-A with bootstrap CIs over processes
    (abtest.counter_ratio: the resampling of the time ratio's CI); an
    event this machine could not count says so (status unsupported or not
    counted, with the probe's reason). {} when no counters were asked for."""
    from . import abtest   # numpy, scipy: only when it compares; commands pair and check their input first
    from .stats import process_stats   # numpy (stats): only when it compares

    sa, sb = Summary.of(res_a), Summary.of(res_b)
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
                d.update(status="ok", **abtest.counter_ratio(xa, xb))
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
    from . import abtest   # numpy, scipy: only when it compares; commands pair and check their input first

    idx = [i for i, e in enumerate(entries) if "ratio" in e]
    decided = abtest.decide([entries[i] for i in idx]) if idx else []
    out = list(entries)
    for i, d in zip(idx, decided):
        out[i] = d
    return out, abtest.summary(decided)


def document(*, kind: str, interleaved: bool, entries: list[dict], summary: dict, delta: float,
             a: dict, b: dict, aa: bool, **context) -> dict:
    return Comparison(kind, interleaved, aa, a, b, delta, [Entry(e) for e in entries], summary, context).to_json()


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
    entries = [entry(ra, rb, delta=delta, key=ra["bench"], switches=switches.get(ra["bench"], 0), interleaved=True)
               for ra, rb in pairs]
    context: dict = {"env": env}
    sw = system_wide([(e, ra, rb) for e, (ra, rb) in zip(entries, pairs)], switches)
    if sw:
        context["system_wide"] = sw
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
    on = _DECIDE_ON.get()

    def one(procs):
        kept = [p for p in procs if p.get("samples")]
        if on is not None:
            kept = [p for p in kept if counter_median(p, on) is not None]
            return [p["round"] for p in kept], [counter_median(p, on) for p in kept]
        return [p["round"] for p in kept], [process_median(p["samples"], p.get("header")) for p in kept]

    (ra, ma), (rb, mb) = one(procs_a), one(procs_b)
    return ra, ma, rb, mb


def boundary_of(pairs) -> str:
    """The alpha spending a sequential run used: recorded with each of its
    processes ("boundary"); a run recorded before there was a choice used
    O'Brien-Fleming."""
    for pa, pb in pairs:
        for p in [*pa, *pb]:
            if p.get("boundary"):
                return p["boundary"]
    return "obf"


def settled_after(pairs: list[tuple[list[dict], list[dict]]], *, delta: float, rounds: int,
                  entries: list | None = None) -> list[bool]:
    """The live look of a sequential `ab` after `rounds` rounds: per benchmark
    (its A and B processes), whether it is settled (the same replay as the
    final document's, so the two agree). One that cannot be compared (an
    arm failed or is unsupported) is settled: more rounds would not help."""
    from . import sequential   # numpy, scipy: only when it compares; commands pair and check their input first

    got = [arms(pa, pb) for pa, pb in pairs]
    decided, _ = sequential.decide([g if min(len(g[1]), len(g[3])) >= 2 else None for g in got],
                                   delta=delta, rounds=rounds, final=False, boundary=boundary_of(pairs))
    if entries is not None:   # the look's statistics, for what the caller says (resolvable)
        entries.extend(decided)
    return [d is None or bool(d["sequential"]["settled"]) for d in decided]


def finish_sequential(entries: list[dict], pairs: list[tuple[dict, dict]], delta: float) -> tuple[list[dict], dict, dict]:
    """The verdicts of a sequential `ab`: its looks replayed from the rounds
    of its processes; each compared benchmark's statistics are those of the
    look that settled it (in a run that measured it no more after that,
    which is how `ab` runs, the same processes as its summaries). Returns
    the entries, the summary and the design record."""
    from . import abtest, sequential   # numpy, scipy: only when it compares; commands pair and check their input first

    got = [arms(ra.get("processes") or [], rb.get("processes") or []) if "ratio" in e else None
           for e, (ra, rb) in zip(entries, pairs)]
    rounds = max((r + 1 for g in got if g for r in g[0] + g[2]), default=0)
    boundary = boundary_of([(ra.get("processes") or [], rb.get("processes") or []) for ra, rb in pairs])
    decided, done = sequential.decide(got, delta=delta, rounds=rounds, final=True, boundary=boundary)
    out = [dict(e, **d) if d is not None else e for e, d in zip(entries, decided)]
    planned = sequential.looks(sequential.STAGES, boundary=boundary)
    last = done[-1] if done else None
    design = {"kind": "sequential", "boundary": boundary, "spending": sequential.BOUNDARIES[boundary][0],
              "test": sequential.TEST, "ci": sequential.CI, "alpha": sequential.ALPHA,
              "stages": list(sequential.STAGES), "planned": [lk.to_json() for lk in planned],
              "looks": [lk.to_json() for lk in done], "looks_done": len(done),
              "stopped": {"look": last.number if last else None,
                          "processes_per_arm": last.processes if last else 0,
                          "reason": sequential.stop_reason(decided, done)}}
    return out, abtest.summary([e for e in out if "ratio" in e]), design


def _host_arch() -> str:
    return host_arch()


def _machine(r: dict) -> tuple:
    """The machine a variants result ran on (the vm target's --over kernel=, cmdline=)."""
    return (r["params"].get("kernel"), r["params"].get("cmdline"))


def _ref_ns(refs: dict, r: dict) -> float | None:
    """The median of the empty-opcost_op reference measured beside `r` (its CPU and machine)."""
    ref = refs.get((r["params"].get("cpu"), _machine(r)))
    return Summary.of(ref).median_ns if ref else None


def _builds(mine: list[dict], refs: dict, cpus: list, machines: list) -> list[dict]:
    """The builds' row of a variants document: median, cycles, and net of the call's reference."""
    builds = []
    for r in mine:
        s = Summary.of(r)
        d = {"name": r["key"], "status": r["status"], "median_ns": s.get("median_ns"),
             "median_cycles": s.get("median_cycles")}
        if len(cpus) > 1:
            d["cpu"] = r["params"].get("cpu")
        if len(machines) > 1:
            d.update({k: v for k, v in zip(("kernel", "cmdline"), _machine(r)) if v is not None})
        if r["params"].get("cflags_for"):
            d["cflags_for"] = r["params"]["cflags_for"]   # its own flags, after cflags (--cflags-for)
        rn = _ref_ns(refs, r)
        if rn is not None and s.get("median_ns") is not None:
            d["net_median_ns"] = s["median_ns"] - rn
        builds.append(d)
    return builds


def _variants_info(mine: list[dict], refs: dict, cpus: list, machines: list, across: bool) -> dict:
    """A variants document's `variants`: what was built how, the builds, the call's overhead, where it ran."""
    p = mine[0]["params"]
    ref0 = refs.get((p.get("cpu"), _machine(mine[0])))
    info = {"source": p["source"], "mode": p["mode"], "cc": p["cc"], "cflags": p["cflags"],
            "baseline": mine[0]["key"], "builds": _builds(mine, refs, cpus, machines),
            "call_overhead": None if ref0 is None else {
                "what": "an empty opcost_op (return x) built with the same compiler and flags, measured "
                        "interleaved; comparisons and medians include it, net_median_ns does not",
                "median_ns": _ref_ns(refs, mine[0]), "median_cycles": Summary.of(ref0).get("median_cycles")}}
    if len(cpus) > 1:
        info["cpus"] = cpus
        if refs:
            info["call_overhead"]["per_cpu"] = {c: Summary.of(r).median_ns for (c, m), r in refs.items()
                                                if m == machines[0]}
    if len(machines) > 1:
        info["machines"] = [{k: v for k, v in zip(("kernel", "cmdline"), m) if v is not None} for m in machines]
        info["compared"] = "across machines" if across else "within each machine"
    if p.get("arch") and (p.get("emulated") or p["arch"] != _host_arch()):
        info["arch"] = p["arch"]   # built for another architecture than this machine's
    if p.get("emulated"):
        info["emulated"] = {"emulator": p["emulated"],
                            "what": f"built for {p.get('arch')}, run under {p['emulated']} (qemu user-mode "
                                    "emulation): the timings are the emulator's, not the CPU's cost; correctness only"}
    if p.get("ops"):
        info["ops"] = int(p["ops"])
    return info


def variants_document(res: list[dict], *, delta: float, run_id, env) -> dict:
    """The `opcost.comparison/1` document of a variants run from its results:
    the builds in -D order, then (op mode) the empty-opcost_op reference, as
    `opcost variants` measures and stores them (so `show` rebuilds it). With
    several CPUs (--cpu 0-1) every build runs on each: each CPU's builds are
    compared with that CPU's first build, and net of that CPU's reference.
    With several machines (--over kernel=K1|K2, cmdline=...: the vm target)
    likewise per machine, except with one -D: then the build on each machine
    is compared with it on the first (kernel against kernel, as `ab`)."""
    mine = [r for r in res if not r["params"].get("reference")]
    refs: dict = {}
    for r in res:
        if r["params"].get("reference"):
            refs.setdefault((r["params"].get("cpu"), _machine(r)), r)
    cpus = list(dict.fromkeys(r["params"].get("cpu") for r in mine))
    machines = list(dict.fromkeys(_machine(r) for r in mine))
    across = len(machines) > 1 and len({r["params"].get("define") for r in mine}) == 1

    def group(r: dict) -> tuple:
        return (r["params"].get("cpu"),) if across else (r["params"].get("cpu"), _machine(r))

    keys = list(dict.fromkeys(group(r) for r in mine))
    groups = [[r for r in mine if group(r) == k] for k in keys]
    entries = [entry(g[0], r, delta=delta, key=r["key"], interleaved=True) for g in groups for r in g[1:]]
    entries, summary = finish(entries)
    info = _variants_info(mine, refs, cpus, machines, across)
    p = mine[0]["params"]
    if len(keys) == 1:
        base = mine[0]["key"]
    elif across:
        base = f"{mine[0]['key']} on each CPU"
    elif len(machines) > 1:
        base = f"{p.get('define', mine[0]['key'])} on each " + ("CPU and machine" if len(cpus) > 1 else "machine")
    else:
        base = f"{p.get('define', mine[0]['key'])} on each CPU"
    return document(kind="variants", interleaved=True, entries=entries, summary=summary, delta=delta,
                    a={"params": base, "run_id": run_id},
                    b={"params": ", ".join(r["key"] for g in groups for r in g[1:]), "run_id": run_id},
                    aa=False, env=env, variants=info)


def pair_results(run_a: dict, run_b: dict) -> tuple[list[tuple[dict, dict]], list[str]]:
    """Two stored runs' results matched by key, and the keys in only one;
    UsageError when they share none."""
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
    `diffs`: env.differences of the two runs. One run per side: the ratio
    and its CI within the runs, no verdict (replicates.UNREPLICATED)."""
    return stored_runs_document([run_a], [run_b], delta=delta, switches=switches, diffs=diffs)


def _side(runs: list[dict]) -> dict:
    d = {"run_id": runs[0]["run_id"], "label": runs[0].get("label"), "created": runs[0].get("created")}
    if len(runs) > 1:
        d["runs"] = [{"run_id": r["run_id"], "label": r.get("label"), "created": r.get("created")} for r in runs]
    return d


# A withheld stored comparison's CI and p (one run on a side): what they are.
WITHIN_RUNS = ("within the runs: the processes of each side pooled, a run-to-run offset (another boot or hour) "
               "not in them; not a verdict's CI or p")


def stored_runs_document(runs_a: list[dict], runs_b: list[dict], *, delta: float, switches: dict[str, int],
                         diffs: list) -> dict:
    """Sides of one or more stored runs compared with the run as the unit
    (replicates.py): per benchmark variant, each run's figure is the median
    of its process medians and the runs are the sample; a variant with one
    run per side keeps the process-level figures and gets no verdict."""
    keyed = [[{result_key(r): r for r in run["results"]} for run in side] for side in (runs_a, runs_b)]
    order = list(dict.fromkeys(k for d in keyed[0] for k in d))
    if len(runs_a) == 1 and len(runs_b) == 1:
        pairs, unmatched = pair_results(runs_a[0], runs_b[0])
    else:
        both = [k for k in order if any(k in d for d in keyed[1])]
        if not both:
            pair_results(runs_a[0], runs_b[0])   # its one-line refusal
        seen = {k for side in keyed for d in side for k in d}
        unmatched = sorted(seen - set(both))
        pairs = [(next(d[k] for d in keyed[0] if k in d), next(d[k] for d in keyed[1] if k in d)) for k in both]
    from . import replicates   # numpy and scipy: only once the runs are known to pair

    entries, sw = [], []
    for a, b in pairs:
        k = result_key(a)
        rs = [[(run["run_id"], d[k]) for run, d in zip(side, ks) if k in d and Summary.of(d[k]).process_medians]
              for side, ks in ((runs_a, keyed[0]), (runs_b, keyed[1]))]
        if replicates.replicated(len(rs[0]), len(rs[1])):
            entries.append(_runs_entry(k, a, rs[0], rs[1], delta=delta))
            continue
        e = entry(a, b, delta=delta, key=k, switches=switches.get(a["bench"], 0))
        if "ratio" in e and max(len(rs[0]), len(rs[1])) > 1 and min(len(rs[0]), len(rs[1])) >= 1:
            # 1 against k (issue 37): every run's processes, not the first run's alone
            from . import abtest   # numpy, scipy: only when it compares; commands pair and check their input first

            pooled = [[m for _, d in side for m in Summary.of(d).process_medians] for side in rs]
            e.update(abtest.compare_arms(pooled[0], pooled[1], delta=delta))
            e["runs_pooled"] = [len(rs[0]), len(rs[1])]
        if "ratio" in e:
            e["withheld"] = replicates.unreplicated(max(len(rs[0]), 1), max(len(rs[1]), 1))
            # its CI and p are within the runs: shown, but not a verdict's (issue 37)
            e["ci_scope"] = WITHIN_RUNS
        entries.append(e)
        sw += [(e, a, b)]
    entries = _finish_stored(entries)
    sysw = system_wide(sw, switches)
    ids = [r["run_id"] for r in runs_a + runs_b]
    return document(
        kind="compare", interleaved=False, entries=entries, summary=_counted(entries), delta=delta,
        a=_side(runs_a), b=_side(runs_b), aa=False,
        env_differences=[{"field": f, "a": a, "b": b} for f, a, b in diffs], unmatched=unmatched,
        env_a=runs_a[0].get("env"), env_b=runs_b[0].get("env"),
        replicates={"unit": replicates.UNIT, "runs_a": [r["run_id"] for r in runs_a],
                    "runs_b": [r["run_id"] for r in runs_b], "n_runs": len(ids)},
        **({"system_wide": sysw} if sysw else {}))


def _runs_entry(key: str, res: dict, ra: list[tuple], rb: list[tuple], *, delta: float) -> dict:
    """One benchmark variant compared run against run (replicates.compare_runs):
    `ra`, `rb` its (run id, result) on each side."""
    from . import replicates   # numpy, scipy: only when it compares; commands pair and check their input first

    def side(rs: list[tuple]) -> dict:
        sums = [Summary.of(r) for _, r in rs]
        meds = [m for s in sums for m in s.process_medians]
        return {"params": rs[0][1].get("params"), "summary": {
            "median_ns": replicates.run_figure([replicates.run_figure(s.process_medians) for s in sums]),
            "n_processes": len(meds), "n_runs": len(rs), "runs": [i for i, _ in rs],
            "run_medians_ns": [replicates.run_figure(s.process_medians) for s in sums],
            "process_medians_ns": meds,
            "flags": [dict(f, run=i) for (i, _), s in zip(rs, sums) for f in s.flags]}}

    e = {"bench": res["bench"], "key": key, "op": res.get("op", ""), "a": side(ra), "b": side(rb)}
    e.update(replicates.compare_runs([Summary.of(r).process_medians for _, r in ra],
                                     [Summary.of(r).process_medians for _, r in rb], delta=delta))
    guests = guests_of_sides([r for _, r in ra], [r for _, r in rb])   # what each side's runs ran on
    if guests is not None:
        e["guests"] = guests
    e["flags"] = []
    for arm, sd in (("A", e["a"]), ("B", e["b"])):
        for f in sd["summary"]["flags"]:
            detail = f.get("detail", "")
            e["flags"].append({"arm": arm, "flag": f["flag"], "detail": detail, "run": f["run"],
                               "text": f"{arm}: {f['flag']}" + (f": {detail}" if detail else "") + f" (run {f['run']})"})
    return e


def _finish_stored(entries: list[dict]) -> list[dict]:
    """Verdicts of a stored comparison: the run-level entries by
    replicates.decide (Holm over them), the one-run-a-side ones withheld."""
    from . import replicates   # numpy, scipy: only when it compares; commands pair and check their input first

    out = list(entries)
    runs = [i for i, e in enumerate(out) if Entry(e).run_level]
    for i, d in zip(runs, replicates.decide([out[i] for i in runs]) if runs else []):
        out[i] = d
    procs = [i for i, e in enumerate(out) if Entry(e).compared and not Entry(e).run_level]
    if procs:
        done, _ = finish([out[i] for i in procs])
        for i, d in zip(procs, done):
            out[i] = dict(d, unit="process (within the runs)", verdict=None,
                          withheld=entries[i].get("withheld") or replicates.UNREPLICATED)
            for k in ("processes_needed", "schedule", "schedule_note"):
                out[i].pop(k, None)
    return out


def _counted(entries: list[dict]) -> dict:
    """abtest.summary over the compared entries, counting only those with a verdict."""
    from . import abtest   # numpy, scipy: only when it compares; commands pair and check their input first

    s = abtest.summary([e for e in entries if "ratio" in e])
    s["counts"] = {v: sum(1 for e in entries if e.get("verdict") == v) for v in abtest.VERDICTS}
    return s


def resolve_side(store, ref: str) -> list[int]:
    """One side of `compare`: a run reference, or several joined by commas
    (12,13,14); a reference that names a run as a whole wins."""

    try:
        return [store.resolve(ref)]
    except UnknownRun:
        if "," not in ref:
            raise
    parts = [p.strip() for p in ref.split(",")]
    if any(not p for p in parts):
        raise UsageError(f"{printable(ref)}: an empty run reference; give RUN or RUN,RUN,... (ids or labels)")
    return [store.resolve(p) for p in parts]


def compare_stored(store, ref_a, ref_b, *, delta: float, force: bool, force_flag: str = "--force",
                   allow_emulated: bool = False) -> dict:
    """The opcost.comparison/1 document of stored runs (`opcost compare`,
    `opcost report --compare`): each side one run reference, several joined
    by commas, or a list of them; refused when a run is on both sides, or
    runs whose machines differ unless `force` (the option that says so:
    `force_flag`). Switches per operation come from the runs' plans (A's first).
    A verdict on timings a TCG guest gave is withheld as `ab` withholds it,
    unless `allow_emulated` (--allow-emulated)."""
    sides = []
    for ref in (ref_a, ref_b):
        refs = [ref] if isinstance(ref, str) else list(ref)
        ids = [i for r in refs for i in resolve_side(store, r)]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise UsageError(f"run {dup[0]} is named twice on one side; give each run once")
        sides.append(ids)
    ids_a, ids_b = sides
    both = sorted(set(ids_a) & set(ids_b))
    if both:
        ta = printable(ref_a if isinstance(ref_a, str) else ",".join(ref_a))
        tb = printable(ref_b if isinstance(ref_b, str) else ",".join(ref_b))
        what = (f"{ta} and {tb} are the same stored run ({both[0]})" if len(ids_a) == len(ids_b) == 1
                else f"run {both[0]} is on both sides ({ta} against {tb})")
        raise UsageError(f"{what}; compare two different runs, or measure noise with an interleaved "
                         "`opcost ab BENCH --a P --b P`")
    runs_a = [store.load_run(i, summaries=True) for i in ids_a]
    runs_b = [store.load_run(i, summaries=True) for i in ids_b]
    same_machine([(r["run_id"], r.get("env") or {}) for r in runs_a + runs_b], force=force,
                 anyway=f"{force_flag} to compare anyway")
    doc = stored_runs_document(runs_a, runs_b, delta=delta,
                               switches=switches_of(*(plan_of(r) for r in runs_a + runs_b)),
                               diffs=differences(runs_a[0].get("env") or {}, runs_b[0].get("env") or {}))
    return withhold_emulated(doc, allow_emulated)


def stored_comparison(doc: dict) -> dict | None:
    """The comparison a stored `ab` or `variants` run printed, rebuilt from
    its results and its stored plan alone (model.Plan: arms, delta, switches
    per operation, --allow-emulated): the opcost.comparison/1 document `show`
    and every `report` format render. None: any other run, or one whose plan
    is not known (or does not match its results)."""
    plan = plan_of(doc)
    if plan is None or plan.kind != doc.get("kind"):
        return None
    res = doc["results"]
    if (plan.kind == "ab" and plan.a is not None and plan.b is not None and plan.delta is not None
            and len(res) == 2 * len(plan.specs)):

        with deciding_on(plan.verdict_on):
            cdoc = ab_document(res, a=plan.a, b=plan.b, delta=plan.delta, run_id=doc["run_id"], env=doc.get("env"),
                               switches=plan.switches)
        return withhold_emulated(cdoc, plan.allow_emulated)
    if plan.kind == "variants" and plan.delta is not None and res:

        with deciding_on(plan.verdict_on):
            cdoc = variants_document(res, delta=plan.delta, run_id=doc["run_id"], env=doc.get("env"))
        return withhold_emulated(cdoc, plan.allow_emulated)
    return None


# --- `fleet ab`, `fleet variants`: one comparison per host, and the host as the unit across them ---

_HOST_STATUS = {"complete": "ok", "running": "failed", "abandoned": "failed"}


def fleet_document(hosts: list[dict], *, plan, run_id: int | None, fleet_id: str) -> dict:
    """The opcost.fleet/1 document of a `fleet ab` (or of a `fleet
    variants`: plan.of): `hosts` in the order given, each {host, status,
    reason, run_id, document (that host's opcost.result/1 with its plan, or
    None)}. Each host's comparison is the one its own ab (variants) run
    prints (stored_comparison: rebuilt from its results and plan, so `show`
    of the record gives the same); across hosts, per benchmark (per
    compared build), the host is the unit (abtest.across_hosts over the log
    of each host's verdict estimate)."""
    rows = []
    for h in hosts:
        doc = h.get("document")
        cdoc = stored_comparison(doc) if doc and doc.get("results") else None
        row = {"host": h["host"], "status": h["status"], "reason": h.get("reason"), "run_id": h.get("run_id"),
               "comparison": cdoc}
        rows.append(row)
    head: dict = {"schema": FLEET_SCHEMA, "opcost_version": __version__, "kind": plan.of or "ab", "run_id": run_id,
                  "fleet": fleet_id}
    if plan.of == "variants":   # each build against the first, by its name (-DNAME)
        entries = [e for r in rows if r["comparison"] for e in Comparison.from_json(r["comparison"]).comparisons]
        keys = list(dict.fromkeys(e.key for e in entries))
        baseline = next((r["comparison"]["variants"]["baseline"] for r in rows
                         if r["comparison"] and "variants" in r["comparison"]), None)
        head.update(source=plan.specs[0] if plan.specs else None, baseline=baseline)
        across = _across(rows, keys, "key", plan.delta, plan.alpha)
    else:
        head.update(a={"params": plan.a}, b={"params": plan.b})
        across = _across(rows, plan.specs, "bench", plan.delta, plan.alpha)
    return {**head, "delta_requested": plan.delta, "alpha": plan.alpha, "hosts": rows, "across": across}


def _across(rows: list[dict], keys: list[str], by: str, delta: float, alpha: float) -> list[dict]:
    """Per key (a benchmark of ab: by="bench"; a compared build of variants:
    by="key"), each host's figure and the hosts' together."""

    from . import abtest   # numpy, scipy: only when it compares; commands pair and check their input first

    out = []
    for key in keys:
        per = []
        op = bench = None
        for r in rows:
            entries = Comparison.from_json(r["comparison"]).comparisons if r["comparison"] else []
            e = next((e for e in entries if (e.key if by == "key" else e.bench) == key), None)
            if e is None or not e.compared or not e.verdict:
                continue
            op, bench = op or e.raw.get("op"), bench or e.bench
            est, ci = e.verdict_ratio
            per.append({"host": r["host"], "ratio": est, "ci95": ci, "verdict": e.verdict})
        counts = {v: 0 for v in abtest.VERDICTS}
        for p in per:
            counts[p["verdict"]] = counts.get(p["verdict"], 0) + 1
        entry: dict = {"bench": key if by == "bench" else bench, "key": key, "op": op, "hosts": per,
                       "counts": counts}
        if per:
            entry.update(abtest.across_hosts([math.log(p["ratio"]) for p in per], delta=delta, alpha=alpha))
        else:
            entry.update(n_hosts=0, verdict=None, note="no host compared it")
        out.append(entry)
    return out


def stored_fleet(store, doc: dict) -> dict | None:
    """A stored fleet record (`doc`, a run of kind fleet) as `fleet ab`
    (`fleet variants`) printed it: its hosts' runs (label fleet=ID, host=NAME) loaded and put
    together by fleet_document. None: not a fleet record (or its plan is
    not known)."""
    plan = plan_of(doc)
    fleet_id = (doc.get("labels") or {}).get("fleet")
    if plan is None or plan.kind != "fleet" or doc.get("kind") != "fleet" or not fleet_id:
        return None
    members = [r for r in store.find_runs(where={"fleet": fleet_id}) if r["id"] != doc["run_id"]]
    hosts = []
    for h in plan.hosts:
        found = [r for r in members if (r.get("labels") or {}).get("host") == h]
        if not found:
            hosts.append({"host": h, "status": "missing", "reason": "nothing stored", "run_id": None})
            continue
        run = store.load_run(found[0]["id"], summaries=True)
        status = _HOST_STATUS.get(run.get("status") or "", run.get("status") or "failed")
        hosts.append({"host": h, "status": status, "reason": None if status == "ok" else run.get("status"),
                      "run_id": run["run_id"], "document": run})
    return fleet_document(hosts, plan=plan, run_id=doc["run_id"], fleet_id=fleet_id)
