"""`html`: one self-contained page a reviewer opens to see distributions
rather than read them: the summary table, the plots (SVG drawn by
matplotlib, inline), counters per op and the environment.

What it takes:
- an opcost.result/1 document (one run): per variant a plot of its batches
  per process and of the per-process medians with the 95% CI of their median;
- several result documents (`serialize_runs`, e.g. 1,000 stored runs): one
  plot per benchmark across the runs (per run the median and its CI, the
  per-process medians, and the batches as their 5-95% and 25-75% ranges), so
  the page stays one plot per benchmark however many runs;
- an opcost.comparison/1 document: the B/A ratio of every benchmark with its
  95% CI against the delta band, and per benchmark the per-process medians of
  A and B;
- an opcost.series/1 document: per series the median and CI at each label in
  order, change points marked between the labels they separate. The series
  schema belongs to the series command; this reader takes what it finds
  (see `_series_list`) and ignores the rest.

Safety: the page loads nothing (no script, font, style sheet or image from
anywhere; a Content-Security-Policy in the page forbids it and any script
at all); every text that came from a user, a store or the machine (labels,
parameters, hosts, commits, environment values) is escaped, in the tables by
html.escape and in the plots by matplotlib's SVG writer, with mathtext off so
that `$...$` in a label is text, not a formula.

Deterministic: the same document gives the same bytes (ASCII: other
characters as references; a fixed svg.hashsalt per plot, no dates in the
SVG, jitter from a seeded RNG), so tests/golden holds pages.

matplotlib is imported here, inside the functions, only when a page is made
(`pip install 'opcost[report]'`); `available()` says before measuring
whether it can be.
"""

from __future__ import annotations

import html as _html
import importlib.util
import io
import json
import math
import re
from typing import Any, Iterable, TypeGuard

from ..counters import split_name
from ..errors import UsageError
from ..guests import header_lines, result_lines, series_lines
from ..model import SERIES_SCHEMA, Comparison, Entry, Summary, geomean_text, process_medians, result_key
from ..tables import fmt_ns
from ..safetext import printable

NAME = "html"
KINDS = ("result", "comparison", "series")
# Drawn once, at the end of a run: rewriting the page after every process
# (as --json is) would put matplotlib in the measuring loop's way.
LIVE = False

MISSING = ("the html format draws its plots with matplotlib, which is not installed: "
           "pip install 'opcost[report]' (or pip install matplotlib)")

CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
       "form-action 'none'")

# How much a plot shows before it thins its points (deterministic stride),
# and says so under the plot.
MAX_BATCH_POINTS = 2000      # batches in one variant's plot
MAX_PROCESS_ROWS = 30        # processes drawn as their own row of batches
MAX_MEDIAN_POINTS = 5000     # per-process medians in one across-runs plot
MAX_TICKS = 24               # labelled ticks on a run or label axis

_A, _B = "#3b6ea8", "#d0763a"
_VERDICT_COLORS = {"faster": "#2e8540", "slower": "#c0392b", "same": "#777777", "negligible": "#999999",
                   "inconclusive": "#b8860b", None: "#555555"}
_RC: Any = {"svg.fonttype": "none", "text.parse_math": False, "text.usetex": False, "font.size": 9,
       "font.family": "DejaVu Sans", "axes.titlesize": 9, "axes.labelsize": 9, "xtick.labelsize": 8,
       "ytick.labelsize": 8, "svg.image_inline": True, "path.simplify": True, "figure.dpi": 72,
       "axes.spines.top": False, "axes.spines.right": False}


def available() -> str | None:
    """None when a page can be drawn here, else the one line saying what to
    install. Looks for matplotlib without importing it (`--export html:`
    is checked before anything is measured)."""

    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else MISSING


def serialize(doc: dict) -> bytes:
    """The page of one document: a run, a comparison or a series."""
    if doc.get("schema") == SERIES_SCHEMA:
        return _render(lambda p: _series_page(p, doc))
    if "comparisons" in doc:
        return _render(lambda p: _comparison_page(p, doc))
    return _render(lambda p: _run_page(p, doc))


def serialize_stored(doc: dict, cdoc: dict) -> bytes:
    """A stored `ab`, `variants` or `series --run` run (`doc`) as the command
    printed it: the page of its comparison or series `cdoc` (rebuilt from
    the stored plan), saying which run it is."""
    if cdoc.get("schema") == SERIES_SCHEMA:
        return _render(lambda p: _series_page(p, cdoc, run=doc))
    return _render(lambda p: _comparison_page(p, cdoc, run=doc))


def serialize_runs(docs: Iterable[dict]) -> bytes:
    """The page of several runs (opcost.result/1 documents, in the order to
    show): one run as in `serialize`; more runs aggregated per benchmark,
    each document reduced as it arrives (give a generator to hold one run's
    samples at a time)."""
    it = iter(docs)
    first = next(it, None)
    if first is None:
        raise UsageError("no runs to report on")
    second = next(it, None)
    if second is None:
        return serialize(first)
    digests = [_RunDigest(first), _RunDigest(second)]
    del first, second
    digests.extend(_RunDigest(d) for d in it)
    return _render(lambda p: _runs_page(p, digests))


# --- text ----------------------------------------------------------------------

def esc(x: Any) -> str:
    """Any value as safe HTML text on one line (control characters shown
    as escapes, as the terminal tables show them)."""
    return _html.escape(printable("" if x is None else x), quote=True)


def _plain(x: Any, limit: int = 0) -> str:
    """Text for a plot: one line, printable, optionally shortened. matplotlib
    escapes it for SVG; this only keeps it short and legible."""
    s = printable("" if x is None else x)
    return s if not limit or len(s) <= limit else s[:limit - 1] + "…"


def _pct(x: Any) -> str:
    return "-" if not isinstance(x, (int, float)) else f"{x * 100:.1f}%"


def _num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return esc(v)
    return "0" if v == 0 else f"{v:.4g}"


def _ci_text(ci: Any, fmt=fmt_ns) -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or None in ci:
        return "-"
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _value_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, separators=(", ", ": "), allow_nan=True)


def _params_text(p: Any) -> str:
    if isinstance(p, dict):
        return ", ".join(f"{k}={_value_text(v)}" for k, v in p.items()) or "(defaults)"
    return str(p) if p else "(defaults)"


def _table(head: list[str], rows: Iterable[list[str]], cls: str = "", right: Iterable[int] = ()) -> str:
    """A table of cells already escaped (`esc`) or built from escaped parts."""
    right = set(right)
    th = "".join(f'<th{" class=num" if i in right else ""}>{h}</th>' for i, h in enumerate(head))
    body = "\n".join("<tr>" + "".join(f'<td{" class=num" if i in right else ""}>{c}</td>' for i, c in enumerate(r))
                     + "</tr>" for r in rows)
    return f'<table{f" class={cls}" if cls else ""}>\n<thead><tr>{th}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>'


# --- the page ------------------------------------------------------------------

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; margin: 1.5em auto;
       max-width: 78em; padding: 0 1em; background: #fff; }
