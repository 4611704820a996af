"""Typed errors. Library code raises these; cli.main turns each into one line on
stderr and its exit code, in one place. Messages say what is wrong and what
would be right."""

EXIT_OK = 0
EXIT_BENCH_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130


class OpcostError(Exception):
    exit_code = EXIT_BENCH_FAILED


class UsageError(OpcostError):
    """Bad input: unknown benchmark, parameter, value, CPU, path..."""
    exit_code = EXIT_USAGE


class StoreError(UsageError):
    """The result store cannot be opened, read or written."""


class UnknownRun(UsageError):
    """A run id or label that the store does not hold."""


class ProbeError(OpcostError):
    """The probe failed (crashed, exited non-zero, printed garbage)."""
    exit_code = EXIT_BENCH_FAILED


class ProbeTimeout(OpcostError):
    exit_code = EXIT_TIMEOUT


class StoreLocked(OpcostError):
    """Another program holds the store's lock longer than opcost waits: not
    bad input (exit 1); the run goes on without the store."""
    exit_code = EXIT_BENCH_FAILED


class StoreGone(OpcostError):
    """The store's file was removed or replaced (another file, another
    directory) while opcost used it: like a locked store, not bad input
    (exit 1); the run goes on without it, into --json or a rescue file."""
    exit_code = EXIT_BENCH_FAILED


class NothingMeasured(OpcostError):
    """Every variant was unsupported here or failed: not a success (exit 1)."""
    exit_code = EXIT_BENCH_FAILED


class HostLost(OpcostError):
    """A remote host (the fleet's SSH target) stopped answering while it
    measured: the connection dropped, its probe cannot be reached. Not a
    failure of one variant: the host's run stops, keeping what it measured."""
    exit_code = EXIT_BENCH_FAILED
