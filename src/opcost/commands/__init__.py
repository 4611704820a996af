"""The subcommands: one module each, named in COMMANDS. A module has
`add_parser(sub)` (its options) and `run(args, argv) -> exit code`; it stays
thin (arguments in, calls to the library, output) and imports nothing heavy
at module level, since `opcost --help` builds every parser.

A new subcommand is one file here and one name in COMMANDS (a module named
like a Python builtin takes a trailing underscore: list_.py).
"""

from __future__ import annotations

import argparse
import importlib

from .. import __version__, protocol
from ..errors import UsageError
from ..formats import FORMATS
from ..redact import redact
from ..safetext import printable

COMMANDS = ("list", "env", "run", "ab", "variants", "compare", "series", "probe", "history", "show", "report",
            "export", "import", "store", "fleet", "completion")


def module(name: str):
    """The module of subcommand `name` (list -> list_: a submodule named
    `list` would shadow the builtin in this package's namespace; `import`
    is a keyword)."""
    return importlib.import_module(f".{name}_" if name in ("list", "import") else f".{name}", __name__)


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, as for every other usage error
        raise UsageError(f"{printable(redact(message))} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="opcost", description="What one low-level operation costs on this machine, "
               "and whether a change made it cheaper.")
    p.add_argument("--version", action="version", version=f"opcost {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS:
        module(name).add_parser(sub)
    protocol.show_bounds(p)
    return p


def command_names(parser: argparse.ArgumentParser) -> list[str]:
    return [name for a in parser._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices]


REFS = ("A run is given by id or label (the latest run with that label); a number is tried as an id "
        "first. id:N and label:TEXT say which: `show label:1` is the run labelled 1.")


def add_measure_options(s: argparse.ArgumentParser, defaults: dict | None = None, target: bool = True) -> None:
    """The options of every measuring command: the protocol (generated from
    protocol.FIELDS), where it runs (--target, unless the command says where
    itself: fleet), where to pin, what to count, and where results go."""
    protocol.add_options(s, defaults)
    g = [a for a in s._action_groups if a.title == "measurement"][0]
    if target:
        g.add_argument("--target", metavar="SPEC", help="where the probe runs: local (this machine, the default), "
                       "ssh://[USER@]HOST[:PORT] (a host reached with your OpenSSH client and its known key) or "
                       "vm:KERNEL[?cpus=N&mem=MiB&accel=kvm|tcg|auto&machine=microvm|pc|auto&cmdline=ARGS] (a kernel booted in QEMU; "
                       "--kernel and kernel= say the same)")
    g.add_argument("--cpu", metavar="CPU[,CPU]", help="pin here unless the SPEC says cpu= "
                   "(default: the last CPU; a second CPU is the helper's)")
    g.add_argument("--counters", metavar="LIST", help="perf events and profiles per op, e.g. "
                   "context-switches,task-clock,cycles,instructions:u,r01c2 or cache:u,cache:k "
                   "(profiles: basic, cache, branch, tlb, frontend, software); this machine's named PMU "
                   "events (ls_dispatch.ld_dispatch, cpu/event=0x29,umask=1/); :helper counts the helper")
    o = s.add_argument_group("output")
    o.add_argument("--label", action="append", metavar="KEY=VALUE",
                   help="label this run, repeatable: --label kernel=6.18-rc3 --label commit=abc123 (searched by "
                   "`history --where`); a bare --label TEXT names it (name=TEXT, for history and compare)")
    add_export_options(o, "opcost.result/1 JSON, updated during the run")
    add_store_option(o)
    o.add_argument("--no-store", action="store_true", help="do not save this run")
    o.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


# The options several subcommands share are declared here once each (and
# --delta in protocol.add_delta, converted to a fraction there once):
# tests/test_present.py checks that no subcommand declares its own.

def add_store_option(g) -> None:
    """--store URL: the result store every command that reads or writes runs takes."""
    g.add_argument("--store", metavar="URL", help="result store: a path (SQLite) or postgresql://HOST/DB "
                   "(default: $XDG_DATA_HOME/opcost/opcost.db)")


def add_notes_flag(g) -> None:
    """--notes: every note of every benchmark under the table, instead of one line per kind."""
    g.add_argument("--notes", action="store_true", help="print every note of every benchmark under the table "
                   "(default: one line per kind of note, across the benchmarks; every export carries them all)")


def add_json_flag(g) -> None:
    """--json (no FILE): a listing command's answer as JSON on stdout instead of its table."""
    g.add_argument("--json", action="store_true", help="JSON on stdout")


def add_export_options(g, what: str) -> None:
    """--json FILE and the repeatable --export FORMAT:FILE (hyperfine's shape): where
    a command's document goes (present.present writes them)."""

    g.add_argument("--json", metavar="FILE", help=f"write {what} ('-': stdout; the table then goes to stderr); "
                   "the same as --export json:FILE")
    g.add_argument("--export", action="append", metavar="FORMAT:FILE",
                   help=f"also write the document as FORMAT ({', '.join(FORMATS)}) to FILE; repeatable")


# Text options that must not be empty (an empty --cpu would silently mean the default).
_NONEMPTY = {"cpu": "a CPU, e.g. --cpu 0 or --cpu 0,1", "label": "a name, e.g. --label 6.18-lazyfpu",
             "bench": "a benchmark name, e.g. --bench syscall.null",
             "cc": "a compiler, e.g. --cc gcc", "out": "a file, e.g. --out ./opcost-probe-aarch64"}
# Text options checked for control characters (a SPEC ending in a newline, an
# escape sequence in a label): never what was meant, and they break the tables.
# Run references are not: they may name a label an older opcost stored.
_TEXT = ("specs", "benches", "a", "b", "cpu", "counters", "label", "store", "arch", "cc", "cflags", "cflags_for",
         "out", "source", "defines", "export", "target")


def flag_of(dest: str) -> str:
    return {"specs": "SPEC", "benches": "BENCH", "source": "SOURCE", "defines": "-D", "a": "--a",
            "b": "--b"}.get(dest, "--" + dest.replace("_", "-"))


# File paths may hold any bytes (a Linux file name need not be UTF-8); every
# other text argument (run references, labels, --where) must be UTF-8 text.
_PATHS = ("json", "output", "order_file", "files", "hosts", "ssh_config")


def _not_utf8(v: str) -> bool:
    # Bytes that are not UTF-8 reach Python's argv as lone surrogates (surrogateescape).
    return any("\udc80" <= c <= "\udcff" for c in v)


def _check_utf8(args: argparse.Namespace) -> None:
    for dest, value in vars(args).items():
        if dest in _PATHS or dest.startswith("_"):
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            for item in v if isinstance(v, (list, tuple)) else [v]:
                if isinstance(item, str) and _not_utf8(item):
                    shown = printable(item.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))
                    name = {"run": "RUN", "runs": "RUN", "run_a": "RUN_A", "run_b": "RUN_B"}.get(dest) or flag_of(dest)
                    raise UsageError(f"{name} '{redact(shown)}' is not UTF-8 text; give it in UTF-8 "
                                     "(only file paths may hold other bytes)")


def check_args(args: argparse.Namespace) -> None:
    """The checks every subcommand shares, before it runs: numbers in range
    (protocol.BOUNDS, converting them from text), no control characters in
    text, no empty value where empty would silently mean something else."""
    _check_utf8(args)
    protocol.check_numbers(args, flag_of)
    for dest in _TEXT:
        value = getattr(args, dest, None)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and printable(v) != v:
                raise UsageError(f"{flag_of(dest)} '{redact(printable(v))}' contains a control character; "
                                 "write it without (a trailing newline or tab is easy to miss)")
    for dest, want in _NONEMPTY.items():
        v = getattr(args, dest, None)
        if isinstance(v, str) and not v.strip():
            raise UsageError(f"{flag_of(dest)} is empty; give {want}, or leave the option out")
