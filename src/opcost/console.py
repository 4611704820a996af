"""What the commands print, in one place: one-line messages on stderr, JSON
on stdout, and the end-of-run output that must survive a closed terminal."""

from __future__ import annotations

import json
import os
import shutil
import sys

from .safetext import screen


def warn(msg: str) -> None:
    print(screen(f"opcost: {msg}"), file=sys.stderr)


def dump_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")


def emit(lines: list[str], stream=None) -> None:
    """Print at the end of a run: a closed terminal (SIGHUP) or pipe must not
    turn a finished run into a traceback."""
    try:
        for line in lines:
            out = stream or sys.stdout
            print(screen(line, color=use_color(out)), file=out, flush=True)
    except OSError:
        pass


def table_stream(exports: list[tuple[str, str]]):
    """`--json -` (an export to '-') puts the document on stdout; the table
    then goes to stderr."""
    return sys.stderr if any(path == "-" for _, path in exports) else sys.stdout


def use_color(stream) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything
    but the empty string (https://no-color.org)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return bool(tty) and not os.environ.get("NO_COLOR")


def terminal_width(stream) -> int | None:
    """The terminal's width when `stream` is one (COLUMNS, else the
    terminal's size), else None: piped and redirected output keeps every
    column at full width, so files and diffs do not depend on a window."""
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return max(40, shutil.get_terminal_size().columns)
