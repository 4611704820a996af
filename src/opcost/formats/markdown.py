"""`markdown`: GitHub-flavoured markdown tables, for issues, pull requests
and mailing-list posts. A run: one row per variant (median, 95% CI, min,
p90, CV, cycles, processes), then the variants not measured; a comparison:
one row per benchmark (A, B, B/A with its CI, p, delta, verdict) and the
geometric mean. Every label, key and parameter is escaped: `|` cannot end a
cell, `*`, `_`, backticks, brackets and `<` cannot turn into markup, links
or HTML (`<` is written `&lt;`)."""

from __future__ import annotations

from ..guests import header_lines, result_lines, series_lines
from ..model import Comparison, Entry, Series, Summary, geomean_text, result_key
from ..safetext import printable
from ..tables import fmt_ns, fmt_pct

NAME = "markdown"
KINDS = ("result", "comparison", "series")
MANY = b"\n"
TABLE_ONLY = True   # a plain run: its results table, from the summaries and headers (no sample read)

# What can start markup inside a table cell or a paragraph that does not
# begin with one of them: emphasis, code, links and images, strikethrough,
# the cell separator, and the backslash itself; '<' (which could open an HTML
# tag) and '&' (an entity) become entities. '>' alone starts nothing there.
_SPECIALS = "\\`*_[]|~"


def escape(text) -> str:
    """Text as it reads, inside a markdown table cell or paragraph."""
    t = printable(str(text)).replace("&", "&amp;").replace("<", "&lt;")
    return "".join("\\" + c if c in _SPECIALS else c for c in t)


