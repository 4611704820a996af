"""The html format (formats/html.py) without a browser: the page is
self-contained and deterministic, escapes what it shows, aggregates many
runs, reads series tolerantly, is reachable from `--export html:FILE` and
says in one line (exit 2, before measuring) when matplotlib is missing.
The browser checks are in tests/test_html_browser.py; the pages of the
golden run and A/B in tests/golden (test_golden.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

import html_docs as H
from conftest import ROOT, cli_argv, cli_env
from opcost.formats import FORMATS, html

FAST = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "--cpu", "0", "--no-progress"]


class Tags(HTMLParser):
    """Every start tag with its attributes, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(data: bytes) -> Tags:
    t = Tags()
    t.feed(data.decode("ascii"))
    return t


# --- self-contained, strict -----------------------------------------------------

@pytest.mark.parametrize("doc", [H.run_doc(), H.ab_doc(), H.series_doc()], ids=["run", "ab", "series"])
def test_page_loads_nothing_and_runs_nothing(doc):
    data = html.serialize(doc)
    t = parse(data)
    names = [n for n, _ in t.tags]
    assert "script" not in names and "img" not in names and "link" not in names and "iframe" not in names
    metas = [a for n, a in t.tags if n == "meta"]
    csp = [a["content"] for a in metas if a.get("http-equiv") == "Content-Security-Policy"]
    assert csp == [html.CSP]
    assert "default-src 'none'" in html.CSP and "script-src" not in html.CSP and "img-src data:" in html.CSP
    # the policy comes before anything it governs
    assert names.index("meta") < names.index("style") and t.tags[names.index("meta") + 1][1].get("http-equiv")
    for name, attrs in t.tags:
        for k, v in attrs.items():
            assert not k.startswith("on"), (name, k)
            if k in ("href", "src", "xlink:href", "action", "data"):
                assert v is None or v.startswith("#") or v.startswith("data:"), (name, k, v)
    # nothing that fetches: no url() in styles, no @import, no font face
    assert not re.search(rb"url\(\s*['\"]?(?!#)", data) and b"@import" not in data and b"@font-face" not in data
    assert names.count("svg") >= 1 and b"<?xml" not in data and b"<!DOCTYPE svg" not in data


def test_output_is_deterministic_across_processes():
    """The same document gives the same bytes in another process with another
    hash seed (ids in the SVG come from svg.hashsalt, not from uuid4)."""
    doc = H.ab_doc()
    here = html.serialize(doc)
    assert here == html.serialize(doc)
    code = ("import json, sys; sys.path[:0] = [%r, %r]; import html_docs as H; from opcost.formats import html; "
            "sys.stdout.buffer.write(html.serialize(H.ab_doc()))") % (str(ROOT / "src"), str(ROOT / "tests"))
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                        env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert cp.returncode == 0, cp.stderr.decode()
    assert cp.stdout == here
    assert re.search(rb"\d{4}-\d\d-\d\dT\d\d:\d\d", here) is None      # no dates
    here.decode("ascii")                                                 # ASCII only


def test_every_plot_has_its_own_ids():
    """Several inline SVGs in one page: their ids (clip paths, markers) must not collide."""
    data = html.serialize(H.run_doc()).decode()
    ids = re.findall(r'\bid="([^"]+)"', data)
    assert ids and len(ids) == len(set(ids))


# --- escaping ---------------------------------------------------------------------

def test_payloads_are_escaped_in_tables_and_plots():
    payload = "<script>alert(1)</script>&amp;\"'"
    doc = H.run_doc(label=payload, params=[{"mode": payload}], host=payload,
                    env_extra={"commit": {"value": payload, "source": payload}})
    data = html.serialize(doc)
    assert b"<script" not in data
    t = parse(data)
    text = "".join(t.text)
    assert text.count(payload) >= 4          # title (h1), key, caption, host, commit
    svg_text = re.findall(r"<text\b[^>]*>(.*?)</text>", data.decode(), flags=re.S)
    assert any("&lt;script&gt;" in s for s in svg_text)    # the plot titles hold it, escaped


def test_dollar_signs_are_text_not_mathtext():
    """mathtext is off: `$x^2$` in a label stays those characters in the SVG
    (with mathtext on, matplotlib would draw x squared, or fail on bad TeX)."""
    doc = H.run_doc(params=[{"mode": "$x^2$"}, {"mode": "$\\frac{"}], label="cost $5")
    data = html.serialize(doc).decode()
    svg_text = "".join(re.findall(r"<text\b[^>]*>(.*?)</text>", data, flags=re.S))
    assert "$x^2$" in svg_text and "$\\frac{" in svg_text


