"""`opcost env`: this machine, as stored with every run (its target's env());
`--check`: what it offers a measurement, ok/warn per row with the fix;
`--apply`/`--reset`: the safe, reversible knobs, as root (envcheck)."""

from __future__ import annotations

import os

from ..console import dump_json
from ..errors import UsageError
from . import add_json_flag


def add_parser(sub) -> None:
    s = sub.add_parser("env", help="describe this machine (stored with every run); --check: is it ready to measure",
                       description="With no option: every field of the environment stored with each run, with "
                       "where it came from. --check: one row per thing a measurement wants (governor, turbo, SMT "
                       "siblings, isolated CPU, interrupts, load and steal now, THP, ASLR, perf_event_paranoid, "
                       "the PMU, KVM, QEMU and its plugins, the cross compilers and qemu-user), ok or warn with "
                       "the command that fixes it; exit 0 when all are ok, 1 when one warns. --apply (root): set "
                       "the safe, reversible knobs (governor, turbo, THP, ASLR, perf_event_paranoid) where this "
                       "kernel has them; --reset puts back what --apply changed.")
    add_json_flag(s)
    g = s.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="is this machine ready to measure: ok/warn per row, "
                   "with the fix; exit 1 when anything warns")
    g.add_argument("--apply", action="store_true", help="as root: set the safe, reversible knobs a measurement "
                   "wants (the old values are kept for --reset)")
    g.add_argument("--reset", action="store_true", help="as root: restore what --apply changed")
    s.add_argument("--root", metavar="DIR", help="read (and with --apply write) /sys and /proc under DIR instead "
                   "of / (a copy of another machine's); KVM, QEMU and the compilers are still this machine's")


def run(args, argv) -> int:
    if args.check or args.apply or args.reset:
        from .. import envcheck   # --help must not load it

        if args.root is not None:
            if not os.path.isdir(args.root):
                raise UsageError(f"--root {args.root}: not a directory; give the directory holding sys/ and proc/")
        if args.apply:
            print("\n".join(envcheck.apply(args.root or "/")))
            return 0
        if args.reset:
            print("\n".join(envcheck.reset()))
            return 0
        rows, cpu = envcheck.run_check(args.root)
        print(envcheck.rows_json(rows, cpu) if args.json else envcheck.format_rows(rows, cpu))
        return 0 if all(r.status == envcheck.OK for r in rows) else 1
    if args.root is not None:
        raise UsageError("--root is for --check and --apply; give one of them")
    from ..env import format_env   # --help must not load it
    from ..session import local_target   # --help must not load it

    env = local_target().env()
    if args.json:
        dump_json(env)
    else:
        from .. import envcheck   # --help must not load it

        print(format_env(env))
        print(envcheck.kvm_line(envcheck.Tools.here(), max((len(n) for n in env), default=0) + 1))
    return 0
