"""Command line: parse, call, print. Every error becomes one line and an exit
code here, in one place. Heavy modules (numpy, rich) are imported inside the
commands that need them, so `opcost --help` stays fast."""

from __future__ import annotations

import argparse
import json
import re
import sys

from . import __version__
from .errors import EXIT_INTERRUPTED, OpcostError, UsageError
from .text import printable


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, as for every other usage error
        raise UsageError(f"{message} (see {self.prog} --help)")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


class Bound:
    """The range of one numeric option. `kind` is int, float or percent
    ("2" or "2%"); an open end is itself refused (a timeout of 0 s)."""

    def __init__(self, kind: str, low: float, high: float, what: str, low_open: bool = False,
                 high_open: bool = False, example: str = ""):
        self.kind, self.low, self.high, self.what = kind, low, high, what
        self.low_open, self.high_open, self.example = low_open, high_open, example

    def range_text(self) -> str:
        lo, hi = _num(self.low), _num(self.high)
        text = {(False, False): f"from {lo} to {hi}", (True, False): f"more than {lo} and at most {hi}",
                (True, True): f"more than {lo} and less than {hi}",
                (False, True): f"at least {lo} and less than {hi}"}[self.low_open, self.high_open]
        return ("a whole number " if self.kind == "int" else "a number ") + text

    def short(self) -> str:
        """[1..1000], [>0..86400], [>0..<100]: the range in --help."""
        return (f"[{'>' if self.low_open else ''}{_num(self.low)}.."
                f"{'<' if self.high_open else ''}{_num(self.high)}]")

    def parse(self, flag: str, value):
        if not isinstance(value, str):
            return value  # a default
        text = value.strip().removesuffix("%") if self.kind == "percent" else value.strip()
        v = None
        if text.isascii() and re.fullmatch(r"[+-]?[0-9]+" if self.kind == "int" else r"[+-]?[0-9.eE+-]+", text):
            try:
                v = int(text) if self.kind == "int" else float(text)
            except ValueError:
                v = None
        if v is None or not (self.low < v if self.low_open else self.low <= v) \
                or not (v < self.high if self.high_open else v <= self.high):
            example = f", e.g. {flag} {self.example}" if self.example else ""
            raise UsageError(f"{flag} {printable(value)}: give {self.what}, {self.range_text()}{example}")
        return v


# Every numeric option of every subcommand, by its dest: one rule, applied by
# check_args right after parsing (before any command runs or anything heavy is
# imported), and each range shown in --help. The upper bounds keep a typo
# (-p 18446744073709551616) from running for days, and every count within
# what the probe's C `long` holds on each architecture (32 bits on i386).
BOUNDS = {
    "processes": Bound("int", 1, 1000, "the number of fresh probe processes per variant"),
    "samples": Bound("int", 1, 10000, "the number of measured batches per process"),
    "warmup": Bound("int", 0, 10000, "the number of warm-up batches per process"),
    "iters": Bound("int", 1, 2**31 - 1, "the iterations per batch"),
    "target_ms": Bound("float", 1, 60000, "the length of one batch in ms"),
    "timeout": Bound("float", 0, 86400, "the seconds one probe process may take", low_open=True),
    "seed": Bound("int", 0, 2**32 - 1, "the seed of the run order and padding"),
    "fake_clock": Bound("float", 0, 1e9, "the fake cost of one operation in ns", low_open=True),
    "parallel": Bound("int", 1, 1024, "the number of concurrent copies"),
    "limit": Bound("int", 1, 10**9, "the number of newest runs to list"),
    "delta": Bound("percent", 0, 100, "a percentage", low_open=True, high_open=True, example="2 for 2%"),
}

# Text options that must not be empty (an empty --cpu would silently mean the default).
_NONEMPTY = {"cpu": "a CPU, e.g. --cpu 0 or --cpu 0,1", "label": "a name, e.g. --label 6.18-lazyfpu",
             "cc": "a compiler, e.g. --cc gcc", "out": "a file, e.g. --out ./opcost-probe-aarch64"}
