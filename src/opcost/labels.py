"""Run labels: key=value pairs (`--label kernel=6.18-rc3 --label commit=abc123`).
A bare `--label TEXT` (no '=') is the run's name, `name=TEXT`, which is also
the run's `label` in the documents and what `label:TEXT` refers to.

Keys are short identifiers (KEY_RULE); values are any printable text. Layer
2: imports only errors and text."""

from __future__ import annotations

import re

from .errors import UsageError
from .safetext import printable

NAME = "name"
KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
KEY_RULE = ("a key is 1-64 characters of letters, digits, '_', '.' and '-', starting with a letter or "
            "digit (e.g. kernel, commit, cpu.model)")


# A run its store lost mid-run, its opcost having got the store back at the
# end: how many processes the store misses, and the file that holds them
# (store.record_missed); an import of that file that completes the run
# removes both.
MISSED_LABEL = "opcost.missing"
RESCUE_LABEL = "opcost.rescue"


def check_key(key: str, what: str = "label key") -> str:
    if not isinstance(key, str) or not KEY_RE.match(key):
        raise UsageError(f"{what} '{printable(key)}' is not valid: {KEY_RULE}")
    return key


def check_value(key: str, value: str) -> str:
    if not isinstance(value, str) or printable(value) != value:
        raise UsageError(f"label {printable(key)}='{printable(value)}' contains a control character; "
                         "a value is any printable text")
    return value


def parse(text: str, option: str = "--label") -> tuple[str, str]:
    """`key=value` (split at the first '='), or bare TEXT as name=TEXT."""
    key, eq, value = text.partition("=")
    if not eq:
        if not text.strip():
            raise UsageError(f"{option} is empty; give KEY=VALUE (e.g. commit=abc123) or a name")
        return NAME, check_value(NAME, text)
    check_key(key, f"{option} '{printable(text)}': key")
    return key, check_value(key, value)


def parse_all(texts: list[str] | None, option: str = "--label") -> dict[str, str]:
    """The labels of repeated --label options, in the order given; a key given
    twice is an error (which one was meant?)."""
    out: dict[str, str] = {}
    for t in texts or []:
        k, v = parse(t, option)
        if k in out and out[k] != v:
            raise UsageError(f"{option} gives {printable(k)} twice ('{printable(out[k])}' and "
                             f"'{printable(v)}'); give each key once")
        out[k] = v
    return out


def merged(label: str | None, labels: dict[str, str] | None) -> dict[str, str]:
    """labels with the name label folded in (labels' own name wins)."""
    out = dict(labels or {})
    if label is not None and NAME not in out:
        out = {NAME: label, **out}
    return out