h1 { font-size: 1.5em; margin: 0 0 .2em; } h2 { font-size: 1.2em; margin: 1.6em 0 .4em;
  border-bottom: 1px solid #ddd; } h3 { font-size: 1em; margin: 1.2em 0 .3em; }
table { border-collapse: collapse; margin: .4em 0 1em; font-size: 13px; }
th, td { border-bottom: 1px solid #e4e4e4; padding: .2em .6em; text-align: left; vertical-align: top; }
th { background: #f4f4f6; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td { overflow-wrap: break-word; } table.env td:nth-child(2) { max-width: 50em; }
.faster { color: #2e8540; font-weight: 600; } .slower { color: #c0392b; font-weight: 600; }
.inconclusive { color: #8a6500; } .same, .negligible { color: #555; }
figure { margin: .6em 0 1.2em; } figcaption { font-size: 12px; color: #555; max-width: 60em; }
.plot svg { max-width: 100%; height: auto; display: block; }
.note { color: #555; font-size: 13px; } .muted { color: #777; } code { font-size: 12.5px; }
ul.notes { font-size: 13px; } details > summary { cursor: pointer; color: #335; }
"""


class _Page:
    """Collects the body of one page and draws its plots."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.n_plots = 0
        self.title = "opcost report"

    def add(self, text: str) -> None:
        self.parts.append(text)

    def plot(self, fig: Any, caption: str = "", alt: str = "") -> None:
        """Add the figure as inline SVG under a caption (already escaped)."""
        import matplotlib   # matplotlib: the optional html extra, and not at `opcost --help`

        self.n_plots += 1
        buf = io.StringIO()
        with matplotlib.rc_context({"svg.hashsalt": f"opcost-plot-{self.n_plots}"}):
            fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.05,
                        metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
        svg = buf.getvalue()
        svg = svg[svg.index("<svg"):]            # no XML prolog or DOCTYPE inside HTML
        # matplotlib numbers its groups per figure (figure_1, axes_1...): in one
        # page the ids of each plot get its own prefix, and so do the references.
        prefix = f"f{self.n_plots}-"
        ref = re.compile(r'(\bid="|\bhref="#|url\(#)')
        # Only inside tags: text content (a label saying id="x") has its `<` and `>` escaped.
        svg = re.sub(r"<[^<>]*>", lambda t: ref.sub(lambda m: m.group(1) + prefix, t.group(0)), svg)
        label = f' role="img" aria-label="{esc(alt)}"' if alt else ""
        self.add(f'<figure><div class="plot"{label}>\n{svg}</div>'
                 + (f"<figcaption>{caption}</figcaption>" if caption else "") + "</figure>")

    def html(self) -> str:
        import matplotlib   # matplotlib: the optional html extra, and not at `opcost --help`

        foot = (f'<p class="note">Made by opcost. Plots drawn by matplotlib {esc(matplotlib.__version__)}; '
                "this page loads nothing from anywhere and runs no script.</p>")
        return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
                '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
                '<meta name="referrer" content="no-referrer">\n'
                f"<title>{esc(self.title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
                + "\n".join(self.parts) + "\n" + foot + "\n</body>\n</html>\n")


def _render(build) -> bytes:
    try:
        import matplotlib   # matplotlib: the optional html extra (its absence is said), and not at `opcost --help`
        from matplotlib.figure import Figure  # noqa: F401  (the OO API: no pyplot, no global figures)
    except ImportError:
        raise UsageError(MISSING) from None
    page = _Page()
    with matplotlib.rc_context(_RC):
        build(page)
        # ASCII only: any other character as a reference (&#8230;), so the page
        # reads the same whatever charset a viewer or a tool assumes.
        return page.html().encode("ascii", "xmlcharrefreplace")


def _figure(width: float, height: float):
    from matplotlib.figure import Figure   # matplotlib: the optional html extra, and not at `opcost --help`

    return Figure(figsize=(width, height), layout="constrained")


def _unit(values: Iterable[float]) -> tuple[float, str]:
    """Divisor and unit that keep the axis numbers short."""
    vals = [abs(v) for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    top = max(vals) if vals else 0.0
    return (1e6, "ms") if top >= 1e6 else (1e3, "us") if top >= 1e3 else (1.0, "ns")


def _axis_top(values: Iterable[float]) -> tuple[float, float, int, float] | None:
    """Where a linear axis stops so that a few far points (contended
    batches) do not squash the rest: at Tukey's far-out fence, the 75th
    percentile plus three times the interquartile range. None when no point
    lies beyond it (the axis shows them all); else (the axis's low end, its
    top, how many points lie above the top, the largest), which the caption
    says."""
    vals = sorted(v for v in values if isinstance(v, (int, float)) and math.isfinite(v))
    if len(vals) < 10:
        return None

    def q(f: float) -> float:
        x = f * (len(vals) - 1)
        i = int(x)
        return vals[i] if i + 1 >= len(vals) else vals[i] + (vals[i + 1] - vals[i]) * (x - i)

    q25, q75 = q(0.25), q(0.75)
    top = max(q75 + 3 * (q75 - q25), q75 * 1.05 if q75 > 0 else q75)
    above = [v for v in vals if v > top]
    if not above:
        return None
    lo = vals[0]
    pad = 0.04 * (top - lo)
    return lo - pad, top + pad, len(above), above[-1]


def _cut_text(cut: tuple[float, float, int, float] | None) -> str:
    """"; the axis stops at ...: 3 points above it, up to 120.0 us": what a robust axis left out."""
    if cut is None:
        return ""
    _, top, n, hi = cut
    return (f"; the axis stops at {fmt_ns(top)} (the 75th percentile plus three times the interquartile range), "
            f"{n} point{'s' if n != 1 else ''} above it, up to {fmt_ns(hi)}")


def _thin(xs: list, limit: int) -> tuple[list, bool]:
    """At most `limit` items by a fixed stride (deterministic), and whether any went."""
    if len(xs) <= limit:
        return xs, False
    step = len(xs) / limit
    return [xs[int(i * step)] for i in range(limit)], True


def _ticks(n: int, limit: int = MAX_TICKS) -> list[int]:
    if n <= limit:
        return list(range(n))
    step = math.ceil(n / limit)
    return list(range(0, n, step))


# --- one run -------------------------------------------------------------------

def _measured(r: dict) -> list[list[float]]:
    """Per process, its measured batches' ns per op."""
    out = []
    for p in r.get("processes") or []:
        xs = [s["ns_per_op"] for s in p.get("samples") or []
              if isinstance(s, dict) and not s.get("warmup") and isinstance(s.get("ns_per_op"), (int, float))]
        if xs:
            out.append(xs)
    return out


def _run_title(doc: dict) -> str:
    t = f"run {doc['run_id']}" if doc.get("run_id") is not None else "run (not stored)"
    if doc.get("label"):
        t += f" ({printable(doc['label'])})"
    return t


def _run_page(page: _Page, doc: dict) -> None:
    results = doc.get("results") or []
    page.title = f"opcost: {_run_title(doc)}"
    facts = [f"status {esc(doc.get('status', '?'))}"]
    for k in ("kind", "created", "finished"):
        if doc.get(k):
            facts.append(f"{k} {esc(doc[k])}")
    facts.append(f"opcost {esc(doc.get('opcost_version', '?'))}")
    page.add(f"<h1>{esc(_run_title(doc))}</h1>\n<p class=note>{', '.join(facts)}</p>")
    if doc.get("argv"):
        page.add(f"<p class=note>command: <code>{esc(' '.join(map(str, doc['argv'])))}</code></p>")
    ran = result_lines(results)   # the vm target's kernel, emulation
    if ran:
        page.add("<p class=note>" + "<br>".join(esc(line) for line in ran) + "</p>")
    page.add("<h2>Summary</h2>")
    page.add(_summary_table(results))
    notes = _result_notes(results)
    if doc.get("store_missed"):
        notes.append(f"the store missed part of this run: {esc(doc['store_missed'].get('reason'))}")
    if notes:
        page.add("<ul class=notes>" + "".join(f"<li>{n}</li>" for n in notes) + "</ul>")
    measured = [r for r in results if _measured(r)]
    if measured:
        page.add("<h2>Distributions</h2>\n<p class=note>Each variant: its measured batches (ns per op), one row "
                 "per probe process, and the per-process medians the statistics are taken over, with their median "
                 "(line) and its 95% bootstrap CI (band).</p>")
        for r in measured:
            _variant_plot(page, r)
    _counters_section(page, [(result_key(r), [("", Summary.of(r).raw)]) for r in results])
    page.add("<h2>Environment</h2>")
    page.add(_env_table(doc.get("env") or {}))


def _summary_table(results: list[dict]) -> str:
    head = ["benchmark", "op", "status", "median", "95% CI", "min", "p90", "CV", "cycles", "user/op", "sys/op",
            "cpus", "n"]
    rows = []
    for r in results:
        s = Summary.of(r)
        cyc = s.get("median_cycles")
        cpus = s.get("cpus")
        rows.append([esc(result_key(r)), esc(r.get("op", "")), esc(r.get("status", "")), fmt_ns(s.get("median_ns")),
                     _ci_text(s.get("ci95_ns")), fmt_ns(s.get("min_ns")), fmt_ns(s.get("p90_ns")), _pct(s.get("cv")),
                     "-" if not isinstance(cyc, (int, float)) else f"{cyc:.0f}", *_cpu_cells(s),
                     esc("|".join(map(str, cpus)) if isinstance(cpus, list) else (r.get("params") or {}).get("cpu", "-")),
                     esc(s.get("n_processes", 0))])
    return (_table(head, rows, right={3, 4, 5, 6, 7, 8, 9, 10, 12}) +
            "\n<p class=note>median, CI, min, p90 and CV over per-process medians; cycles at the TSC rate; user/sys "
            "per op from getrusage (measuring side+helper).</p>")


def _cpu_cells(s: Summary) -> list[str]:
    """user/op and sys/op; `measuring side+helper` where a helper takes part."""
    if "helper_user_ns_per_op" in s:
        return [f"{fmt_ns(s.get('user_ns_per_op'))}+{fmt_ns(s.get('helper_user_ns_per_op'))}",
                f"{fmt_ns(s.get('sys_ns_per_op'))}+{fmt_ns(s.get('helper_sys_ns_per_op'))}"]
    return [fmt_ns(s.get("user_ns_per_op")), fmt_ns(s.get("sys_ns_per_op"))]


def _result_notes(results: list[dict]) -> list[str]:
    notes = []
    for r in results:
        s = Summary.of(r)
        name = esc(result_key(r))
        if r.get("status") in ("unsupported", "failed"):
            notes.append(f"{name}: {esc(r['status'])}: {esc(r.get('reason'))}")
        elif not s.get("n_processes"):
            notes.append(f"{name}: not measured")
        for f in s.get("flags") or []:
            if isinstance(f, dict):
                notes.append(f"{name}: {esc(f.get('flag'))}: {esc(f.get('detail') or f.get('text') or '')}")
        if s.get("ops_per_iter"):
            notes.append(f"{name}: one iteration ({esc(s.get('iteration') or 'several operations')}) = "
                         f"{s['ops_per_iter']:.0f} ops: {fmt_ns(s.get('median_ns_per_iter'))} per iteration")
    return notes


def _variant_plot(page: _Page, r: dict) -> None:
    import numpy as np   # numpy: formats load with `opcost --help`, numpy must not

    batches = _measured(r)
    meds = process_medians(r)
    s = Summary.of(r)
    cut = _axis_top([x for b in batches for x in b] + meds)
    div, unit = _unit([x for b in batches for x in b] + meds if cut is None else
                      [x for b in batches for x in b if x <= cut[1]] + [m for m in meds if m <= cut[1]])
    per_row = len(batches) <= MAX_PROCESS_ROWS
    rows = batches if per_row else [[x for b in batches for x in b]]
    total = sum(len(b) for b in rows)
    share = min(1.0, MAX_BATCH_POINTS / total) if total else 1.0
    thinned = share < 1.0
    fig = _figure(7.5, 0.9 + 0.17 * (len(rows) + 2))
    ax = fig.add_subplot()
    rng = np.random.default_rng(0)
    for i, b in enumerate(rows):
        xs, _ = _thin(b, max(1, int(len(b) * share)))
        y = i + 2 + rng.uniform(-0.22, 0.22, len(xs))
        ax.scatter(np.asarray(xs) / div, y, s=9, color=_A, alpha=0.6, linewidths=0)
        if per_row and i < len(meds):   # the process's median: what the statistics take from it
            ax.plot([meds[i] / div] * 2, [i + 1.62, i + 2.38], color="#222", lw=1.2)
    if meds:
        m = np.asarray(meds) / div
        q1, q2, q3 = np.percentile(m, [25, 50, 75])
        ax.add_patch(_rect(q1, 0.7, q3 - q1, 0.6))
        ax.plot([m.min(), q1], [1, 1], color="#555", lw=1)
        ax.plot([q3, m.max()], [1, 1], color="#555", lw=1)
        ax.scatter(m, 1 + rng.uniform(-0.15, 0.15, m.size), s=16, color="#222", zorder=3, linewidths=0)
    med = s.get("median_ns")
    ci = s.get("ci95_ns")
    if isinstance(ci, list) and len(ci) == 2 and None not in ci:
        ax.axvspan(ci[0] / div, ci[1] / div, color=_B, alpha=0.18, lw=0)
    if isinstance(med, (int, float)):
        ax.axvline(med / div, color=_B, lw=1.3)
    labels = ["process medians"] + ([f"process {i + 1}" for i in range(len(rows))] if per_row else ["all batches"])
    ticks = list(range(1, len(rows) + 2))
    keep = set(_ticks(len(ticks), 12))
    ax.set_yticks([t for i, t in enumerate(ticks) if i in keep], [lb for i, lb in enumerate(labels) if i in keep])
    ax.set_ylim(len(rows) + 1.6, 0.4)
    if cut is not None:
        ax.set_xlim(cut[0] / div, cut[1] / div)
    ax.set_xlabel(f"{unit} per {_plain(r.get('op') or 'op', 40)}")
    ax.set_title(_plain(result_key(r), 110), loc="left")
    ax.grid(axis="x", color="#eee", lw=0.6)
    cap = (f"{esc(result_key(r))} ({esc(_params_text(r.get('params')))}): {len(batches)} processes, "
           f"{sum(len(b) for b in batches)} batches")
    if not per_row:
        cap += f"; more than {MAX_PROCESS_ROWS} processes, so their batches share one row"
    if thinned:
        cap += f"; {int(total * share)} of the batches drawn (every {1 / share:.1f}th), all of them counted"
    cap += _cut_text(cut)
    page.plot(fig, cap + ".", alt=f"distribution of {result_key(r)}")


def _rect(x: float, y: float, w: float, h: float):
    from matplotlib.patches import Rectangle   # matplotlib: the optional html extra, and not at `opcost --help`

    return Rectangle((x, y), w, h, facecolor="#e8e8ee", edgecolor="#555", lw=1)


# --- counters ------------------------------------------------------------------

def _counters_section(page: _Page, entries: list[tuple[str, list[tuple[str, dict]]]]) -> None:
    """entries: (benchmark key, [(column prefix, summary)]): one table per
    benchmark, a row per event, a column per modifier (and per arm)."""
    blocks = []
    for key, sides in entries:
        events: list[str] = []
        cols: list[tuple[str, str]] = []
        cells: dict = {}
        derived_rows = []
        notes = []
        for side, s in sides:
            vals = s.get("counters") or {}
            running = s.get("counters_running") or {}
            for full, v in vals.items():
                base, mod = split_name(str(full))
                if base not in events:
                    events.append(base)
                if (side, mod) not in cols:
                    cols.append((side, mod))
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    cell = _num(v) + ("*" if full in running else "")
                else:
                    cell = "n/s" if v == "<not supported>" else "n/c" if v == "<not counted>" else esc(v)
                cells[(base, side, mod)] = cell
            for full, frac in running.items():
                if isinstance(frac, (int, float)):
                    notes.append(f"{esc((side + ' ') if side else '')}{esc(full)}: multiplexed "
                                 f"({frac:.0%} running), value scaled")
            for full, why in (s.get("counter_reasons") or {}).items():
                notes.append(f"{esc((side + ' ') if side else '')}{esc(full)}: {esc(why)}")
            for name, d in (s.get("derived") or {}).items():
                if isinstance(d, dict):
                    v = d.get("value")
                    derived_rows.append([esc(f"{side} {name}" if side else name),
                                         _num(v) if isinstance(v, (int, float)) else
                                         f"- ({esc(d.get('reason', 'not available'))})", esc(d.get("expr", ""))])
        if not events:
            continue
        mod_name = {"": "all", "u": "u", "k": "k"}
        head = ["event"] + [esc(f"{side} {mod_name.get(m, m)}" if side else mod_name.get(m, m)) for side, m in cols]
        rows = [[esc(e)] + [cells.get((e, side, m), "") for side, m in cols] for e in events]
        block = f"<h3>{esc(key)}</h3>\n" + _table(head, rows, right=range(1, len(cols) + 1))
        if derived_rows:
            block += _table(["derived", "value", "from"], derived_rows, right={1})
        if notes:
            block += "<ul class=notes>" + "".join(f"<li>{n}</li>" for n in notes) + "</ul>"
        blocks.append(block)
    if blocks:
        page.add("<h2>Counters per op</h2>\n<p class=note>median over processes; u: user space only, k: kernel only, "
                 "all: both; * a multiplexed (scaled) value; n/s not supported here, n/c never counted.</p>")
        page.add("\n".join(blocks))


# --- environment ---------------------------------------------------------------

def _env_rows(env: dict) -> list[tuple[str, str, str]]:
    out = []
    for k, v in env.items():
        if isinstance(v, dict) and "value" in v:
            out.append((str(k), _value_text(v.get("value")), str(v.get("source") or "")))
        else:
            out.append((str(k), _value_text(v), ""))
    return out


def _env_table(env: dict) -> str:
    return _env_rows_table(_env_rows(env) if isinstance(env, dict) else [])


def _env_rows_table(rows: list[tuple[str, str, str]]) -> str:
    if not rows:
        return "<p class=note>no environment recorded</p>"
    return _table(["field", "value", "source"], ([esc(k), esc(v), f"<span class=muted>{esc(s)}</span>"]
                                                 for k, v, s in rows), cls="env")


# --- several runs --------------------------------------------------------------

class _RunDigest:
    """What the page of many runs keeps of one run: its facts, its
    environment as rows, and per result the figures its plot needs (median,
    CI, per-process medians, batch quantiles), not its samples; so a report
    over 1,000 runs holds one run's samples at a time."""

    __slots__ = ("run_id", "label", "created", "status", "kind", "n_results", "env", "rows", "title")

    def __init__(self, doc: dict) -> None:
        import numpy as np   # numpy: formats load with `opcost --help`, numpy must not

        self.run_id = doc.get("run_id")
        self.label = doc.get("label")
        self.created = doc.get("created")
        self.status = doc.get("status", "")
        self.kind = doc.get("kind")
        self.title = _run_title(doc)
        env = doc.get("env")
        self.env = _env_rows(env) if isinstance(env, dict) else []
        results = doc.get("results") or []
        self.n_results = len(results)
        self.rows: list[tuple[str, str, dict]] = []
        for r in results:
            b = _measured(r)
            flat = np.fromiter((x for p in b for x in p), dtype=float)
            s = Summary.of(r)
            meds = process_medians(r)
            med = s.get("median_ns") if isinstance(s.get("median_ns"), (int, float)) else (
                float(np.median(meds)) if meds else None)
            self.rows.append((result_key(r), str(r.get("op") or ""), {
                "median": med, "ci": s.get("ci95_ns"), "meds": meds,
                "q": np.percentile(flat, [5, 25, 75, 95]).tolist() if flat.size else None,
                "n": len(b), "batches": int(flat.size)}))


def _runs_page(page: _Page, digests: Iterable[_RunDigest]) -> None:
    import numpy as np   # numpy: formats load with `opcost --help`, numpy must not

    runs = list(digests)       # each digest made as its run arrives; the run itself is gone
    page.title = f"opcost: {len(runs)} runs"
    page.add(f"<h1>{len(runs)} runs</h1>\n<p class=note>in this order: "
             f"{esc(runs[0].title)} \u2026 {esc(runs[-1].title)}</p>")
    # benchmark key -> its rows, each with the index of its run
    agg: dict[str, list[dict]] = {}
    ops: dict[str, str] = {}
    for i, d in enumerate(runs):
        for k, op, row in d.rows:
            agg.setdefault(k, []).append({**row, "run": i})
            ops.setdefault(k, op)
    n_batches = sum(x["batches"] for rows in agg.values() for x in rows)
    page.add("<h2>Summary per benchmark</h2>")
    head = ["benchmark", "op", "runs", "median of run medians", "lowest run median", "highest run median",
            "last run median", "processes", "batches"]
    trows = []
    for k, rows in agg.items():
        meds = [x["median"] for x in rows if x["median"] is not None]
        trows.append([esc(k), esc(ops[k]), str(len(rows)), fmt_ns(float(np.median(meds)) if meds else None),
                      fmt_ns(min(meds) if meds else None), fmt_ns(max(meds) if meds else None),
                      fmt_ns(rows[-1]["median"]), str(sum(x["n"] for x in rows)), str(sum(x["batches"] for x in rows))])
    page.add(_table(head, trows, right={2, 3, 4, 5, 6, 7, 8}))
    page.add(f"<h2>Across runs</h2>\n<p class=note>One plot per benchmark over the {len(runs)} runs: per run the "
             "median over its processes with its 95% CI (line and band), the per-process medians (dots), and its "
             f"batches as their 5\u201395% (thin) and 25\u201375% (thick) ranges: all {n_batches} batches are "
             "summarised, none drawn one by one.</p>")
    for k, rows in agg.items():
        _across_plot(page, k, ops[k], rows, runs)
    page.add("<h2>Runs</h2>")
    run_rows = [[esc(d.run_id if d.run_id is not None else "-"), esc(d.label or ""), esc(d.created or ""),
                 esc(d.status), esc(d.kind or ""), str(d.n_results)] for d in runs]
    table = _table(["run", "label", "created", "status", "kind", "results"], run_rows, right={0, 5})
    page.add(table if len(runs) <= 50 else f"<details><summary>the {len(runs)} runs</summary>\n{table}</details>")
    page.add("<h2>Environment</h2>")
    differ = _env_differences([d.env for d in runs])
    if differ:
        page.add(f"<p class=note>{len(differ)} field(s) differ between the runs (distinct values, first "
                 "few shown):</p>")
        page.add(_table(["field", "distinct values", "values"],
                        ([esc(f), str(len(vals)), esc(" | ".join(vals[:5]) + (" | \u2026" if len(vals) > 5 else ""))]
                         for f, vals in differ.items()), cls="env"))
        page.add(f"<h3>{esc(runs[-1].title)}</h3>")
    else:
        page.add("<p class=note>the same in every run:</p>")
    page.add(_env_rows_table(runs[-1].env))


def _env_differences(envs: list[list[tuple[str, str, str]]]) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for env in envs:
        for k, v, _ in env:
            seen = values.setdefault(k, [])
            if v not in seen:
                seen.append(v)
    return {k: v for k, v in values.items() if len(v) > 1}


def _across_plot(page: _Page, key: str, op: str, rows: list[dict], runs: list[_RunDigest]) -> None:
    import numpy as np   # numpy: formats load with `opcost --help`, numpy must not

    n = len(runs)
    x_of = {x["run"]: j for j, x in enumerate(rows)}
    xs = np.arange(len(rows), dtype=float)
    allv = [v for x in rows if x["q"] for v in (x["q"][0], x["q"][3])] + [x["median"] for x in rows
                                                                             if x["median"] is not None]
    div, unit = _unit(allv)
    fig = _figure(9, 3.2)
    ax = fig.add_subplot()
    have_q = [(x_of[x["run"]], x["q"]) for x in rows if x["q"]]
    if have_q:
        qx = np.array([p for p, _ in have_q], dtype=float)
        q = np.array([v for _, v in have_q]) / div
        ax.vlines(qx, q[:, 0], q[:, 3], color=_A, alpha=0.35, lw=0.8)
        ax.vlines(qx, q[:, 1], q[:, 2], color=_A, alpha=0.55, lw=2.4 if len(rows) <= 200 else 1.2)
    pts = [(x_of[x["run"]], m) for x in rows for m in x["meds"]]
    pts, thinned = _thin(pts, MAX_MEDIAN_POINTS)
    if pts:
        ax.scatter([p for p, _ in pts], [m / div for _, m in pts], s=5 if len(rows) > 100 else 9, color="#222",
                   alpha=0.6, linewidths=0, zorder=3)
    med = np.array([np.nan if x["median"] is None else x["median"] / div for x in rows])
    lo = np.array([x["ci"][0] / div if _ok_ci(x["ci"]) else np.nan for x in rows])
    hi = np.array([x["ci"][1] / div if _ok_ci(x["ci"]) else np.nan for x in rows])
    ax.fill_between(xs, lo, hi, color=_B, alpha=0.22, lw=0, step="mid")
    ax.plot(xs, med, color=_B, lw=1.3, marker="o" if len(rows) <= 60 else None, ms=3, zorder=4)
    ticks = _ticks(len(rows))
    names = [_plain(runs[x["run"]].label or f"run {runs[x['run']].run_id or x['run'] + 1}", 18) for x in rows]
    ax.set_xticks([xs[t] for t in ticks], [names[t] for t in ticks], rotation=45 if len(ticks) > 8 else 0,
                  ha="right" if len(ticks) > 8 else "center")
    ax.set_xlim(-0.7, len(rows) - 0.3)
    ax.set_ylabel(f"{unit} per {_plain(op or 'op', 30)}")
    ax.set_title(_plain(key, 110), loc="left")
    ax.grid(axis="y", color="#eee", lw=0.6)
    cap = f"{esc(key)}: in {len(rows)} of the {n} runs"
    if thinned:
        cap += f"; {len(pts)} of the {sum(len(x['meds']) for x in rows)} per-process medians drawn (a fixed stride)"
    page.plot(fig, cap + ".", alt=f"{key} across runs")


def _ok_ci(ci: Any) -> TypeGuard[list]:
    return (isinstance(ci, (list, tuple)) and len(ci) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in ci))


# --- a comparison --------------------------------------------------------------

def _arm_text(arm: dict) -> str:
    if not isinstance(arm, dict):
        return esc(arm)
    if "params" in arm:
        return esc(_params_text(arm.get("params")))
    if isinstance(arm.get("runs"), list) and arm["runs"]:
        return f"{len(arm['runs'])} runs: " + "; ".join(_arm_text({k: v for k, v in r.items() if k != "runs"})
                                                       for r in arm["runs"] if isinstance(r, dict))
    t = f"run {arm.get('run_id', '?')}"
    if arm.get("label"):
        t += f" ({printable(arm['label'])})"
    if arm.get("created"):
        t += f", {arm['created']}"
    return esc(t)


def _comparison_lines(doc: dict, run: dict | None) -> list[str]:
    """What a comparison page says under its title: the stored run, the
    arms, interleaving, A/A, delta, the sequential design."""
    lines = [_stored_run_text(run)] if run is not None else []
    lines += [f"<b>A</b>: {_arm_text(doc.get('a') or {})}", f"<b>B</b>: {_arm_text(doc.get('b') or {})}"]
    if doc.get("interleaved"):
        lines.append("interleaved: each round ran one A and one B process in a random order")
    else:
        lines.append("not interleaved: A and B ran at different times, so drift between them is part of the difference")
    if doc.get("aa"):
        lines.append("A/A: A and B are identical, so any difference is noise")
    cmp = Comparison.from_json(doc)   # the vm target's kernels and emulation
    lines += [esc(line) for line in header_lines(cmp.comparisons, cmp.context.get("emulated"))]
    if isinstance(doc.get("delta_requested"), (int, float)):
        lines.append(f"smallest difference that matters (delta): {_pct(doc['delta_requested'])}")
    design = doc.get("design") or {}
    if isinstance(design, dict) and design.get("kind") == "sequential":
        stopped = design.get("stopped") or {}
        lines.append(f"sequential design: {esc(design.get('looks_done', '?'))} look(s) done of "
                     f"{len(design.get('planned') or [])}" + (f", stopped: {esc(stopped.get('reason'))}"
                                                              if stopped else ""))
    return lines


def _comparison_notes(doc: dict, entries: list[Entry]) -> list[str]:
    """The notes under a comparison's plots: flags, inconclusive, withheld, unmatched."""
    notes = []
    for e in entries:
        for f in e.flags:
            notes.append(f"{esc(e.key)}: {esc(f.get('text') or f.get('detail') or f.get('flag'))}")
        if e.verdict == "inconclusive" and e.processes_needed:
            notes.append(f"{esc(e.key)}: inconclusive: about {esc(e.processes_needed)} processes per arm "
                         "would likely decide it")
        if e.withheld:
            notes.append(f"{esc(e.key)}: no verdict: {esc(e.withheld)}")
    if doc.get("unmatched"):
        notes.append("not in both runs (not compared): " + esc(", ".join(map(str, doc["unmatched"]))))
    return notes


def _comparison_env(page: _Page, doc: dict) -> None:
    """A comparison's environment: the differences between A and B, then the
    machine (one, or each arm's)."""
    page.add("<h2>Environment</h2>")
    if isinstance(doc.get("env_differences"), list):
        diffs = doc["env_differences"]
        page.add("<h3>differences between A and B</h3>")
        page.add(_table(["field", "A", "B"], ([esc(d.get("field")), esc(_value_text(d.get("a"))),
                                               esc(_value_text(d.get("b")))] for d in diffs if isinstance(d, dict)),
                        cls="env") if diffs else "<p class=note>none</p>")
    if isinstance(doc.get("env"), dict):
        page.add(_env_table(doc["env"]))
    elif any(isinstance(doc.get(f"env_{side}"), dict) for side in ("a", "b")):
        for side in ("a", "b"):
            if isinstance(doc.get(f"env_{side}"), dict):
                page.add(f"<h3>{side.upper()}</h3>")
                page.add(_env_table(doc[f"env_{side}"]))
    else:
        page.add(_env_table({}))


def _comparison_page(page: _Page, doc: dict, run: dict | None = None) -> None:
    """`run`: the stored run this comparison was rebuilt from (its id,
    label, date and status said under the title)."""
    cmp = Comparison.from_json(doc)
    entries = cmp.comparisons
    kind = str(doc.get("kind") or "comparison")
    page.title = f"opcost {kind}: A {printable(_arm_plain(doc.get('a')))} vs B {printable(_arm_plain(doc.get('b')))}"
    page.add(f"<h1>{esc(kind)}: B relative to A</h1>")
    page.add("<p class=note>" + "<br>".join(_comparison_lines(doc, run)) + "</p>")
    page.add("<h2>Summary</h2>")
    head = ["benchmark", "op", "A", "B", "B/A", "95% CI of B/A", "p (Holm)", "delta", "verdict"]
    rows = []
    for e in entries:
        v = e.verdict
        est, ci = e.verdict_ratio
        rows.append([esc(e.key), esc(e.op), fmt_ns(e.median_a),
                     fmt_ns(e.median_b), f"{est:.4f}" if isinstance(est, (int, float)) else "-",
                     _ci_text(ci, lambda x: f"{x:.4f}"),
                     f"{e.p_adjusted:.2g}" if isinstance(e.p_adjusted, (int, float)) else "-",
                     _pct(e.delta),
                     f'<span class="{esc(v)}">{esc(v)}</span>' if v else esc(e.status or
                                                                         ("no verdict" if e.withheld else "-"))])
    page.add(_table(head, rows, right={2, 3, 4, 5, 6, 7}))
    if isinstance(cmp.geomean_ratio, (int, float)):
        how = cmp.methods   # the test each entry used: said once, never beside another's
        page.add(f"<p class=note>{esc(geomean_text(cmp.summary, cmp.comparisons))}. Verdicts are B relative to A; "
                 + ("p: Welch's t over the runs' log medians (the run is the unit)" if cmp.run_level else
                    f"{esc(how)} over per-process medians" if how else
                    "p: Mann-Whitney U and Kolmogorov-Smirnov over per-process medians")
                 + ", Holm-adjusted across benchmarks.</p>")
    for e in entries:
        if isinstance(e.savings, dict) and isinstance(e.savings.get("A"), dict):
            _savings_section(page, e)
    notes = _comparison_notes(doc, entries)
    if notes:
        page.add("<ul class=notes>" + "".join(f"<li>{n}</li>" for n in notes) + "</ul>")
    plotted = [e for e in entries if isinstance(e.ratio, (int, float))]
    if plotted:
        page.add("<h2>B/A with its 95% CI</h2>")
        _ratio_plot(page, plotted)
        page.add("<h2>A and B per benchmark</h2>\n<p class=note>per-process medians of each arm (dots), the median "
                 "over them (tick) and its 95% CI (bar).</p>")
        for e in plotted:
            _ab_plot(page, e)
    _counters_section(page, [(e.key, [("A", e.summary_a.raw), ("B", e.summary_b.raw)]) for e in entries])
    _comparison_env(page, doc)


def _stored_run_text(run: dict) -> str:
    """"stored run 3 (label), DATE, complete", escaped."""
    return esc(f"stored run {run.get('run_id')}" + (f" ({printable(run['label'])})" if run.get("label") else "")
               + ", ".join(["", *(str(run[k]) for k in ("created", "status") if run.get(k))]))


def _savings_section(page: _Page, e: Entry) -> None:
    """Seed 000's savings table of one benchmark, as `ab` prints it: A, B,
    the saving A-B and (A-B)/A per quantity, each with its 95% CI."""
    def fmt(col: str, x: Any) -> str:
        if col.startswith("cycles"):
            return "-" if not isinstance(x, (int, float)) else ("0" if f"{x:.0f}" == "-0" else f"{x:.0f}")
        return fmt_ns(x)

    sv = e.savings or {}
    ci_d, ci_i, span = sv.get("ci95_difference") or {}, sv.get("ci95_improvement") or {}, sv.get("spans_zero") or {}
    per = e.op or "op"
    rows = []
    for c in sv["A"]:
        rows.append([esc(c), fmt(c, sv["A"].get(c)), fmt(c, (sv.get("B") or {}).get(c)),
                     fmt(c, (sv.get("difference") or {}).get(c)), _ci_text(ci_d.get(c), lambda x: fmt(c, x)),
                     _pct((sv.get("improvement") or {}).get(c)), _ci_text(ci_i.get(c), _pct),
                     "spans 0" if span.get(c) else ""])
    page.add(f"<h2>Savings of {esc(e.key)}</h2>\n<p class=note>per {esc(per)}; user and "
             "system from getrusage of the measuring side; 95% bootstrap CIs over processes (“spans 0”: not shown "
             "to differ).</p>")
    page.add(_table(["per " + esc(per), "A", "B", "saving A-B", "95% CI", "(A-B)/A", "95% CI", ""], rows,
                    right={1, 2, 3, 4, 5, 6}))
    seed = sv.get("seed")
    if isinstance(seed, dict) and isinstance(seed.get("saving_ns"), (int, float)):
        page.add(f"<p class=note>user+system saved per {esc(seed.get('per'))}: {fmt_ns(seed['saving_ns'])} "
                 f"{_ci_text(seed.get('ci95_ns'))}" + (" (the CI spans 0: not shown to differ)"
                                                       if seed.get("spans_zero") else "") + "</p>")


def _arm_plain(arm: Any) -> str:
    if isinstance(arm, dict):
        if "params" in arm:
            return _params_text(arm["params"])
        return f"run {arm.get('run_id', '?')}" + (f" ({arm['label']})" if arm.get("label") else "")
    return str(arm)


def _ratio_plot(page: _Page, entries: list[Entry]) -> None:
    fig = _figure(7.5, 0.8 + 0.32 * len(entries))
    ax = fig.add_subplot()
    for i, e in enumerate(entries):
        d = float(e.delta) if isinstance(e.delta, (int, float)) else 0.0
        ax.fill_betweenx([i - 0.4, i + 0.4], 1 - d, 1 + d, color="#dddddd", lw=0)
        color = _VERDICT_COLORS.get(e.verdict, "#555555")
        est, ci = e.verdict_ratio
        if _ok_ci(ci):
            ax.plot([ci[0], ci[1]], [i, i], color=color, lw=2.2, solid_capstyle="butt")
        ax.plot([est], [i], marker="o", color=color, ms=5)
    ax.axvline(1.0, color="#333", lw=0.8)
    ax.set_yticks(range(len(entries)), [_plain(e.key, 48) for e in entries])
    ax.set_ylim(len(entries) - 0.5, -0.5)
    ax.set_xlabel("B/A (the estimate the verdict uses): below 1 B is faster; grey: within delta")
    ax.grid(axis="x", color="#eee", lw=0.6)
    page.plot(fig, "B/A of every benchmark with its 95% CI, coloured by verdict (green faster, red slower, "
              "grey same or negligible, amber inconclusive); the grey band is ±delta around 1.",
              alt="ratio B/A per benchmark")


def _ab_plot(page: _Page, e: Entry) -> None:
    import numpy as np   # numpy: formats load with `opcost --help`, numpy must not

    arms = []
    for side, color, s, figure in (("A", _A, e.summary_a, e.median_a), ("B", _B, e.summary_b, e.median_b)):
        meds = s.process_medians
        med = s.get("median_ns", figure)
        arms.append((side, color, meds, med if isinstance(med, (int, float)) else None, s.get("ci95_ns")))
    cut = _axis_top([v for _, _, meds, _, _ in arms for v in meds])
    div, unit = _unit([v for _, _, meds, med, _ in arms for v in meds + ([med] if med is not None else [])
                       if cut is None or v <= cut[1]])
    fig = _figure(7.5, 1.45)
    ax = fig.add_subplot()
    rng = np.random.default_rng(0)
    for y, (name, color, meds, med, ci) in enumerate(arms):
        if meds:
            ax.scatter(np.asarray(meds) / div, y + rng.uniform(-0.18, 0.18, len(meds)), s=12, color=color,
                       alpha=0.7, linewidths=0)
        if _ok_ci(ci):
            ax.plot([ci[0] / div, ci[1] / div], [y + 0.32] * 2, color=color, lw=2.5, solid_capstyle="butt")
        if med is not None:
            ax.plot([med / div] * 2, [y - 0.3, y + 0.3], color="#222", lw=1.4)
    ax.set_yticks([0, 1], ["A", "B"])
    ax.set_ylim(1.6, -0.6)
    if cut is not None:
        ax.set_xlim(cut[0] / div, cut[1] / div)
    ax.set_xlabel(f"{unit} per {_plain(e.op or 'op', 40)}")
    ratio = e.ratio
    ax.set_title(_plain(e.key, 90) + (f"   B/A {ratio:.4f}" if ratio else "")
                 + (f"  {e.verdict}" if e.verdict else ""), loc="left")
    ax.grid(axis="x", color="#eee", lw=0.6)
    n = [len(m) for _, _, m, _, _ in arms]
    page.plot(fig, f"{esc(e.key)}: A {n[0]} processes, B {n[1]} processes{_cut_text(cut)}.",
              alt=f"A and B of {e.key}")


# --- a series ------------------------------------------------------------------
#
# The reader takes, tolerantly (the series command owns the schema):
#   doc: {schema: opcost.series/1, bench | key, by, points: [...], change_points: [...]}
#   or doc.series: [{bench | key, points, change_points}, ...] for several.
#   points (also named labels, rows, steps): {label | value | name, n_processes | n,
#     median_ns, ci95_ns, process_medians_ns, change_prev, change_first}; the
#     statistics may sit in a `summary` of the point.
#   change_points (also changepoints, changes): {index | at | position: the
#     first point after the step, from | to labels, change | ratio, ci95_ratio,
#     verdict}; a bare integer is an index.

def _series_list(doc: dict) -> list[dict]:
    inner = doc.get("series")
    if isinstance(inner, list) and inner and all(isinstance(s, dict) for s in inner):
        return inner
    return [doc]


def _points(s: dict) -> list[dict]:
    for name in ("points", "labels", "rows", "steps"):
        v = s.get(name)
        if isinstance(v, list) and all(isinstance(p, dict) for p in v):
            return v
    return []


def _pt(p: dict, *names: str) -> Any:
    for src in (p, Summary.of(p)):
        for n in names:
            if n in src:
                return src[n]
    return None


def _change_points(s: dict, points: list[dict]) -> list[dict]:
    raw: list = next((s[n] for n in ("change_points", "changepoints", "changes") if isinstance(s.get(n), list)), [])
    labels = [str(_pt(p, "label", "value", "name")) for p in points]
    out = []
    for c in raw:
        c = {"index": c} if isinstance(c, int) and not isinstance(c, bool) else c
        if not isinstance(c, dict):
            continue
        idx = next((c[n] for n in ("index", "at", "position") if isinstance(c.get(n), int)), None)
        if idx is None and c.get("to") is not None and str(c["to"]) in labels:
            idx = labels.index(str(c["to"]))
        if idx is None or not 0 < idx < len(points) + 1:
            continue
        out.append({**c, "index": idx})
    return out


def _series_page(page: _Page, doc: dict, run: dict | None = None) -> None:
    """`run`: the stored run (`series --run`) this series was rebuilt from."""
    series = _series_list(doc)
    first = series[0]
    name = first.get("key") or first.get("bench") or doc.get("bench") or "series"
    page.title = f"opcost series: {printable(name)}"
    page.add(f"<h1>series: {esc(name)}</h1>")
    facts = [_stored_run_text(run)] if run is not None else []
    by = doc.get("by") or first.get("by")
    if by:
        facts.append(f"labels by {esc(by)}")
    if "interleaved" in doc:
        facts.append("interleaved" if doc.get("interleaved") else
                     "not interleaved: the labels ran at different times, so drift is part of any step")
    if facts:
        page.add("<p class=note>" + "; ".join(facts) + "</p>")
    ran = series_lines(doc)   # the vm target's kernel, emulation
    if ran:
        page.add("<p class=note>" + "<br>".join(esc(line) for line in ran) + "</p>")
    for s in series:
        points = _points(s)
        cps = _change_points(s, points)
        key = s.get("key") or s.get("bench") or name
        if len(series) > 1:
            page.add(f"<h2>{esc(key)}</h2>")
        at = {c["index"]: c for c in cps}
        flagged = any(isinstance(p.get("flags"), list) and p["flags"] for p in points)
        head = ["#", "label", "processes", "median", "95% CI", "vs previous", "vs first", "change point"]
        head += ["flags"] if flagged else []
        rows = []
        for i, p in enumerate(points):
            c = at.get(i)
            rows.append([str(i + 1), esc(_pt(p, "label", "value", "name")), esc(_pt(p, "n_processes", "n") or "-"),
                         fmt_ns(_pt(p, "median_ns", "median")), _ci_text(_pt(p, "ci95_ns", "ci")),
                         _change(_pt(p, "change_prev", "vs_previous")), _change(_pt(p, "change_first", "vs_first")),
                         esc(_cp_plain(c)) if c else ""]
                        + ([esc(", ".join(dict.fromkeys(str(f.get("flag")) for f in p.get("flags") or []
                                                        if isinstance(f, dict))))] if flagged else []))
        page.add(_table(head, rows, right={0, 2, 3, 4, 5, 6}))
        if points:
            _series_plot(page, key, points, cps, s.get("op") or doc.get("op"))
        if cps:
            page.add("<ul class=notes>" + "".join(
                f"<li>between {esc(_pt(points[c['index'] - 1], 'label', 'value', 'name'))} and "
                f"{esc(_pt(points[c['index']], 'label', 'value', 'name')) if c['index'] < len(points) else '?'}: "
                f"{esc(_cp_plain(c))}" + (f"<br>unconfirmed: {esc(c.get('confirm') or '')}" if c.get("unconfirmed") else "")
                + "</li>" for c in cps) + "</ul>")
        elif points and s.get("withheld"):
            page.add(f"<p class=note>no change point given: {esc(s['withheld'])}.</p>")
        elif points:
            page.add("<p class=note>no change point found.</p>")
        notes = [f"{esc(_pt(p, 'label', 'value', 'name'))}: {esc(f.get('flag'))}"
                 + (f": {esc(f['detail'])}" if f.get("detail") else "")
                 for p in points for f in (p.get("flags") or [] if isinstance(p.get("flags"), list) else [])
                 if isinstance(f, dict)]
        if notes:
            page.add("<p class=note>flags of the labels (their figures are less trustworthy):</p>"
                     "<ul class=notes>" + "".join(f"<li>{n}</li>" for n in notes) + "</ul>")
    for n in ("env", "env_first", "env_last"):
        if isinstance(doc.get(n), dict):
            page.add("<h2>Environment</h2>")
            page.add(_env_table(doc[n]))
            break


def _change(c: Any) -> str:
    """A label's change against the previous or the first label, as the
    text prints it ("+3.1%"): the series document's {change, ci95_change}
    (or a bare fraction); "-" where there is none (the first label)."""
    if isinstance(c, dict):
        c = c.get("change")
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c):
        return "-"
    return f"{c * 100:+.1f}%"


def _cp_plain(c: dict) -> str:
    """A change point in words: its size, the CI of the ratio, the verdict."""
    parts = []
    change = c.get("change")
    ratio = c.get("ratio")
    if isinstance(change, (int, float)):
        parts.append(f"{change * 100:+.1f}%")
    elif isinstance(ratio, (int, float)):
        parts.append(f"{(ratio - 1) * 100:+.1f}%")
    ci = c.get("ci95_ratio") or c.get("ci95")
    if _ok_ci(ci):
        parts.append(f"95% CI of the ratio [{ci[0]:.4f}, {ci[1]:.4f}]")
    if c.get("verdict"):
        parts.append(str(c["verdict"]) + (" unconfirmed" if c.get("unconfirmed") else ""))
    return ", ".join(parts) if parts else "step"


def _series_plot(page: _Page, key: str, points: list[dict], cps: list[dict], op: Any) -> None:
    import numpy as np   # numpy: formats load with `opcost --help`, numpy must not

    meds = [_pt(p, "median_ns", "median") for p in points]
    cis = [_pt(p, "ci95_ns", "ci") for p in points]
    procs = [[m for m in (_pt(p, "process_medians_ns") or []) if isinstance(m, (int, float))] for p in points]
    cut = _axis_top([m for ps in procs for m in ps])
    div, unit = _unit([m for m in meds if isinstance(m, (int, float)) and (cut is None or m <= cut[1])]
                      + [m for ps in procs for m in ps if cut is None or m <= cut[1]])
    fig = _figure(9, 3.2)
    ax = fig.add_subplot()
    xs = np.arange(len(points), dtype=float)
    rng = np.random.default_rng(0)
    pts = [(i, m) for i, ps in enumerate(procs) for m in ps]
    pts, thinned = _thin(pts, MAX_MEDIAN_POINTS)
    if pts:
        ax.scatter([i + rng.uniform(-0.12, 0.12) for i, _ in pts], [m / div for _, m in pts], s=6, color="#777",
                   alpha=0.5, linewidths=0)
    y = np.array([m / div if isinstance(m, (int, float)) else np.nan for m in meds])
    lo = np.array([c[0] / div if _ok_ci(c) else np.nan for c in cis])
    hi = np.array([c[1] / div if _ok_ci(c) else np.nan for c in cis])
    ok = ~np.isnan(lo)
    if ok.any():
        ax.errorbar(xs[ok], y[ok], yerr=[y[ok] - lo[ok], hi[ok] - y[ok]], fmt="none", ecolor=_A, elinewidth=1.4,
                    capsize=2)
    ax.plot(xs, y, color=_A, marker="o", ms=3.5, lw=1)
    for c in cps:
        ax.axvline(c["index"] - 0.5, color="#c0392b", lw=1.2, ls="--")
        ax.annotate(_plain(_cp_plain(c).split(",")[0], 12), (c["index"] - 0.5, 1.0),
                    xycoords=("data", "axes fraction"), xytext=(3, -10), textcoords="offset points",
                    color="#c0392b", fontsize=8)
    ticks = _ticks(len(points))
    labels = [_plain(_pt(p, "label", "value", "name"), 16) for p in points]
    rot = len(ticks) > 8 or max((len(labels[t]) for t in ticks), default=0) > 8
    ax.set_xticks([xs[t] for t in ticks], [labels[t] for t in ticks], rotation=45 if rot else 0,
                  ha="right" if rot else "center")
    ax.set_xlim(-0.6, len(points) - 0.4)
    if cut is not None:
        ax.set_ylim(cut[0] / div, cut[1] / div)
    ax.set_ylabel(f"{unit} per {_plain(op or 'op', 30)}")
    ax.set_title(_plain(key, 110), loc="left")
    ax.grid(axis="y", color="#eee", lw=0.6)
    cap = (f"{esc(key)}: median and 95% CI per label in series order, per-process medians in grey; change points "
           "as dashed red lines between the labels they separate")
    if thinned:
        cap += f"; {len(pts)} per-process medians drawn (a fixed stride)"
    cap += _cut_text(cut)
    page.plot(fig, cap + ".", alt=f"series of {key}")
