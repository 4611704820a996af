"""Command line: parse, call, print. Every error becomes one line and an exit
code here, in one place. The subcommands are commands/*.py (their parsers
and what they run); heavy modules (numpy, rich) are imported inside the
commands that need them, so `opcost --help` stays fast."""

from __future__ import annotations

import signal
import sys

from . import interrupts
from .errors import EXIT_INTERRUPTED, OpcostError, UsageError
from .redact import redact
from .safetext import printable, screen


def _glue_flag_values(argv: list[str]) -> list[str]:
    """`opcost variants ... --cflags -O3`: argparse takes a value that starts
    with '-' for an option, so `--cflags X` becomes `--cflags=X` (the value
    is whatever follows, as compilers' wrappers accept it)."""
    if "variants" not in argv:
        return argv
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in ("--cflags", "--cflags-for", "--cc") and i + 1 < len(argv):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    interrupts.install()   # first: Ctrl-C, SIGTERM, SIGHUP end a run cleanly from here on
    try:
        return _main(argv)
    finally:
        # The answer is decided: a signal now must not kill the interpreter on
        # its way out (it resets the handlers while finalizing) and turn a
        # finished run's exit 0 into "killed by SIGINT". Blocked in this
        # thread, and ignored in the whole process: threads that a library
        # started (numpy's BLAS pool) do not block it, and a signal delivered
        # to one of them once the interpreter has put the default action back
        # would kill the process.
        signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.SIGNALS)
        for sig in interrupts.SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    argv = _glue_flag_values(list(argv))
    try:
        from . import commands   # in the try: a Ctrl-C while the parsers load ends as an interruption

        if argv[:1] == ["--version"] and len(argv) > 1:
            # argparse prints the version and exits at --version, ignoring the rest.
            raise UsageError(f"--version takes nothing more (got '{printable(argv[1])}'): `opcost --version` alone")
        parser = commands.build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            raise UsageError("give a command: " + ", ".join(commands.command_names(parser))
                             + " (opcost --help says what each does)")
        commands.check_args(args)
        try:
            return commands.module(args.command).run(args, argv)
        finally:
            _close_targets()
    except OpcostError as e:
        print(screen(f"opcost: {redact(str(e))}"), file=sys.stderr)    # a --store URL's password never shown
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


def _close_targets() -> None:
    """Close the targets a command opened (an SSH connection and its upload:
    targets.close_all), whatever the way out; only if it opened any."""
    targets = sys.modules.get("opcost.targets")
    if targets is not None:
        targets.close_all()


def _interrupted() -> int:
    """Stopped before a run existed (checking input, starting up): nothing
    was stored. 128 + the signal: 130 (Ctrl-C), 143 (SIGTERM), 129 (SIGHUP)."""

    interrupts.hold()
    done = interrupts.done_text()
    try:
        if done is None:
            print("opcost: interrupted before anything was measured", file=sys.stderr)
        else:
            name = signal.Signals(interrupts.received() or signal.SIGINT).name
            print(f"opcost: interrupted ({name}); {done}", file=sys.stderr)
    except OSError:
        pass
    return interrupts.exit_code(EXIT_INTERRUPTED)
