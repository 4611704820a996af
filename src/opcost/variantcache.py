"""The build cache of `opcost variants`: what one variant's build produced
(its object's symbols, the architecture it is for, the linked program or the
probe with the operation linked in), kept under
${XDG_CACHE_HOME:-~/.cache}/opcost/builds/KEY so that the next invocation of
the same study measures at once instead of compiling for a minute.

KEY is a SHA-256 over everything the build depends on: the source and the
files it includes with `#include "..."` / `.include "..."` (found beside the
including file or under an -I/-iquote directory of the flags), the compiler
(its words, and the resolved executable's path, size and modification time:
a compiler upgrade changes them), every flag and the -D, the probe's sources
and opcost's version. The compiler is not run to compute it.

Writes are safe against concurrent opcost processes: each file is written
under a temporary name in the entry's directory and renamed into place, so a
reader sees a whole file or none. The cache is bounded: after a store, the
least recently used entries are removed while the total exceeds
OPCOST_BUILD_CACHE_MB (default 512 MiB); an entry used is touched. A cache
that cannot be written (read-only home, full disk) only costs the rebuild."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

from . import __version__
from .output import replace

FORMAT = "opcost-build-cache/1"
DEFAULT_MB = 512
_INCLUDE = re.compile(rb'^\s*(?:#\s*include|\.include)\s*"([^"\n]+)"', re.M)


def root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not base or not os.path.isabs(base):   # the XDG rule: a relative value is ignored
        base = str(Path.home() / ".cache")
    return Path(base) / "opcost" / "builds"


def limit_bytes() -> int:
    """OPCOST_BUILD_CACHE_MB, else 512 MiB; a value that is not a number
    >= 0 is the default (the cache is an optimisation: it never stops a run)."""
    try:
        mb = float(os.environ.get("OPCOST_BUILD_CACHE_MB", DEFAULT_MB))
    except ValueError:
        mb = DEFAULT_MB
    return int(mb * 2**20) if mb >= 0 and mb == mb else DEFAULT_MB * 2**20


def _include_dirs(flags: list[str]) -> list[Path]:
    out, i = [], 0
    while i < len(flags):
        f = flags[i]
        for opt in ("-I", "-iquote", "-isystem", "-idirafter"):
            if f == opt and i + 1 < len(flags):
                out.append(Path(flags[i + 1]))
                i += 1
            elif f.startswith(opt) and len(f) > len(opt) and opt == "-I":
                out.append(Path(f[2:]))
        i += 1
    return out


def source_files(source: Path, flags: list[str]) -> list[Path]:
    """The source and, transitively, the quoted includes that resolve to a
    file beside the including file or in a directory of the flags."""
    dirs = _include_dirs(flags)
    seen: list[Path] = []
    todo = [source]
    while todo and len(seen) < 1000:
        f = todo.pop()
        if f in seen:
            continue
        seen.append(f)
        try:
            text = f.read_bytes()
        except OSError:
            continue
        for m in _INCLUDE.finditer(text):
            name = m.group(1).decode(errors="replace")
            for d in (f.parent, *dirs):
                p = d / name
                if p.is_file():
                    todo.append(p.resolve())
                    break
    return seen


def compiler_identity(cc: list[str]) -> list:
    exe = shutil.which(cc[0])
    if exe is None:
        return [cc]
    real = os.path.realpath(exe)
    try:
        st = os.stat(real)
        return [cc, real, st.st_size, st.st_mtime_ns]
    except OSError:
        return [cc, real]


def key(*, what: str, sources: list[Path], cc: list[str], flags: list[str], probe_dir: Path | None,
        extra: str = "") -> str:
    """The cache key of one build (see the module's docstring)."""

    h = hashlib.sha256()

    def put(x) -> None:
        b = x if isinstance(x, bytes) else json.dumps(x, sort_keys=True, default=str).encode()
        h.update(len(b).to_bytes(8, "little") + b)

    put([FORMAT, __version__, what, extra, flags, compiler_identity(cc)])
    for f in sources:
        put(str(f))
        try:
            put(f.read_bytes())
        except OSError:
            put(b"unreadable")
    if probe_dir is not None:
        files = {f for pat in ("Makefile", "*.c", "*.h", "*.S", "lib/*.[ch]", "bench/*.[ch]")
                 for f in probe_dir.glob(pat) if f.is_file() and not f.name.endswith("-tiny.c")}
        for f in sorted(files):
            put(str(f.relative_to(probe_dir)))
            put(f.read_bytes())
    return h.hexdigest()[:40]


class Cache:
    """One cache directory; every method degrades to "not cached" on an
    OSError (the cache never fails a build)."""

    def __init__(self, directory: Path | None = None):
        self.dir = directory or root()
        self.unwritable: str | None = None

    def entry(self, k: str) -> Path:
        return self.dir / k

    def meta(self, k: str) -> dict | None:
        try:
            m = json.loads((self.entry(k) / "meta.json").read_text())
        except (OSError, ValueError):
            return None
        return m if isinstance(m, dict) and m.get("format") == FORMAT else None

    def file(self, k: str, name: str) -> Path | None:
        p = self.entry(k) / name
        try:
            if p.is_file() and os.access(p, os.X_OK):
                now = time.time()
                os.utime(self.entry(k), (now, now))   # recently used: evicted last
                return p
        except OSError:
            pass
        return None

    def put_meta(self, k: str, meta: dict) -> None:
        self._write(k, "meta.json", json.dumps({"format": FORMAT, **meta}).encode())

    def put_file(self, k: str, name: str, src: Path) -> None:
        try:
            data = src.read_bytes()
        except OSError:
            return
        self._write(k, name, data, mode=0o755)

    def _write(self, k: str, name: str, data: bytes, mode: int = 0o644) -> None:
        if self.unwritable:
            return
        d = self.entry(k)
        try:
            d.mkdir(parents=True, exist_ok=True)
            replace(str(d / name), data, mode=mode)   # a reader sees the whole file or none
        except OSError as e:
            self.unwritable = f"{self.dir}: {e.strerror or e}"
            return
        self.evict()

    def evict(self, limit: int | None = None) -> list[Path]:
        """Remove least recently used entries while the cache is over its
        bound, and temporary files a killed opcost left (over an hour old)."""
        limit = limit_bytes() if limit is None else limit
        entries = []
        now = time.time()
        try:
            dirs = [d for d in self.dir.iterdir() if d.is_dir() and not d.is_symlink()]
        except OSError:
            return []
        for d in dirs:
            size = 0
            try:
                for f in d.iterdir():
                    st = f.stat()
                    if f.name.startswith(".") and now - st.st_mtime > 3600:
                        f.unlink()
                        continue
                    size += st.st_size
                entries.append((d.stat().st_mtime, size, d))
            except OSError:
                continue
        total = sum(s for _, s, _ in entries)
        gone = []
        for _, size, d in sorted(entries):
            if total <= limit:
                break
            shutil.rmtree(d, ignore_errors=True)
            total -= size
            gone.append(d)
        return gone


def link_or_copy(src: Path, dst: Path) -> Path:
    """The cached executable into the build directory (a hard link when it
    can be one): an entry evicted meanwhile cannot take it away mid-run."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst
