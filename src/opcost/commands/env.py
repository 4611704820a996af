"""`opcost env`: this machine, as stored with every run."""

from __future__ import annotations

from ..console import dump_json


def add_parser(sub) -> None:
    s = sub.add_parser("env", help="describe this machine (stored with every run)")
    s.add_argument("--json", action="store_true", help="JSON on stdout")


def run(args, argv) -> int:
    from ..env import collect_local, format_env

    env = collect_local()
    if args.json:
        dump_json(env)
    else:
        print(format_env(env))
    return 0
