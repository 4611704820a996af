"""Terminal rendering of results: plain aligned text on stdout, no colour
codes when piped, so it can be read at a glance and diffed."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from .counters import CLOCK_EVENTS, display_name, split_name
from .guests import header_lines, result_lines, series_lines
from .model import REFERENCE_NAME, Comparison, Entry, Series, SeriesLabel, Summary, geomean_text, result_key
from .safetext import printable


def fmt_ns(x: Any) -> str:
    """A time in ns, scaled to us or ms; '-' for anything not a number."""
    if not isinstance(x, (int, float)) or isinstance(x, bool) or math.isnan(x):
        return "-"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.3f} ms"
    if abs(x) >= 1e3:
        return f"{x / 1e3:.3f} us"
    return f"{x:.1f} ns"


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _ci(s: Mapping) -> str:
    ci = s.get("ci95_ns")
    if not ci:
        return "-"
    return f"[{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]"


def _cpus(r: dict) -> str:
    cpus = Summary.of(r).cpus
    return "|".join(cpus) if cpus else str((r.get("params") or {}).get("cpu", "-"))


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _vis(cell: str) -> int:
    """The width a cell takes on a terminal (its colour codes take none)."""
    return len(_ANSI.sub("", cell))


def _table(rows: list[list[str]], right: set[int], width: int | None = None, drop: tuple[int, ...] = ()) -> str:
    """Aligned columns under a dashed rule. With `width` (a terminal's, on a
    TTY only) a table wider than it loses the columns `drop` names, in that
    order, as far as needed (a line below says which), then its first column
    is shortened; without, every column is shown in full."""
    widths = [max(_vis(r[i]) for r in rows) for i in range(len(rows[0]))]
    shown = list(range(len(widths)))
    cut = 0
    if width is not None:
        def total() -> int:
            return sum(widths[i] for i in shown) + 2 * (len(shown) - 1)
        for i in drop:
            if total() <= width:
                break
            shown.remove(i)
        if total() > width:
            cut = max(12, widths[0] - (total() - width))
            widths[0] = min(widths[0], cut)
    lines = []
    for n, r in enumerate(rows):
        cells = []
        for i in shown:
            c = r[i]
            if i == 0 and cut and len(c) > widths[0]:
                c = c[: widths[0] - 3] + "..."
            pad = " " * (widths[i] - _vis(c))
            cells.append(pad + c if i in right else c + pad)
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * widths[i] for i in shown))
    hidden = [rows[0][i] for i in range(len(widths)) if i not in shown]
    if hidden:
        lines.append(f"(not shown, to fit {width} columns: {', '.join(hidden)}; a wider terminal, or a pipe, "
                     "shows them)")
    return "\n".join(lines)


def format_results(results: list[dict], width: int | None = None, all_notes: bool = True) -> str:
    """One line per result (opcost.result/1 `results[]` entries); then
    counters, flags, unsupported and failed variants under their own headings.
    The notes: every note of every benchmark (`all_notes`, what every file
    format carries), or one line per kind across the benchmarks
    (group_notes: what a terminal shows unless --notes)."""
    head = ["benchmark", "op", "median", "95% CI", "min", "p90", "CV", "cycles", "user/op", "sys/op", "cpus", "n"]
    rows = [head]
    notes: list[Note] = []
    counters, parallel = [], []
    disturbed, measured = disturbed_rounds(results)
    if disturbed:
        notes.append(_disturbed_note(disturbed, measured))
    for r in results:
        s = Summary.of(r)
        name = printable(result_key(r))
        status, reason = r.get("status"), r.get("reason")
        if status in ("unsupported", "failed") and not s.get("n_processes"):
            notes.append(Note(status, name, f"{name}: {status}: {reason}"))
            continue
        if not s.get("n_processes"):
            notes.append(Note("not measured", name, f"{name}: not measured (interrupted)"))
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
        notes += _result_notes(r, s, name, disturbed)
        if s.get("counters"):
            counters.append(format_counters(name, s))
        par = r.get("parallel") or s.get("parallel")
        if par:
            parallel.append(format_parallel(name, par))
    out = ["\n".join(result_lines(results))]   # what a vm run ran on, and that it was emulated
    if len(rows) > 1:
        out.append(_table(rows, right={2, 4, 5, 6, 7, 8, 9, 11}, width=width, drop=(10, 5, 4, 9, 8, 6, 7)))
        out.append("median, CI, min, p90 and CV over per-process medians; cycles at the TSC rate; "
                   "user/sys per op from getrusage (measuring side+helper).")
    if counters:
        out.append("counters per op (median over processes; u: user space only, k: kernel only, "
                   "all: both):\n" + "\n".join(counters))
    if parallel:
        out.append("parallel copies (throughput = operations / wall time of the batches run while all copies measured; efficiency = per-copy throughput "
                   "over one copy alone, paired per round):\n" + "\n".join(parallel))
    if notes and all_notes:
        out.append("notes:\n" + "\n".join("  " + n.text for n in notes))
    elif notes:
        out.append(group_notes(notes, measured))
    return "\n\n".join(x for x in out if x)


def _result_notes(r: dict, s: Summary, name: str, disturbed: dict[int, int]) -> list[Note]:
    """The notes on one measured result: an iteration of several operations,
    the xstate area, a requested cost, wall time apart from the figure, the
    boots' spread, its flags (an outliers flag said once for the run when its
    rounds were disturbed), a failure part way."""
    out: list[Note] = []
    status, reason = r.get("status"), r.get("reason")
    if s.get("ops_per_iter"):
        out.append(Note("iteration", name, f"{name}: one iteration ({s.get('iteration') or 'several operations'}) = "
                        f"{s['ops_per_iter']:.0f} ops: {fmt_ns(s['median_ns_per_iter'])} per iteration"))
    xs = next((h["xstate"] for p in r.get("processes") or []
               if isinstance(h := p.get("header"), dict) and isinstance(h.get("xstate"), dict)), None)
    if xs:   # xstate.*: which components were asked for, and the area (docs/instructions.md)
        out.append(Note("xstate", name, f"{name}: {xs.get('format')} area of {xs.get('area_bytes')} bytes, "
                        f"{xs.get('touched_bytes')} touched"
                        + (f"; RFBM {xs['rfbm']} (XCR0 {xs.get('xcr0')}"
                           + (f", XFD-capable {xs['xfd_capable']}"
                              if xs.get("xfd_capable") not in (None, "0x0") else "")
                           + ")" if xs.get("rfbm") else "")))
    if s.get("nominal_ns") is not None:
        out.append(Note("requested", name, f"{name}: requested {fmt_ns(s['nominal_ns'])}, overshoot "
                        f"{fmt_ns(s['overshoot_ns'])} per op"))
    wall = s.get("median_wall_ns")
    if s.get("figure") not in (None, "wall") and wall and s.get("median_ns") and abs(wall / s["median_ns"] - 1) >= 0.01:
        out.append(Note("wall time", name, f"{name}: wall time {fmt_ns(wall)} ({wall / s['median_ns'] - 1:+.1%}): the median is "
                        + ("time on the CPU" if s["figure"] == "cpu" else "wall time less the waiting for a CPU"
                           if s["figure"] == "wall-less-waiting" else "time on the CPU or less the waiting")
                        + "; waiting for the CPU is in wall time only (docs/statistics.md)",
                        wall / s["median_ns"] - 1))
    bt = s.get("boots")
    if bt:
        share = bt.get("between_share")
        out.append(Note("boots", name, f"{name}: {bt['n_boots']} boots of {'/'.join(map(str, bt['processes_per_boot']))} "
                        f"processes: spread (MAD) within a boot {fmt_pct(bt['within_boot_mad'])}, between boots "
                        f"{fmt_pct(bt['between_boot_mad'])}; "
                        + ("-" if share is None else f"{share:.0%}") + " of the variance between boots", share))
    for f in s.get("flags", []):
        if f["flag"] == "outliers" and f.get("rounds") and set(f["rounds"]) <= set(disturbed):
            continue   # said once above, for the whole run
        out.append(Note(f["flag"], name, f"{name}: {f['flag']}: {f['detail']}", _flag_value(f, s)))
    if status == "failed":
        out.append(Note("failed", name, f"{name}: failed after {s['n_processes']} process(es): {reason}"))
    return out


class Note(NamedTuple):
    """One note of one benchmark: its kind (a flag's name, "wall time",
    "failed", ...), the benchmark, the line --notes prints, and the figure
    its kind is ranged by across benchmarks (None: none)."""
    kind: str
    name: str
    text: str
    value: float | None = None


def _flag_value(f: Mapping, s: Mapping) -> float | None:
    """The figure a flag's grouped line gives the range of: the CV of
    `unstable`, the share lost of `contended`, the batches of `steal` or
    `migrations`, the processes of `outliers` or of `no steady state`."""
    if f["flag"] == "unstable":
        return s.get("cv")
    if f["flag"] == "contended":
        return f.get("lost_share")
    if f["flag"] == "outliers":
        return float(len(f.get("processes") or [])) or None
    if f["flag"] == "bimodal":
        return float(len(f.get("levels") or [])) or None
    m = re.match(r"(?:first batches \S+ slower in )?(\d+) of \d+", f.get("detail") or "")
    return float(m.group(1)) if m else None


# Each kind's grouped line, in the order of how much it changes the reading
# of the table: (kind, its title, its figure's range as text ({} the range),
# how the range is written, the one thing to do). A kind not listed (a new
# flag) comes last, with its count and names.
_KINDS: tuple[tuple[str, str, str, str, str], ...] = (
    ("failed", "failed", "", "", "why: --notes"),
    ("unsupported", "unsupported here", "", "", "why: --notes"),
    ("not measured", "not measured", "", "", "interrupted before their first process"),
    ("emulated", "emulated", "", "", "the timings are the emulator's: use them for correctness only"),
    ("disturbed", "disturbed", "", "", ""),
    ("bimodal", "bimodal", "{} levels", "n", "the processes fall on separate levels and the median is one of "
     "them: the shares with --notes; re-run to see which level is usual"),
    ("unstable", "unstable (CV > 5%)", "CV {}", "pct", "more processes (-p), or a quieter machine (opcost env --check)"),
    ("contended", "contended", "{} of the measured time lost waiting for the CPU", "pct",
     "other tasks ran on the measuring CPU; the figures leave that waiting out, wall time includes it; a quieter "
     "machine or an isolated CPU: opcost env --check"),
    ("steal", "steal", "{} batches each", "n", "the hypervisor took the CPU: a dedicated host or vCPU "
     "(opcost env --check)"),
    ("migrations", "migrations", "{} batches each off the pinned CPU", "n",
     "something moved the probe off its CPU: check cpusets and --cpu"),
    ("no steady state", "no steady state", "{} processes each slow to start", "n", "raise --warmup"),
    ("outliers", "outliers", "{} processes each", "n", "lone processes off the median, which is robust to them"),
    ("multiplexed", "multiplexed", "", "", "counters shared the PMU and were scaled: ask for fewer"),
    ("wall time", "wall time differs", "{} over the figure", "spct",
     "the median leaves out the waiting for a CPU (docs/statistics.md)"),
    ("boots", "boots", "{} of the variance between boots", "pct", "per boot: --notes"),
    ("iteration", "several operations an iteration", "", "", "per iteration: --notes"),
    ("requested", "requested duration", "", "", "overshoot per op: --notes"),
    ("xstate", "xstate area", "", "", "which components (RFBM) and the area's bytes: --notes"),
)
# Kinds that are the machine's noise: on nearly every benchmark, said once
# as a property of the machine.
_MACHINE_KINDS = {"unstable", "contended", "steal", "migrations", "no steady state", "outliers"}


def _range(vals: list[float], how: str) -> str:
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if how == "pct":
        return fmt_pct(lo) if lo == hi else f"{lo * 100:.1f}-{hi * 100:.1f}%"
    if how == "spct":
        return f"{lo:+.1%}" if lo == hi else f"{lo:+.1%} to {hi:+.1%}"
    return f"{lo:.0f}" if lo == hi else f"{lo:.0f}-{hi:.0f}"


def group_notes(notes: list[Note], measured: int) -> str:
    """The notes one line per kind, most telling first (the machine's
    noise, when a noise kind is on nearly every benchmark: at least 3, and
    80% of those measured, said once as a property of the machine): how
    many benchmarks a kind is on (named when at most three), the range of
    its figure, and the one thing to do. A kind on one benchmark is that
    benchmark's note as --notes prints it."""
    by_kind: dict[str, list[Note]] = {}
    for n in notes:
        by_kind.setdefault(n.kind, []).append(n)
    spec = {k[0]: k[1:] for k in _KINDS}
    lines: list[tuple[float, str]] = []
    for kind, group in by_kind.items():
        rank = [k[0] for k in _KINDS].index(kind) if kind in spec else len(_KINDS)
        names = list(dict.fromkeys(n.name for n in group if n.name))
        if len(group) == 1:
            lines.append((rank, group[0].text))
            continue
        title, figure, how, todo = spec.get(kind, (kind, "", "", "see --notes"))
        span = _range([n.value for n in group if n.value is not None], how)
        of = max(measured, len(names))
        machine = kind in _MACHINE_KINDS and len(names) >= 3 and len(names) >= 0.8 * of
        line = (f"this machine: {title} in {len(names)} of {of} benchmarks" if machine else
                f"{title}: {len(names)} of {of} benchmarks" + (f" ({', '.join(names)})" if len(names) <= 3 else ""))
        if span == "1":      # "1 process each", not "1 processes each"
            figure = figure.replace("processes", "process").replace("batches", "batch")
        line += (", " + figure.format(span) if figure and span else "") + (f"; {todo}" if todo else "")
        lines.append((4.5 if machine else rank, line))
    return (f"notes (one line per kind; all {len(notes)}, per benchmark: --notes, and every export):\n"
            + "\n".join("  " + ln for _, ln in sorted(lines, key=lambda x: x[0])))


