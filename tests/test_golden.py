"""The outputs of run, ab, compare, variants and show are what they were when
tests/golden/ was captured (tests/golden_cases.py says how and what is masked)."""

from __future__ import annotations

import difflib

from golden_cases import GOLDEN, capture


def test_outputs_match_the_golden_files(probe_bin):
    got = capture()
    want = {p.name: p.read_text() for p in GOLDEN.iterdir()}
    assert sorted(got) == sorted(want)
    diffs = []
    for name in sorted(want):
        if got[name] != want[name]:
            diffs.append("".join(difflib.unified_diff(want[name].splitlines(True), got[name].splitlines(True),
                                                      f"golden/{name}", f"now/{name}", n=2))[:3000])
    assert not diffs, "\n".join(diffs)
