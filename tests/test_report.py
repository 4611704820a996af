"""`opcost report` (issue 15): the formats read by the tools they are for
(benchstat for `go`, hyperfine's scripts for `hyperfine-json`), markdown
escaping, the -o/--force rules, colour and width on a terminal.

benchstat and hyperfine are installed by test.sh, which sets
OPCOST_REQUIRE_TOOLS=benchstat,hyperfine,hyperfine-scripts: there, a missing
tool (or hyperfine's scripts/ missing from the shared directory beside the
checkout) fails the test instead of skipping it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli_argv, cli_env, on_tty
from mdcheck import check_markdown

REQUIRED = set(filter(None, os.environ.get("OPCOST_REQUIRE_TOOLS", "").split(",")))
TINY = ["-n", "3", "-w", "1", "--target-ms", "1", "--cpu", "0", "--no-progress"]


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if name in REQUIRED:
            pytest.fail(f"{name} missing but OPCOST_REQUIRE_TOOLS={','.join(sorted(REQUIRED))} (test.sh installs it)")
        pytest.skip(f"{name} not installed (test.sh installs it)")
    return path


def ok(cp: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert cp.returncode == 0, f"exit {cp.returncode}\n{cp.stdout}\n{cp.stderr}"
    return cp


# --- go: benchstat ------------------------------------------------------------------

def _benchstat_row(out: str, prefix: str) -> tuple[float, float, int]:
    """(change in %, p, n) of the first row starting with `prefix` (benchstat's
    first table, sec/op)."""
    for line in out.splitlines():
        if line.startswith(prefix):
            m = re.search(r"([+-]\d+(?:\.\d+)?)% \(p=([\d.]+) n=(\d+)\)", line)
            assert m, f"no change on {line!r}\n{out}"
            return float(m.group(1)), float(m.group(2)), int(m.group(3))
    raise AssertionError(f"no row {prefix!r} in\n{out}")


def test_benchstat_reports_an_injected_difference_with_its_sign(run_cli, tmp_path):
    """Two stored runs of the same benchmarks on the probe's fake clock, one
    with an operation of 100 ns, one of 110 ns (+10%, each batch +-1%
    jitter): benchstat, given their `go` exports, finds +10% one way and
    -9.1% the other, significant, in one table per unit (the header lines
    do not split the runs)."""
    benchstat = tool("benchstat")
    for label, ns in (("fast", "100"), ("slow", "110")):
        ok(run_cli("run", "syscall.null", "ctx.pipe:mode=thread", "--fake-clock", ns, "-p", "6", *TINY,
                   "--label", label))
        ok(run_cli("report", label, "-f", "go", "-o", f"{label}.txt"))
    text = (tmp_path / "fast.txt").read_text()
    bench_lines = [ln for ln in text.splitlines() if ln.startswith("Benchmark")]
    assert len(bench_lines) == 12   # one line per process: 2 variants x 6
    assert all(re.fullmatch(r"Benchmark\S+-\d+\t\d+\t\S+ ns/op\t\S+ cycles/op", ln) for ln in bench_lines), text
    headers = [ln for ln in text.splitlines() if not ln.startswith("Benchmark")]
    assert [h.split(":")[0] for h in headers] == ["goos", "goarch", "cpu", "pkg"], headers

    cp = ok(subprocess.run([benchstat, "fast.txt", "slow.txt"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60))
    # one table per unit (sec/op, cycles/op), each with both runs as columns
    assert sum("fast.txt" in ln and "slow.txt" in ln for ln in cp.stdout.splitlines()) == 2, cp.stdout
    for prefix in ("SyscallNull/", "CtxPipe/"):
        change, p, n = _benchstat_row(cp.stdout, prefix)
        assert n == 6 and p < 0.05 and 8.0 < change < 12.0, cp.stdout
    cp = ok(subprocess.run([benchstat, "slow.txt", "fast.txt"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60))
    change, p, n = _benchstat_row(cp.stdout, "SyscallNull/")
    assert n == 6 and p < 0.05 and -11.0 < change < -7.0, cp.stdout


def test_same_runs_read_as_no_difference(run_cli, tmp_path):
    """The counter-check: the same fake cost twice is not a difference."""
    benchstat = tool("benchstat")
    for label in ("one", "two"):
        ok(run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "6", *TINY, "--label", label))
        ok(run_cli("report", label, "-f", "go", "-o", f"{label}.txt"))
    cp = ok(subprocess.run([benchstat, "one.txt", "two.txt"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60))
    line = next(ln for ln in cp.stdout.splitlines() if ln.startswith("SyscallNull/"))
    assert "~" in line, cp.stdout


def test_go_names_keep_variants_apart(run_cli):
    """cpu (and arch) are left out of the names, so that runs pinned to
    different CPUs pair up in benchstat, unless the run's variants differ in
    them (`--cpu 0-1`: one variant per CPU), which must not merge."""
    ok(run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "2", *TINY[:-3], "--cpu", "0-1", "--no-progress",
               "--label", "two"))
    ok(run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "2", *TINY, "--label", "one"))

    def names(label):
        go = ok(run_cli("report", label, "-f", "go")).stdout
        return sorted({ln.split("\t")[0] for ln in go.splitlines() if ln.startswith("Benchmark")})
    assert [re.sub(r"-\d+$", "", n) for n in names("two")] == ["BenchmarkSyscallNull/cpu=0/via=libc",
                                                                "BenchmarkSyscallNull/cpu=1/via=libc"]
    assert [re.sub(r"-\d+$", "", n) for n in names("one")] == ["BenchmarkSyscallNull/via=libc"]


def test_go_leaves_out_what_does_not_apply_and_the_arms_pair_in_benchstat(run_cli, tmp_path):
    """An ab of ctx.pipe with fp=none (A) against fp=parent,fpkind=avx (B):
    fpkind means nothing with fp=none (the probe's table says so: list shows
    applies_if, the run's header params_unused), so A's lines do not carry
    it; benchstat, columns by what the arms set (fp and fpkind), pairs the
    two arms on one row, without -ignore, n=6 a side."""
    benchstat = tool("benchstat")
    listing = json.loads(ok(subprocess.run([str(Path(__file__).resolve().parents[1] / "probe" / "opcost-probe"),
                                            "list", "--json"], capture_output=True, text=True)).stdout)
    fpkind = next(p for b in listing["benchmarks"] if b["name"] == "ctx.pipe" for p in b["params"] if p["name"] == "fpkind")
    assert fpkind["applies_if"] == "fp!=none"
    ok(run_cli("ab", "ctx.pipe", "--a", "fp=none", "--b", "fp=parent,fpkind=sse", "--fake-clock", "100", "-p", "6",
               *TINY, "--label", "fp"))
    go = ok(run_cli("report", "fp", "-f", "go", "-o", "fp.txt"))
    names = {ln.split("\t")[0] for ln in (tmp_path / "fp.txt").read_text().splitlines() if ln.startswith("Benchmark")}
    assert {re.sub(r"-\d+$", "", n) for n in names} == {"BenchmarkCtxPipe/fp=none/mode=process/placement=same",
                                                        "BenchmarkCtxPipe/fp=parent/fpkind=sse/mode=process/placement=same"}
    out = ok(subprocess.run([benchstat, "-col", "/fp,/fpkind", "fp.txt"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)).stdout
    rows = [ln for ln in out.splitlines() if ln.startswith("CtxPipe/")]
    assert len(rows) == 2 and re.search(r"n=6\)", rows[0]), out   # sec/op and cycles/op: one row each, paired
    assert all("fpkind" not in r for r in rows), out
    assert go.stderr == ""


# --- hyperfine-json -----------------------------------------------------------------

def test_hyperfine_json_has_hyperfines_layout(run_cli, tmp_path):
    """Every field hyperfine 1.x writes (from a real `hyperfine --export-json`
    here, with a parameter) is in ours with the same JSON type; the way
    hyperfine's scripts read it (advanced_statistics.py: json.load()
    ["results"], then each "command" and "times"; plot_parametrized.py:
    "mean", "stddev") gives the statistics the fields claim."""
    import numpy as np

    hyperfine = tool("hyperfine")
    ok(subprocess.run([hyperfine, "--runs", "2", "--style", "none", "--export-json", "real.json", "-P", "n", "1", "2",
                       "true {n}"], cwd=tmp_path, capture_output=True, text=True, timeout=120))
    real = json.loads((tmp_path / "real.json").read_text())["results"]
    ok(run_cli("run", "syscall.null", "ctx.pipe:mode=process|thread", "--fake-clock", "100", "-p", "4", *TINY,
               "--label", "x"))
    ok(run_cli("report", "x", "-f", "hyperfine-json", "-o", "ours.json"))
    ours = json.loads((tmp_path / "ours.json").read_text())["results"]
    assert len(ours) == 3

    def kind(v):
        return "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__
    want = {k: kind(v) for k, v in real[0].items()}
    assert set(want) >= {"command", "mean", "stddev", "median", "user", "system", "min", "max", "times",
                         "exit_codes", "parameters"}
    for r in ours[1:]:   # ctx.pipe: has parameters
        assert {k: kind(v) for k, v in r.items()} == want, r
        assert all(isinstance(v, str) for v in r["parameters"].values())
    # only what varies between the entries: via (syscall.null's only), ctx.pipe's own, not cpu=0 (all share it)
    assert ours[0]["parameters"] == {"via": "libc"}
    assert [b["parameters"]["mode"] for b in ours[1:]] == ["process", "thread"]
    assert not any("cpu" in b["parameters"] for b in ours)

    commands = [b["command"] for b in ours]
    times = [b["times"] for b in ours]
    assert commands == ["1e9 x syscall.null", "1e9 x ctx.pipe:mode=process", "1e9 x ctx.pipe:mode=thread"]
    for b, ts in zip(ours, times):
        assert len(ts) == 4 and len(b["exit_codes"]) == 4 and set(b["exit_codes"]) == {0}
        assert all(90 < t < 110 for t in ts), ts      # 100 ns per op: 100 s per 1e9 operations
        assert b["mean"] == pytest.approx(np.mean(ts))
        assert b["stddev"] == pytest.approx(np.std(ts, ddof=1))
        assert b["median"] == pytest.approx(np.median(ts))
        assert (b["min"], b["max"]) == (min(ts), max(ts))
        assert 0 < b["user"] < b["mean"] and 0 < b["system"] < b["mean"]
    doc = json.loads(ok(run_cli("report", "x", "-f", "json")).stdout)
    medians = [r["summary"]["process_medians_ns"] for r in doc["results"]]
    assert [t for ts in times for t in ts] == pytest.approx([m for ms in medians for m in ms])


SHARED = Path(os.environ.get("OPCOST_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
HYPERFINE_SCRIPTS = SHARED / "anchors" / "hyperfine-scripts"


def hyperfine_scripts() -> Path:
    """hyperfine's own scripts/ (at a fixed commit, with its licences) in the
    shared directory beside the checkout (or $OPCOST_SHARED): run from there,
    never copied into the project."""
    if not (HYPERFINE_SCRIPTS / "advanced_statistics.py").is_file():
        if "hyperfine-scripts" in REQUIRED:
            pytest.fail(f"{HYPERFINE_SCRIPTS} missing but OPCOST_REQUIRE_TOOLS names hyperfine-scripts")
        pytest.skip(f"hyperfine's scripts not found in {HYPERFINE_SCRIPTS} (the shared directory beside the "
                    "checkout, or $OPCOST_SHARED)")
    return HYPERFINE_SCRIPTS


def test_hyperfines_own_scripts_read_the_export(run_cli, tmp_path):
    """advanced_statistics.py prints the statistics of the per-process
    medians (100 ns per operation and more on the fake clock: over 90 s per 1e9
    operations, not 0.000), and plot_parametrized.py draws the one parameter
    that varies (spin; cpu and via are the same for every entry)."""
    scripts = hyperfine_scripts()
    ok(run_cli("run", "syscall.null:spin=1|101|201", "--fake-clock", "100", "-p", "4", *TINY, "--label", "s"))
    ok(run_cli("report", "s", "-f", "hyperfine-json", "-o", "h.json"))
    ours = json.loads((tmp_path / "h.json").read_text())["results"]
    env = dict(os.environ, MPLBACKEND="Agg")
    out = ok(subprocess.run([sys.executable, str(scripts / "advanced_statistics.py"), "h.json"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120)).stdout
    blocks = out.split("Command '")[1:]
    assert [b.split("'")[0] for b in blocks] == [f"1e9 x syscall.null:spin={n}" for n in (1, 101, 201)], out
    for block, b in zip(blocks, ours):
        stats = dict(re.findall(r"^  (\w+):\s+([\d.]+) s$", block, re.M))
        assert set(stats) == {"mean", "stddev", "median", "min", "max"}, block
        assert float(stats["mean"]) == pytest.approx(b["mean"], abs=1e-3) and float(stats["mean"]) > 90
        assert float(stats["median"]) == pytest.approx(b["median"], abs=1e-3)
        assert (float(stats["min"]), float(stats["max"])) == pytest.approx((min(b["times"]), max(b["times"])), abs=1e-3)
    cp = ok(subprocess.run([sys.executable, str(scripts / "plot_parametrized.py"), "h.json", "-o", "p.png"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120))
    assert cp.stderr == "" and (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # an ab of the two arms: the parameter that varies is the arm's, plotted as well
    ok(run_cli("ab", "syscall.null", "--a", "spin=1", "--b", "spin=101", "--fake-clock", "100", "-p", "4", *TINY,
               "--label", "ab"))
    ok(run_cli("report", "ab", "-f", "hyperfine-json", "-o", "ab.json"))
    ab = json.loads((tmp_path / "ab.json").read_text())["results"]
    assert [b["parameters"] for b in ab] == [{"spin": "1"}, {"spin": "101"}]
    ok(subprocess.run([sys.executable, str(scripts / "plot_parametrized.py"), "ab.json", "-o", "ab.png"],
                      cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120))
    assert (tmp_path / "ab.png").stat().st_size > 0


# --- markdown ---------------------------------------------------------------------

def test_markdown_escapes_what_would_be_markup():
    from opcost.formats.markdown import escape

    assert escape("a|b") == "a\\|b"
    assert escape("<script>alert(1)</script>") == "&lt;script>alert(1)&lt;/script>"
    assert escape("*x* _y_ `z` [l](u) ~~s~~ \\ &") == "\\*x\\* \\_y\\_ \\`z\\` \\[l\\](u) \\~\\~s\\~\\~ \\\\ &amp;"
    assert escape("line\nbreak") == "line\\\\nbreak"   # printable()'s \n, its backslash escaped: no row ends


def test_markdown_table_with_a_hostile_label(run_cli):
    ok(run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "2", *TINY, "--label", "x|y <b>*z*</b>"))
    md = ok(run_cli("report", "--last", "-f", "markdown")).stdout
    assert "(x\\|y &lt;b>\\*z\\*&lt;/b>)" in md.splitlines()[0]
    rows = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert len(rows) == 3 and len({ln.count(" | ") for ln in rows}) == 1, md   # every row has the same cells
    check_markdown(md)                                                         # and renders so


# --- several runs, -o, --force ----------------------------------------------------

def test_output_file_rules(run_cli, tmp_path):
    ok(run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "2", *TINY, "--label", "a"))
    target = tmp_path / "r.md"
    ok(run_cli("report", "a", "-f", "markdown", "-o", str(target)))
    first = target.read_text()
    assert first.startswith("**run 1** (a)")
    target.write_text("keep me\n")
    cp = run_cli("report", "a", "-f", "markdown", "-o", str(target))
    assert cp.returncode == 2 and cp.stdout == "" and len(cp.stderr.splitlines()) == 1, cp
    assert "exists; add --force" in cp.stderr and target.read_text() == "keep me\n"
    ok(run_cli("report", "a", "-f", "markdown", "-o", str(target), "--force"))
    assert target.read_text() == first
    assert ok(run_cli("report", "a", "-f", "markdown", "-o", "-")).stdout == first
    assert ok(run_cli("report", "a", "-f", "markdown")).stdout == first


def test_several_runs_concatenate_where_the_format_allows(run_cli):
    ok(run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "2", *TINY, "--label", "a"))
    ok(run_cli("run", "signal.install", "--fake-clock", "100", "-p", "2", *TINY, "--label", "b"))
    go = ok(run_cli("report", "a", "b", "-f", "go")).stdout
    assert [ln.split("-")[0] for ln in go.splitlines() if ln.startswith("Benchmark")] == \
        ["BenchmarkSyscallNull/via=libc"] * 2 + ["BenchmarkSignalInstall/refill=no"] * 2
    text = ok(run_cli("report", "a", "b")).stdout
    assert "run 1 (a)" in text and "run 2 (b)" in text
    cp = run_cli("report", "a", "b", "-f", "json")
    assert cp.returncode == 2 and "writes one document" in cp.stderr


# --- terminal: colour and width ---------------------------------------------------

def test_colour_only_on_a_tty_and_never_with_no_color(run_cli, tmp_path, probe_bin):
    # two runs a side: a verdict needs the runs as replicates (one run a side gets none)
    for label, ns in (("a", "100"), ("a2", "101"), ("b", "120"), ("b2", "121")):
        ok(run_cli("run", "syscall.null", "--fake-clock", ns, "-p", "6", *TINY, "--label", label))
    env = cli_env(tmp_path, COLUMNS="200")
    env.pop("NO_COLOR", None)
    argv = cli_argv("compare", "a,a2", "b,b2")
    assert "\x1b[31mslower\x1b[0m" in on_tty(argv, env, tmp_path)
    assert "\x1b[" not in on_tty(argv, {**env, "NO_COLOR": "1"}, tmp_path)
    assert "\x1b[" in on_tty(argv, {**env, "NO_COLOR": ""}, tmp_path)   # no-color.org: empty is unset
    piped = ok(run_cli("compare", "a,a2", "b,b2", env={"NO_COLOR": ""}))
    assert "\x1b[" not in piped.stdout and " slower" in piped.stdout
    assert "\x1b[" not in ok(run_cli("report", "--compare", "a,a2", "b,b2")).stdout


def test_tables_fit_the_terminal_and_say_what_they_left_out(run_cli, tmp_path, probe_bin):
    ok(run_cli("run", "syscall.null", "ctx.pipe:mode=process", "--fake-clock", "100", "-p", "2", *TINY,
               "--label", "a"))
    wide = ok(run_cli("show", "a", env={"COLUMNS": "60"})).stdout   # not a terminal: full width
    assert "not shown" not in wide and max(len(ln) for ln in wide.splitlines()) > 100
    out = on_tty(cli_argv("show", "a"), cli_env(tmp_path, COLUMNS="80"), tmp_path).replace("\r\n", "\n")
    table = out.split("\n\n")[0].splitlines()[1:]
    assert all(len(ln) <= 80 for ln in table[:4]), out
    hidden = next(ln for ln in out.splitlines() if ln.startswith("(not shown, to fit 80 columns: "))
    assert "cpus" in hidden and "p90" in hidden and "median" not in hidden
    assert "median" in table[0] and "95% CI" in table[0]
    narrow = on_tty(cli_argv("show", "a"), cli_env(tmp_path, COLUMNS="40"), tmp_path).replace("\r\n", "\n")
    assert "..." in narrow.split("\n\n")[0]   # the benchmark column shortened at last


def test_report_help_and_formats_import_nothing_heavy():
    """`opcost --help` builds report's parser, which lists formats.FORMATS:
    no format module may import numpy, scipy or matplotlib at module level."""
    code = ("import sys, contextlib, io\n"
            "from opcost.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    try:\n"
            "        rc = main(['report', '--help'])\n"
            "    except SystemExit as e:\n"
            "        rc = e.code\n"
            "import opcost.formats\n"
            "heavy = sorted(m for m in ('numpy', 'scipy', 'matplotlib') if m in sys.modules)\n"
            "print(rc, '--format' in out.getvalue(), heavy)\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    assert cp.stdout.strip() == "0 True []", cp


def test_a_stored_ab_run_renders_as_its_comparison_in_every_format(run_cli, tmp_path):
    """Issue 26: `report N` of a stored `ab` run shows the comparison `ab`
    printed (B/A, CI, p, verdict, the savings table), rebuilt from its plan,
    in text, markdown and html alike; json stays the stored result document."""
    ok(run_cli("ab", "syscall.null", "--a", "spin=1", "--b", "spin=21", "--fake-clock", "100", "-p", "6", *TINY,
               "--label", "inj"))
    shown = ok(run_cli("show", "inj")).stdout
    text = ok(run_cli("report", "inj", "-f", "text")).stdout
    assert text.splitlines()[1:] == shown.splitlines()[1:]    # the same table as `show` (and `ab`)
    md = ok(run_cli("report", "inj", "-f", "markdown")).stdout
    row = next(ln for ln in md.splitlines() if ln.startswith("| syscall.null |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-1] == "**slower**" and 1.09 < float(cells[4]) < 1.12, row
    assert "| per system call | A | B | saving A-B |" in md and "| elapsed |" in md
    assert md.startswith("**run 1** (inj)")
    page = tmp_path / "ab.html"
    ok(run_cli("report", "inj", "-f", "html", "-o", str(page)))
    html = page.read_text()
    assert '<span class="slower">slower</span>' in html and "saving A-B" in html and "stored run 1 (inj)" in html
    doc = json.loads(ok(run_cli("report", "inj", "-f", "json")).stdout)
    assert doc["schema"] == "opcost.result/1" and doc["kind"] == "ab"
    # a plain run is not turned into a comparison
    ok(run_cli("run", "syscall.null", "--fake-clock", "100", "-p", "2", *TINY, "--label", "plain"))
    assert "B/A" not in ok(run_cli("report", "plain", "-f", "markdown")).stdout


def test_csv_says_its_units_and_flags():
    """Issue 26: fractions say so in the header (cv_fraction, delta_fraction:
    the text's percentages / 100), and flags get a column, each once, a
    comparison's prefixed by their arm."""
    import csv as _csv
    import io

    from opcost.formats import csv as fmt

    run = {"results": [{"bench": "syscall.null", "key": "syscall.null", "params": {"cpu": "0"}, "op": "system call",
                        "status": "ok", "summary": {"n_processes": 4, "median_ns": 100.0, "cv": 0.25,
                                                     "flags": [{"flag": "unstable", "detail": "CV 25% > 5%"},
                                                               {"flag": "contended", "detail": "x"},
                                                               {"flag": "unstable", "detail": "again"}]}},
                       {"bench": "signal.install", "key": "signal.install", "params": {}, "op": "sigaction call",
                        "status": "ok", "summary": {"n_processes": 4, "median_ns": 200.0, "cv": 0.01}}]}
    rows = list(_csv.DictReader(io.StringIO(fmt.serialize(run).decode())))
    assert "cv" not in rows[0] and rows[0]["cv_fraction"] == "0.25"
    assert rows[0]["flags"] == "unstable;contended" and rows[1]["flags"] == ""
    cmp_doc = {"comparisons": [{"bench": "syscall.null", "key": "syscall.null", "op": "system call", "ratio": 1.1,
                                "delta": 0.02, "verdict": "slower",
                                "flags": [{"arm": "A", "flag": "bimodal", "detail": "", "text": "A: bimodal"},
                                          {"arm": "B", "flag": "outliers", "detail": "", "text": "B: outliers"}]}]}
    (row,) = _csv.DictReader(io.StringIO(fmt.serialize(cmp_doc).decode()))
    assert "delta" not in row and row["delta_fraction"] == "0.02" and row["flags"] == "A:bimodal;B:outliers"


def test_a_stored_variants_run_renders_as_its_comparison(run_cli, tmp_path):
    """Issue 26: `report N -f markdown` of a stored `variants` run: its builds'
    table, then the comparison `variants` printed (B/A, verdict), as `show`."""
    (tmp_path / "prog.c").write_text("int main(void) { volatile int x = 0; for (int i = 0; i < 1000; i++) x += i; "
                                     "return 0; }\n")
    ok(run_cli("variants", "prog.c", "-DA", "-DB", "--fake-clock", "1000", "-p", "3", "--cpu", "0", "--no-progress",
               "--label", "v", timeout=240))
    md = ok(run_cli("report", "v", "-f", "markdown")).stdout
    assert "| -DA | program run |" in md                       # the builds' table
    assert "| benchmark | op | A | B | B/A | 95% CI | p (Holm) | delta | verdict |" in md
    row = [ln for ln in md.splitlines() if ln.startswith("| -DB | program run | ")][-1]   # after the builds' row
    assert row.count("|") == 10 and 0.9 < float(row.split("|")[5]) < 1.1, row
    assert "B/A" in ok(run_cli("report", "v", "-f", "text")).stdout
