"""`opcost probe build|list`: probes per architecture."""

from __future__ import annotations

import os

from ..console import dump_json
from . import Parser, add_json_flag


def add_parser(sub) -> None:
    s = sub.add_parser("probe", help="probes per architecture: list them, build one (cross-compile)")
    ps = s.add_subparsers(dest="probe_command", metavar="ACTION", parser_class=Parser, required=True)
    b = ps.add_parser("build", help="compile the probe for an architecture (x86_64, i386, aarch64, arm)")
    b.add_argument("--arch", required=True, help="x86_64, i386, aarch64 or arm")
    b.add_argument("--cc", metavar="CC", help="compiler (default: cc for the host, the Debian cross compiler "
                   "otherwise, e.g. aarch64-linux-gnu-gcc)")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--static", dest="static", action="store_true", default=True,
                   help="link statically (default; needed under qemu and on machines without this libc)")
    g.add_argument("--dynamic", dest="static", action="store_false", help="link dynamically")
    b.add_argument("--out", metavar="FILE", help="where to put it (default: $XDG_DATA_HOME/opcost/probes/, "
                   "where arch= finds it)")
    ls = ps.add_parser("list", help="which architectures have a probe here, and how they run")
    add_json_flag(ls)


def run(args, argv) -> int:
    from .. import probe, crossprobe   # --help must not load it

    if args.probe_command == "build":
        path = crossprobe.build(args.arch, args.cc, args.static, args.out)
        info = probe.find_probe(args.arch)
        how = ("runs natively" if probe.runs_natively(args.arch)
               else f"runs under {os.path.basename(info.emulator)} (correctness only)" if info and info.emulator
               else "cannot run here (install qemu-user to run it emulated)")
        print(f"built {path} ({args.arch}, {'static' if args.static else 'dynamic'}); {how}")
        return 0
    rows = crossprobe.probes()
    if args.json:
        dump_json({"probes": rows})
        return 0
    for r in rows:
        print(f"{r['arch']:<8} {r['runs']:<48} {r['path'] or ''}")
    return 0
