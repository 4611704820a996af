"""The plan of a run stored before plans were (schema version 5, `plan` of
opcost.result/1), recovered once from its stored command line: at the
migration of an older store, when an older store is read as it is
(read-only), and when a document without a plan is imported.

The command lines such runs stored were written by the options of opcost up
to 0.1.0, which are frozen here as data: what a later command line calls
them does not matter (`show` of an old run keeps its comparison after any
CLI change). Each measuring command's options that take a value, those that
do not, and its positionals; argparse reads them as the parser of that
version did (abbreviations, `--opt=value`, `-p3`), and a command line that
does not parse, or is of another kind than the run's, recovers no plan (the
run is then shown as its results table, as before).
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Callable, NoReturn

from ..model import Plan

# The options of opcost 0.1.0's measuring commands (`-h` aside).
_MEASURE = ("-p --processes", "-n --samples", "-w --warmup", "--target-ms", "--iters", "--timeout", "--seed",
            "--fake-clock", "--cpu", "--counters", "--label", "--json", "--export", "--store")
_FROZEN: dict[str, dict[str, Any]] = {
    "run": {"positional": [("specs", "*")], "flags": ["--no-store", "--no-progress"],
            "values": [*_MEASURE, "--parallel"]},
    "ab": {"positional": [("benches", "+")], "flags": ["--no-store", "--no-progress"],
           "values": ["--a", "--b", "--delta", "--boundary", *_MEASURE]},
    "variants": {"positional": [("source", None)], "flags": ["--no-store", "--no-progress"],
                 "values": ["-D", "--mode", "--cc", "--arch", "--ops", "--cflags", "--delta", *_MEASURE]},
    "series": {"positional": [("bench", "?")], "flags": ["--force", "--no-store", "--no-progress"],
               "values": ["--by", "--order", "--order-file", "--run", "--over", "--delta", *_MEASURE]},
}
# The probe's context switches per operation (`opcost-probe list --json`,
# switches_per_op) of 0.1.0's benchmarks: every other benchmark's is 0.
_SWITCHES = {"ctx.pipe": 2, "ctx.yield": 2, "ctx.unix": 2, "ctx.futex": 2, "ctx.eventfd": 2}
_DELTA = 2.0            # --delta's default, percent
_SCHEDULE = [10, 20, 40]  # ab's sequential looks without -p
_BOUNDARY = "pocock"    # and their alpha spending without --boundary (a run's processes say which)


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def _parser(kind: str) -> argparse.ArgumentParser:
    spec = _FROZEN[kind]
    p = _Parser(prog=f"opcost {kind}", add_help=False)
    for dest, nargs in spec["positional"]:
        p.add_argument(dest, nargs=nargs)
    for flag in spec["flags"]:
        p.add_argument(flag, action="store_true")
    for names in spec["values"]:
        p.add_argument(*names.split(), action="append")
    return p


def _last(v: list[str] | None) -> str | None:
    return v[-1] if v else None


def _percent(text: str | None) -> float | None:
    if text is None:
        return _DELTA / 100
    text = text.strip().removesuffix("%")
    if not re.fullmatch(r"[+-]?[0-9.eE+-]+", text):
        return None
    try:
        v = float(text)
    except ValueError:
        return None
    return v / 100 if 0 < v < 100 else None


def recover_plan(argv: list[str] | None, kind: str | None, results: list[dict] | None = None) -> Plan | None:
    """The plan a stored run of `kind` had, from its command line (argv[0]
    is the program, argv[1] the command); None when it cannot be told (not
    a measuring command, not this kind, does not parse, a value out of range).
    results: the run's results (their benchmarks give the switches per
    operation; an ab run's processes, its boundary)."""
    argv = [str(a) for a in argv or []]
    kind = kind or "run"
    if kind not in _FROZEN or len(argv) < 2 or argv[1] != kind:
        return None
    try:
        args = _parser(kind).parse_args(argv[2:])
    except _Refused:
        return None
    results = results or []
    plan = Plan(kind=kind, target="local", recovered=True,
                switches={r["bench"]: _SWITCHES[r["bench"]] for r in results if r.get("bench") in _SWITCHES})
    if kind in ("ab", "variants", "series"):
        delta = _percent(_last(args.delta))
        if delta is None:
            return None
        plan.delta = delta
    if kind == "run":
        plan.specs = list(args.specs)
    elif kind == "ab":
        if not args.a or not args.b:
            return None
        plan.specs, plan.a, plan.b = list(args.benches), _last(args.a), _last(args.b)
        if args.processes is None:   # the sequential design
            plan.stages = list(_SCHEDULE)
            stored = [p.get("boundary") for r in results for p in r.get("processes") or [] if p.get("boundary")]
            # a run whose processes record no boundary ran before there was a choice: O'Brien-Fleming's
            plan.boundary = stored[0] if stored else _last(args.boundary) or (
                "obf" if any("stage" in p for r in results for p in r.get("processes") or []) else _BOUNDARY)
    elif kind == "variants":
        plan.specs = [args.source]
        ops = _last(args.ops)
        plan.ops = int(ops) if ops is not None and ops.strip().isdigit() else None
    else:  # series: a `series --run` is stored, `series BENCH --by KEY` is not
        spec, over = _last(args.run), _last(args.over)
        if spec is None or over is None:
            return None
        param, eq, values = over.partition("=")
        vals = [v.strip() for v in values.split("|")]
        if not eq or not param.strip() or any(not v for v in vals):
            return None
        plan.specs, plan.over = [spec], {"param": param.strip(), "values": vals}
    return plan


def plan_or_recovered(doc: dict) -> dict | None:
    """A result document's plan as stored, else recovered from its argv
    (its `plan` field's value: a dict, or None when it cannot be told)."""
    plan = doc.get("plan")
    if isinstance(plan, dict):
        return plan
    got = recover_plan(doc.get("argv"), doc.get("kind"), doc.get("results"))
    return None if got is None else got.to_dict()
