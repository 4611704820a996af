"""The one presenter: how every command that produces a document ends.

A command plans, measures (or loads), builds its document, and hands it here
(`present`), which does the rest the same way for every command:

- writes the document's exports (`--json FILE`, `--export FORMAT:FILE`),
  except those the recorder already wrote while measuring (a result);
- prints the table on standard output, or on standard error when an export
  goes to standard output ('-'), so that stdout holds the document alone;
  a command whose document alone is its answer (`show --json -`) prints no
  table then;
- in colour only on a terminal and never with NO_COLOR (console.use_color),
  at the terminal's width (console.terminal_width: full width when piped);
- after a measuring command: where the run was stored ("stored as run N"),
  how it ended, and the exit code (`finish`).

`fleet run` ends the same way per host (`present_fleet`).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable

from . import formats, interrupts
from .console import emit, table_stream, terminal_width, use_color
from .errors import EXIT_BENCH_FAILED, StoreGone
from .redact import redact
from .store import default_store_path
from .tables import format_results

if TYPE_CHECKING:
    from .session import Measured, Settings

# A table of a document: formatter(doc, color=..., width=...) -> text.
Formatter = Callable[..., str]


def present(doc: Any, formatter: Formatter, exports: list[tuple[str, str]], *, measured: Measured | None = None,
            alone: bool = False) -> int:
    """Export `doc`, print `formatter`'s table of it, and say how the run
    ended (`measured`, a measuring command's session.measure); the exit
    code. `doc` None: nothing to export or print (a measured series too
    short to analyse), only the end of the run. `alone`: when an export goes
    to standard output, the document is the whole answer (no table)."""
    if doc is not None:
        written = measured.recorder.exports if measured is not None else []
        todo = [e for e in exports if e not in written]
        if todo:
            formats.write(todo, doc)
        if not (alone and formats.to_stdout(exports)):
            out = table_stream(exports)
            emit([formatter(doc, color=use_color(out), width=terminal_width(out))], out)
    return finish(measured) if measured is not None else 0


def finish(m: Measured) -> int:
    """Where the run went and how it ended, on stderr; the exit code."""
    settings, recorder, outcome = m.settings, m.recorder, m.outcome
    lines = []
    if recorder.run_id is not None and recorder.store_error is None:
        shown = ([settings.label] if settings.label else []) + [
            f"{k}={v}" for k, v in settings.labels.items() if k != "name"]
        lines.append(f"\nstored as run {recorder.run_id}" + (f" ({', '.join(shown)})" if shown else "")
                     + f" in {store_name(settings.store)}")
    elif recorder.store_error is not None:
        # a store removed or replaced (StoreGone) holds no part of this run: its run ids are another file's
        gone = isinstance(recorder.store_error, StoreGone)
        lines.append(f"opcost: the store missed {recorder.store_missed} process(es) of this run "
                     + (f"(run {recorder.run_id} there is incomplete); " if recorder.run_id is not None and not gone
                        else "(the file there now holds no part of it); " if gone else "; ")
                     + f"everything measured is in {recorder.full_copy_said}")
    if outcome.status == "interrupted":
        lines.append(f"opcost: interrupted ({signal.Signals(outcome.signum or signal.SIGINT).name}); "
                     "everything measured so far was kept")
    elif outcome.error is not None:
        lines.append(f"opcost: {outcome.error}")
    late = interrupts.received() if outcome.status != "interrupted" else None
    if late is not None:
        # A signal that came while the run was finishing (held: nothing was
        # cut short) still decides the exit code, as the first signal does.
        lines.append(f"opcost: {signal.Signals(late).name} came as the run was finishing; "
                     "the run was completed and kept")
    emit(lines, sys.stderr)
    code = outcome.exit_code if late is None else 128 + late
    if recorder.store_error is not None and code == 0:
        # Lost during the run (locked, removed, a full disk): not bad input,
        # whatever the store's own error would say when opening it.
        code = EXIT_BENCH_FAILED
    return code


def present_fleet(f, settings: Settings, formatter: Formatter, *, doc: dict | None = None,
                  record_lost: str | None = None) -> int:
    """`fleet run`'s end: each host's table (`formatter` of its results),
    then per host where its run went or why it did not complete, on stderr;
    the fleet's exit code. `fleet ab`'s: its one document `doc` (exported,
    and `formatter`'s table of it) instead of the hosts' tables, then the
    same lines and where the fleet's record went (`record_lost`: why the
    store did not take its end)."""
    out = table_stream(settings.exports)
    if doc is not None:

        formats.write(settings.exports, doc)
        emit([formatter(doc, color=use_color(out), width=terminal_width(out))], out)
    for h in f.hosts if doc is None else ():
        o = f.outcomes[h]
        if o.results:
            emit([f"== {h} ==", formatter(o.results, color=use_color(out), width=terminal_width(out))], out)
    lines = []
    for h in f.hosts:
        o = f.outcomes[h]
        where = f"run {o.run_id} (host={h}) in {store_name(settings.store)}" if o.run_id is not None \
            else "nothing stored"
        kept = f"; kept {o.processes} process(es) as {where}" if o.run_id is not None else ""
        left = "" if o.cleaned in (True, None) else \
            "; the upload's removal was not confirmed (the connection was gone: the host removes it as its session ends)"
        if o.status == "ok":
            lines.append(f"opcost: {h}: " + (f"stored as {where}" if o.run_id is not None else
                                             "measured, not stored (--no-store)") + left)
        else:
            reason = (o.reason or "").removeprefix(f"{h}: ")
            said = o.status if reason in ("", o.status) else f"{o.status}: {reason}"
            lines.append(f"opcost: {h}: {said}{kept}{left}")
    bad = [h for h in f.hosts if f.outcomes[h].status != "ok"]
    if bad:
        lines.append(f"opcost: {len(bad)} of {len(f.hosts)} host(s) did not complete: {', '.join(bad)}")
    if doc is not None and doc.get("run_id") is not None:
        lines.append(f"\nthe fleet stored as run {doc['run_id']} (fleet={doc['fleet']}) in {store_name(settings.store)}"
                     + (f"; its end was not stored: {record_lost}" if record_lost else ""))
    emit(lines, sys.stderr)
    code = f.exit_code()
    return 1 if code == 0 and record_lost else code


def store_name(url: str | None) -> str:
    """The store as a user would type it: ~ for the home directory, a URL's password masked."""
    text = str(default_store_path()) if url is None else redact(url)
    home = os.path.expanduser("~")
    return "~" + text[len(home):] if home not in ("", "/") and text.startswith(home + "/") else text


def results_table(results: list[dict], *, color: bool, width: int | None, all_notes: bool = False) -> str:
    """The results table of `run` and of each host of `fleet run` (no colour
    in it): its notes one line per kind, or all of them (--notes)."""
    return format_results(results, width=width, all_notes=all_notes)