# Text options checked for control characters (a SPEC ending in a newline, an
# escape sequence in a label): never what was meant, and they break the tables.
# Run references are not: they may name a label an older opcost stored.
_TEXT = ("specs", "benches", "a", "b", "cpu", "counters", "label", "store", "arch", "cc", "cflags", "out",
         "source", "defines")


def _flag(dest: str) -> str:
    return {"specs": "SPEC", "benches": "BENCH", "source": "SOURCE", "defines": "-D", "a": "--a",
            "b": "--b"}.get(dest, "--" + dest.replace("_", "-"))


def check_args(args: argparse.Namespace) -> None:
    """The checks every subcommand shares, before it runs: numbers in range
    (BOUNDS, converting them from text), no control characters in text, no
    empty value where empty would silently mean something else."""
    for dest, bound in BOUNDS.items():
        if getattr(args, dest, None) is not None:
            setattr(args, dest, bound.parse(_flag(dest), getattr(args, dest)))
    for dest in _TEXT:
        value = getattr(args, dest, None)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and printable(v) != v:
                raise UsageError(f"{_flag(dest)} '{printable(v)}' contains a control character; "
                                 "write it without (a trailing newline or tab is easy to miss)")
    for dest, want in _NONEMPTY.items():
        v = getattr(args, dest, None)
        if isinstance(v, str) and not v.strip():
            raise UsageError(f"{_flag(dest)} is empty; give {want}, or leave the option out")


def _show_bounds(parser: argparse.ArgumentParser) -> None:
    """Append each numeric option's range to its --help line."""
    for a in parser._actions:
        if a.dest in BOUNDS and a.help:
            a.help += " " + BOUNDS[a.dest].short()
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                _show_bounds(sub)


