"""`opcost history [clean | delete RUN...]`: the stored runs, filtered by
label (--where KEY=VALUE) and benchmark (--bench); `clean` records the runs
whose opcost is gone as abandoned; `delete` removes runs (asking first)."""

from __future__ import annotations

import sys

from ..console import dump_json, warn
from ..errors import UsageError
from ..safetext import printable
from . import REFS, add_json_flag, add_store_option


def add_parser(sub) -> None:
    s = sub.add_parser("history", help="list stored runs (--where KEY=VALUE, --bench NAME); `history clean` "
                       "marks runs whose opcost is gone; `history delete RUN...` removes runs",
                       description="A run still shown as running whose opcost process is gone (killed, "
                       "rebooted) reads as abandoned; `opcost history clean` stores that status for "
                       "them (their measurements stay). `opcost history delete RUN...` deletes runs with "
                       "everything they measured: it asks on a terminal, and needs --yes otherwise. " + REFS)
    s.add_argument("action", nargs="?", choices=["clean", "delete"], metavar="clean|delete",
                   help="clean: store status 'abandoned' for runs left running by an opcost that is gone; "
                   "delete RUN...: delete these runs")
    s.add_argument("runs", nargs="*", metavar="RUN", help="with delete: the runs (id or label)")
    s.add_argument("--where", action="append", metavar="KEY=VALUE",
                   help="only runs labelled KEY=VALUE (--label at run time; a bare label is name=...); "
                   "repeatable, all must hold")
    s.add_argument("--bench", metavar="NAME", help="only runs with a result of benchmark NAME (e.g. signal.catch)")
    add_store_option(s)
    s.add_argument("--limit", default=None, metavar="N", help="newest N runs")
    add_json_flag(s)
    s.add_argument("--yes", "-y", action="store_true", help="with delete: do not ask")


def where_of(texts: list[str] | None) -> dict[str, str]:
    """--where KEY=VALUE options as a dict (all must hold)."""
    from .. import labels   # --help must not load it

    out: dict[str, str] = {}
    for text in texts or []:
        key, eq, value = text.partition("=")
        if not eq:
            raise UsageError(f"--where '{printable(text)}' needs KEY=VALUE (e.g. --where commit=abc123; "
                             "a run's bare --label is --where name=TEXT)")
        labels.check_key(key, f"--where '{printable(text)}': key")
        if key in out and out[key] != value:
            raise UsageError(f"--where gives {printable(key)} twice ('{printable(out[key])}' and "
                             f"'{printable(value)}'): no run has both; give each key once")
        out[key] = value
    return out


def run(args, argv) -> int:
    from ..history import format_history   # --help must not load it
    from ..store import open_store   # --help must not load it

    if args.action != "delete" and args.runs:
        raise UsageError(f"unexpected argument '{args.runs[0]}': only `history delete` takes runs")
    if args.action is not None and (args.where or args.bench or args.limit is not None or args.json):
        raise UsageError(f"--where, --bench, --limit and --json list runs; `history {args.action}` takes none")
    if args.yes and args.action != "delete":
        raise UsageError("--yes is for `history delete RUN...`")
    if args.action == "clean":
        with open_store(args.store, on_wait=warn) as store:
            gone = store.clean_abandoned()
        print(f"marked {len(gone)} abandoned run(s)" + (f": {', '.join(map(str, gone))}" if gone else ""))
        return 0
    if args.action == "delete":
        return _delete(args)
    where = where_of(args.where)
    with open_store(args.store, readonly=True) as store:
        if where or args.bench:
            runs = store.find_runs(where=where or None, bench=args.bench)
            if args.limit is not None:
                runs = runs[:int(args.limit)]
        else:
            runs = store.list_runs(args.limit)
    if args.json:
        dump_json(runs)
    elif not runs and (where or args.bench):
        print("no stored run matches " + " and ".join(
            [printable(f"{k}={v}") for k, v in where.items()] + ([f"bench {printable(args.bench)}"] if args.bench else [])))
    else:
        print(format_history(runs))
    return 0


def _delete(args) -> int:
    from ..history import format_history   # --help must not load it
    from ..store import open_store   # --help must not load it

    if not args.runs:
        raise UsageError("history delete needs the runs to delete (ids or labels, e.g. `history delete 3 4`)")
    asks = not args.yes
    if asks and not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UsageError("history delete asks before deleting, and this is not a terminal: add --yes "
                         "to delete without asking")
    with open_store(args.store, readonly=True) as store:      # all known, or nothing is deleted
        ids = sorted({store.resolve(ref) for ref in args.runs})
        chosen = [r for r in store.list_runs() if r["id"] in ids]
    if asks:
        print(format_history(chosen), file=sys.stderr)
        sys.stderr.write(f"delete {len(ids)} run(s) and everything they measured? [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted", file=sys.stderr)
            return 1
    with open_store(args.store, on_wait=warn) as store:
        gone = store.delete_runs(ids)
    print(f"deleted {len(gone)} run(s): {', '.join(map(str, gone))}")
    return 0
