"""`opcost store copy SRC DST [RUN...]`: runs from one store into another
(SQLite or PostgreSQL, either way), each once: a run's identity is its uuid
(store.base.identity), so copying twice stores it once."""

from __future__ import annotations

import os
import sys

from .. import interrupts
from ..console import warn
from ..errors import UsageError
from ..redact import redact
from ..safetext import printable
from . import REFS

BATCH = 20      # runs per transaction of the destination: a copy stopped midway is taken up by running it again


def add_parser(sub) -> None:
    s = sub.add_parser("store", help="copy runs between stores: `store copy SRC DST [RUN...]`",
                       description="Actions on result stores. `opcost store copy SRC DST [RUN...]` copies runs "
                       "(all of them, or the RUNs given, from SRC) into DST, as `opcost export` and `opcost "
                       "import` would: env, labels, command line, times, status, every process and its raw "
                       "samples. A store is a path (SQLite) or a URL: sqlite:///abs/path, "
                       "postgresql://[USER@]HOST[:PORT]/DBNAME (the password from ~/.pgpass, PGPASSFILE or "
                       "a service file: postgresql:///DBNAME?service=NAME). A run DST holds already (the "
                       "same uuid) is not stored again. SRC is only read.")
    acts = s.add_subparsers(dest="store_action", metavar="ACTION", parser_class=type(s))
    c = acts.add_parser("copy", help="copy runs from SRC into DST, each once",
                        description="Copies runs from SRC into DST (created if needed), oldest first, "
                        f"{BATCH} runs per transaction; a run DST holds already is skipped. " + REFS)
    c.add_argument("src", metavar="SRC", help="the store to read (path or URL)")
    c.add_argument("dst", metavar="DST", help="the store to copy into (path or URL)")
    c.add_argument("runs", nargs="*", metavar="RUN", help="only these runs of SRC (id or label; default: all)")
    c.add_argument("--wait", action="store_true", help="a run still being measured: wait for it to end (default: "
                   "copy what it has measured so far, marked interrupted; copying again once it has ended "
                   "completes it in place)")


def _check(name: str, value: str) -> None:
    # a command's module is read by `opcost --help`: what it runs is imported when it runs (all below)
    if not value.strip():
        raise UsageError(f"{name} is empty; give a store path or URL (e.g. ~/.local/share/opcost/opcost.db "
                         "or postgresql://HOST/DBNAME)")
    if printable(value) != value:
        raise UsageError(f"{name} '{redact(printable(value))}' contains a control character; "
                         "write it without (a trailing newline or tab is easy to miss)")


def _where(url: str) -> str:
    """What identifies a store: its file (resolved) for a backend given a path
    (store.BACKENDS: not whole_url), or its URL (password masked)."""
    from ..store import BACKENDS   # --help: sqlite3 and the backends

    scheme, sep, rest = url.partition("://")
    backend = BACKENDS.get(scheme.lower()) if sep else BACKENDS["sqlite"]
    if backend is not None and not backend.whole_url:
        return f"{scheme.lower() if sep else 'sqlite'}:" + os.path.realpath(os.path.expanduser(rest if sep else url))
    return redact(url)


def _copied(url: str, docs: list[dict], where) -> str:
    """What an interrupted copy had done, read back from DST after the
    signal (each batch is committed whole)."""
    from ..transfer import held_after   # --help

    return f"{where}: " + held_after(url, docs).replace("the store holds", "it holds")


def run(args, argv) -> int:
    # --help reads this module; what the copy runs is imported when it runs
    from ..store import open_store   # --help
    from ..transfer import load_settled   # --help

    if args.store_action is None:
        raise UsageError("give an action: `opcost store copy SRC DST [RUN...]` (opcost store --help)")
    _check("SRC", args.src)
    _check("DST", args.dst)
    if _where(args.src) == _where(args.dst):
        raise UsageError("SRC and DST are the same store; give another DST")
    with open_store(args.src, readonly=True) as src:
        if args.runs:
            ids: list[int] = []
            for ref in args.runs:                     # every reference checked before DST is touched
                rid = src.resolve(ref)
                if rid not in ids:
                    ids.append(rid)
        else:
            ids = [r["id"] for r in reversed(src.list_runs())]
        with open_store(args.dst, on_wait=warn) as dst:
            new: list[str] = []
            old: list[str] = []
            completed: dict[int, int] = {}
            idents = {r["id"]: {"uuid": r.get("uuid")} for r in src.list_runs()}
            interrupts.say_done(lambda: _copied(args.dst, [idents[rid] for rid in ids], dst.path))
            for i in range(0, len(ids), BATCH):
                docs = [load_settled(src, rid, args.wait, warn) for rid in ids[i:i + BATCH]]
                done = dst.import_runs(docs)
                completed.update(getattr(dst, "completed", {}))
                for rid, stored in done:
                    if rid not in completed:
                        (new if stored else old).append(str(rid))
            where = dst.path
    print(f"copied {len(new)} run(s) into {where}" + (f" ({', '.join(new)})" if new else "")
          + "".join(f"; run {rid}: {n} process(es) added, completed in place" for rid, n in completed.items())
          + (f"; {len(old)} already there ({', '.join(old)})" if old else ""), file=sys.stdout)
    return 0
