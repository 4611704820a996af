"""`opcost export RUN... -o FILE`: stored runs as opcost.result/1 JSON, for
`opcost import` on another machine."""

from __future__ import annotations

import sys

from .. import output
from ..console import warn
from ..safetext import printable
from . import REFS, add_store_option


def add_parser(sub) -> None:
    s = sub.add_parser("export", help="write stored runs as opcost.result/1 JSON (for `opcost import`)",
                       description="Writes the runs as they are stored: env, labels, command line, times, "
                       "status, every process and its raw samples. One run: one JSON document (as "
                       "`show RUN --json` writes it); two or more: JSON lines, one document per line. "
                       + REFS)
    s.add_argument("runs", nargs="+", metavar="RUN", help="run id or label; repeatable")
    s.add_argument("-o", "--output", metavar="FILE", default="-",
                   help="where to write ('-', the default: stdout); an existing file only with --force")
    s.add_argument("--force", action="store_true", help="overwrite an existing -o FILE")
    s.add_argument("--wait", action="store_true", help="a run still being measured: wait for it to end (default: "
                   "export what it has measured so far, marked interrupted; importing a later export "
                   "completes it in place)")
    add_store_option(s)


def run(args, argv) -> int:
    from ..store import open_store   # --help must not load it
    from ..transfer import load_settled, serialize   # --help must not load it

    output.check_target(args.output, "-o", overwrite=args.force)
    with open_store(args.store, readonly=True) as store:
        ids: list[int] = []
        for ref in args.runs:
            rid = store.resolve(ref)
            if rid not in ids:
                ids.append(rid)
        docs = [load_settled(store, rid, args.wait, warn) for rid in ids]
    output.save(args.output, serialize(docs))
    if args.output != output.STDOUT:
        print(f"exported {len(docs)} run(s) ({', '.join(map(str, ids))}) to {printable(args.output)}",
              file=sys.stderr)
    return 0