def _disturbed_note(disturbed: dict[int, int], measured: int) -> Note:
    """Rounds that were outliers in several benchmarks: said once, for the whole run."""
    counts = set(disturbed.values())
    which = (f"{'rounds' if len(disturbed) > 1 else 'round'} {', '.join(str(r + 1) for r in disturbed)} "
             f"{'were' if len(disturbed) > 1 else 'was'} an outlier in {counts.pop()}" if len(counts) == 1 else
             "rounds " + ", ".join(f"{r + 1} ({n})" for r, n in disturbed.items()) + " were outliers in that many")
    return Note("disturbed", "", f"{which} of {measured} benchmarks: the machine was disturbed then, not one benchmark")


def disturbed_rounds(results: list[dict]) -> tuple[dict[int, int], int]:
    """Rounds that were outliers in most of a run's benchmarks (at least 3,
    and at least half of those measured): the machine, not a benchmark, was
    slow then. {round: benchmarks it was an outlier in}, and how many
    benchmarks were measured."""
    measured = [r for r in results if Summary.of(r).n_processes]
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


def format_counters(name: str, s: Mapping) -> str:
    """One table per result: a row per event, a column per modifier (all, u,
    k); a cell is the per-op value, `*` marks a multiplexed (scaled) value,
    `n/s` an event this machine cannot count; reasons and derived metrics
    follow."""
    vals = s.get("counters") or {}
    reasons = s.get("counter_reasons", {})
    sources = s.get("counter_sources", {})
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
        if isinstance(v, (int, float)) and full in sources:
            cell = f"{v:.3f}" if v else "0"    # exact counts: the window's fixed part shows in the 3rd decimal
        elif isinstance(v, (int, float)):
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
    by_source: dict = {}
    for full, how in sources.items():
        if full in vals:
            by_source.setdefault(how, []).append(full)
    for how, names in by_source.items():
        notes.append(f"{', '.join(display_name(n) for n in names)}: exact, from the {how}")
    by_reason: dict = {}
    for full, why in reasons.items():
        tag = "<not supported>: " if vals.get(full) == "<not supported>" else ""
        by_reason.setdefault(tag + why, []).append(full)
    for why, names in by_reason.items():
        notes.append(f"{', '.join(display_name(n) for n in names)}: {why}")
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


