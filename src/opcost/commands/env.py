"""`opcost env`: this machine, as stored with every run (its target's env())."""

from __future__ import annotations

from ..console import dump_json
from . import add_json_flag


def add_parser(sub) -> None:
    s = sub.add_parser("env", help="describe this machine (stored with every run)")
    add_json_flag(s)


def run(args, argv) -> int:
    from ..env import format_env
    from ..session import local_target

    env = local_target().env()
    if args.json:
        dump_json(env)
    else:
        print(format_env(env))
    return 0
