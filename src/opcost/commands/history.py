"""`opcost history [clean]`: the stored runs; `clean` records the runs whose
opcost is gone as abandoned."""

from __future__ import annotations

from ..console import dump_json, warn


def add_parser(sub) -> None:
    s = sub.add_parser("history", help="list stored runs; `history clean` marks runs whose opcost is gone",
                       description="A run still shown as running whose opcost process is gone (killed, "
                       "rebooted) reads as abandoned; `opcost history clean` stores that status for "
                       "them (their measurements stay).")
    s.add_argument("action", nargs="?", choices=["clean"], metavar="clean",
                   help="store status 'abandoned' for runs left running by an opcost that is gone")
    s.add_argument("--store", metavar="URL", help="result store (default: $XDG_DATA_HOME/opcost/opcost.db)")
    s.add_argument("--limit", default=None, metavar="N", help="newest N runs")
    s.add_argument("--json", action="store_true", help="JSON on stdout")


def run(args, argv) -> int:
    from ..history import format_history
    from ..store import open_store

    if args.action == "clean":
        with open_store(args.store, on_wait=warn) as store:
            gone = store.clean_abandoned()
        print(f"marked {len(gone)} abandoned run(s)" + (f": {', '.join(map(str, gone))}" if gone else ""))
        return 0
    with open_store(args.store, readonly=True) as store:
        runs = store.list_runs(args.limit)
    if args.json:
        dump_json(runs)
    else:
        print(format_history(runs))
    return 0
