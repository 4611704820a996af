"""Planning the rounds: how many a run has (its stages, or the protocol's
processes), and how many fit its time budget (budget.py), decided from the
first header of each long variant, said once."""

from __future__ import annotations

import time

from ..budget import Budget, process_cost_s
from ..errors import UsageError
from .results import RunOptions, VariantResult


class RoundPlan:
    def __init__(self, opts: RunOptions, warn) -> None:
        self.opts = opts
        self.warn = warn
        self.budget: Budget | None = None   # the time budget (budget.py), set when the rounds start
        self.cap: int | None = None         # processes per variant the budget keeps (the fixed design)
        self._said = False                  # the budget's plan line, said once
        self._t_start = 0.0

    def ends(self) -> tuple[int, ...]:
        """The round after which each stage ends (one stage: the protocol's processes)."""
        return self.opts.stages or (self.opts.protocol.processes,)

    def start(self, results: list[VariantResult]) -> None:
        """The run's time budget (budget.py), before its first process: each
        process is then told its share (--budget-ms)."""
        pending = sum(1 for vr in results if vr.status == "pending")
        self.budget = Budget.of(self.opts.protocol, self.ends()[-1], pending, 2 if self.opts.parallel > 1 else 1,
                                self.opts.stages)
        self._t_start = time.monotonic()

    def kept(self, rnd: int) -> bool:
        """Whether round `rnd` is within what the budget keeps (decided by
        the first header of a long variant: it may change after round 0)."""
        return self.cap is None or rnd < self.cap

    def total(self, end: int) -> int:
        """The rounds the progress counts to in a stage ending at `end`."""
        return end if self.cap is None else min(end, self.cap)

    def share_ms(self) -> float | None:
        """One process's share of the budget (the probe's --budget-ms)."""
        return self.budget.per_process_ms() if self.budget else None

    def record(self, key: str) -> dict | None:
        """What a process of a variant the budget shaped records of it."""
        if self.budget is not None and key in self.budget.shaped:
            return self.budget.record()
        return None

    def on_header(self, vr: VariantResult, header: dict) -> None:
        """A process's header: the first of a long variant plans the run
        within the budget (processes kept, the plan and its ETA said once); a
        stated budget that cannot give the minimum is a usage error here,
        before this process measures (it is stopped: nothing measured is lost)."""
        b = self.budget
        key = vr.variant.key()
        if b is None or key in b.costs:
            return
        cost = process_cost_s(header)
        if cost is None:   # short iterations: not shaped, but they take their time in each round
            short = process_cost_s(header, long_only=False)
            if short is not None:
                b.costs[key] = short
            return
        b.costs[key] = cost
        b.shaped.add(key)
        fit = b.fitting()
        first_stage = min(b.stages[0], b.rounds) if b.stages else b.minimum
        if fit < first_stage:
            if b.source == "--max-time":
                raise UsageError(b.short_line(key, header))
            if not self._said:
                self.warn(b.short_line(key, header))
                self._said = True
        if not b.stages:
            self.cap = max(b.minimum, fit)
        if not self._said:
            self.warn(b.plan_line(key, header, self.cap or b.rounds))
            self._said = True

    def next_stage_fits(self, look: int, done: int, end: int) -> bool:
        """The sequential design: whether the next stage fits in what is
        left of the budget; if not, say so and stop at this look."""
        b = self.budget
        if b is None or not b.shaped:
            return True
        # the time spent: as measured, and at least as planned (the fake clock's seconds are not spent)
        elapsed = max(time.monotonic() - self._t_start, done * b.round_cost_s())
        if b.stage_fits(end - done, elapsed):
            return True
        self.warn(b.stage_line(look, done, end - done, elapsed))
        return False
