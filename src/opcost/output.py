"""The one place opcost writes a file it was asked to write (`--json FILE`,
and every export to come).

Rules, the same for every such file:
- `-` is standard output (the data goes there once, at the end of the run);
- a symlink is followed: what it names is written, the link stays a link;
- an existing target that is not a regular file (a device such as /dev/null,
  a FIFO, /dev/stdout) is written in place, never replaced;
- a regular file (or a new one) is written beside the target and renamed over
  it, so a reader never sees half a document; an existing file keeps its
  mode (and, when we may, its owner), a new one gets 0666 less the umask;
- `check_target` tries all of that before anything is measured, without
  touching the target, so a bad path is a usage error and not a lost run.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from .errors import UsageError

STDOUT = "-"


def _real(path: str) -> str:
    return os.path.realpath(path)


def is_stream(path: str) -> bool:
    """True for targets that take the data as a stream, once: stdout, devices,
    FIFOs, sockets. Rewriting such a target would append, not replace."""
    if path == STDOUT:
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not stat.S_ISREG(st.st_mode)


def check_target(path: str, option: str = "--json", *, overwrite: bool = True) -> None:
    """Raise UsageError when `path` cannot be written the way `write` will;
    with overwrite=False also when it names an existing regular file (which
    `write` would replace: `opcost report -o` without --force)."""
    if path == STDOUT:
        return
    if not path or not path.strip():
        raise UsageError(f"{option} needs a file path ('-' for standard output)")
    if "\n" in path or "\0" in path:
        raise UsageError(f"{option} {path!r}: a file path cannot hold a newline or NUL byte")
    real = _real(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"{option} {path} cannot be reached ({e.strerror}); give a writable file path") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{option} {path} is a directory; give a file path")
    if st is not None and not stat.S_ISREG(st.st_mode):
        # A device or FIFO is written in place. Opening a FIFO to test it would
        # hand its reader an end of file, so only the permission is checked.
        if not os.access(real, os.W_OK):
            raise UsageError(f"{option} {path} is not writable; give a writable file path")
        return
    if st is not None and not overwrite:
        raise UsageError(f"{option} {path} exists; add --force to overwrite it, or give another file")
    if st is not None and not os.access(real, os.W_OK):
        raise UsageError(f"{option} {path} is not writable; give a writable file path")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", dir=os.path.dirname(real) or ".")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise UsageError(f"{option} {path} cannot be written ({e.strerror}); give a writable file path") from None


def write(path: str, data: bytes) -> None:
    """Write `data` to `path` by the rules above. OSError propagates."""
    if path == STDOUT:
        out = sys.stdout.buffer
        out.write(data)
        out.flush()
        return
    real = _real(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(real, "wb") as f:   # in place: a device or FIFO stays what it is
            f.write(data)
        return
    replace(real, data, st=st)


def replace(real: str, data: bytes, *, st: os.stat_result | None = None, mode: int | None = None) -> None:
    """Write `data` as the regular file `real`, whole or not at all: a
    temporary file beside it, renamed over it (a reader sees the old file or
    the new one). Its mode: `mode`, else the replaced file's (`st`, whose
    owner is kept where we may), else the umask's default."""
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", dir=os.path.dirname(real) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            elif st is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
                try:
                    os.fchown(f.fileno(), st.st_uid, st.st_gid)
                except OSError:
                    pass  # not ours to give away: the mode is kept, the owner becomes us
            else:
                os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