def _cycles(x: float) -> str:
    t = f"{x:.0f}"
    return "0" if t == "-0" else t


def _sv_fmt(col: str, x: float | None) -> str:
    return ("-" if x is None else _cycles(x)) if col.startswith("cycles") else fmt_ns(x)


def _savings_table(e: Entry) -> str:
    """Seed 000's savings, one line per quantity: A, B, the saving A-B and
    (A-B)/A, each with its 95% bootstrap CI where the processes are known;
    "spans 0" where the saving's CI contains zero (not shown to differ)."""
    sv = e.savings or {}
    ci_d, ci_i, span = sv.get("ci95_difference") or {}, sv.get("ci95_improvement") or {}, sv.get("spans_zero") or {}
    rows = [["per " + (e.op or "op"), "A", "B", "saving A-B", "95% CI", "(A-B)/A", "95% CI", ""]]
    for c in sv["A"]:
        d, i = ci_d.get(c), ci_i.get(c)
        rows.append([c, _sv_fmt(c, sv["A"][c]), _sv_fmt(c, sv["B"][c]), _sv_fmt(c, sv["difference"][c]),
                     f"[{_sv_fmt(c, d[0])}, {_sv_fmt(c, d[1])}]" if d else "-", fmt_pct(sv["improvement"][c]),
                     f"[{fmt_pct(i[0])}, {fmt_pct(i[1])}]" if i else "-", "spans 0" if span.get(c) else ""])
    if not any(r[-1] for r in rows[1:]):
        rows = [r[:-1] for r in rows]
    text = _table(rows, right=set(range(1, 7)))
    seed = sv.get("seed")
    if seed:
        text += "\n" + _seed_line("user+system saved", seed)
    return text


