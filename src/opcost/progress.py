"""Progress on stderr: a rich bar with an ETA on a terminal; elsewhere (a log,
CI, a pipe) one line per finished round, so a long run is never silent, as
pip and hyperfine do; nothing with --no-progress."""

from __future__ import annotations

import sys
import time
from typing import Any


class NullProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def begin(self, name: str) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def skip(self, n: int) -> None:
        pass

    def round_done(self, done: int, total: int) -> None:
        pass


class LineProgress(NullProgress):
    """`opcost: round 3/10 done, 12 s, about 28 s left` on stderr: every round
    runs every variant once, so a round is the unit of progress; at most one
    line per `every` seconds, none for the last round (the table follows)."""

    def __init__(self, stream=None, every: float = 5.0):
        self._stream = stream or sys.stderr
        self._t0 = self._last = time.monotonic()
        self._every = every

    def round_done(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - self._last < self._every:
            return
        self._last = now
        el = now - self._t0
        left = f", about {el / done * (total - done):.0f} s left" if done < total else ""
        try:
            print(f"opcost: round {done}/{total} done, {el:.0f} s{left}", file=self._stream, flush=True)
        except OSError:
            pass   # stderr gone (a closed terminal): progress is not worth failing for


class BarProgress(NullProgress):
    def __init__(self, total_batches: int):
        from rich.console import Console   # rich (~0.1 s): only when a bar is drawn
        # rich (~0.1 s): only when a bar is drawn
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True),
                           transient=True)
        self._total = total_batches
        self._task: Any = None          # rich's TaskID, once entered

    def __enter__(self):
        self._p.__enter__()
        self._task = self._p.add_task("starting", total=self._total)
        return self

    def __exit__(self, *exc):
        return self._p.__exit__(*exc)

    def begin(self, name: str) -> None:
        self._p.update(self._task, description=name)

    def advance(self, n: int = 1) -> None:
        self._p.advance(self._task, n)

    def skip(self, n: int) -> None:
        self._p.advance(self._task, n)


def make_progress(total_batches: int, enabled: bool | None = None):
    """enabled=False: nothing; None: a bar on a terminal, round lines elsewhere."""
    if enabled is False:
        return NullProgress()
    return BarProgress(total_batches) if sys.stderr.isatty() else LineProgress()
