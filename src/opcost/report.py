"""Terminal rendering of results: plain aligned text on stdout, no colour
codes when piped, so it can be read at a glance and diffed."""

from __future__ import annotations

import math

from .text import printable


def fmt_ns(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.3f} ms"
    if abs(x) >= 1e3:
        return f"{x / 1e3:.3f} us"
    return f"{x:.1f} ns"


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _ci(s: dict) -> str:
    ci = s.get("ci95_ns")
    if not ci:
        return "-"
    return f"[{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]"


def result_key(r: dict) -> str:
    """`bench:k=v,...` for a result document (the stored form has no key)."""
    if r.get("key"):
        return r["key"]
    params = {k: v for k, v in (r.get("params") or {}).items() if k != "arch"}
    return r["bench"] + (":" + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")


def _cpus(r: dict) -> str:
    cpus = (r.get("summary") or {}).get("cpus")
    return "|".join(cpus) if cpus else str((r.get("params") or {}).get("cpu", "-"))


def _table(rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_results(results: list[dict]) -> str:
    """One line per result (opcost.result/1 `results[]` entries); then
    counters, flags, unsupported and failed variants under their own headings."""
    head = ["benchmark", "op", "median", "95% CI", "min", "p90", "CV", "cycles", "user/op", "sys/op", "cpus", "n"]
    rows = [head]
    notes, counters, parallel = [], [], []
    disturbed, measured = disturbed_rounds(results)
    if disturbed:
        counts = set(disturbed.values())
        which = (f"{'rounds' if len(disturbed) > 1 else 'round'} {', '.join(str(r + 1) for r in disturbed)} "
                 f"{'were' if len(disturbed) > 1 else 'was'} an outlier in {counts.pop()}" if len(counts) == 1 else
                 "rounds " + ", ".join(f"{r + 1} ({n})" for r, n in disturbed.items()) + " were outliers in that many")
        notes.append(f"  {which} of {measured} benchmarks: the machine was disturbed then, not one benchmark")
    for r in results:
        s = r.get("summary") or {}
        name = printable(result_key(r))
        status, reason = r.get("status"), r.get("reason")
        if status in ("unsupported", "failed") and not s.get("n_processes"):
            notes.append(f"  {name}: {status}: {reason}")
            continue
        if not s.get("n_processes"):
            notes.append(f"  {name}: not measured (interrupted)")
            continue
        user = s.get("user_ns_per_op")
        sys_ = s.get("sys_ns_per_op")
        if "helper_user_ns_per_op" in s:
            user_s = f"{fmt_ns(user)}+{fmt_ns(s['helper_user_ns_per_op'])}"
            sys_s = f"{fmt_ns(sys_)}+{fmt_ns(s.get('helper_sys_ns_per_op'))}"
        else:
            user_s, sys_s = fmt_ns(user), fmt_ns(sys_)
        cyc = s.get("median_cycles")
        rows.append([name, r.get("op", ""), fmt_ns(s.get("median_ns")), _ci(s), fmt_ns(s.get("min_ns")), fmt_ns(s.get("p90_ns")),
                     fmt_pct(s.get("cv")), "-" if cyc is None else f"{cyc:.0f}", user_s, sys_s, _cpus(r),
                     str(s["n_processes"])])
        if s.get("ops_per_iter"):
            notes.append(f"  {name}: one iteration ({s.get('iteration') or 'several operations'}) = "
                         f"{s['ops_per_iter']:.0f} ops: {fmt_ns(s['median_ns_per_iter'])} per iteration")
        if s.get("nominal_ns") is not None:
            notes.append(f"  {name}: requested {fmt_ns(s['nominal_ns'])}, overshoot {fmt_ns(s['overshoot_ns'])} per op")
        for f in s.get("flags", []):
            if f["flag"] == "outliers" and f.get("rounds") and set(f["rounds"]) <= set(disturbed):
                continue   # said once above, for the whole run
            notes.append(f"  {name}: {f['flag']}: {f['detail']}")
        if status == "failed":
            notes.append(f"  {name}: failed after {s['n_processes']} process(es): {reason}")
        if s.get("counters"):
            counters.append(format_counters(name, s))
        par = r.get("parallel") or s.get("parallel")
        if par:
            parallel.append(format_parallel(name, par))
    out = []
    if len(rows) > 1:
        out.append(_table(rows, right={2, 4, 5, 6, 7, 8, 9, 11}))
        out.append("median, CI, min, p90 and CV over per-process medians; cycles at the TSC rate; "
                   "user/sys per op from getrusage (measuring side+helper).")
    if counters:
        out.append("counters per op (median over processes; u: user space only, k: kernel only, "
                   "all: both):\n" + "\n".join(counters))
    if parallel:
        out.append("parallel copies (throughput = operations / wall time of the batches run while all copies measured; efficiency = per-copy throughput "
                   "over one copy alone, paired per round):\n" + "\n".join(parallel))
    if notes:
        out.append("notes:\n" + "\n".join(notes))
    return "\n\n".join(out)


def disturbed_rounds(results: list[dict]) -> tuple[dict[int, int], int]:
    """Rounds that were outliers in most of a run's benchmarks (at least 3,
    and at least half of those measured): the machine, not a benchmark, was
    slow then. {round: benchmarks it was an outlier in}, and how many
    benchmarks were measured."""
    measured = [r for r in results if (r.get("summary") or {}).get("n_processes")]
    count: dict[int, int] = {}
    for r in measured:
        for f in r["summary"].get("flags", []):
            if f["flag"] == "outliers":
                for rnd in set(f.get("rounds") or []):
                    if rnd is not None:
                        count[rnd] = count.get(rnd, 0) + 1
    need = max(3, (len(measured) + 1) // 2)
    return {rnd: n for rnd, n in sorted(count.items()) if n >= need}, len(measured)


_MOD_COLS = {"": "all", "u": "u", "k": "k"}


def _num(v) -> str:
    if v == 0:
        return "0"
    return f"{v:.4g}"


def format_counters(name: str, s: dict) -> str:
    """One table per result: a row per event, a column per modifier (all, u,
    k); a cell is the per-op value, `*` marks a multiplexed (scaled) value,
    `n/s` an event this machine cannot count; reasons and derived metrics
    follow."""
    from .counters import CLOCK_EVENTS, split_name

    vals = s.get("counters") or {}
    reasons = s.get("counter_reasons", {})
    running = s.get("counters_running", {})
    events: list[str] = []
    mods: list[str] = []
    cells: dict = {}
    for full, v in vals.items():
        base, mod = split_name(full)
        if base not in events:
            events.append(base)
        if mod not in mods:
            mods.append(mod)
        if isinstance(v, (int, float)):
            cell = _num(v) + ("*" if full in running else "")
        else:
            cell = "n/s" if v == "<not supported>" else "n/c" if v == "<not counted>" else str(v)
        cells[(base, mod)] = cell
    mods.sort(key=lambda m: "uk".find(m) if m in ("u", "k") else (-1 if m == "" else 9))
    rows = [["event"] + [_MOD_COLS.get(m, m) for m in mods]]
    for e in events:
        rows.append([e] + [cells.get((e, m), "") for m in mods])
    lines = [f"  {name}"] + ["    " + line for line in _table(rows, right=set(range(1, len(mods) + 1))).splitlines()]
    notes = []
    for full, frac in running.items():
        notes.append(f"{full}: multiplexed ({frac:.0%} running), value scaled by time enabled/running")
    by_reason: dict = {}
    for full, why in reasons.items():
        tag = "<not supported>: " if vals.get(full) == "<not supported>" else ""
        by_reason.setdefault(tag + why, []).append(full)
    for why, names in by_reason.items():
        notes.append(f"{', '.join(names)}: {why}")
    for full, v in vals.items():
        if v == "<not counted>":
            notes.append(f"{full}: <not counted>: its group never got a PMU slot during a batch "
                         "(too many events for the hardware counters, or the NMI watchdog holds one); ask for fewer")
    clock_split = [e for e in events if e in CLOCK_EVENTS and any(m in ("u", "k") and (e, m) in cells for m in mods)]
    if clock_split:
        notes.append(f"{', '.join(clock_split)}: the kernel ignores :u/:k for clock events, so these columns are "
                     "user+kernel time alike (user/sys per op in the table above are the getrusage split)")
    derived = s.get("derived") or {}
    if derived:
        lines.append("    derived:")
        width = max(len(k) for k in derived)
        for k, d in derived.items():
            v = d.get("value")
            shown = _num(v) if isinstance(v, (int, float)) else f"- ({d.get('reason', 'not available')})"
            lines.append(f"      {k.ljust(width)} = {shown}   [{d['expr']}]")
    if notes:
        lines += ["    " + n for n in notes]
    return "\n".join(lines)


def _rate(x: float | None) -> str:
    if x is None:
        return "-"
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3f} {unit}ops/s"
    return f"{x:.1f} ops/s"


def format_parallel(name: str, p: dict) -> str:
    cpus = ",".join(map(str, p.get("cpus", [])))
    eff = p.get("efficiency")
    rng = p.get("efficiency_range")
    lines = [f"  {name}: {p['copies']} copies on CPUs {cpus}, {p.get('n_rounds', 0)} round(s)",
             f"    1 copy alone     {_rate(p.get('single_ops_per_s'))}",
             f"    per copy         {_rate(p.get('per_copy_ops_per_s'))} (slowest copy {_rate(p.get('min_copy_ops_per_s'))})",
             f"    total            {_rate(p.get('total_ops_per_s'))}",
             "    efficiency       " + ("-" if eff is None else f"{eff:.3f}")
             + (f" (rounds {rng[0]:.3f}..{rng[1]:.3f})" if rng and len(rng) == 2 else "")]
    ov = p.get("overlap")
    if ov is not None:
        lines.append(f"    overlap          {ov:.0%} of the copies' measuring span ran concurrently (median round)")
    lines += [f"    note: {f}" for f in p.get("flags", [])]
    return "\n".join(lines)


_COLORS = {"slower": "31", "faster": "32", "same": "2", "negligible": "2", "inconclusive": "33"}


def _verdict(v: str | None, color: bool) -> str:
    if v is None:
        return "-"
    return f"\x1b[{_COLORS[v]}m{v}\x1b[0m" if color else v


def _params_text(p) -> str:
    if isinstance(p, dict):
        return ",".join(f"{k}={v}" for k, v in p.items()) or "(defaults)"
    return p or "(defaults)"


def _savings_table(e: dict) -> str:
    sv = e["savings"]
    cols = list(sv["A"])
    rows = [["per " + (e["op"] or "op")] + cols]
    for name, key in (("A", "A"), ("B", "B"), ("difference (A-B)", "difference")):
        rows.append([name] + [(f"{sv[key][c]:.0f}" if c.startswith("cycles") and sv[key][c] is not None
                               else fmt_ns(sv[key][c])) for c in cols])
    rows.append(["improvement (A-B)/A"] + [fmt_pct(sv["improvement"][c]) for c in cols])
    return _table(rows, right=set(range(1, len(cols) + 1)))


def format_comparison(doc: dict, color: bool = False) -> str:
    """One line per benchmark with its verdict, the geometric mean, then per
    benchmark seed 000's savings table, then notes and environment changes."""
    out = []
    if doc["interleaved"]:
        out.append(f"A/B, interleaved: each round ran one A and one B process in a random order\n"
                   f"A: {_params_text(doc['a'].get('params'))}\nB: {_params_text(doc['b'].get('params'))}")
        if doc.get("aa"):
            out[-1] += "\nA/A run: A and B are identical, so any difference below is noise."
    else:
        def name(r):
            return (f"run {r['run_id']}" + (f" ({printable(r['label'])})" if r.get("label") else "")
                    + f", {r.get('created', '')}")
        out.append(f"A: {name(doc['a'])}\nB: {name(doc['b'])}\n"
                   "not interleaved: A and B ran at different times, so drift between them is part of the difference")
    rows = [["benchmark", "op", "A", "B", "B/A", "95% CI", "p (Holm)", "delta", "verdict"]]
    notes = []
    for e in doc["comparisons"]:
        e = {**e, "key": printable(e["key"])}
        if "ratio" not in e:
            rows.append([e["key"], e["op"], "-", "-", "-", "-", "-", "-", "-"])
            notes.append(f"  {e['key']}: {e['status']}")
            continue
        ci = e.get("ci95_ratio")
        rows.append([e["key"], e["op"], fmt_ns(e["median_a"]), fmt_ns(e["median_b"]), f"{e['ratio']:.4f}",
                     f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-", f"{e['p_adjusted']:.2g}",
                     fmt_pct(e["delta"]), _verdict(e["verdict"], color)])
        if e["verdict"] == "inconclusive":
            need = e.get("processes_needed")
            sched = e.get("schedule")
            notes.append(f"  {e['key']}: inconclusive: about {need} processes per arm would likely decide it"
                         + (f": rerun with -p {sched}" if sched else f" ({e.get('schedule_note', 'beyond the 10/20/40 schedule')})"))
        if e["delta"] > doc["delta_requested"] + 1e-12:
            notes.append(f"  {e['key']}: delta raised from {fmt_pct(doc['delta_requested'])} to {fmt_pct(e['delta'])}: "
                         "twice the measured A/A noise")
        for f in e.get("flags", []):
            notes.append(f"  {e['key']}: {f['text']}")
    out.append(_table(rows, right={2, 3, 4, 6, 7}))
    if (doc.get("design") or {}).get("kind") == "sequential":
        out.append(_design_text(doc))
    s = doc["summary"]
    if s.get("geomean_ratio") is not None:
        counts = ", ".join(f"{k} {v}" for k, v in s["counts"].items() if v)
        twice = "twice the " if (doc.get("design") or {}).get("kind") == "sequential" else ""
        out.append(f"geometric mean of B/A: {s['geomean_ratio']:.4f} over {s['n']} benchmark(s) ({counts})\n"
                   f"verdicts are B relative to A; p: {twice}smaller of Mann-Whitney U and Kolmogorov-Smirnov over "
                   "per-process medians" + (" (Bonferroni for taking the smaller)" if twice else "")
                   + ", Holm-adjusted across benchmarks")
    for e in doc["comparisons"]:
        if "savings" in e:
            per = ("per op" if not e["savings"]["A"].get("elapsed per switch")
                   else f"per {e['op']} ({_switch_count(e)} switches)")
            out.append(f"{printable(e['key'])}: " + per
                       + "; user/system from getrusage of the measuring side"
                       + ("; whole system = both sides' user+system" if "whole system" in e["savings"]["A"] else "")
                       + "\n" + _savings_table(e))
    if notes:
        out.append("notes:\n" + "\n".join(notes))
    if doc.get("unmatched"):
        out.append("not in both runs (not compared): " + ", ".join(doc["unmatched"]))
    diffs = doc.get("env_differences")
    if diffs is not None:
        out.append("environment differences:\n" + ("\n".join(f"  {d['field']}: {_short(d['a'])} -> {_short(d['b'])}"
                                                          for d in diffs) if diffs else "  none"))
    return "\n\n".join(out)


def _design_text(doc: dict) -> str:
    """The sequential design: its looks and levels, and where each benchmark
    stopped: "stopped after 20 processes per arm (look 2 of 3): slower"."""
    d = doc["design"]
    planned = d["planned"]
    lines = [f"sequential design: looks after {', '.join(str(lk['processes_per_arm']) for lk in planned)} processes "
             f"per arm ({d['spending']} alpha spending); significant at p (Holm) under "
             + ", ".join(f"{lk['p_level']:.2g}" for lk in planned) + ";\n"
             "a verdict is settled when significant beyond delta, or when its CI at that level lies inside +/- delta"]
    n = len(planned)
    for e in doc["comparisons"]:
        q = e.get("sequential")
        if not q:
            continue
        if q["processes_per_arm"] not in d["stages"]:
            where = f"the run ended before look {q['look']} of {n}"
        else:
            where = f"look {q['look']} of {n}" + (", where the run ended" if q["settled"] == "the run ended here" else "")
        lines.append(f"  {printable(e['key'])}: stopped after {q['processes_per_arm']} processes per arm "
                     f"({where}): {e['verdict']}")
    return "\n".join(lines)


def _switch_count(e: dict) -> int:
    a = e["savings"]["A"]
    return round(a["elapsed"] / a["elapsed per switch"]) if a.get("elapsed per switch") else 0


def _short(v, width: int = 60) -> str:
    t = str(v)
    return t if len(t) <= width else t[: width - 3] + "..."


_MODE_TEXT = {"program": "whole program, each run timed like time(1): elapsed from fork to wait, "
                         "user and system from wait4",
              "op": "opcost_op called in a dependent chain inside the probe; loop and clock overhead "
                    "subtracted, the call itself not"}


def rel_path(p: str) -> str:
    import os

    try:
        return os.path.relpath(p)
    except ValueError:
        return str(p)


def format_variants(doc: dict, results: list[dict], color: bool = False) -> str:
    """`opcost variants`: how the builds were made and run, their table, the
    call overhead (op mode), and each build compared with the first."""
    from .build import REFERENCE_NAME

    info = doc["variants"]
    head = (f"{rel_path(info['source'])}: {info['mode']} mode ({_MODE_TEXT[info['mode']]})\n"
            f"built with: {info['cc']} {info['cflags']} -DNAME".rstrip())
    emu = info.get("emulated")
    if info.get("arch") and not emu:
        head += f"\nbuilt for {info['arch']}, which this machine runs natively"
    if emu:
        head += (f"\nemulated: built for {info.get('arch')}, run under {emu['emulator']}: the timings are qemu's, "
                 f"not an {info.get('arch')} CPU's (correctness only)")
    if info.get("ops"):
        head += (f"\nper operation: a run's time / --ops {info['ops']} (the run's start-up and exit are "
                 "spread over its operations)")
    if info.get("cpus"):
        head += (f"\none row per build and CPU ({', '.join(info['cpus'])}); each CPU's builds are compared "
                 "with that CPU's first")
    out = [head, format_results(results)]
    ovh = info.get("call_overhead")
    if ovh and ovh.get("median_ns") is not None:
        net = ", ".join(f"{b['name']} {fmt_ns(b.get('net_median_ns'))}" for b in info["builds"])
        out.append(f"call overhead: {REFERENCE_NAME} costs {fmt_ns(ovh['median_ns'])} per call "
                   f"({ovh['median_cycles']:.1f} cycles); net of it: {net}.\n"
                   "The comparisons below include the call.")
    if doc["comparisons"]:
        others = len(doc["comparisons"])
        out.append(f"interleaved: every round ran one process of each variant in a random order\n"
                   f"A (baseline): {doc['a']['params']}; verdicts are each other variant relative to A"
                   + (f", p Holm-adjusted across the {others} comparisons" if others > 1 else ""))
        out.append(format_comparison(doc, color=color).split("\n\n", 1)[1])
    else:
        out.append("one variant: measured alone, nothing to compare (give a second -D to compare with it)")
    return "\n\n".join(out)