_REFS = ("A run is given by id or label (the latest run with that label); a number is tried as an id "
         "first. id:N and label:TEXT say which: `show label:1` is the run labelled 1.")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="opcost", description="What one low-level operation costs on this machine, "
                "and whether a change made it cheaper.")
    p.add_argument("--version", action="version", version=f"opcost {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    s = sub.add_parser("list", help="benchmarks and their parameters")
    s.add_argument("--json", action="store_true", help="machine-readable table on stdout")

    s = sub.add_parser("env", help="describe this machine (stored with every run)")
    s.add_argument("--json", action="store_true", help="JSON on stdout")

    s = sub.add_parser("run", help="measure benchmarks (no SPEC: the default suite)",
                       description="SPEC is bench.name or bench.name:key=value,key=value; "
                       "key=a|b|c expands into one variant per value. cpu and arch are parameters "
                       "of every benchmark (cpu=A or cpu=A,B for the measuring side and its helper).")
    s.add_argument("specs", nargs="*", metavar="SPEC")
    add_run_options(s)
    s.add_argument("--parallel", default=None, metavar="N",
                   help="also run N copies at once, copy i pinned to the i-th allowed CPU (wrapping), and "
                   "report per-copy and total throughput and scaling efficiency against one copy")

    s = sub.add_parser("ab", help="interleaved A/B of two variants, with a verdict",
                       description="Each round runs one A and one B process in a random order. "
                       "PARAMS is key=value,key=value (cpu, arch and spin included); identical A and B "
                       "make an A/A run, which measures the noise.")
    s.add_argument("benches", nargs="+", metavar="BENCH")
    s.add_argument("--a", required=True, metavar="PARAMS", help="variant A (the baseline)")
    s.add_argument("--b", required=True, metavar="PARAMS", help="variant B (verdicts are B relative to A)")
    s.add_argument("--delta", default="2", metavar="PCT",
                   help="practical threshold in percent (default 2; raised to twice the measured noise)")
    add_run_options(s)

    s = sub.add_parser("variants", help="compile SOURCE once per -D NAME and compare the builds, interleaved",
                       description="SOURCE (C or assembly) is compiled once per -D NAME (cc CFLAGS -DNAME); the "
                       "builds are measured interleaved and each is compared to the first. Program mode (SOURCE "
                       "defines main): each run of the program is one sample, timed like time(1); defaults "
                       "-n 1 -w 0 after one untimed check run. Op mode (SOURCE defines "
                       "uint64_t opcost_op(uint64_t x)): linked into the probe as benchmark user.op and "
                       "measured per call, with an empty opcost_op as the reference; defaults -n 20 -w 3. "
                       "--cflags takes the next word whatever it starts with: --cflags -O3, "
                       "--cflags '-O2 -march=native'.")
    s.add_argument("source", metavar="SOURCE", help="C (.c) or assembly (.s, .S) file")
    s.add_argument("-D", dest="defines", action="append", metavar="NAME[=VALUE]",
                   help="one variant per -D; the first is the baseline A")
    s.add_argument("--mode", choices=("auto", "program", "op"), default="auto",
                   help="program (SOURCE defines main) or op (it defines opcost_op); default: from SOURCE")
    s.add_argument("--cc", default="cc", help="C compiler (default cc)")
    s.add_argument("--cflags", default="-O2", metavar="FLAGS", help="compiler flags (default -O2)")
    s.add_argument("--delta", default="2", metavar="PCT",
                   help="practical threshold in percent (default 2; raised to twice the measured noise)")
    add_run_options(s)
    for a in s._actions:  # the defaults of these depend on the mode (see the description)
        if a.dest in ("samples", "warmup", "target_ms"):
            a.default = None
            a.help = a.help.split(" (default")[0] + {"samples": " (default: program 1, op 20)",
                                                     "warmup": " (default: program 0, op 3)",
                                                     "target_ms": " (op mode; default 10)"}[a.dest]

    s = sub.add_parser("compare", help="compare two stored runs (not interleaved)", description=_REFS)
    s.add_argument("run_a", metavar="RUN_A", help="run id or label (the baseline)")
    s.add_argument("run_b", metavar="RUN_B", help="run id or label")
    s.add_argument("--delta", default="2", metavar="PCT", help="practical threshold in percent (default 2)")
    s.add_argument("--force", action="store_true", help="compare even when CPU model or architecture differ")
    s.add_argument("--store", metavar="URL", help="result store")
    s.add_argument("--json", metavar="FILE", help="write the opcost.comparison/1 document")

    s = sub.add_parser("probe", help="probes per architecture: list them, build one (cross-compile)")
    ps = s.add_subparsers(dest="probe_command", metavar="ACTION", parser_class=_Parser, required=True)
    b = ps.add_parser("build", help="compile the probe for an architecture (x86_64, i386, aarch64)")
    b.add_argument("--arch", required=True, help="x86_64, i386 or aarch64")
    b.add_argument("--cc", metavar="CC", help="compiler (default: cc for the host, the Debian cross compiler "
                   "otherwise, e.g. aarch64-linux-gnu-gcc)")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--static", dest="static", action="store_true", default=True,
                   help="link statically (default; needed under qemu and on machines without this libc)")
    g.add_argument("--dynamic", dest="static", action="store_false", help="link dynamically")
    b.add_argument("--out", metavar="FILE", help="where to put it (default: $XDG_DATA_HOME/opcost/probes/, "
                   "where arch= finds it)")
    ls = ps.add_parser("list", help="which architectures have a probe here, and how they run")
    ls.add_argument("--json", action="store_true", help="JSON on stdout")

    s = sub.add_parser("history", help="list stored runs; `history clean` marks runs whose opcost is gone",
                       description="A run still shown as running whose opcost process is gone (killed, "
                       "rebooted) reads as abandoned; `opcost history clean` stores that status for "
                       "them (their measurements stay).")
    s.add_argument("action", nargs="?", choices=["clean"], metavar="clean",
                   help="store status 'abandoned' for runs left running by an opcost that is gone")
    s.add_argument("--store", metavar="URL", help="result store (default: $XDG_DATA_HOME/opcost/opcost.db)")
    s.add_argument("--limit", default=None, metavar="N", help="newest N runs")
    s.add_argument("--json", action="store_true", help="JSON on stdout")

    s = sub.add_parser("show", help="print a stored run", description=_REFS + " An ab or variants run is "
                       "printed as its comparison, rebuilt from the stored results.")
    s.add_argument("run", metavar="RUN", help="run id or label")
    s.add_argument("--store", metavar="URL", help="result store")
    s.add_argument("--json", metavar="FILE", help="write its opcost.result/1 document to FILE ('-': stdout)")
    _show_bounds(p)
    return p


