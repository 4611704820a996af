"""The measuring protocol, written once: what a run does per variant (how many
fresh processes, batches, warm-up, batch length...) with each field's
default, range and help. The command line is generated from it (`add_options`),
the runner and every probe request carry one `Protocol`, and every numeric
option of every subcommand is range-checked by one rule (`BOUNDS`).

No heavy imports here: `opcost --help` builds its parser from this module.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, fields, replace

from .errors import UsageError
from .safetext import printable


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


class Bound:
    """The range of one numeric option. `kind` is int, float or percent
    ("2" or "2%", checked in percent and given to the program as the fraction
    0.02); an open end is itself refused (a timeout of 0 s)."""

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
        return v / 100 if self.kind == "percent" else v


@dataclass(frozen=True)
class Field:
    """One protocol option: its flags, default, range and help."""
    dest: str
    flags: tuple
    default: object
    bound: Bound
    metavar: str
    help: str


# The protocol of one run, in the order --help shows it. The defaults are the
# design's (docs/statistics.md): 10 fresh processes of 20 measured batches of 10 ms
# after 3 warm-up batches.
FIELDS = (
    Field("processes", ("-p", "--processes"), 10, Bound("int", 1, 1000, "the number of fresh probe processes per variant"),
          "N", "fresh probe processes per variant"),
    Field("samples", ("-n", "--samples"), 20, Bound("int", 1, 10000, "the number of measured batches per process"),
          "N", "measured batches per process"),
    Field("warmup", ("-w", "--warmup"), 3, Bound("int", 0, 10000, "the number of warm-up batches per process"),
          "N", "warm-up batches per process, not analysed"),
    Field("target_ms", ("--target-ms",), 10.0, Bound("float", 1, 60000, "the length of one batch in ms"),
          "MS", "length of one batch; iterations are calibrated to it"),
    Field("iters", ("--iters",), None, Bound("int", 1, 2**31 - 1, "the iterations per batch"),
          "N", "fixed iterations per batch instead of calibrating"),
    Field("timeout", ("--timeout",), None,
          Bound("float", 0, 86400, "the seconds one probe process may take", low_open=True),
          "SEC", "a hard limit per probe process (default: none; a probe that says nothing for 20 of its "
          "batches, at least 30 s, 120 s before its header, is stopped anyway)"),
    Field("max_time", ("--max-time",), None,
          Bound("float", 0, 604800, "the seconds the run may take", low_open=True, example="300"),
          "SEC", "time budget for benchmarks whose one iteration takes a second or more: fewer batches per "
          "process, then fewer processes (never under 6 per variant), so the run fits (default: "
          "300 s for such iterations; shorter iterations keep the protocol)"),
    Field("seed", ("--seed",), None, Bound("int", 0, 2**32 - 1, "the seed of the run order and padding"),
          "N", "seed for the run order and padding (default: a fresh one from the system's entropy, recorded "
          "in the run's plan; --seed N repeats a run's order; 0 with --fake-clock)"),
    Field("fake_clock", ("--fake-clock",), None,
          Bound("float", 0, 1e9, "the fake cost of one operation in ns", low_open=True),
          "NS", "deterministic fake timings of NS per op (for tests of opcost itself)"),
)


def fresh_seed() -> int:
    """A seed from the system's entropy (os.urandom), in --seed's range."""
    import secrets   # --help must not load it

    return secrets.randbits(32)


@dataclass(frozen=True)
class Protocol:
    processes: int = 10
    samples: int = 20
    warmup: int = 3
    target_ms: float = 10.0
    iters: int | None = None
    timeout: float | None = None
    max_time: float | None = None
    seed: int = 0
    fake_clock: float | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, **override) -> "Protocol":
        """From parsed (and range-checked) options; `override` wins."""
        given = {f.name: getattr(args, f.name) for f in fields(cls) if getattr(args, f.name, None) is not None}
        merged = {**given, **override}
        if merged.get("seed") is None:
            # a fresh random order each run (issue 37): the permutation test's
            # validity then rests on randomisation, not on there being no order
            # effect. --fake-clock (deterministic fake timings, for tests of
            # opcost itself) keeps seed 0: its output is meant to repeat.
            merged["seed"] = 0 if merged.get("fake_clock") is not None else fresh_seed()
        return cls(**merged)

    def with_(self, **changes) -> "Protocol":
        return replace(self, **changes)


# Every numeric option of every subcommand, by its dest: one rule, applied by
# check_numbers right after parsing (before any command runs or anything heavy
# is imported), and each range shown in --help. The upper bounds keep a typo
# (-p 18446744073709551616) from running for days, and every count within
# what the probe's C `long` holds on each architecture (32 bits on i386).
BOUNDS = {f.dest: f.bound for f in FIELDS}
BOUNDS.update({
    "parallel": Bound("int", 1, 1024, "the number of concurrent copies"),
    "parallel_hosts": Bound("int", 1, 1024, "the number of hosts measured at once"),
    "limit": Bound("int", 1, 10**9, "the number of newest runs to list"),
    "delta": Bound("percent", 0, 100, "a percentage", low_open=True, high_open=True, example="2 for 2%"),
    # variants --ops: the probe's `time` reads it as an unsigned 64-bit count on every architecture
    "ops": Bound("int", 1, 10**15, "the number of operations one run performs", example="1000000"),
    # the vm target (targets/vm_options.py)
    "vm_cpus": Bound("int", 1, 64, "the number of guest CPUs"),
    "vm_mem": Bound("int", 64, 65536, "guest memory in MiB", example="512"),
    "vm_procs": Bound("int", 1, 100, "the number of probe processes per variant and boot"),
    "functions": Bound("int", 1, 100000, "the number of functions to show", example="15"),
})

# The time budget (--max-time, runner.Budget; docs/commands/run.md "Long
# iterations"): it shapes only variants whose one iteration takes at least
# LONG_ITERATION_MS (the probe's BUDGET_LONG_MS), DEFAULT_MAX_TIME_S when
# none is stated; it never plans fewer than MIN_PROCESSES per variant (as
# abtest.MIN_PROCESSES: below that the exact test can barely reach p < 0.05)
# nor fewer than the probe's BUDGET_MIN_SAMPLES measured batches a process.
DEFAULT_MAX_TIME_S = 300.0
LONG_ITERATION_MS = 1000.0
MIN_PROCESSES = 6

DEFAULT_DELTA = "2"
# The declared schedule of processes per arm (docs/statistics.md): the stages of
# `ab`'s sequential design, and the counts an inconclusive verdict points to.
SCHEDULE = (10, 20, 40)
# Complete interleaved rounds from which an A/B is tested paired (abtest:
# min-p of the signed-rank and rank-sum statistics over within-round swaps,
# exact over all 2^n swaps up to PAIRED_EXACT_MAX rounds, else from
# PAIRED_SAMPLES seeded ones); its smallest p is 2 / 2^n (sampled:
# 1 / (1 + PAIRED_SAMPLES)), so below
# 10 rounds the unpaired permutation test (smallest p 2 / C(2n, n)) is used.
# At 10 rounds 2 / 2^10 = 0.002 fits Holm over at most 9 comparisons at 5%
# with the fixed design's level (0.05 / 0.002 = 25 was this comment's claim
# until issue 37: Holm's first step needs m x floor under the level, 0.0179
# at the former look 1, so 9); the sequential design tests a look paired
# only where m x floor <= its level / 4 (sequential.PAIRED_ROOM: never at
# 10 rounds, look 1 is unpaired; from 20 rounds up to ~170 benchmarks).
PAIRED_MIN = 10
PAIRED_EXACT_MAX = 16
PAIRED_SAMPLES = 40_000


def best_p(n: int, comparisons: int = 1) -> float:
    """The smallest Holm-adjusted p a fixed design of n processes per arm
    can give (every comparison at its test's floor): what such a run can
    at best show, known before measuring. Pure Python (`--help` imports
    this module)."""

    if n < 2:
        return 1.0
    if n > PAIRED_EXACT_MAX:
        floor = 1.0 / (1 + PAIRED_SAMPLES)
    else:
        floor = 2.0 / 2.0 ** n if n >= PAIRED_MIN else 2.0 / math.comb(2 * n, n)
    return min(1.0, max(1, comparisons) * floor)


def never_significant(n: int, comparisons: int = 1, alpha: float = 0.05) -> str | None:
    """One line saying that -p n can never give a significant difference
    (with `comparisons` compared, Holm-adjusted), and the smallest -p that
    can; None when it can."""
    bp = best_p(n, comparisons)
    if bp < alpha:
        return None
    m = next(k for k in range(n + 1, 1000) if best_p(k, comparisons) < alpha)
    across = f" over {comparisons} comparisons (Holm)" if comparisons > 1 else ""
    # Moses' exact 95% interval needs 1 / C(2n, n) <= 0.025, i.e. n >= 4
    no_ci = n < 4
    return (f"-p {n}: the smallest p {n} processes per arm can give is {bp:.2g}{across}, never under {alpha:g}: "
            "no difference can be shown" + (" and no 95% interval can be formed (every verdict: inconclusive)"
                                            if no_ci else "") + f"; -p {m} or more can show one")


# `ab`'s sequential design: its alpha-spending boundaries (sequential.py),
# the default first. Pocock: by simulation (validation/compare/boundary.py)
# as powerful as O'Brien-Fleming here and about twice as quick to a verdict.
BOUNDARIES = ("pocock", "obf")
BOUNDARY = BOUNDARIES[0]


def add_options(parser: argparse.ArgumentParser, defaults: dict | None = None) -> None:
    """The protocol's options, in a 'measurement' group; `defaults` changes
    the shown default of some (variants: they depend on the mode, None)."""
    g = parser.add_argument_group("measurement")
    defaults = defaults or {}
    for f in FIELDS:
        default = defaults.get(f.dest, f.default)
        shown = defaults.get(f.dest + "_help")
        help_ = f.help + (f" ({shown})" if shown else "" if default is None or "default" in f.help
                          else f" (default {_num(default)})")
        g.add_argument(*f.flags, dest=f.dest, default=default, metavar=f.metavar, help=help_)


def add_delta(parser: argparse.ArgumentParser, interleaved: bool = True) -> None:
    """--delta PCT, the one declaration: given in percent, `args.delta` is the
    fraction (check_numbers converts it, BOUNDS["delta"])."""
    parser.add_argument("--delta", default=DEFAULT_DELTA, metavar="PCT",
                        help="practical threshold in percent (default 2" +
                        ("; fixed: a run too noisy for it is inconclusive)" if interleaved else ")"))


def check_numbers(args: argparse.Namespace, flag_of) -> None:
    """Range-check and convert every numeric option present in `args`."""
    for dest, bound in BOUNDS.items():
        if getattr(args, dest, None) is not None:
            setattr(args, dest, bound.parse(flag_of(dest), getattr(args, dest)))


def show_bounds(parser: argparse.ArgumentParser) -> None:
    """Append each numeric option's range to its --help line."""
    for a in parser._actions:
        if a.dest in BOUNDS and a.help:
            a.help += " " + BOUNDS[a.dest].short()
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                show_bounds(sub)
