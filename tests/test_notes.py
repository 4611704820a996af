"""Issue 35 item 1: notes that point. Under a run's table the terminal shows
one line per kind of note across the benchmarks (how many, the range of its
figure, the one thing to do; a noise kind on nearly every benchmark said
once, as the machine's), every note of every benchmark with --notes, and
every export carries every note as before. The results here are built
(flags as stats.flags writes them), so nothing depends on this CPU."""

from __future__ import annotations

import copy
import html
import json
import re

from opcost import formats
from opcost.tables import format_results

NAMES = [f"b{i}" for i in range(10)]


def _flags(i: int) -> list[dict]:
    """b0-b9 all contended (the machine), b0-b2 unstable, b3 stealing, b4
    and b5 with an outlier each, b6 bimodal."""
    out = [{"flag": "contended", "lost_share": 0.1 + i / 100, "detail": f"{10 + i:.1f}% of the measured time lost "
            "waiting for the CPU (run delay: runnable, another task running); 50 of 200 batches lost > 1%"}]
    if i < 3:
        out.append({"flag": "unstable", "detail": f"CV of process medians {6 + i:.1%} > 5%"})
    if i == 3:
        out.append({"flag": "steal", "detail": "2 of 200 batches saw hypervisor steal time"})
    if i in (4, 5):
        out.append({"flag": "outliers", "detail": f"1 process(es) beyond 3 MADs and 2% off the median: #{i} (+9.0%)",
                    "processes": [i], "rounds": [i]})
    if i == 6:
        out.append({"flag": "bimodal", "detail": "2 levels, 70% at 1.00x, 30% at 1.40x of the median",
                    "levels": [{}, {}]})
    return out


def _doc() -> dict:
    """A result document of ten benchmarks carrying the flags above."""
    res = []
    for i, name in enumerate(NAMES):
        s = {"process_medians_ns": [100.0] * 5, "median_ns": 100.0, "n_processes": 5, "cv": 0.06 + i / 100 if i < 3
             else 0.01, "min_ns": 99.0, "p90_ns": 101.0, "ci95_ns": [99.5, 100.5], "flags": _flags(i)}
        res.append({"bench": name, "key": name, "op": "x", "status": "ok", "params": {}, "processes": [],
                    "summary": s})
    return {"schema": "opcost.result/1", "run_id": 1, "created": "2026-11-29T00:00:00Z", "status": "complete",
            "results": res}


def _every_note(doc: dict) -> list[str]:
    return [f"{r['key']}: {f['flag']}: {f['detail']}" for r in doc["results"] for f in r["summary"]["flags"]]


def test_grouped_one_line_per_kind_each_with_what_to_do():
    doc = _doc()
    text = format_results(doc["results"], all_notes=False)
    notes = text.split("\n\nnotes")[1].splitlines()[1:]
    assert notes[0].startswith("  this machine: contended in 10 of 10 benchmarks, 10.0-19.0% of the measured time "
                               "lost") and "opcost env --check" in notes[0], notes
    unstable = [n for n in notes if n.startswith("  unstable")]
    assert unstable == ["  unstable (CV > 5%): 3 of 10 benchmarks (b0, b1, b2), CV 6.0-8.0%; more processes (-p), "
                        "or a quieter machine (opcost env --check)"]
    # a kind on one benchmark is its own note; two benchmarks: one line for both
    assert "  b3: steal: 2 of 200 batches saw hypervisor steal time" in notes
    assert any(n.startswith("  outliers: 2 of 10 benchmarks (b4, b5), 1 process each;") for n in notes)
    kinds = [re.match(r"  (this machine: )?(\w[\w ()>%]*?)[: ]", n).group(2) for n in notes]
    assert len(notes) == 5 and len(set(kinds)) == len(kinds), notes
    # most telling first: the machine, then bimodal, unstable, steal, outliers
    assert [n.split(":")[0].strip() for n in notes][1:] == ["b6", "unstable (CV > 5%)", "b3", "outliers"]
    assert f"all {len(_every_note(doc))}, per benchmark: --notes" in text


def test_all_notes_is_every_note_as_before():
    doc = _doc()
    text = format_results(doc["results"])
    assert text.split("\n\nnotes:\n")[1].splitlines() == ["  " + n for n in _every_note(doc)]


def test_every_export_carries_every_note(tmp_path):
    """text, markdown, html and json: every note of every benchmark; csv:
    every flag by name (its `flags` column, as before)."""
    doc = _doc()
    want = _every_note(doc)
    for fmt in ("text", "markdown", "html", "json", "csv"):
        out = tmp_path / f"r.{fmt}"
        formats.write([(fmt, str(out))], copy.deepcopy(doc))
        got = out.read_text()
        if fmt == "json":
            back = json.loads(got)
            assert _every_note(back) == want
        elif fmt == "csv":
            for r in doc["results"]:
                line = next(ln for ln in got.splitlines() if ln.startswith(r["key"] + ","))
                assert all(f["flag"] in line for f in r["summary"]["flags"]), (fmt, line)
        else:
            got = html.unescape(got) if fmt == "html" else got.replace("\\", "")
            missing = [n for n in want if n not in got]
            assert not missing, (fmt, missing)


def test_run_and_show_group_and_notes_flag_shows_all(run_cli, tmp_path):
    """The CLI: `run` and `show` group by kind; --notes prints each note."""
    specs = ["mem.pagefault:size=1048576|2097152", "-p", "3", "-n", "3", "--fake-clock", "100", "--no-progress"]
    cp = run_cli("run", *specs)
    assert cp.returncode == 0, cp.stderr
    assert ("several operations an iteration: 2 of 2 benchmarks (mem.pagefault:size=1048576, "
            "mem.pagefault:size=2097152); per iteration: --notes") in cp.stdout
    assert "mem.pagefault:size=1048576: one iteration" not in cp.stdout
    full = run_cli("show", "1", "--notes").stdout
    for size in (1048576, 2097152):
        assert f"mem.pagefault:size={size}: one iteration" in full
    assert "several operations an iteration" not in full
    assert "several operations an iteration: 2 of 2" in run_cli("show", "1").stdout
