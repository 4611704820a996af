"""Result stores. `open_store(url)` picks the backend from the URL scheme through
BACKENDS, the one table of them; every backend offers the `Store` interface
(store/base.py), and every SQL one is base.SqlStore with its dialect."""

from __future__ import annotations

import os
import pathlib
import re

from ..errors import StoreError
from .base import OnWait, SqlStore, Store
from .postgresql import PostgresStore
from .sqlite import SqliteStore

__all__ = ["BACKENDS", "Store", "PostgresStore", "SqliteStore", "default_store_path", "open_store"]


# scheme -> backend class, constructed with the rest of the URL after "scheme://"
# (for sqlite: "/abs/path" or "rel/path"), or the whole URL (whole_url: postgresql).
BACKENDS: dict[str, type[SqlStore]] = {"sqlite": SqliteStore, "postgresql": PostgresStore}

# Other spellings of a scheme (libpq takes both).
_ALIASES = {"postgres": "postgresql"}

# Schemes we know of but do not implement yet: a specific message, not "unknown".
_PLANNED: dict[str, str] = {}

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)


def default_store_path() -> pathlib.Path:
    """$XDG_DATA_HOME/opcost/opcost.db, XDG_DATA_HOME defaulting to ~/.local/share.
    A relative XDG_DATA_HOME is ignored, as the XDG spec requires."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = pathlib.Path(xdg) if xdg and os.path.isabs(xdg) else pathlib.Path.home() / ".local" / "share"
    return base / "opcost" / "opcost.db"


def _supported() -> str:
    return "; ".join(f"{scheme} ({cls.url_help})" for scheme, cls in BACKENDS.items())


def open_store(url: str | None, on_wait: OnWait | None = None, *, readonly: bool = False) -> Store:
    """Open (creating if needed) the store at `url`: None for the default path, a
    plain path, or `scheme://rest`. Raises StoreError if it cannot be used,
    StoreLocked if another program holds it too long. `on_wait(message)` is
    told once when a write has to wait for another program's lock.
    readonly: only to read (history, show, compare): nothing is created,
    migrated or written; a missing default store reads as an empty one."""
    if url is None:
        return SqliteStore(default_store_path(), on_wait=on_wait, readonly=readonly, missing_ok=True)
    if not url.strip():
        raise StoreError(f"--store needs a path or URL; supported: {_supported()}")
    m = _URL.match(url)
    scheme, rest = (m.group(1).lower(), m.group(2)) if m else ("sqlite", url)
    backend = BACKENDS.get(_ALIASES.get(scheme, scheme))
    if backend is None:
        # The URL itself is not echoed: a database URL may carry a password.
        if scheme in _PLANNED:
            raise StoreError(f"{_PLANNED[scheme]} stores ({scheme}://...) are not supported yet; "
                             f"supported: {_supported()}")
        raise StoreError(f"unknown store scheme '{scheme}://'; supported: {_supported()}")
    if backend.whole_url:
        return backend(url, on_wait=on_wait, readonly=readonly)
    if not rest:
        raise StoreError(f"--store {scheme}:// needs a path after '{scheme}://'; "
                         f"supported: {_supported()}")
    return backend(rest, on_wait=on_wait, readonly=readonly)