def _seed_line(what: str, f: dict) -> str:
    """"user+system saved per switch: 12.3 ns [4.1 ns, 20.5 ns] = 32 cycles [11, 53]"."""
    ci = f.get("ci95_ns")
    line = f"{what} per {f['per']}: {fmt_ns(f['saving_ns'])}" + (f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else "")
    if f.get("saving_cycles") is not None:
        cc = f.get("ci95_cycles")
        line += f" = {_cycles(f['saving_cycles'])} cycles" + (f" [{_cycles(cc[0])}, {_cycles(cc[1])}]" if cc else "")
    if f.get("spans_zero"):
        line += " (the CI spans 0: not shown to differ)"
    return line


def _system_wide_text(doc: dict) -> str:
    lines = ["system-wide (seed 000: the fp=child and fp=parent variants summed, user+system of the measuring "
             "side; cycles at the TSC rate; 95% bootstrap CIs over the four arms' processes):"]
    for f in doc["system_wide"]:
        ob, ci = f.get("of_b"), f.get("ci95_of_b")
        lines.append(f"  {printable(f['bench'])} ({printable(f['child'])} + {printable(f['parent'])}): "
                     + _seed_line("saved", f) + "; "
                     + ("-" if ob is None else fmt_pct(ob)) + (f" [{fmt_pct(ci[0])}, {fmt_pct(ci[1])}]" if ci else "")
                     + " of B's user+system")
    return "\n".join(lines)


def _comparison_head(cmp: Comparison) -> str:
    """What was compared with what: the interleaved arms, or the stored runs of each side."""
    if cmp.interleaved:
        text = (f"A/B, interleaved: each round ran one A and one B process in a random order\n"
                f"A: {_params_text(cmp.a.get('params'))}\nB: {_params_text(cmp.b.get('params'))}")
        if cmp.aa:
            text += "\nA/A run: A and B are identical, so any difference below is noise."
        return text

    def name(r):
        return (f"run {r['run_id']}" + (f" ({printable(r['label'])})" if r.get("label") else "")
                + f", {r.get('created', '')}")

    def side(r):
        return name(r) if not r.get("runs") else f"{len(r['runs'])} runs: " + "; ".join(map(name, r["runs"]))

    text = (f"A: {side(cmp.a)}\nB: {side(cmp.b)}\n"
            "not interleaved: A and B ran at different times, so drift between them is part of the difference")
    if cmp.run_level:
        text += ("\nthe run is the unit: each run's figure is the median of its process medians, and the "
                 "verdict rests on the spread between runs")
    return text


def _mitigations_note(e: dict) -> str:
    """What the guests' sysfs said of their mitigations, A against B; where
    sysfs is the same but the kernels' boot logs are not (pti=on on a CPU
    model that claims not to need it), it says so (the header lists them)."""
    mit = e["mitigations"]
    boot = (e.get("guests") or {}).get("boot_mitigations_differ") or {}
    if mit["differ"]:
        said = "; ".join(f"{k}: A {mit['a'].get(k, '-')!r}, B {mit['b'].get(k, '-')!r}" for k in mit["differ"])
    else:
        said = "the same in A and B" + (", but the kernels' boot logs differ (see above)"
                                        if boot.get("only_a") or boot.get("only_b") else "")
    return "guest mitigations (/sys/devices/system/cpu/vulnerabilities): " + said


