"""`opcost list`: the benchmarks and their parameters, from the probe itself."""

from __future__ import annotations

from ..console import dump_json
from . import add_json_flag


def add_parser(sub) -> None:
    s = sub.add_parser("list", help="benchmarks and their parameters")
    add_json_flag(s)


def run(args, argv) -> int:
    from ..session import default_suite, local_target   # --help must not load it

    target = local_target()
    table = target.benchmark_table()
    if args.json:
        dump_json({**table, "default_suite": default_suite(table), "generic_params": [
            {"name": "cpu", "help": "CPU for the measuring side, or A,B (measuring side, helper)"},
            {"name": "arch", "help": "probe architecture", "choices": target.arches()}]})
        return 0
    for b in table["benchmarks"]:
        print(f"{b['name']:<16} {b['summary']}")
        print(f"{'':<16} op: {b['op']}")
        for p in b["params"]:
            allowed = "|".join(p["choices"]) if p["type"] == "enum" else (
                f"{p['min']}..{p['max']}" if p["type"] == "int" else "text")
            print(f"{'':<16}   {p['name']}={allowed} (default {p['default']}): {p['help']}")
    print(f"\nevery benchmark also takes cpu=A[,B] (or a range A-B: one variant per CPU), "
          f"arch={'|'.join(target.arches())} and spin=N")
    print(f"default suite (`opcost run` with no SPEC): {' '.join(default_suite(table))}")
    return 0