def test_control_characters_shown_as_escapes():
    doc = H.run_doc(label="a\nb\x1b[31mc\x00")
    data = html.serialize(doc).decode()
    assert "a\\nb\\x1b[31mc\\x00" in data and "\x1b" not in data and "\x00" not in data


# --- contents -----------------------------------------------------------------

def test_result_page_has_summary_plots_counters_env():
    doc = H.run_doc()
    data = html.serialize(doc).decode()
    t = parse(data.encode())
    text = " ".join(t.text)
    for h in ("Summary", "Distributions", "Counters per op", "Environment"):
        assert f"<h2>{h}</h2>" in data
    assert data.count('<div class="plot"') == len(doc["results"])
    assert "instructions" in text and "testhost" in text and "Test CPU @ 2.00GHz" in text
    med = doc["results"][0]["summary"]["median_ns"]
    assert f"{med:.1f} ns" in text


def test_comparison_page_has_ratio_plot_and_ab_plots():
    doc = H.ab_doc()
    data = html.serialize(doc).decode()
    assert data.count('<div class="plot"') == 1 + len(doc["comparisons"])
    for e in doc["comparisons"]:
        assert f"{e['ratio']:.4f}" in data
        assert f'<span class="{e["verdict"]}">{e["verdict"]}</span>' in data


def test_series_page_marks_change_points():
    doc = H.series_doc()
    data = html.serialize(doc).decode()
    assert data.count('<div class="plot"') == 1
    assert "between c05f and c06a: +5.0%" in data
    # the dashed line: matplotlib writes the dash pattern into the path's style
    assert "stroke-dasharray" in data
    flat = html.serialize(H.series_doc(step=0)).decode()
    assert "no change point found" in flat and "stroke-dasharray" not in flat


def test_series_reader_is_tolerant():
    """Other names for the same things (labels/value/summary, changes/at, a
    bare index, several series) read the same; unknown fields are ignored."""
    doc = H.series_doc()
    alt = {"schema": "opcost.series/1", "unknown": {"x": 1},
           "series": [{"bench": "signal.catch",
                       "labels": [{"value": p["label"], "n": 6, "summary": {"median_ns": p["median_ns"],
                                                                            "ci95_ns": p["ci95_ns"]}}
                                  for p in doc["points"]],
                       "changes": [{"at": 6, "change": 0.05}, 3, {"to": "c09d"}, {"index": 99}, "junk"]}]}
    data = html.serialize(alt).decode()
    assert "between c05f and c06a: +5.0%" in data
    assert "between c02c and c03d: step" in data and "between c08c and c09d: step" in data
    assert data.count("stroke-dasharray") >= 3


def test_many_runs_one_plot_per_benchmark():
    docs = [H.run_doc(run_id=i, label=f"r{i}", seed=i, params=[{"mode": "thread"}], processes=3, samples=5)
            for i in range(1, 81)]
    docs[40]["env"]["kernel_release"]["value"] = "6.19.0-other"
    data = html.serialize_runs(docs).decode()
    assert data.count('<div class="plot"') == 2            # syscall.null and ctx.pipe, not 80 x 2
    assert "<details>" in data                              # the run list is folded beyond 50 runs
    assert "kernel_release" in data and "6.19.0-other" in data and "field(s) differ" in data
    assert f"all {80 * 2 * 3 * 5} batches are summarised" in data


def test_many_processes_and_batches_are_thinned_and_said_so():
    doc = H.run_doc(processes=40, samples=100, params=[])
    data = html.serialize(doc).decode()
    assert "more than 30 processes, so their batches share one row" in data
    assert "of the batches drawn" in data and "all of them counted" in data
    assert data.count("<use ") < 2500                      # markers drawn, at most MAX_BATCH_POINTS + medians


# --- reachable, and optional ----------------------------------------------------

def test_registered_and_final_only():
    assert FORMATS["html"] is html
    assert set(html.KINDS) == {"result", "comparison", "series"}
    from opcost.record import Recorder

    rec = Recorder(store=None, exports=[("html", "r.html"), ("json", "r.json")], env={}, argv=[], label=None)
    assert rec._targets(final=False) == [("json", "r.json")]
    assert rec._targets(final=True) == [("html", "r.html"), ("json", "r.json")]