def _entry_notes(e: Entry, key: str) -> list[str]:
    """The notes under the table of one compared benchmark: the guests'
    mitigations, the counter decided on, what would decide an inconclusive
    one, a size that can show nothing, its flags."""
    notes = []
    if e.mitigations:
        notes.append(f"  {key}: " + _mitigations_note(e.raw))
    on = e.decided_on
    if on:
        d, dci = on["difference"], on.get("ci95_difference")
        notes.append(f"  {key}: decided on {on['counter']} per op ({on.get('source', 'perf')}"
                     + (", exact; per process its smallest batch" if on.get("source") == "emulator" else "")
                     + f"): A {on['a']:.3f}, "
                     f"B {on['b']:.3f}, B-A {d:+.3f} {on['counter'].split(':')[0]}/op"
                     + (f" [{dci[0]:+.3f}, {dci[1]:+.3f}]" if dci else ""))
    if e.inconclusive_for_now:
        sched = e.schedule
        notes.append(f"  {key}: inconclusive: about {e.processes_needed} processes per arm would likely decide it"
                     + (f": rerun with -p {sched}" if sched else f" ({e.schedule_note or 'beyond the 10/20/40 schedule'})"))
    if e.p_floor >= 0.05:
        notes.append(f"  {key}: {e.n_a} and {e.n_b} processes can give no p under 0.05 (the smallest "
                     f"is {e.p_floor:.2g}): no difference can be shown at this size")
    notes += [f"  {key}: {f['text']}" for f in e.flags]
    if e.runs_needed:
        notes.append(f"  {key}: inconclusive: about {e.runs_needed} runs a side would likely decide it")
    return notes


