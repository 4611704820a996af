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
- a FIFO is opened without blocking: opcost waits for a program to open it
  for reading (and to read it) at most OPCOST_OUTPUT_WAIT seconds (default
  60) and gives up at once when it is stopped (`give_up`, a signal), instead
  of hanging in open() where no signal ends it;
- `check_target` tries all of that before anything is measured, without
  touching the target, so a bad path is a usage error and not a lost run.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import sys
import tempfile
import time
from typing import Callable

from .errors import OpcostError, UsageError

STDOUT = "-"
OUTPUT_WAIT_ENV = "OPCOST_OUTPUT_WAIT"
_POLL_S = 0.05


def output_wait_s() -> float:
    """How long a FIFO output waits for its reader: OPCOST_OUTPUT_WAIT seconds, default 60."""
    raw = os.environ.get(OUTPUT_WAIT_ENV)
    if raw is None or raw == "":
        return 60.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise UsageError(f"{OUTPUT_WAIT_ENV}={raw}: give how many seconds a FIFO output waits for its "
                         "reader, a number >= 0 (default 60)")
    return value


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
        if stat.S_ISFIFO(st.st_mode):
            output_wait_s()
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


def _identity(path: str) -> tuple[str, object]:
    """What a target is, whatever the spelling (`x`, `./x`, a symlink to it,
    another hard link): its (device, inode) if it exists, else its real path."""
    real = _real(path)
    try:
        st = os.stat(real)
    except OSError:
        return "path", real
    return "inode", (st.st_dev, st.st_ino)


def check_distinct(targets: list[tuple[str, str]]) -> None:
    """Raise UsageError when two of these (option as given, path) outputs are
    the same file: the last write would silently replace the first. Standard
    output (`-`) and devices (/dev/null, a terminal) may be given twice."""
    seen: dict[tuple[str, object], str] = {}
    for option, path in targets:
        if path == STDOUT:
            continue
        try:
            if stat.S_ISCHR(os.stat(path).st_mode):
                continue
        except OSError:
            pass
        key = _identity(path)
        if key in seen:
            raise UsageError(f"{seen[key]} and {option} are the same file: the second would replace the "
                             "first; give each output its own file")
        seen[key] = option


def write(path: str, data: bytes, give_up: Callable[[], bool] | None = None) -> None:
    """Write `data` to `path` by the rules above. OSError propagates.
    give_up() true while waiting for a FIFO's reader: stop waiting (a signal
    was noted but not raised, as while a run finishes)."""
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
    if st is not None and stat.S_ISFIFO(st.st_mode):
        _write_fifo(real, data, give_up)
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(real, "wb") as f:   # in place: a device or FIFO stays what it is
            f.write(data)
        return
    replace(real, data, st=st)


def save(path: str, data: bytes, give_up: Callable[[], bool] | None = None) -> None:
    """write(), for an output written once at the end (export -o, report -o,
    --json of a command that measures nothing): a file that cannot be written
    then (a full disk, a quota) is one line and exit 1, the old file kept as
    it was (write() replaces a file whole or not at all)."""
    try:
        write(path, data, give_up)
    except BrokenPipeError:
        raise
    except OSError as e:
        where = "standard output" if path == STDOUT else path
        kept = "" if path == STDOUT or not os.path.lexists(path) else f"; {path} is as it was"
        raise OpcostError(f"cannot write {where} ({e.strerror or e}){kept}") from None


def _write_fifo(real: str, data: bytes, give_up: Callable[[], bool] | None) -> None:
    """Open a FIFO without blocking and write it whole, waiting for a reader
    at most output_wait_s() without progress; a signal (raised, or noted:
    give_up) ends the wait. OSError when it cannot be done."""
    wait = output_wait_s()
    deadline = time.monotonic() + wait

    def stop(what: str) -> None:
        if give_up is not None and give_up():
            raise OSError(errno.EINTR, f"stopped by a signal while waiting for a program to {what} the FIFO")
        if time.monotonic() >= deadline:
            raise OSError(errno.ETIMEDOUT, f"no program came to {what} the FIFO within {wait:g} s "
                          f"({OUTPUT_WAIT_ENV})")

    while True:
        try:
            fd = os.open(real, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            break
        except OSError as e:
            if e.errno != errno.ENXIO:   # ENXIO: no reader yet
                raise
        stop("open")
        time.sleep(_POLL_S)
    try:
        view = memoryview(data)
        while view:
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                n = 0
            if n:
                view = view[n:]
                deadline = time.monotonic() + wait   # progress: the reader is there
                continue
            stop("read")
            select.select([], [fd], [], _POLL_S)
    finally:
        os.close(fd)


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
