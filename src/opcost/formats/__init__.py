"""Exporters: one module per format, registered in FORMATS. A format module
has NAME, KINDS (the documents it takes, as model.kind_of names them:
"result" for opcost.result/1, "comparison" for opcost.comparison/1,
"series" for opcost.series/1 once it exists) and `serialize(doc) -> bytes`;
optionally MANY, the bytes between the outputs of several documents when
their concatenation still reads as one (text, markdown, go): without it a
format takes one document at a time. Files are written by opcost.output, the
one writer. A format module imports nothing heavy at module level (the
parsers list FORMATS for `opcost --help`).
optional: available() (None, or the line saying what to install: checked
when --export is parsed, before anything is measured) and LIVE = False
(written at the end of a run only, not rewritten after every process).

Adding a format is one file here and one entry in FORMATS.
"""

from __future__ import annotations

from .. import output
from ..errors import UsageError
from ..model import kind_of
from ..safetext import screen
from . import csv, go, hyperfine_json, html, json, markdown, text

FORMATS = {m.NAME: m for m in (
    json,
    csv,
    text,
    markdown,
    go,
    hyperfine_json,
    html,
)}


def parse(text: str, option: str = "--export") -> tuple[str, str]:
    """`FORMAT:FILE` (FILE '-': stdout) -> (format, path), checked."""
    fmt, sep, path = text.partition(":")
    if not sep or fmt not in FORMATS:
        raise UsageError(f"{option} {text}: give FORMAT:FILE with FORMAT one of {', '.join(FORMATS)} "
                         f"(e.g. {option} csv:out.csv; '-' as FILE is standard output)")
    missing = getattr(FORMATS[fmt], "available", lambda: None)()   # a format's optional library, before measuring
    if missing:
        raise UsageError(f"{option} {fmt}: {missing}")
    output.check_target(path, f"{option} {fmt}:")
    return fmt, path


def check(exports: list[tuple[str, str]], kind: str) -> None:
    """Each format takes the kind of document this command produces; at
    most one export goes to standard output."""
    for fmt, _ in exports:
        if kind not in FORMATS[fmt].KINDS:
            article = "an" if kind[0] in "aeiou" else "a"
            raise UsageError(f"--export {fmt}: this command writes {article} {kind} document, which {fmt} does not "
                             f"take (it takes: {', '.join(FORMATS[fmt].KINDS)})")
    if sum(1 for _, p in exports if p == output.STDOUT) > 1:
        raise UsageError("two exports to standard output ('-'); give files for all but one")


# Formats whose text reaches a terminal or a viewer as it is: stored text in
# them (an imported result's op, a label) is screened (safetext.screen).
# JSON escapes control characters itself.
_SCREENED = ("csv", "text", "markdown", "go", "html")


def serialize(fmt: str, doc: dict) -> bytes:
    return screened(fmt, FORMATS[fmt].serialize(doc))


def screened(fmt: str, data: bytes) -> bytes:
    """`data` in format `fmt` with stored text's control characters escaped
    (safetext.screen), for the formats that need it."""
    if fmt in _SCREENED:
        text = data.decode("utf-8", "surrogateescape")
        screened = screen(text, crlf=True)
        if screened is not text:
            data = screened.encode("utf-8", "surrogateescape")
    return data


def write(exports: list[tuple[str, str]], doc: dict) -> None:
    """Every requested export of one document."""
    kind = kind_of(doc)
    for fmt, path in exports:
        if kind in FORMATS[fmt].KINDS:
            output.save(path, serialize(fmt, doc))


def to_stdout(exports: list[tuple[str, str]]) -> bool:
    return any(p == output.STDOUT for _, p in exports)