def _comparison_table(cmp: Comparison, color: bool, width: int | None) -> tuple[str, list[str]]:
    """The table, one line per benchmark with its verdict, and the notes on its lines."""
    rows = [["benchmark", "op", "A", "B", "B/A", "95% CI", "p (Holm)", "delta", "verdict"]]
    notes = []
    withheld: dict[str, list[str]] = {}
    for e in cmp.comparisons:
        key = printable(e.key)
        if not e.compared:
            rows.append([key, e.op, "-", "-", "-", "-", "-", "-", "-"])
            notes.append(f"  {key}: {e.status}")
            continue
        est, ci = e.verdict_ratio
        show = (lambda x: f"{x:.3f}") if e.decided_on else fmt_ns
        held = bool(e.ci_scope)   # withheld: a CI and p within the runs, in parentheses (issue 37)
        cell, pc = (f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-"), f"{e.p_adjusted:.2g}"
        rows.append([key, e.op, show(e.median_a), show(e.median_b), f"{est:.4f}",
                     f"({cell})" if held and ci else cell, f"({pc})" if held else pc,
                     fmt_pct(e.delta), _verdict(e.verdict, color)])
        notes += _entry_notes(e, key)
        if e.withheld:
            withheld.setdefault(e.withheld, []).append(key)
    notes += [f"  {', '.join(keys)}: no verdict: {why}" for why, keys in withheld.items()]
    if any(e.ci_scope for e in cmp.comparisons):
        notes.append("  (CI) and (p) in parentheses: within the runs, not a verdict's")
    return _table(rows, right={2, 3, 4, 6, 7}, width=width, drop=(1, 7, 6)), notes


def _comparison_summary(cmp: Comparison) -> str:
    """The geometric mean of B/A over the benchmarks, the verdicts counted, and how they were reached."""
    how = cmp.methods
    return (geomean_text(cmp.summary, cmp.comparisons) + "\n"
            + ("verdicts are B relative to A; p: Welch's t over the runs' log medians, Holm-adjusted across "
               "benchmarks; B/A: the geometric means of the runs' medians" if cmp.run_level else
               f"verdicts are B relative to A, over per-process medians; {how}; p Holm-adjusted across "
               "benchmarks; delta fixed" if how else
               "verdicts are B relative to A; p: twice the smaller of Mann-Whitney U and Kolmogorov-Smirnov "
               "over per-process medians (Bonferroni for taking the smaller), Holm-adjusted across benchmarks"))


def _comparison_details(cmp: Comparison) -> list[str]:
    """Per benchmark seed 000's savings, the system-wide savings, the counters B against A."""
    out = []
    for e in cmp.comparisons:
        sv = e.savings
        if sv is not None:
            per = "per op" if not sv["A"].get("elapsed per switch") else f"per {e.op} ({_switch_count(e)} switches)"
            out.append(f"{printable(e.key)}: " + per
                       + "; user/system from getrusage of the measuring side"
                       + ("; whole system = both sides' user+system" if "whole system" in sv["A"] else "")
                       + "\n" + _savings_table(e))
    if cmp.context.get("system_wide"):
        out.append(_system_wide_text(cmp.context))
    counted = [_counters_comparison(e) for e in cmp.comparisons if e.counters]
    if counted:
        out.append("counters per op, B against A (medians over processes; B/A and B-A with 95% bootstrap CIs over "
                   "processes; *: the CI excludes no change):\n" + "\n".join(counted))
    return out


def format_comparison(doc: dict, color: bool = False, width: int | None = None) -> str:
    """One line per benchmark with its verdict, the geometric mean, then per
    benchmark seed 000's savings table, then notes and environment changes."""
    cmp = Comparison.from_json(doc)
    table, notes = _comparison_table(cmp, color, width)
    out = [_comparison_head(cmp), table]
    # the vm target's kernels (each side's, stored runs too) and emulation, in the header
    out[0] += "".join("\n" + line for line in header_lines(cmp.comparisons, cmp.context.get("emulated")))
    if cmp.sequential:
        out.append(_design_text(cmp))
    if cmp.geomean_ratio is not None:
        out.append(_comparison_summary(cmp))
    out += _comparison_details(cmp)
    if notes:
        out.append("notes:\n" + "\n".join(notes))
    if cmp.context.get("unmatched"):
        out.append("not in both runs (not compared): " + ", ".join(cmp.context["unmatched"]))
    diffs = cmp.context.get("env_differences")
    if diffs is not None:
        out.append("environment differences:\n" + ("\n".join(f"  {d['field']}: {_short(d['a'])} -> {_short(d['b'])}"
                                                          for d in diffs) if diffs else "  none"))
    return "\n\n".join(out)


def format_fleet(doc: dict, color: bool = False, width: int | None = None) -> str:
    """A `fleet ab` (opcost.fleet/1): per benchmark, one line per host (its
    own interleaved A/B: B/A, 95% CI, verdict) and one across hosts (the
    host as the unit), a sentence per benchmark, then the hosts that gave
    no comparison. Each host's full table: `opcost show` of its run. A
    `fleet variants` the same per compared build (B: it, A: the baseline)."""
    hosts = doc["hosts"]
    record = f" (fleet record: run {doc['run_id']})" if doc.get("run_id") is not None else ""
    builds = doc.get("kind") == "variants"
    if builds:
        out = [f"variants on {len(hosts)} host(s), each interleaving its own builds{record}\n"
               f"SOURCE: {printable(str(doc.get('source')))}\nA (baseline): {printable(str(doc.get('baseline')))}; "
               "B: each other build"]
    else:
        out = [f"A/B on {len(hosts)} host(s), each interleaving its own arms{record}"
               f"\nA: {_params_text(doc['a'].get('params'))}\nB: {_params_text(doc['b'].get('params'))}"]
    rows = [["variant" if builds else "benchmark", "host", "run", "B/A", "95% CI", "verdict"]]
    lines = []
    for x in doc["across"]:
        key = printable(x["key"])
        for h in x["hosts"]:
            run = next((r["run_id"] for r in hosts if r["host"] == h["host"]), None)
            ci = h.get("ci95")
            rows.append([key, printable(h["host"]), "-" if run is None else str(run), f"{h['ratio']:.4f}",
                         f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-", _verdict(h["verdict"], color)])
        if not x.get("n_hosts"):
            rows.append([key, "across hosts", "-", "-", "-", "-"])
            lines.append(f"{key}: {x.get('note', 'no host compared it')}")
            continue
        ci = x.get("ci95")
        rows.append([key, "across hosts", "-", f"{x['geomean_ratio']:.4f}",
                     f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-", _verdict(x["verdict"], color)])
        said = ", ".join(f"{v} on {n} of {x['n_hosts']} hosts" for v, n in x["counts"].items() if n)
        lines.append(f"{key}: {said}, geometric mean {x['geomean_ratio']:.4f}"
                     + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "") + f"; across hosts: {x['verdict']}"
                     + (f" ({x['note']})" if x.get("note") else ""))
    out.append(_table(rows, right={2, 3}, width=width, drop=(2,)))
    out.append("\n".join(lines) + "\nacross hosts the host is the unit: the geometric mean of the hosts' B/A, its "
               "95% CI the t-interval over their log ratios, p the one-sample t test, delta "
               + fmt_pct(doc.get("delta_requested") or 0.0) + " fixed; each host's verdict is its own "
               + ("variants'" if builds else "ab's"))
    gone = [f"  {printable(r['host'])}: {r['status']}" + (f": {printable(str(r['reason']))}" if r.get("reason") else "")
            for r in hosts if r.get("comparison") is None or r["status"] != "ok"]
    if gone:
        out.append("hosts without a complete comparison:\n" + "\n".join(gone))
    runs = [str(r["run_id"]) for r in hosts if r.get("run_id") is not None]
    if runs:
        out.append("each host's own table: opcost show RUN (runs " + ", ".join(runs) + ")")
    return "\n\n".join(out)


def _signed(x: float) -> str:
    return "0" if x == 0 else f"{x:+.4g}"


def _ci_text(ci, fmt) -> str:
    if not ci:
        return "-"
    lo, hi = ("-inf" if ci[0] is None else fmt(ci[0])), ("inf" if ci[1] is None else fmt(ci[1]))
    return f"[{lo}, {hi}]"


def _counters_comparison(e: Entry) -> str:
    """One benchmark's counters, A against B: a row per event (`event
    (helper)` for the helper's side), unsupported ones flagged with why."""
    rows = [["event", "A", "B", "B/A", "95% CI", "B-A", "95% CI"]]
    notes = []
    for name, c in (e.counters or {}).items():
        shown = display_name(name)
        if c["status"] != "ok":
            def cell(v):
                return "n/s" if v == "<not supported>" else "n/c" if v == "<not counted>" else \
                    "-" if v is None else _num(v) if isinstance(v, (int, float)) else str(v)
            what = {"unsupported": "unsupported here", "not counted": "not counted"}.get(c["status"], c["status"])
            rows.append([shown, cell(c.get("a")), cell(c.get("b")), "-", what, "-", ""])
            if c.get("reason"):
                notes.append(f"{shown}: {what}: {c['reason']}")
            continue
        star = "*" if c.get("differs") else ""
        r = c.get("ratio")
        rows.append([shown, _num(c["a"]), _num(c["b"]), "-" if r is None else f"{r:.4f}{star if r is not None else ''}",
                     _ci_text(c.get("ci95_ratio"), lambda x: f"{x:.4f}"),
                     _signed(c["difference"]) + (star if r is None else ""),
                     _ci_text(c.get("ci95_difference"), _signed)])
        for k in ("note", "partial"):
            if c.get(k):
                notes.append(f"{shown}: {c[k]}")
    table = _table(rows, right={1, 2, 3, 5})
    return "\n".join([f"  {printable(e.key)} (per {e.op or 'op'})"] + ["    " + ln for ln in table.splitlines()]
                     + ["    " + n for n in notes])


def _design_text(cmp: Comparison) -> str:
    """The sequential design: its looks and levels, and where each benchmark
    stopped: "stopped after 20 processes per arm (look 2 of 3): slower"."""
    d = cmp.context["design"]
    planned = d["planned"]
    lines = [f"sequential design: looks after {', '.join(str(lk['processes_per_arm']) for lk in planned)} processes "
             f"per arm ({d['spending']} alpha spending); significant at p (Holm) under "
             + ", ".join(f"{lk['p_level']:.2g}" for lk in planned) + ";\n"
             "a verdict is settled when significant with its CI at that level clear of +/- delta, "
             "or when that CI lies inside +/- delta; the CI shown is that CI at the stopping look's level "
             "(a repeated confidence interval: 95% at every look at once, so also where the run stopped)"]
    n = len(planned)
    for e in cmp.comparisons:
        q = e.sequential
        if not q:
            continue
        if q["processes_per_arm"] not in d["stages"]:
            where = f"the run ended before look {q['look']} of {n}"
        else:
            where = f"look {q['look']} of {n}" + (", where the run ended" if q["settled"] == "the run ended here" else "")
        lines.append(f"  {printable(e.key)}: stopped after {q['processes_per_arm']} processes per arm "
                     f"({where}): {e.verdict}")
    return "\n".join(lines)


def _switch_count(e: Entry) -> int:
    a = (e.savings or {})["A"]
    return round(a["elapsed"] / a["elapsed per switch"]) if a.get("elapsed per switch") else 0


def _short(v, width: int = 60) -> str:
    t = str(v)
    return t if len(t) <= width else t[: width - 3] + "..."


_MODE_TEXT = {"program": "whole program, each run timed like time(1): elapsed from fork to wait, "
                         "user and system from wait4",
              "op": "opcost_op called in a dependent chain inside the probe; loop and clock overhead "
                    "subtracted, the call itself not"}


def rel_path(p: str) -> str:
    try:
        return os.path.relpath(p)
    except ValueError:
        return str(p)


def format_variants(doc: dict, results: list[dict], color: bool = False, width: int | None = None,
                    all_notes: bool = True) -> str:
    """`opcost variants`: how the builds were made and run, their table, the
    call overhead (op mode), and each build compared with the first."""
    info = doc["variants"]
    head = (f"{rel_path(info['source'])}: {info['mode']} mode ({_MODE_TEXT[info['mode']]})\n"
            f"built with: {info['cc']} {info['cflags']} -DNAME".rstrip())
    own = {re.split(r" (?:cpu|kernel|cmdline)=", b["name"])[0]: b["cflags_for"] for b in info.get("builds", [])
           if b.get("cflags_for")}
    if own:
        head += "\n" + "; ".join(f"{name} also {flags}" for name, flags in own.items()) + " (--cflags-for)"
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
    if info.get("machines"):
        head += (f"\none row per build and machine ({len(info['machines'])} machines, each boot in QEMU the unit); "
                 + ("the build on each machine is compared with it on the first" if info.get("compared") ==
                    "across machines" else "each machine's builds are compared with that machine's first"))
    out = [head, format_results(results, width, all_notes)]
    ovh = info.get("call_overhead")
    if ovh and ovh.get("median_ns") is not None:
        net = ", ".join(f"{b['name']} {fmt_ns(b.get('net_median_ns'))}" for b in info["builds"])
        out.append(f"call overhead: {REFERENCE_NAME} costs {fmt_ns(ovh['median_ns'])} per call "
                   f"({ovh['median_cycles']:.1f} cycles); net of it: {net}.\n"
                   "The comparisons below include the call.")
    compared = Comparison.from_json(doc).comparisons
    if compared:
        others = len(compared)
        out.append(f"interleaved: every round ran one process of each variant in a random order\n"
                   f"A (baseline): {doc['a']['params']}; verdicts are each other variant relative to A"
                   + (f", p Holm-adjusted across the {others} comparisons" if others > 1 else "")
                   + "".join("\n" + line for line in header_lines(compared, doc.get("emulated"),
                                                                  ("A (baseline)", "B"))))
        out.append(format_comparison(doc, color=color, width=width).split("\n\n", 1)[1])
    else:
        out.append("one variant: measured alone, nothing to compare (give a second -D to compare with it)")
    return "\n\n".join(out)


def _chg(c: dict | None) -> str:
    """`+9.9% [+9.5%, +10.3%]`: a change with its 95% CI."""
    if not c:
        return "-"
    ci = c.get("ci95_change")
    text = f"{c['change'] * 100:+.1f}%"
    return text + (f" [{ci[0] * 100:+.1f}%, {ci[1] * 100:+.1f}%]" if ci else "")


def _change_points_text(s: Series, color: bool) -> str:
    """Each change point with its size, CI, verdict, segments and neighbours;
    or why none is given (withheld), or that none was confirmed."""
    if s.change_points:
        lines = []
        for c in s.change_points:
            nb = c.neighbours
            lines.append(
                f"  > {_short(printable(c.label), 40)} (label {c.index + 1}, after {_short(printable(c.previous), 40)}): "
                f"{_chg(c.raw)} {_verdict(c.verdict, color)}" + (" unconfirmed" if c.unconfirmed else "")
                + f", p {c.p_adjusted:.2g} (Holm), delta {fmt_pct(c.delta)}\n"
                f"    segments {_seg(c.left)} vs {_seg(c.right)}"
                + (f"\n    unconfirmed: {printable(c.confirm or '')}" if c.unconfirmed else "")
                + (f"\n    the two labels either side alone: {(nb['ratio'] - 1) * 100:+.1f}% "
                   f"{_verdict(nb['verdict'], color)}" if nb else ""))
        return (f"change points ({len(s.change_points)}; > marks the label where the new level begins):\n"
                + "\n".join(lines))
    if s.withheld:
        held = s.withheld_change_points
        return (f"change points: withheld: {printable(s.withheld)}"
                + (f"\n  ({len(held)} found, not given: " + ", ".join(
                    f"{_short(printable(c.label), 40)} (label {c.index + 1})" for c in held) + ")" if held else ""))
    return f"change points: none (no step of at least {fmt_pct(s.delta_requested)} confirmed)"


def _series_method(s: Series) -> str:
    """How the change points were found and confirmed, and the candidates rejected."""
    nz, cand = s.noise, s.candidates
    cal = cand.get("calibration")
    pen_from = (f"penalty {cand['penalty']:.3g}, the larger of the noise's and the one calibrated by permuting "
                f"labels ({cal['penalty']:.3g}: {cal['method']}; p of any change {cal['p_any_change']:.3g}) "
                f"(noise sigma {nz['sigma'] * 100:.2f}% of log-median"
                if cal else f"penalty {cand['penalty']:.3g} from the noise (sigma {nz['sigma'] * 100:.2f}% of log-median")
    method = (f"method: {cand['method']}, {pen_from}, {nz['method']}); each candidate compared between "
              "the segments either side ("
              + ("Welch's t over the runs' log medians: the run is the unit" if s.run_level else
                 "Mann-Whitney U and KS over per-process medians") + ", Holm over the candidates)")
    if s.rejected:
        method += "\ncandidates rejected: " + "; ".join(
            f"{_short(printable(r.label), 30)} ({_chg(r.raw)}: {r.why})" for r in s.rejected)
    return method


def format_series(doc: dict, color: bool = False) -> str:
    """Seed 003's table: one line per label (processes, median with 95% CI,
    change vs the previous label and vs the first), change points marked
    `>`; then each change point with its size, CI and verdict, what was
    rejected, the noise, and notes. First, what its labels ran on when in a
    vm (guests.series_lines: the kernel, emulation)."""
    s = Series.from_json(doc)
    ran = series_lines(doc)
    out = ["\n".join(printable(ln) for ln in ran)] if ran else []
    head = f"{printable(s.spec)} by {printable(s.by)}, {len(s.labels)} labels"
    if s.interleaved:
        head += ", interleaved: each round ran every label once, in a fresh random order"
    else:
        head += ("\nnot interleaved: the labels ran at different times, so drift between them is part of "
                 "each change")
    out.append(head)
    if s.differing:
        out.append("parameters that differ between labels:\n" + "\n".join(
            f"  {printable(k)}: {', '.join(printable(str(v)) for v in vals)}" for k, vals in s.differing.items()))
    flagged = s.flagged
    rows = [["", printable(s.by), "n", "median", "95% CI", "vs previous", "vs first"] + (["flags"] if flagged else [])]
    for lb in s.labels:
        rows.append([">" if lb.change_point else "", _short(printable(lb.value), 40), str(lb.n_processes),
                     fmt_ns(lb.median_ns), _ci(lb.raw), _chg(lb.vs_previous), _chg(lb.vs_first)]
                    + ([series_flags(lb)] if flagged else []))
    out.append(_table(rows, right={2, 3, 5, 6}))
    out.append(_change_points_text(s, color))
    out.append(_series_method(s))
    flag_notes = [f"  {_short(printable(lb.value), 40)}: {printable(f['flag'])}"
                  + (f": {printable(f['detail'])}" if f.get("detail") else "")
                  + (f" (run {f['run']})" if f.get("run") is not None else "")
                  for lb in s.labels for f in lb.flags]
    if flag_notes:
        out.append("flags of the labels (their figures are less trustworthy; re-measure them):\n"
                   + "\n".join(flag_notes))
    if s.notes:
        out.append("notes:\n" + "\n".join(f"  {printable(n)}" for n in s.notes))
    return "\n\n".join(out)


def series_flags(lb: SeriesLabel) -> str:
    """A label's flags in the series table: their names, once each."""
    return ",".join(dict.fromkeys(printable(n) for n in lb.flag_names))


def _seg(s: dict) -> str:
    span = _short(printable(s["first"]), 30) if s["n_labels"] == 1 else f"{_short(printable(s['first']), 30)}..{_short(printable(s['last']), 30)}"
    return f"{span} ({s['n_labels']} label{'s' if s['n_labels'] != 1 else ''}, {s['n_processes']} processes)"