def table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Cells are escaped by the caller; numbers need no escaping."""
    head, *body = rows
    rule = ["---:" if i in right else "---" for i in range(len(head))]
    return ["| " + " | ".join(r) + " |" for r in (head, rule, *body)]


def _run_title(doc: dict) -> str:
    if doc.get("run_id") is None:
        return "**run** (not stored)" + (f" {escape(doc['label'])}" if doc.get("label") else "")
    return (f"**run {doc['run_id']}**" + (f" ({escape(doc['label'])})" if doc.get("label") else "")
            + (f", {escape(doc['created'])}" if doc.get("created") else "")
            + (f", {escape(doc['status'])}" if doc.get("status") else ""))


def _result(doc: dict) -> list[str]:
    rows = [["benchmark", "op", "median", "95% CI", "min", "p90", "CV", "cycles", "n"]]
    notes = []
    for r in doc["results"]:
        s = Summary.of(r)
        key = escape(result_key(r))
        if not s.get("n_processes"):
            notes.append(f"- {key}: {escape(r.get('status') or 'not measured')}"
                         + (f": {escape(r['reason'])}" if r.get("reason") else ""))
            continue
        ci = s.get("ci95_ns")
        cyc = s.get("median_cycles")
        rows.append([key, escape(r.get("op", "")), fmt_ns(s.get("median_ns")),
                     f"{fmt_ns(ci[0])} – {fmt_ns(ci[1])}" if ci else "-", fmt_ns(s.get("min_ns")),
                     fmt_ns(s.get("p90_ns")), fmt_pct(s.get("cv")), "-" if cyc is None else f"{cyc:.0f}",
                     str(s["n_processes"])])
        for f in s.get("flags", []):
            notes.append(f"- {key}: {escape(f['flag'])}: {escape(f.get('detail', ''))}")
    out = [_run_title(doc), ""]
    ran = result_lines(doc["results"])   # the vm target's kernel, emulation
    if ran:
        out += [f"- {escape(line)}" for line in ran] + [""]
    if len(rows) > 1:
        out += table(rows, {2, 4, 5, 6, 7, 8})
        out += ["", "Median, CI, min, p90 and CV over per-process medians (n processes); cycles at the TSC rate."]
    if notes:
        out += ["", *notes]
    return out


def _comparison(doc: dict) -> list[str]:
    def who(x: dict) -> str:
        if doc.get("interleaved"):
            p = x.get("params")
            return escape(",".join(f"{k}={v}" for k, v in p.items()) if isinstance(p, dict) else (p or "(defaults)"))
        if x.get("runs"):
            return f"{len(x['runs'])} runs (" + ", ".join(
                str(r.get("run_id")) + (f" {escape(r['label'])}" if r.get("label") else "") for r in x["runs"]) + ")"
        return f"run {x.get('run_id')}" + (f" ({escape(x['label'])})" if x.get("label") else "")

    out = [f"**A**: {who(doc['a'])}, **B**: {who(doc['b'])}"
           + ("" if doc.get("interleaved") else " (not interleaved: drift between the runs is part of the difference)"),
           ""]
    rows = [["benchmark", "op", "A", "B", "B/A", "95% CI", "p (Holm)", "delta", "verdict"]]
    notes = []
    withheld: dict[str, list[str]] = {}
    cmp = Comparison.from_json(doc)
    guests = header_lines(cmp.comparisons, cmp.context.get("emulated"))   # the vm target's kernels, emulation
    if guests:
        out += [f"- {escape(line)}" for line in guests] + [""]
    for e in cmp.comparisons:
        key = escape(e.key)
        if not e.compared:
            rows.append([key, escape(e.op), "-", "-", "-", "-", "-", "-", escape(e.status or "-")])
            continue
        if e.verdict == "inconclusive":
            sched = e.schedule
            notes.append(f"- {key}: inconclusive: about {e.processes_needed} processes per arm would likely "
                         "decide it" + (f" (rerun with -p {sched})" if sched else ""))
        for f in e.flags:
            notes.append(f"- {key}: {escape(f.get('text', ''))}")
        if e.withheld:
            withheld.setdefault(escape(e.withheld), []).append(key)
        est, ci = e.verdict_ratio
        verdict = e.verdict or "-"
        rows.append([key, escape(e.op), fmt_ns(e.median_a), fmt_ns(e.median_b), f"{est:.4f}",
                     f"{ci[0]:.4f} – {ci[1]:.4f}" if ci else "-", f"{e.p_adjusted:.2g}", fmt_pct(e.delta),
                     f"**{verdict}**" if verdict in ("slower", "faster") else verdict])
    out += table(rows, {2, 3, 4, 6, 7})
    if cmp.geomean_ratio is not None:
        said = geomean_text(cmp.summary, cmp.comparisons)
        out += ["", said[0].upper() + said[1:] + ". Verdicts are B relative to A; p over "
                + ("the runs' medians (the run is the unit)" if cmp.run_level else "per-process medians")
                + ", Holm-adjusted across benchmarks."
                + (f" {escape(cmp.methods)}." if cmp.methods else "")]
    for e in cmp.comparisons:
        if isinstance(e.savings, dict):
            out += ["", *_savings(e)]
    notes += [f"- {', '.join(keys)}: no verdict: {why}" for why, keys in withheld.items()]
    if notes:
        out += ["", *notes]
    if cmp.context.get("unmatched"):
        out += ["", "Not in both runs: " + ", ".join(escape(u) for u in cmp.context["unmatched"])]
    diffs = cmp.context.get("env_differences")
    if diffs:
        out += ["", "Environment differences:", ""]
        out += [f"- {escape(d['field'])}: {escape(_short(d['a']))} → {escape(_short(d['b']))}" for d in diffs]
    return out


def _savings(e: Entry) -> list[str]:
    """Seed 000's savings table of one benchmark, as `ab` prints it: A, B,
    the saving A-B and (A-B)/A per quantity, each with its 95% CI."""
    def fmt(col: str, x) -> str:
        if col.startswith("cycles"):
            return "-" if x is None else ("0" if f"{x:.0f}" == "-0" else f"{x:.0f}")
        return fmt_ns(x)

    sv = e.savings or {}
    ci_d, ci_i, span = sv.get("ci95_difference") or {}, sv.get("ci95_improvement") or {}, sv.get("spans_zero") or {}
    rows = [["per " + escape(e.op or "op"), "A", "B", "saving A-B", "95% CI", "(A-B)/A", "95% CI", ""]]
    for c in sv["A"]:
        d, i = ci_d.get(c), ci_i.get(c)
        rows.append([escape(c), fmt(c, sv["A"][c]), fmt(c, sv["B"][c]), fmt(c, sv["difference"][c]),
                     f"{fmt(c, d[0])} – {fmt(c, d[1])}" if d else "-", fmt_pct(sv["improvement"][c]),
                     f"{fmt_pct(i[0])} – {fmt_pct(i[1])}" if i else "-", "spans 0" if span.get(c) else ""])
    if not any(r[-1] for r in rows[1:]):
        rows = [r[:-1] for r in rows]
    out = [f"**{escape(e.key)}**: savings per {escape(e.op or 'op')} (user/system from getrusage of "
           "the measuring side)", "", *table(rows, {1, 2, 3, 5})]
    seed = sv.get("seed")
    if isinstance(seed, dict) and seed.get("saving_ns") is not None:
        ci = seed.get("ci95_ns")
        out += ["", f"user+system saved per {escape(seed.get('per'))}: {fmt_ns(seed['saving_ns'])}"
                + (f" ({fmt_ns(ci[0])} – {fmt_ns(ci[1])})" if ci else "")
                + (" (the CI spans 0: not shown to differ)" if seed.get("spans_zero") else "")]
    return out


def _short(v, width: int = 60) -> str:
    t = str(v)
    return t if len(t) <= width else t[: width - 3] + "..."


def _pct(c: dict | None) -> str:
    if not isinstance(c, dict) or not isinstance(c.get("change"), (int, float)):
        return "-"
    return f"{c['change'] * 100:+.1f}%"


def _series(doc: dict) -> list[str]:
    """A series: one row per label (processes, median, change against the
    previous label, its flags), change points marked, each change point
    with its verdict (and `unconfirmed` at an end of the series). First,
    what its labels ran on when in a vm (guests.series_lines)."""
    s = Series.from_json(doc)
    ran = series_lines(doc)
    out = [f"- {escape(line)}" for line in ran] + [""] if ran else []
    out += [f"**{escape(s.spec)}** by {escape(s.by)}, {len(s.labels)} labels"
            + (", interleaved" if s.interleaved else " (not interleaved: drift between the runs is part of each change)"),
            ""]
    rows = [["", escape(s.by or "label"), "n", "median", "vs previous", "flags"]]
    for lb in s.labels:
        flags = ", ".join(dict.fromkeys(escape(f.get("flag")) for f in lb.flags))
        rows.append([">" if lb.change_point else "", escape(_short(lb.value, 40)),
                     str(lb.raw.get("n_processes", "-")), fmt_ns(lb.median_ns), _pct(lb.vs_previous), flags])
    out += table(rows, {2, 3, 4})
    out += [""] + ([f"- > {escape(c.label)} (after {escape(c.previous)}): "
                    f"{(c.ratio - 1) * 100:+.1f}% **{escape(c.verdict or '-')}**"
                    + (f", unconfirmed: {escape(c.confirm or '')}" if c.unconfirmed else "")
                    for c in s.change_points] or ([f"No change point given: {escape(s.withheld)}."] if s.withheld
                                                  else ["No change point confirmed."]))
    flagged = [f"- {escape(lb.value)}: {escape(f.get('flag'))}" + (f": {escape(f['detail'])}" if f.get("detail") else "")
               for lb in s.labels for f in lb.flags]
    if flagged:
        out += ["", "Flags of the labels (their figures are less trustworthy):", "", *flagged]
    return out


def serialize_stored(doc: dict, cdoc: dict) -> bytes:
    """A stored `ab`, `variants` or `series --run` run (`doc`) as the command
    printed it: which run, (variants) its builds' table, then its comparison
    or series `cdoc` (rebuilt from the stored plan)."""
    if str(cdoc.get("schema", "")).startswith("opcost.series/"):
        return ("\n".join([_run_title(doc), "", *_series(cdoc)]) + "\n").encode()
    lines = _result(doc) if cdoc.get("kind") == "variants" else [_run_title(doc)]
    if Comparison.from_json(cdoc).comparisons:
        lines += ["", *_comparison(cdoc)]
    return ("\n".join(lines) + "\n").encode()


def serialize(doc: dict) -> bytes:
    if str(doc.get("schema", "")).startswith("opcost.series/"):
        return ("\n".join(_series(doc)) + "\n").encode()
    lines = _comparison(doc) if "comparisons" in doc else _result(doc)
    return ("\n".join(lines) + "\n").encode()
