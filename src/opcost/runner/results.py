"""What a run collects: its options, one VariantResult per variant (its
processes as they finish, its status, its summary at the end), and the
run's Outcome."""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass, field

from ..errors import OpcostError
from ..model import Process, Result
from ..protocol import Protocol
from ..spec import Variant


@dataclass
class RunOptions:
    """What a run needs besides its variants: the protocol every process
    follows, and what is counted."""
    protocol: Protocol = field(default_factory=Protocol)
    counters: str | None = None                   # the probe's event list
    emulated: tuple = ()                          # events QEMU's counting plugin serves (emucount.py)
    derived: list = field(default_factory=list)   # counters.Derived metrics to compute
    parallel: int = 1                             # > 1: also run this many copies at once per round
    # A sequential design (ab without -p): the rounds after which the
    # runner's `look` decides whether to go on; empty: protocol.processes rounds.
    stages: tuple[int, ...] = ()
    boundary: str | None = None    # its alpha spending, recorded with each process (show replays it)
    compares: bool = False         # the command compares variants at its end (ab, variants, series): abtest, scipy

    def copies_per_round(self) -> int:
        """Processes of one variant in a round: its own, and --parallel N's copies."""
        return 1 + (self.parallel if self.parallel > 1 else 0)


@dataclass
class VariantResult:
    variant: Variant
    op: str = ""
    status: str = "pending"        # pending | ok | unsupported | failed
    reason: str | None = None
    processes: list[dict] = field(default_factory=list)
    summary: dict | None = None
    parallel_rounds: list[dict] = field(default_factory=list)   # --parallel: one entry per round
    settled: bool = False          # a sequential look decided it: measured no more

    def to_model(self) -> Result:
        s = self.summary
        return Result(self.variant.bench, self.variant.key(), self.variant.all_params(), self.op, "ns", self.status,
                      self.reason, [Process.from_json(p) for p in self.processes], s,
                      s.get("parallel") if s else None)

    def to_json(self) -> dict:
        return self.to_model().to_json()


@dataclass
class Outcome:
    results: list[VariantResult]
    status: str                     # complete | interrupted | failed
    error: OpcostError | None = None
    signum: int | None = None       # interrupted: by which signal (SIGINT, SIGTERM, SIGHUP)

    @property
    def exit_code(self) -> int:
        if self.status == "interrupted":
            return 128 + (self.signum or signal.SIGINT)
        if self.error is not None:
            return self.error.exit_code
        return 1 if any(r.status == "failed" for r in self.results) else 0


def process_timeout(p: Protocol) -> float:
    """The hard limit of one probe process: --timeout, else none. A probe
    that stops making progress is stopped sooner (probe.stall_limit)."""
    return p.timeout if p.timeout else math.inf
