"""MkDocs hook: the pages that list the export formats by hand list exactly
those of `opcost.formats.FORMATS` (the code is the one list), and the table
of `opcost report` says which documents each takes as its KINDS do. A format
added to FORMATS and not to these pages (or one removed) fails the build,
naming the page and what to write; tests/test_recipes.py runs the same check.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_KIND_WORDS = {"result": "run", "comparison": "comparison", "series": "series", "fleet": "fleet"}

# page -> the pattern whose first group is the hand-kept list of format names
LISTS = {
    "architecture.md": r"file formats \(`formats/`: ([^)]*)\)",
    "layout.md": r"formats/ +file formats: one module each \(([^)]*)\)",
    "commands/run.md": r"the same document as FORMAT \(([^:]*):",
}


def _formats() -> dict:
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    from opcost.formats import FORMATS

    return FORMATS


def _names(text: str) -> list[str]:
    return [n.replace("_", "-") for n in re.findall(r"[a-z][a-z_-]*", text.replace("`", ""))]


def problems(docs: Path = DOCS) -> list[str]:
    """What the pages say wrong about the formats; empty when they agree with the code."""
    formats = _formats()
    want = list(formats)
    out = []
    for page, pattern in LISTS.items():
        m = re.search(pattern, (docs / page).read_text())
        if m is None:
            out.append(f"docs/{page}: its list of formats is gone (expected to match {pattern!r})")
        elif _names(m.group(1)) != want:
            out.append(f"docs/{page}: lists formats {_names(m.group(1))}; write {want} (formats.FORMATS, in its order)")
    rows = dict(re.findall(r"^\| `([a-z][a-z-]*)`(?: \(default\))? \| ([a-z ,()]+?) \|", (docs / "commands/report.md").read_text(),
                           re.MULTILINE))
    if sorted(rows) != sorted(want):
        out.append(f"docs/commands/report.md: its --format table has rows {list(rows)}; write one for each of {want}")
    for name, m in formats.items():
        said = re.sub(r" \([^)]*\)", "", rows.get(name, "")).split(", ")
        kinds = [_KIND_WORDS[k] for k in m.KINDS]
        if name in rows and said != kinds:
            out.append(f"docs/commands/report.md: `{name}` takes {said}; its KINDS say {kinds}")
    return out


def on_config(config, **kwargs):
    from mkdocs.exceptions import PluginError

    found = problems()
    if found:
        raise PluginError("the formats' lists disagree with opcost.formats.FORMATS:\n" + "\n".join(found))
    return config
