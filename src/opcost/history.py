"""`opcost history`: the stored runs as a plain-text table, newest first.
Text from the store (labels above all) is shown escaped (`\\n`, `\\x1b`): a
newline or a terminal escape in a label must not break the table or drive
the terminal."""

from __future__ import annotations

from .labels import MISSED_LABEL, RESCUE_LABEL
from .safetext import printable

EMPTY_STORE_MESSAGE = "no stored runs yet: `opcost run SPEC` stores one (`opcost list` shows benchmarks)"

_LABEL_MAX = 24
_LABELS_MAX = 48
_SEP = "  "


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 3, 0)] + "..."


def _created(iso: str | None) -> str:
    # Stored as 2024-05-01T12:34:56Z; shown without the T/Z noise (header says UTC).
    if not iso:
        return "-"
    return iso.replace("T", " ").removesuffix("Z")


def _benches(names: list[str], width: int) -> str:
    """As many names as fit in `width`, then "+N more" rather than a cut-off name."""
    if not names:
        return "-"
    shown: list[str] = []
    for i, name in enumerate(names):
        rest = len(names) - i - 1
        tail = f" +{rest} more" if rest else ""
        candidate = ", ".join(shown + [name]) + tail
        if len(candidate) > width and shown:
            return ", ".join(shown) + f" +{len(names) - i} more"
        shown.append(name)
    return ", ".join(shown)


def _others(run: dict) -> dict:
    return {k: v for k, v in (run.get("labels") or {}).items() if k not in ("name", MISSED_LABEL, RESCUE_LABEL)}


def rescue_places() -> str:
    """Where a rescue file goes (record.rescue_folders), as words."""
    # only when a note names the places: history's table needs neither
    import tempfile
    from .record import state_dir   # record loads the store and the runner: history's table needs neither

    return (f"beside the store (or the --json file), {tempfile.gettempdir()}, the working directory it ran "
            f"in, {state_dir()}: the first of them that could be written")


def missing_note(run: dict) -> str | None:
    """What a run lacks and where it may be: a list_runs entry or a run's
    document. Known when its opcost got the store back at the end (the
    labels store.record_missed wrote); for an abandoned run otherwise
    (its opcost gone before it could mark it), where a rescue file would be."""
    tags = run.get("labels") or {}
    rid = run.get("id", run.get("run_id"))
    if MISSED_LABEL in tags:
        where = tags.get(RESCUE_LABEL)
        return (f"run {rid} lacks {printable(tags[MISSED_LABEL])} process(es) its store missed mid-run: "
                + (f"{printable(where)} holds the whole run (`opcost import {printable(where)}` into this store "
                   "completes it in place)" if where else
                   "they went to standard output at its end (no folder could take a rescue file)"))
    if run.get("status") == "abandoned":
        return (f"run {rid} is abandoned: it may lack processes; if its store was lost mid-run, its "
                f"rescue file opcost-unsaved-*.json holds the whole run, {rescue_places()} (`opcost import "
                "FILE` into this store completes it in place)")
    return None


def format_history(runs: list[dict], width: int = 100) -> str:
    """Table of runs as given by Store.list_runs(); the benches column is fitted
    so a line stays within `width` when it can. No trailing newline."""
    if not runs:
        return EMPTY_STORE_MESSAGE
    headers = ["ID", "CREATED (UTC)", "LABEL", "KIND", "STATUS", "RESULTS"]
    rows = [[str(r["id"]), printable(_created(r.get("created"))),
             _clip(printable(r.get("label") or "-"), _LABEL_MAX), printable(r.get("kind") or "run"),
             printable(r.get("status") or "-"), str(r.get("n_results", 0))] for r in runs]
    if any(_others(r) for r in runs):
        # key=value labels beyond the name: a column of their own, before the benches
        headers.append("LABELS")
        rows = [row + [_clip(printable(" ".join(f"{k}={v}" for k, v in _others(r).items()) or "-"),
                             _LABELS_MAX)] for row, r in zip(rows, runs)]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    right = {0, 5}  # numbers right-aligned

    def cells(values: list[str]) -> str:
        return _SEP.join(v.rjust(w) if i in right else v.ljust(w)
                         for i, (v, w) in enumerate(zip(values, widths)))

    bench_width = max(width - sum(widths) - len(_SEP) * len(widths), 20)
    lines = [cells(headers) + _SEP + "BENCHES"]
    for run, row in zip(runs, rows):
        lines.append((cells(row) + _SEP + _benches([printable(b) for b in run.get("benches") or []], bench_width))
                     .rstrip())
    legend = []
    if any(r.get("status") == "running" for r in runs):
        legend.append("running: its opcost is still measuring (on this host, or on another one sharing the store)")
    lost = [r for r in runs if MISSED_LABEL in (r.get("labels") or {})]
    if any(r.get("status") == "abandoned" for r in runs):
        legend.append("abandoned: the opcost that ran it is gone (killed, or the machine restarted); what it "
                      "measured is stored (`opcost history clean` records the status)"
                      + ("" if all(r in lost for r in runs if r.get("status") == "abandoned") else
                         "; it may lack processes: if its store was lost mid-run, a rescue file "
                         f"opcost-unsaved-*.json holds the whole run, {rescue_places()} (`opcost import FILE` "
                         "into this store completes it in place)"))
    legend += [note for note in map(missing_note, lost) if note]
    if legend:
        lines += [""] + legend
    return "\n".join(lines)
