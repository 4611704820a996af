"""The markdown check the report tests and the CI gate's tests share: the
text renders (Python-Markdown with its tables extension, what mkdocs uses)
with every pipe table a <table> whose rows all have the header's number of
cells: a stray `|` in a label or an unescaped one in a cell would break it."""

from __future__ import annotations

import re
from html.parser import HTMLParser


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[int]] = []    # per table, the cells of each row

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append(0)
        elif tag in ("td", "th") and self.tables and self.tables[-1]:
            self.tables[-1][-1] += 1


def check_markdown(md: str) -> str:
    """The HTML of `md`; fails unless each pipe table of the source renders
    as a table with as many cells in every row as in its header."""
    import markdown

    html = markdown.markdown(md, extensions=["tables"])
    source: list[list[str]] = []
    prev = False
    for line in md.splitlines():
        is_row = line.startswith("|")
        if is_row and not prev:
            source.append([])
        if is_row:
            source[-1].append(line)
        prev = is_row
    p = _Tables()
    p.feed(html)
    assert len(p.tables) == len(source), f"{len(source)} pipe tables in the markdown, {len(p.tables)} rendered:\n{md}"
    for rows, lines in zip(p.tables, source):
        assert len(rows) == len(lines) - 1, f"a table lost rows ({len(rows)} of {len(lines) - 1}):\n" + "\n".join(lines)
        assert len(set(rows)) == 1, f"rows with different numbers of cells {rows}:\n" + "\n".join(lines)
        pipes = [len(re.findall(r"(?<!\\)\|", ln.strip())) for ln in lines]
        assert len(set(pipes)) == 1 and pipes[0] - 1 == rows[0], \
            f"a row whose unescaped | make other cells than its header's ({pipes}):\n" + "\n".join(lines)
    return html
