"""validation/harness/interleave.py: a pair whose side gave no figure because
the CPU was taken from it (script.Disturbed, e.g. lmbench's lat_ctx printing
no line beside a busy task) is run again like a disturbed pair, up to
--retries times; it fails the pair only when it stays so. Fake sides: no
timing."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from validation.anchors import parsers  # noqa: E402
from validation.anchors.summary import attempt  # noqa: E402
from validation.harness.interleave import Interleave  # noqa: E402
from validation.harness.script import Disturbed, Failure  # noqa: E402


def sides(no_figure: int, share: float = 1.0):
    """opcost always measures; the anchor gives no figure its first no_figure times."""
    calls = {"anchor": 0}

    def anchor():
        calls["anchor"] += 1
        if calls["anchor"] <= no_figure:
            raise Disturbed("lat_ctx: no 'PROCS TIME' line")
        return {"ns_per_op": 200.0, "wall_s": 1.0, "cpu_share": share}

    def opcost():
        return {"ns_per_op": 210.0, "wall_s": 1.0, "cpu_share": share}

    return {"opcost": opcost, "anchor": anchor}, calls


def il(retries: int = 3, isolate: bool = True) -> Interleave:
    return Interleave(random.Random(1), 1, retries, 0.9, isolate_failures=isolate)


def test_a_side_without_a_figure_is_run_again_and_the_pair_kept():
    s, calls = sides(no_figure=2)
    got = il().pair(1, "lat_ctx -s 0 2", s, attempt)
    assert calls["anchor"] == 3 and got["ratio"] == pytest.approx(1.05)
    assert got["no_figure_reruns"] == 2 and got["reruns"] == 2 and "error" not in got


def test_a_side_that_never_gives_a_figure_fails_the_pair_after_the_retries():
    s, calls = sides(no_figure=10)
    got = il(retries=3).pair(1, "lat_ctx -s 0 2", s, attempt)
    assert calls["anchor"] == 4 and "no 'PROCS TIME' line" in got["error"] and got["attempts"] == []
    with pytest.raises(Failure):     # without isolate_failures the script ends, one line
        il(retries=1, isolate=False).pair(1, "lat_ctx -s 0 2", sides(no_figure=10)[0], attempt)


def test_a_disturbed_figure_then_no_figure_keeps_the_figure():
    """Attempt 1 measured with a low CPU share (disturbed, run again);
    attempt 2 gave no figure and was the last: attempt 1 is kept."""
    s, calls = sides(no_figure=0, share=0.5)
    s2 = dict(s)
    n = {"i": 0}

    def anchor():
        n["i"] += 1
        if n["i"] > 1:
            raise Disturbed("no figure")
        return s["anchor"]()

    s2["anchor"] = anchor
    got = il(retries=1).pair(1, "x", s2, attempt)
    assert got["disturbed"] is True and got["ratio"] == pytest.approx(1.05) and got["no_figure_reruns"] == 1


def test_lat_ctx_without_its_line_is_no_figure_but_a_missing_overhead_is_a_format_error():
    with pytest.raises(parsers.NoFigure):
        parsers.parse_lat_ctx('\n"size=0k ovr=0.29\n')
    with pytest.raises(ValueError) as e:
        parsers.parse_lat_ctx("2 0.66\n")
    assert not isinstance(e.value, parsers.NoFigure)
