"""How a run ends when someone stops it: Ctrl-C (SIGINT), SIGTERM, SIGHUP.

`install()` (first thing `opcost` does) makes each of the three raise
`Interrupted`, a KeyboardInterrupt carrying the signal, so every `except
KeyboardInterrupt` on the way (the probe's process group is killed, the
runner stops) behaves as for Ctrl-C. Two kinds of code must not be cut in
half by one:
- `deferred()`: a step that is short and must be whole (storing one probe
  process, creating the run): a signal that arrives inside is raised when the
  step ends;
- `hold()`: from the moment the run starts finishing (summaries, the final
  store and file writes, the table), no signal raises any more, so a second
  Ctrl-C 2 ms after the first cannot leave the run half-finished. The first
  signal decides the exit code: 128 + its number (130, 143, 129).
Long waits inside a deferred step (a locked store) poll `pending()` to give up.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class _State:
    first: int | None = None      # the first signal received (decides the exit code)
    depth = 0                     # > 0: inside deferred() or after hold()
    pending = False               # a signal arrived while deferred, not raised yet
    installed = False
    done: Callable[[], str] | None = None   # what a command that measures nothing has done so far


_s = _State()


def _handler(signum, frame) -> None:
    if _s.first is None:
        _s.first = signum
    if _s.depth > 0:
        _s.pending = True
        return
    raise Interrupted(_s.first)


def _unraisable(hook):
    """sys.unraisablehook: a signal whose Interrupted was raised where Python
    cannot raise (a weakref callback such as importlib's module-lock `cb`, a
    __del__) is not printed as "Exception ignored" and lost: it becomes
    pending, raised where the next deferred() step ends (creating the run,
    storing a process) or obeyed at the end as any held signal is."""
    def unraisable(u) -> None:
        if isinstance(u.exc_value, Interrupted):
            if _s.first is None:
                _s.first = u.exc_value.signum
            _s.pending = True
            return
        hook(u)
    return unraisable


def install() -> None:
    for sig in SIGNALS:
        signal.signal(sig, _handler)
    if not getattr(sys.unraisablehook, "_opcost", False):
        hook = _unraisable(sys.unraisablehook)
        hook._opcost = True  # type: ignore[attr-defined]
        sys.unraisablehook = hook
    _s.installed = True


def received() -> int | None:
    """The first signal received, or None."""
    return _s.first


def pending() -> bool:
    return _s.pending


def exit_code(default: int = 130) -> int:
    return 128 + _s.first if _s.first is not None else default


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    _s.depth += 1
    try:
        yield
    except BaseException:
        _s.depth -= 1
        raise
    _s.depth -= 1
    if _s.depth == 0 and _s.pending:
        _s.pending = False
        raise Interrupted(_s.first if _s.first is not None else signal.SIGINT)


def say_done(what: Callable[[], str]) -> None:
    """A command that measures nothing (store copy, import) tells what it has
    done so far, for the line an interruption prints (instead of "interrupted
    before anything was measured")."""
    _s.done = what


def done_text() -> str | None:
    return _s.done() if _s.done is not None else None


def hold() -> None:
    """From now on signals are noted, never raised (the run is finishing)."""
    _s.depth += 1


def reset() -> None:
    """For tests of this module in one interpreter."""
    _s.first, _s.depth, _s.pending, _s.done = None, 0, False, None
