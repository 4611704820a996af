"""Progress on stderr: a rich bar with an ETA on a terminal, nothing otherwise
(so logs and CI output stay clean)."""

from __future__ import annotations

import sys


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


class BarProgress(NullProgress):
    def __init__(self, total_batches: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True),
                           transient=True)
        self._total = total_batches
        self._task = None

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
    if enabled is None:
        enabled = sys.stderr.isatty()
    return BarProgress(total_batches) if enabled else NullProgress()