def test_run_and_show_and_compare_export_html(tmp_path, probe_bin):
    env = cli_env(tmp_path, COLUMNS="200")

    def opcost(*args):
        cp = subprocess.run(cli_argv(*args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL)
        assert cp.returncode == 0, cp.stderr
        return cp

    opcost("run", "syscall.null", "ctx.pipe", *FAST, "-p", "3", "--label", "one", "--json", "r.json",
           "--export", "html:r.html")
    page = (tmp_path / "r.html").read_bytes()
    assert page == html.serialize(json.loads((tmp_path / "r.json").read_text()))
    assert page.count(b'<div class="plot"') == 2
    opcost("run", "syscall.null", "ctx.pipe", *FAST, "-p", "3", "--label", "two")
    opcost("show", "one", "--export", "html:s.html")
    assert b"run 1 (one)" in (tmp_path / "s.html").read_bytes()
    opcost("compare", "one", "two", "--json", "c.json", "--export", "html:c.html")
    c = (tmp_path / "c.html").read_bytes()
    assert c == html.serialize(json.loads((tmp_path / "c.json").read_text()))
    assert b"B/A with its 95% CI" in c


BLOCK = """
import importlib.abc, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""


def test_without_matplotlib_one_line_exit_2_before_measuring(tmp_path, probe_bin):
    """As if `opcost[report]` were not installed: `--export html:` is refused
    when parsed (nothing measured, nothing written), and `serialize` says
    the same as a UsageError."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK)
    env = cli_env(tmp_path)
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
    cp = subprocess.run(cli_argv("run", "syscall.null", *FAST, "--export", "html:r.html"), cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("opcost: --export html: ") and "pip install 'opcost[report]'" \
        in lines[0], cp.stderr
    assert "Traceback" not in cp.stderr and cp.stdout == ""
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "opcost").exists()   # no store: nothing ran
    code = ("import sys; sys.path.insert(0, %r)\nfrom opcost.errors import UsageError\nfrom opcost.formats import html\n"
            "assert html.available() == html.MISSING\ntry:\n    html.serialize({'results': []})\nexcept UsageError as e:\n"
            "    print(e)\n") % str(ROOT / "src")
    cp = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0 and cp.stdout.strip() == html.MISSING, cp.stderr


def test_help_does_not_import_matplotlib_even_with_html_registered(tmp_path):
    cp = subprocess.run([sys.executable, "-X", "importtime", "-m", "opcost", "run", "--help"], cwd=tmp_path,
                        env=cli_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0 and "html" in cp.stdout
    mods = {ln.rsplit("|", 1)[1].strip() for ln in cp.stderr.splitlines() if ln.startswith("import time:")}
    assert "opcost.formats.html" in mods
    assert not [m for m in mods if m.split(".")[0] in ("matplotlib", "numpy")]


def test_label_text_that_looks_like_svg_markup_is_kept():
    label = 'id="x" href="#y" url(#z) <g id="w">'
    data = html.serialize(H.run_doc(params=[{"mode": label}])).decode()
    svg_text = "".join(re.findall(r"<text\b[^>]*>(.*?)</text>", data, flags=re.S))
    assert 'id="x" href="#y" url(#z) &lt;g id="w"&gt;' in svg_text


def test_lean_load_is_the_full_document_with_plain_samples(tmp_path):
    """store.load_run(sample_data=False), what reports over many runs read:
    the same document, each sample only its plain columns; and the same page
    of several runs from either."""
    from opcost.store import open_store

    docs = [H.run_doc(run_id=None, label=f"r{i}", seed=i, processes=3, samples=4) for i in range(3)]
    with open_store(str(tmp_path / "s.db")) as store:
        for d in docs:
            rid = store.create_run(label=d["label"], env=d["env"], argv=d["argv"], opcost_version="0.1.0")
            for pos, r in enumerate(d["results"]):
                res = store.add_result(rid, position=pos, bench=r["bench"], params=r["params"], op=r["op"],
                                       unit="ns", key=r.get("key"))
                for p in r["processes"]:
                    store.add_process(res, idx=p["index"], header=p["header"], samples=p["samples"],
                                      trailer=p["trailer"], meta={"round": p["round"], "seq": p["seq"]})
                store.set_result(res, status="ok", summary=r["summary"])
            store.finish_run(rid, "complete")
        full = [store.load_run(f"id:{i}") for i in (1, 2, 3)]
        lean = [store.load_run(f"id:{i}", sample_data=False) for i in (1, 2, 3)]
    page = html.serialize_runs(iter(lean))
    assert page == html.serialize_runs(full) and b"all 108 batches are summarised" in page   # 3 runs x 3 variants x 3 x 4
    for f, le in zip(full, lean):
        for rf, rl in zip(f["results"], le["results"]):
            for pf, pl in zip(rf["processes"], rl["processes"]):
                assert pl["samples"] == [{k: s[k] for k in ("iters", "ns_per_op", "tsc_per_op")}
                                         for s in pf["samples"]]
                pf["samples"] = pl["samples"] = []
        assert f == le


def test_series_page_of_a_real_series_run(tmp_path, probe_bin):
    """Issue 26: the page of the series document opcost itself writes (a
    `series --run` on the fake clock, then `report N -f html` of the stored
    run): rows counted from 1 as the text counts, "vs previous" / "vs first"
    filled as the markdown prints them, the per-process medians drawn (one
    grey point each), and the stored run's page is its series page."""
    env = cli_env(tmp_path)

    def cli(*args):
        cp = subprocess.run(cli_argv(*args), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0, cp.stderr
        return cp.stdout

    cli("series", "--run", "syscall.null", "--over", "spin=1|21|41", "--fake-clock", "100", "-p", "3", "-n", "3",
        "-w", "1", "--target-ms", "1", "--cpu", "0", "--no-progress", "--json", "s.json", "--label", "ser")
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["schema"] == "opcost.series/1"
    assert all(len(lb["process_medians_ns"]) == 3 for lb in doc["labels"])
    page = tmp_path / "s.html"
    cli("report", "ser", "-f", "html", "-o", str(page))
    data = page.read_text()
    assert 'aria-label="series of syscall.null"' in data and "stored run 1 (ser)" in data
    rows = re.findall(r"<tr><td class=num>(\d+)</td><td>([^<]*)</td><td class=num>\d+</td><td class=num>[^<]*</td>"
                      r"<td class=num>[^<]*</td><td class=num>([^<]*)</td><td class=num>([^<]*)</td>", data)
    assert [(r[0], r[1]) for r in rows] == [("1", "1"), ("2", "21"), ("3", "41")], rows
    md = cli("report", "ser", "-f", "markdown")
    vs_prev = [ln.split("|")[5].strip() for ln in md.splitlines() if re.match(r"\|\s*>?\s*\|\s*(1|21|41) \|", ln)]
    assert [r[2] for r in rows] == vs_prev and vs_prev[0] == "-" and vs_prev[1].startswith("+"), (rows, vs_prev)
    assert rows[0][3] == "-" and rows[2][3].startswith("+")
    # the grey points: one <use> per per-process median, none without them
    bare = {**doc, "labels": [{k: v for k, v in lb.items() if k != "process_medians_ns"} for lb in doc["labels"]]}
    with_pts, without = html.serialize(doc).decode(), html.serialize(bare).decode()
    assert with_pts.count("<use ") - without.count("<use ") == 9


def _contended_run(outliers: tuple[float, ...]) -> dict:
    """A run whose batches lie at 8.5 us +- 1%, a few of them (`outliers`, ns)
    contended; its summaries computed from those batches."""
    from opcost.model import Run
    from opcost.summaries import fill_summaries

    r = H.result("syscall.null", {"via": "libc"}, 8500.0, processes=5, samples=12, seed=3)
    d = Run([r], H.env(), ["opcost", "run", "syscall.null"], "complete", 1, "noisy").to_json()
    batches = [s for p in d["results"][0]["processes"] for s in p["samples"] if not s.get("warmup")]
    for s, v in zip(batches[::17], outliers):
        s["ns_per_op"] = v
    return fill_summaries(d)


def _figure_of(data: str, alt: str) -> str:
    fig = data[data.index(f'aria-label="{alt}'):]
    return fig[:fig.index("</figure>")]


def test_a_few_contended_batches_do_not_squash_the_plot():
    """Issue 26: batches at 8-9 us with three at 60-120 us: the axis stops at
    Tukey's far-out fence (well under 20 us, so the data spread over it) and
    the caption says how many points are above it and how far they go;
    without the far batches nothing is cut and nothing said."""
    fig = _figure_of(html.serialize(_contended_run((60000.0, 90000.0, 120000.0))).decode(),
                     "distribution of syscall.null")
    assert "3 points above it, up to 120.000 us" in fig
    ticks = [float(t) for t in re.findall(r">(-?[0-9.]+)</text>", fig)]
    assert ticks and max(ticks) < 20 and min(ticks) > 5, ticks     # us: the axis spans the data, not the outliers
    plain = _figure_of(html.serialize(_contended_run(())).decode(), "distribution of syscall.null")
    assert "above it" not in plain
