"""Passwords out of what opcost shows and keeps (layer 1: no imports of ours).

A PostgreSQL store may be given as a URL with a password in it
(postgresql://user:secret@host/db, or ?password=secret). Such a password must
never reach output, error messages, the stored command line or exports:
everything that could carry a --store argument goes through `redact` (one
text) or `redact_argv` (a command line) first. Pure text handling, the way
libpq reads a URL (the user information ends at an '@' before any '/'; the
password follows the first ':' in it), so that `opcost --help` imports no
database driver."""

from __future__ import annotations

import re

MASK = "***"

_URL = re.compile(r"postgres(?:ql)?://", re.IGNORECASE)
# key=value conninfo and URL query parameters: password=..., quoted or not.
_PARAM = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&#'\"]+)", re.IGNORECASE)


def _redact_url_at(text: str, start: int) -> str:
    """text with the user-information password of the URL whose authority
    starts at `start` masked: everything between the first ':' and the last
    '@' before the path (libpq stops at the first '@'; a password with an
    unencoded '@' in it is still masked whole)."""
    end = len(text)
    for i in range(start, len(text)):
        if text[i] == "/" or text[i].isspace():
            end = i
            break
    at = text.rfind("@", start, end)
    if at >= 0:
        user, colon, _ = text[start:at].partition(":")
        if colon:
            return text[:start] + user + ":" + MASK + text[at:]
    return text


def redact(text: str) -> str:
    """text with the password of every PostgreSQL URL or conninfo in it masked
    (postgresql://user:***@host/db); anything else unchanged."""
    if not isinstance(text, str) or "postgres" not in text.lower() and "password" not in text.lower():
        return text
    pos = 0
    while True:
        m = _URL.search(text, pos)
        if m is None:
            break
        text = _redact_url_at(text, m.end())
        pos = m.end()
    return _PARAM.sub(lambda m: m.group(1) + MASK, text)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line as it may be stored or shown: every argument redacted
    (--store URL, --store=URL, `store copy SRC DST`)."""
    return [redact(a) for a in argv]


def scrub(text: str, secrets: list[str]) -> str:
    """text with each of these exact strings (a password as given, and as it
    was spelled in the URL) masked: for the driver's own messages."""
    for s in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(s, MASK)
    return redact(text)
