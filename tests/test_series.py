"""Series (issue 14): the change-point detector on synthetic data, the
opcost.series/1 document, `opcost series` over stored labelled runs and
`opcost series --run ... --over ...` measuring its labels, and bad input
that only a store with runs can show (the rest is in data/malformed.txt)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from opcost import changepoint
from opcost.errors import UsageError
from opcost.model import SERIES_SCHEMA
from opcost.series import Label, document, read_order
from opcost.spec import parse_over

FAST = ["--fake-clock", "100", "-p", "3", "-n", "3", "-w", "1", "--target-ms", "1", "--no-progress"]


def synthetic(n_labels: int, step: float, at: int | None, sigma: float = 0.01, per: int = 5, seed: int = 1):
    rng = np.random.default_rng(seed)
    return [100.0 * np.exp(rng.normal(0, sigma, per) + (np.log1p(step) if at is not None and i >= at else 0.0))
            for i in range(n_labels)]


# --- the detector -----------------------------------------------------------------

@pytest.mark.parametrize("n,at", [(10, 4), (10, 1), (30, 17), (30, 28)])
def test_step_found_at_its_label(n, at):
    a = changepoint.analyse(synthetic(n, 0.05, at, seed=n + at), resamples=500)
    assert [c["index"] for c in a["change_points"]] == [at]
    c = a["change_points"][0]
    assert c["verdict"] == "slower" and 0.03 < c["ratio"] - 1 < 0.07
    assert c["left"] == [0, at] and c["right"] == [at, n]
    assert c["neighbours"]["verdict"] in ("slower", "inconclusive")


def test_two_steps_both_found():
    labels = synthetic(20, 0.06, 6, seed=3)
    labels = [x * (0.9 if i >= 14 else 1.0) for i, x in enumerate(labels)]
    a = changepoint.analyse(labels, resamples=500)
    assert [(c["index"], c["verdict"]) for c in a["change_points"]] == [(6, "slower"), (14, "faster")]


@pytest.mark.parametrize("seed", range(5))
def test_flat_series_has_none(seed):
    a = changepoint.analyse(synthetic(30, 0.0, None, seed=seed), resamples=500)
    assert a["change_points"] == []


def test_step_below_delta_dropped():
    # 1% with 0.1% noise: the detector finds it, delta (2%) drops it.
    a = changepoint.analyse(synthetic(12, 0.01, 6, sigma=0.001), resamples=500)
    assert a["candidates"]["indices"] == [6]
    assert a["change_points"] == []
    assert a["rejected"][0]["index"] == 6 and "below delta" in a["rejected"][0]["why"]
    # ... and a 1% delta keeps it
    a = changepoint.analyse(synthetic(12, 0.01, 6, sigma=0.001), delta=0.005, resamples=500)
    assert [c["index"] for c in a["change_points"]] == [6]


def test_noise_is_pooled_within_labels_and_robust():
    labels = synthetic(10, 0.2, 5, sigma=0.02, per=10, seed=7)
    nz = changepoint.noise([np.asarray(x) for x in labels])
    assert 0.012 < nz["sigma"] < 0.03          # the step between labels is not noise
    labels[3][0] *= 3                          # one wild process
    assert changepoint.noise([np.asarray(x) for x in labels])["sigma"] < 0.03


def test_single_process_labels_use_successive_medians():
    labels = [[100.0 + (i % 2) * 0.5] for i in range(8)]
    nz = changepoint.noise([np.asarray(x) for x in labels])
    assert "successive" in nz["method"] and nz["sigma"] > 0.003


def test_labels_table_changes():
    rows = changepoint.labels_table([np.array([100.0, 101, 99]), np.array([110.0, 111, 109]),
                                     np.array([121.0, 120, 122])], resamples=500)
    assert rows[0]["vs_previous"] is None and rows[0]["vs_first"] is None
    assert rows[1]["vs_previous"]["change"] == pytest.approx(0.10)
    assert rows[2]["vs_first"]["change"] == pytest.approx(0.21)
    lo, hi = rows[2]["vs_first"]["ci95_change"]
    assert lo <= 0.21 <= hi
    assert rows[1]["median_ns"] == 110.0 and rows[1]["n_processes"] == 3


def test_too_few_labels_or_bad_values():
    with pytest.raises(ValueError, match="at least 3"):
        changepoint.analyse([[1.0, 2.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="finite"):
        changepoint.analyse([[1.0], [0.0], [1.0]])


# --- the document -------------------------------------------------------------------

def test_document_schema_and_json():
    labels = [Label(f"c{i}", list(x), [i + 1], {"spin": "1" if i < 5 else "40"})
              for i, x in enumerate(synthetic(8, 0.08, 5, seed=2))]
    doc = document(labels, kind="stored", interleaved=False, bench="syscall.null", spec="syscall.null",
                   by="commit", order="time", delta=0.02, notes=["a note"], env_differences=[])
    doc = json.loads(json.dumps(doc, allow_nan=False))
    assert doc["schema"] == SERIES_SCHEMA == "opcost.series/1"
    for k in ("opcost_version", "kind", "interleaved", "bench", "spec", "by", "order", "differing", "labels",
              "noise", "candidates", "change_points", "rejected", "delta_requested", "alpha", "notes"):
        assert k in doc, k
    assert doc["differing"] == {"spin": ["1"] * 5 + ["40"] * 3}
    assert [lb["change_point"] for lb in doc["labels"]] == [i == 5 for i in range(8)]
    lb = doc["labels"][5]
    assert set(lb) >= {"value", "runs", "pooled", "params", "n_processes", "median_ns", "ci95_ns",
                       "vs_previous", "vs_first", "change_point"}
    (c,) = doc["change_points"]
    assert c["label"] == "c5" and c["previous"] == "c4" and c["verdict"] == "slower"
    assert c["ci95_change"][0] < c["change"] < c["ci95_change"][1]
    assert c["left"] == {"first": "c0", "last": "c4", "n_labels": 5, "n_processes": 25}
    # stored runs, one a label: the run is the unit, so the two labels alone (one run each) are no sample
    assert doc["unit"] == "run" and c["neighbours"] is None
    inter = document(labels, kind="measured", interleaved=True, bench="syscall.null", spec="syscall.null",
                     by="commit", order="over", delta=0.02, notes=[])
    assert inter["unit"] == "process"
    assert set(inter["change_points"][0]["neighbours"]) == {"ratio", "ci95_ratio", "p_value", "verdict"}


def test_document_needs_three_labels():
    with pytest.raises(UsageError, match="at least 3 labels"):
        document([Label("a", [1.0]), Label("b", [1.0])], kind="stored", interleaved=False, bench="x", spec="x",
                 by="k", order="time", delta=0.02, notes=[])


def test_parse_over_and_order(tmp_path):
    assert parse_over("spin=1|1|4") == ("spin", ["1", "1", "4"])
    for bad in ("spin", "spin=1|4", "=1|2|3", "spin=1||3"):
        with pytest.raises(UsageError):
            parse_over(bad)
    assert read_order("a, b,c", None) == (["a", "b", "c"], "order")
    f = tmp_path / "order.txt"
    f.write_text("# git rev-list --reverse\nabc\n\ndef\n")
    assert read_order(None, str(f)) == (["abc", "def"], "order-file")
    assert read_order(None, None) == (None, "time")
    with pytest.raises(UsageError, match="twice"):
        read_order("a,b,a", None)


# --- end to end ---------------------------------------------------------------------

def _label_runs(run_cli, values, bench="syscall.null", extra=()):
    for v in values:
        cp = run_cli("run", bench, *FAST, "--label", f"commit={v}", *extra)
        assert cp.returncode == 0, cp.stderr


def test_stored_series_end_to_end(run_cli, tmp_path):
    _label_runs(run_cli, ["aaa", "bbb", "ccc", "ddd"])
    _label_runs(run_cli, ["bbb"])                       # a second run of one value: pooled
    out = tmp_path / "s.json"
    cp = run_cli("series", "syscall.null", "--by", "commit", "--order", "aaa,bbb,ccc,ddd", "--json", str(out))
    assert cp.returncode == 0, cp.stderr
    assert "not interleaved" in cp.stdout and "commit" in cp.stdout and "vs previous" in cp.stdout
    assert "2 runs pooled" in cp.stdout
    doc = json.loads(out.read_text())
    assert doc["schema"] == "opcost.series/1" and doc["interleaved"] is False and doc["order"] == "order"
    assert [lb["value"] for lb in doc["labels"]] == ["aaa", "bbb", "ccc", "ddd"]
    assert [lb["n_processes"] for lb in doc["labels"]] == [3, 6, 3, 3]
    assert doc["labels"][1]["pooled"] is True
    # default order: the time of the runs; --order-file
    cp = run_cli("series", "syscall.null", "--by", "commit", "--json", "-")
    assert [lb["value"] for lb in json.loads(cp.stdout)["labels"]] == ["aaa", "bbb", "ccc", "ddd"]
    (tmp_path / "o.txt").write_text("ddd\nccc\naaa\n")
    cp = run_cli("series", "syscall.null", "--by", "commit", "--order-file", "o.txt", "--json", "-")
    assert [lb["value"] for lb in json.loads(cp.stdout)["labels"]] == ["ddd", "ccc", "aaa"]


def test_stored_series_refuses_other_machines_unless_forced(run_cli, tmp_path):
    _label_runs(run_cli, ["a", "b", "c"])
    db = tmp_path / "opcost" / "opcost.db"
    with sqlite3.connect(db) as con:
        rid, env = con.execute("SELECT id, env FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        env = json.loads(env)
        env["cpu_model_name"] = {"value": "Another CPU 9000", "source": "test"}
        con.execute("UPDATE runs SET env = ? WHERE id = ?", (json.dumps(env), rid))
    cp = run_cli("series", "syscall.null", "--by", "commit")
    assert cp.returncode == 2 and "different machines" in cp.stderr and "--force" in cp.stderr
    assert "Traceback" not in cp.stderr
    cp = run_cli("series", "syscall.null", "--by", "commit", "--force")
    assert cp.returncode == 0, cp.stderr
    assert "--force: runs from different machines" in cp.stdout


def test_stored_series_other_benchmark_and_variants(run_cli):
    _label_runs(run_cli, ["a", "b", "c"])
    _label_runs(run_cli, ["d"], bench="ctx.yield")
    cp = run_cli("series", "syscall.null", "--by", "commit", "--order", "a,b,c,d")
    assert cp.returncode == 2 and "did not measure syscall.null" in cp.stderr
    cp = run_cli("series", "syscall.null", "--by", "commit")
    assert cp.returncode == 0 and "did not measure syscall.null" in cp.stdout
    cp = run_cli("run", "syscall.null:via=libc|inline", *FAST, "--label", "commit=e")
    assert cp.returncode == 0, cp.stderr
    cp = run_cli("series", "syscall.null", "--by", "commit", "--order", "a,b,e")
    assert cp.returncode == 2 and "holds 2 variants" in cp.stderr and "via=" in cp.stderr
    cp = run_cli("series", "syscall.null:via=libc", "--by", "commit", "--order", "a,b,e")
    assert cp.returncode == 0, cp.stderr
    cp = run_cli("series", "syscall.null:via=nosuch", "--by", "commit")
    assert cp.returncode == 2 and "holds a variant matching syscall.null:via=nosuch" in cp.stderr, cp.stderr


def test_measured_series_finds_a_large_step(run_cli, tmp_path):
    """Real timing, tiny: spin=1000 adds some 300 ns to a ~100 ns syscall,
    far beyond any noise of a shared machine. The three equal labels each
    side are flat series, which by design hold a false change point in at
    most 5% of series (docs/statistics.md; one CI run of this test found
    one, between two spin=1 labels): up to 5 attempts, each stored (the
    last is the one checked), so the test fails falsely with probability
    under (2 x 0.05) ** 5 = 1e-5."""
    out = tmp_path / "m.json"
    for _ in range(5):
        cp = run_cli("series", "--run", "syscall.null", "--over", "spin=1|1|1|1000|1000|1000", "-p", "4", "-n", "3",
                     "-w", "1", "--target-ms", "1", "--no-progress", "--json", str(out), timeout=300)
        assert cp.returncode == 0, cp.stderr
        doc = json.loads(out.read_text())
        if [c["index"] for c in doc["change_points"]] == [3]:
            break
    else:
        pytest.fail(f"5 attempts, the last's change points: {doc['change_points']}")
    assert doc["kind"] == "measured" and doc["interleaved"] is True and doc["by"] == "spin"
    assert doc["differing"] == {"spin": ["1", "1", "1", "1000", "1000", "1000"]}
    assert doc["change_points"][0]["verdict"] == "slower"
    assert "interleaved: each round ran every label once" in cp.stdout
    assert "stored as run" in cp.stderr
    # one stored run of kind series, every label a result, rounds interleaved
    runs = json.loads(run_cli("history", "--json").stdout)
    assert runs[0]["kind"] == "series" and runs[0]["n_results"] == 6
    text = run_cli("show", str(runs[0]["id"])).stdout
    assert "syscall.null by spin, 6 labels, interleaved" in text and "change points (1" in text
    shown = json.loads(run_cli("show", str(runs[0]["id"]), "--json", "-").stdout)
    seqs = {}
    for i, r in enumerate(shown["results"]):
        for p in r["processes"]:
            seqs.setdefault(p["round"], []).append((p["seq"], i))
    assert all(sorted(i for _, i in v) == list(range(6)) for v in seqs.values())
    orders = [tuple(i for _, i in sorted(v)) for v in seqs.values()]
    assert len(set(orders)) > 1      # a fresh random order per round (4 rounds of 6 labels)


def test_report_takes_a_series_and_html_takes_several_runs(run_cli, tmp_path):
    """`opcost report --series BENCH --by KEY` is the series' document in any
    format that takes one (json the same as `series --json`); a format that
    does not take a series says so; html draws several runs on one page."""
    _label_runs(run_cli, ["aaa", "bbb", "ccc"])
    cp = run_cli("report", "--series", "syscall.null", "--by", "commit", "--order", "aaa,bbb,ccc", "-f", "json")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    ref = json.loads(run_cli("series", "syscall.null", "--by", "commit", "--order", "aaa,bbb,ccc",
                             "--json", "-").stdout)
    assert doc["schema"] == "opcost.series/1" and doc["labels"] == ref["labels"]
    cp = run_cli("report", "--series", "syscall.null", "--by", "commit", "-f", "go")
    assert cp.returncode == 2 and "does not take a series document" in cp.stderr
    pytest.importorskip("matplotlib")
    page = tmp_path / "s.html"
    cp = run_cli("report", "--series", "syscall.null", "--by", "commit", "-f", "html", "-o", str(page))
    assert cp.returncode == 0, cp.stderr
    assert b"<svg" in page.read_bytes() and b"aaa" in page.read_bytes()
    page = tmp_path / "runs.html"
    cp = run_cli("report", "id:1", "id:2", "id:3", "-f", "html", "-o", str(page))
    assert cp.returncode == 0, cp.stderr
    assert page.read_bytes().count(b"<svg") >= 1


def test_labels_carry_their_flags_and_an_end_change_point_is_unconfirmed():
    """Issue 25: a flagged label is marked in the table, JSON, markdown and
    HTML; a change point at the last label rests on that label alone and
    is `unconfirmed`, with how to confirm it; one inside is not."""
    from opcost.formats import markdown
    from opcost.tables import format_series

    # 10 labels: with the penalty calibrated by permuting the runs over the
    # labels, a step carried by the last label's two runs can only stand out of
    # a series long enough that both runs rarely land at one end by chance
    # (2 x 2/11 x 1/10 = 3.6% of the permutations, under the 5% level).
    xs = synthetic(10, 0.10, 9, seed=3)
    flags = [{"flag": "contended", "detail": "46.6% of the measured time lost"}]
    labels = [Label(f"c{i}", list(x), [i + 1], flags=flags if i == 2 else []) for i, x in enumerate(xs)]
    # the last label measured by one run only: no run-to-run spread on its side, so no change point
    one = document(labels, kind="stored", interleaved=False, bench="syscall.null", spec="syscall.null",
                   by="commit", order="time", delta=0.02, notes=[])
    # (the permutation-calibrated penalty may leave no candidate at all; any that
    # PELT proposes at the last label is rejected for its one run)
    assert one["change_points"] == [] and all("one run on a side" in r["why"] for r in one["rejected"])
    labels[9].runs, labels[9].run_medians = [10, 11], [list(xs[9][:3]), list(xs[9][3:])]
    doc = document(labels, kind="stored", interleaved=False, bench="syscall.null", spec="syscall.null",
                   by="commit", order="time", delta=0.02, notes=[])
    doc = json.loads(json.dumps(doc, allow_nan=False))
    assert doc["labels"][2]["flags"] == flags and doc["labels"][0]["flags"] == []
    (c,) = doc["change_points"]
    assert c["index"] == 9 and c["unconfirmed"] is True and "c7, c8, c9" in c["confirm"]
    text = format_series(doc)
    assert "slower unconfirmed" in text and "unconfirmed: c9 is the only label on its side" in text
    head, *rows = [ln for ln in text.splitlines() if ln.split()[:1] in (["commit"], ["c2"])]
    assert head.split()[-1] == "flags" and rows[0].split()[-1] == "contended"
    assert "c2: contended: 46.6% of the measured time lost" in text
    md = markdown.serialize(doc).decode()
    assert "| contended |" in md and "unconfirmed" in md and "46.6%" in md
    inside = document([Label(f"c{i}", list(x), [i + 1]) for i, x in enumerate(synthetic(8, 0.10, 4, seed=4))],
                      kind="measured", interleaved=True, bench="b", spec="b", by="k", order="over", delta=0.02,
                      notes=[])
    (c,) = inside["change_points"]
    assert c["index"] == 4 and c["unconfirmed"] is False and "flags" not in format_series(inside).splitlines()[1]
    pytest.importorskip("matplotlib")
    from opcost.formats import html

    page = html.serialize(doc).decode()
    assert "contended" in page and "unconfirmed" in page


def test_noise_sees_both_levels_of_bimodal_processes():
    """Issue 25: on 70/30 processes on two levels 20% apart (1% within a
    level), the pairwise robust estimate reads about the within-level 1%;
    the noise must see the levels (their SD is about 10%), and stay near
    the truth on plain normal noise."""
    rng = np.random.default_rng(11)
    bimodal = [np.where(rng.random(10) < 0.3, 80.0, 100.0) * np.exp(0.01 * rng.standard_normal(10))
               for _ in range(10)]
    true_sd = float(np.std(np.log(np.concatenate(bimodal))))
    assert changepoint.noise(bimodal)["sigma"] > 0.7 * true_sd
    normal = [100 * np.exp(0.02 * rng.standard_normal(10)) for _ in range(10)]
    assert 0.015 < changepoint.noise(normal)["sigma"] < 0.027


def test_stored_series_with_run_offsets_stays_flat():
    """Issue 25: a flat series of stored runs (one run a label, 10
    processes, 2% process noise, a 1% offset per run) analysed with the run
    as the unit: at most 0.05 false change points per series
    (validation/series/stored_runs.py measures 0.020 over 200 series). 60
    seeded series; failing needs 9 or more false change points in 60 series
    (Poisson tail: 4e-3 at 0.05, 5e-6 at the measured 0.020)."""
    rng = np.random.default_rng(5)
    false = 0
    for _ in range(60):
        runs = [[100 * np.exp(0.02 * rng.standard_normal(10) + 0.01 * rng.standard_normal())] for _ in range(10)]
        a = changepoint.analyse([r[0] for r in runs], table=False, resamples=200, runs=runs)
        false += len(a["change_points"])
    assert false < 9


def test_series_run_penalty_is_calibrated_by_permuting_labels_within_rounds():
    """Issue 25: `series --run` sets its penalty from label permutations
    within rounds (seeded, so the same data give the same penalty). On flat
    series with drift between rounds (each round its own offset) and
    bimodal processes, one split beats that penalty in about 5% of series
    by construction, and the penalty used is never below it: PELT's
    candidates land on at most 10% of 300 seeded series (binomial tail at a
    true 5%: 1.3e-4; seeded: 2 of 300), and the confirmed change points stay
    under 0.05 a series (seeded: 2 in 300; the permutation penalty alone let
    14 through, the reason the noise's penalty stays a floor)."""
    rng = np.random.default_rng(3)
    any_cand = cps = 0
    for _ in range(300):
        drift = 0.02 * rng.standard_normal(6)
        groups = [100 * np.exp(drift + np.where(rng.random(6) < 0.3, np.log(0.8), 0.0)
                               + 0.01 * rng.standard_normal(6)) for _ in range(8)]
        rounds = [list(range(6))] * 8
        a = changepoint.analyse(groups, table=False, resamples=200, rounds=rounds)
        assert a["candidates"]["calibration"]["permutations"] == changepoint.PERMUTATIONS
        any_cand += bool(a["candidates"]["indices"])
        cps += len(a["change_points"])
    assert any_cand <= 30, any_cand
    assert cps <= 10, cps
    p1 = changepoint.permutation_penalty(groups, rounds, seed=1)
    assert p1 == changepoint.permutation_penalty(groups, rounds, seed=1) and 0 < p1["p_any_change"] <= 1
    assert changepoint.permutation_penalty([g[:1] for g in groups], [[i] for i in range(8)]) is None