def add_run_options(s: argparse.ArgumentParser) -> None:
    g = s.add_argument_group("measurement")
    g.add_argument("-p", "--processes", default=10, metavar="N",
                   help="fresh probe processes per variant (default 10)")
    g.add_argument("-n", "--samples", default=20, metavar="N",
                   help="measured batches per process (default 20)")
    g.add_argument("-w", "--warmup", default=3, metavar="N",
                   help="warm-up batches per process, not analysed (default 3)")
    g.add_argument("--target-ms", default=10.0, metavar="MS",
                   help="length of one batch; iterations are calibrated to it (default 10)")
    g.add_argument("--iters", default=None, metavar="N",
                   help="fixed iterations per batch instead of calibrating")
    g.add_argument("--cpu", metavar="CPU[,CPU]", help="pin here unless the SPEC says cpu= "
                   "(default: the last CPU; a second CPU is the helper's)")
    g.add_argument("--counters", metavar="LIST", help="perf events and profiles per op, e.g. "
                   "context-switches,task-clock,cycles,instructions:u,r01c2 or cache:u,cache:k "
                   "(profiles: basic, cache, branch, tlb, frontend, software)")
    g.add_argument("--timeout", default=None, metavar="SEC",
                   help="per probe process (default: generous, from the batch plan)")
    g.add_argument("--seed", default=0, metavar="N", help="seed for the run order and padding (default 0)")
    g.add_argument("--fake-clock", default=None, metavar="NS",
                   help="deterministic fake timings of NS per op (for tests of opcost itself)")
    o = s.add_argument_group("output")
    o.add_argument("--label", help="name this run (for history and compare)")
    o.add_argument("--json", metavar="FILE", help="write opcost.result/1 JSON (updated after every process)")
    o.add_argument("--store", metavar="URL", help="result store (default: $XDG_DATA_HOME/opcost/opcost.db)")
    o.add_argument("--no-store", action="store_true", help="do not save this run")
    o.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _glue_flag_values(argv: list[str]) -> list[str]:
    """`opcost variants ... --cflags -O3`: argparse takes a value that starts
    with '-' for an option, so `--cflags X` becomes `--cflags=X` (the value
    is whatever follows, as compilers' wrappers accept it)."""
    if "variants" not in argv:
        return argv
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in ("--cflags", "--cc") and i + 1 < len(argv):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    return [name for a in parser._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices]


def main(argv: list[str] | None = None) -> int:
    from . import interrupts

    interrupts.install()   # first: Ctrl-C, SIGTERM, SIGHUP end a run cleanly from here on
    try:
        return _main(argv)
    finally:
        # The answer is decided: a signal now must not kill the interpreter on
        # its way out (it resets the handlers while finalizing) and turn a
        # finished run's exit 0 into "killed by SIGINT".
        import signal

        signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.SIGNALS)


def _main(argv: list[str] | None) -> int:
    from . import interrupts

    argv = sys.argv[1:] if argv is None else argv
    argv = _glue_flag_values(list(argv))
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            raise UsageError("give a command: " + ", ".join(_commands(parser)) + " (opcost --help says what each does)")
        check_args(args)
        from . import commands
        return getattr(commands, "cmd_" + args.command)(args, argv)
    except OpcostError as e:
        print(f"opcost: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return _interrupted()
    except Exception:
        # A signal raised inside an import can come out wrapped (a class body's
        # __set_name__ turns it into RuntimeError): still an interruption.
        if interrupts.received() is None:
            raise
        return _interrupted()


def _interrupted() -> int:
    """Stopped before a run existed (checking input, starting up): nothing
    was stored. 128 + the signal: 130 (Ctrl-C), 143 (SIGTERM), 129 (SIGHUP)."""
    from . import interrupts

    interrupts.hold()
    try:
        print("opcost: interrupted before anything was measured", file=sys.stderr)
    except OSError:
        pass
    return interrupts.exit_code(EXIT_INTERRUPTED)


def dump_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")
