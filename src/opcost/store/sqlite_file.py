"""An SQLite store's file as the file system sees it, before and beside
SQLite: what is at the path (a directory, a device, another kind of file),
its parent made, its identity (device, inode) to notice it removed or
replaced, the files SQLite keeps beside it, a WAL file that cannot be read
where its -shm cannot be made, and a full disk. store/sqlite.py's
SqliteStore asks these; they know nothing of SQL."""

from __future__ import annotations

import os
import pathlib
import stat

from ..errors import StoreError

HINT = "--store PATH must be a writable SQLite file, or use --no-store"
_FULL_BYTES = 1 << 20   # less free than this where the store is: an I/O error is the full disk
_SQLITE_MAGIC = b"SQLite format 3\x00"


def prepare(p: pathlib.Path, readonly: bool) -> None:
    """StoreError, in one line, when `p` cannot be an SQLite store: a
    directory, a device or FIFO, another kind of file, an unreadable path; the
    parent directory made unless `readonly`."""
    try:
        _prepare(p, readonly)
    except OSError as e:  # e.g. EACCES from stat() on an ancestor directory
        raise StoreError(f"cannot access store {p} ({e.strerror or e}): {HINT}") from None


def _prepare(p: pathlib.Path, readonly: bool) -> None:
    if p.is_dir():
        raise StoreError(f"store {p} is a directory: --store PATH must be an SQLite file "
                         f"(e.g. {p / 'opcost.db'}), or use --no-store")
    if not readonly:
        _make_parent(p)
    kind = _not_a_file(p)
    if kind:
        # SQLite would "open" a device and leave a -journal beside it (a FIFO
        # would block the check below).
        raise StoreError(f"store {p} is {kind}, not a file: --store PATH must be an SQLite file "
                         "(an existing store or a new path), or use --no-store")
    # Check the magic ourselves: SQLite's own complaint comes only at the first
    # query and its wording varies between versions.
    try:
        with open(p, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except (FileNotFoundError, NotADirectoryError):
        return  # created by connect(), or (read-only) an empty store
    except OSError as e:
        raise StoreError(f"cannot read store {p} ({e.strerror or e}): {HINT}") from None
    if head and head != _SQLITE_MAGIC:
        raise StoreError(f"store {p} is not an SQLite database: {HINT}")


def _make_parent(p: pathlib.Path) -> None:
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StoreError(f"cannot create directory {p.parent} for store {p}: a file is in "
                         f"the way; {HINT}") from None
    except OSError as e:
        raise StoreError(f"cannot create directory {p.parent} for store {p} "
                         f"({e.strerror or e}): {HINT}") from None


def files(p: pathlib.Path) -> list[str]:
    """The store's file and the ones SQLite keeps beside it."""
    return [str(p)] + [f"{p}{s}" for s in ("-journal", "-wal", "-shm")]


def remove_made(p: pathlib.Path, absent: list[str]) -> None:
    """Remove what a failed creation made of `absent` (the files not there
    before): all of them when the store itself was new, else only an empty
    -journal."""
    if str(p) not in absent:
        absent = [f for f in absent if f.endswith("-journal") and _empty_file(f)]
    for f in absent:
        try:
            if os.path.isfile(f) and not os.path.islink(f):
                os.unlink(f)
        except OSError:
            pass


def ident(p: pathlib.Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `p` now; None if there is none."""
    try:
        st = os.stat(p)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def wal_unwritable(p: pathlib.Path) -> bool:
    """A WAL store whose -shm is not there and cannot be made (a read-only mount)."""
    try:
        with open(p, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    wal = len(head) == 20 and head[18] == 2      # file format versions 2: WAL
    shm = pathlib.Path(str(p) + "-shm")
    return wal and not shm.exists() and not os.access(p.parent, os.W_OK)


def disk_full(p: pathlib.Path) -> bool:
    """Less than a MiB free where the store is."""
    try:
        st = os.statvfs(p.parent)
    except (OSError, AttributeError):
        return False
    return st.f_bavail * st.f_frsize < _FULL_BYTES


def _not_a_file(p: pathlib.Path) -> str | None:
    """What p is when it is not a regular file (a device, a FIFO, a socket)."""
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return None
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None


def _empty_file(f: str) -> bool:
    try:
        return os.path.getsize(f) == 0
    except OSError:
        return False
