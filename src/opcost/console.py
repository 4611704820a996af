"""What the commands print, in one place: one-line messages on stderr, JSON
on stdout, and the end-of-run output that must survive a closed terminal."""

from __future__ import annotations

import json
import sys


def warn(msg: str) -> None:
    print(f"opcost: {msg}", file=sys.stderr)


def dump_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")


def emit(lines: list[str], stream=None) -> None:
    """Print at the end of a run: a closed terminal (SIGHUP) or pipe must not
    turn a finished run into a traceback."""
    try:
        for line in lines:
            print(line, file=stream or sys.stdout, flush=True)
    except OSError:
        pass


def table_stream(exports: list[tuple[str, str]]):
    """`--json -` (an export to '-') puts the document on stdout; the table
    then goes to stderr."""
    return sys.stderr if any(path == "-" for _, path in exports) else sys.stdout
