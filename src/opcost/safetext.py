"""Text that came from users, files or a store (labels, run references,
parameters, an imported result's op), made safe to print: no terminal
control. Imported by cli, so it stays tiny.

`printable` is for text inside a one-line message; `screen` is the one path
at the output edge (console.emit, formats.serialize of text formats, cli's
error line): every line as it is, its control characters escaped."""

from __future__ import annotations

import re

# opcost's own colour (tables.py: a verdict word in SGR colour), kept by
# `screen(..., color=True)`, only when colour is on (a terminal, no NO_COLOR).
_SGR = re.compile(r"(\x1b\[[0-9;]*m)")


def _escape(c: str) -> str:
    return repr(c)[1:-1] if c != "\\" else c


def printable(text) -> str:
    """`text` with control characters and other unprintable ones escaped
    (\\n, \\x1b, \\u202e), so that it prints on one line and cannot drive the
    terminal."""
    return "".join(c if c.isprintable() else _escape(c) for c in str(text))


def _screen_line(line: str) -> str:
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() or c == "\t" else _escape(c) for c in line)


def screen(text: str, *, color: bool = False, crlf: bool = False) -> str:
    """`text` with its line breaks (and tabs) kept and every other control or
    unprintable character escaped as printable() does: ESC, BEL, CR, NUL,
    U+202E cannot reach the terminal raw. color: opcost's SGR colour
    sequences are kept. crlf: a CR before a line break is kept (CSV's
    line ends)."""
    if text.isprintable():
        return text
    lines = text.split("\n")
    out = []
    for line in lines:
        end = "\r" if crlf and line.endswith("\r") else ""
        body = line[:-1] if end else line
        if color and "\x1b" in body:
            body = "".join(p if _SGR.fullmatch(p) else _screen_line(p) for p in _SGR.split(body))
        else:
            body = _screen_line(body)
        out.append(body + end)
    return "\n".join(out)
