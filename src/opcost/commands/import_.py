"""`opcost import FILE...`: runs written by `opcost export` (or `run --json`)
into the store, each once."""

from __future__ import annotations

from .. import interrupts
from ..console import warn
from ..safetext import printable
from . import add_store_option


def add_parser(sub) -> None:
    s = sub.add_parser("import", help="store runs from files of `opcost export` (or `run --json`)",
                       description="Stores each run as it was measured: env, labels, command line, times, "
                       "status, every process and its raw samples. A file holds one opcost.result/1 "
                       "document or JSON lines (one per line); a file over 64 MiB is read as it is stored, one "
                       "process at a time (its runs' uuid and run_id before their results, as export writes "
                       "them), every file then in one transaction; others up to 256 MiB. Every file is checked "
                       "(each document against the JSON Schema of opcost.result/1 that opcost ships: "
                       "docs/result-json.md) before anything is stored, and each is stored in one "
                       "transaction. A run the store holds already (the same uuid) is not stored again. "
                       "A run keeps its id when this store never gave it, else it gets the next free one.")
    s.add_argument("files", nargs="+", metavar="FILE", help="file written by `opcost export`; repeatable")
    add_store_option(s)


def run(args, argv) -> int:
    from ..store import open_store   # --help must not load it
    from ..transfer import held_after, read_file, streamed   # --help must not load it

    big = [path for path in args.files if streamed(path)]   # read as they are stored, never whole
    files = [(path, None if path in big else read_file(path)) for path in args.files]   # the rest checked first
    if big:
        return _run_streamed(args, files)
    interrupts.say_done(lambda: held_after(args.store, [d for _, docs in files for d in docs or []])
                        + " (each file is stored whole or not at all)")
    with open_store(args.store, on_wait=warn) as store:
        for path, docs in files:
            done = store.import_runs(docs or [])
            _said(path, done, getattr(store, "completed", {}), store)
    return 0


def _run_streamed(args, files) -> int:
    """Files among them over docschema.STREAM_FROM: all in one transaction
    (a bad file anywhere stores nothing), a large one read as it is stored."""
    # a command loads what it uses when it runs, never for --help
    from ..docschema import NeedsWhole   # --help must not load it
    from ..store import open_store   # --help must not load it
    from ..transfer import ProcessParser, held_after, read_file, stream_file   # --help must not load it

    heads: list = []
    interrupts.say_done(lambda: held_after(args.store, [d for _, docs in files if docs for d in docs] + heads)
                        + " (nothing or everything given is stored: one transaction)")
    with open_store(args.store, on_wait=warn) as store, ProcessParser() as parser:
        try:
            done = store.import_files([docs if docs is not None else stream_file(path, heads, parser)
                                       for path, docs in files])
        except NeedsWhole:   # a large file that cannot go to the store as it is read: read whole, as before
            files = [(path, docs if docs is not None else read_file(path)) for path, docs in files]
            done = store.import_files([docs for _, docs in files])
        for (path, _), (runs, completed) in zip(files, done):
            _said(path, runs, completed, store)
    return 0


def _said(path: str, done: list, completed: dict, store) -> None:
    new = [str(rid) for rid, stored in done if stored and rid not in completed]
    old = [str(rid) for rid, stored in done if not stored]
    print(f"{printable(path)}: imported {len(new)} run(s)" + (f" ({', '.join(new)})" if new else "")
          + "".join(f"; run {rid}: {n} process(es) added, now {_status(store, rid)}" for rid, n in completed.items())
          + (f"; {len(old)} already stored ({', '.join(old)})" if old else ""))


def _status(store, run_id: int) -> str:
    return next((r["status"] for r in store.find_runs() if r["id"] == run_id), "stored")
