"""The time budget of a run whose iterations are long (`--max-time`): what
a process may take, how many processes fit, and the lines that say so.

A benchmark whose one iteration takes a second or more (a whole hackbench
run, a program) has batches of one iteration each, and the default protocol
(10 processes of 3 + 20 batches per variant) then means hundreds of
multi-second iterations. Within a budget (`--max-time`, else
protocol.DEFAULT_MAX_TIME_S) the run is planned as hyperfine plans its runs
from the first one's time: each probe process is told its share of the
budget (`--budget-ms`), and when one iteration is long the probe keeps only
the batches that fit (measured batches first, at least 3; its header says
what it kept); from that first header the runner knows what a process costs,
says the plan and its ETA, and keeps only the processes per variant that fit
(never fewer than protocol.MIN_PROCESSES: the process is the unit the
statistics need). When even that does not fit, a stated budget is a usage
error that says what budget would; the default one is exceeded, and said.
`ab`'s sequential design keeps its stages: a stage that would pass the
budget is not started (the run ends at the look before, "ended early").

Pure arithmetic and text: no imports beyond the protocol (the runner uses it
while measuring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .protocol import DEFAULT_MAX_TIME_S, LONG_ITERATION_MS, MIN_PROCESSES, Protocol


def _s(seconds: float) -> str:
    """120 s, 7.5 min, 1.2 h: an ETA as people read it."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def process_cost_s(header: dict, long_only: bool = True) -> float | None:
    """The seconds one probe process takes by its header, when a budget was
    given to it (and, `long_only`, its iterations are long): the
    calibration's untimed iteration, then its warm-up and measured batches
    (None: short iterations, which the budget does not shape)."""
    ms = float(header.get("batch_ms") or 0)
    b = header.get("budget")
    if not isinstance(b, dict) or long_only and (not b.get("long_iteration") or ms < LONG_ITERATION_MS):
        return None
    return (1 + int(header.get("warmup") or 0) + int(header.get("samples") or 0)) * ms / 1000.0


@dataclass
class Budget:
    """One run's budget. `rounds`: the processes per variant planned (the
    sequential design: its last stage); `variants`: those measured; `steps`:
    processes per variant per round (2 with --parallel: the single one and
    the copies). `costs`: seconds per process of each long variant, from its
    first header (`shaped`: those whose iterations are long; a short
    variant of the same run counts with what it costs)."""
    max_time_s: float
    source: str                    # "--max-time" | "default"
    rounds: int
    variants: int
    steps: int = 1
    stages: tuple[int, ...] = ()
    costs: dict[str, float] = field(default_factory=dict)
    shaped: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, p: Protocol, rounds: int, variants: int, steps: int = 1,
           stages: tuple[int, ...] = ()) -> "Budget | None":
        """The budget a protocol asks for: --max-time, else the default one;
        none with --iters (the batches are what was asked), nor on the fake
        clock unless stated (tests of opcost itself: their probe command
        lines stay as they were)."""
        if p.iters or variants < 1 or rounds < 1:
            return None
        if p.max_time:
            return cls(float(p.max_time), "--max-time", rounds, variants, steps, stages)
        if p.fake_clock is not None:
            return None
        return cls(DEFAULT_MAX_TIME_S, "default", rounds, variants, steps, stages)

    def per_process_ms(self) -> float:
        """Each probe process's share, for its warm-up and measured batches."""
        return self.max_time_s * 1000.0 / (self.variants * self.rounds * self.steps)

    @property
    def minimum(self) -> int:
        """The fewest processes per variant the plan keeps (what was asked, if fewer)."""
        return min(MIN_PROCESSES, self.rounds)

    def round_cost_s(self) -> float:
        """One round of every variant: those not seen yet cost as the dearest seen."""
        known = list(self.costs.values())
        return (sum(known) + max(0, self.variants - len(known)) * max(known, default=0.0)) * self.steps

    def fitting(self) -> int:
        """Processes per variant that fit in the budget (may be under the minimum)."""
        cost = self.round_cost_s()
        return self.rounds if cost <= 0 else min(self.rounds, math.floor(self.max_time_s / cost))

    def needed_s(self, processes: int) -> float:
        return processes * self.round_cost_s()

    def what(self) -> str:
        return (f"--max-time {self.max_time_s:g}" if self.source == "--max-time"
                else f"the default time budget of {self.max_time_s:g} s (opcost's fixed default for iterations "
                "of a second or more, not sized from this machine; --max-time sets it)")

    def plan_line(self, key: str, header: dict, processes: int) -> str:
        """The plan and its ETA, said once when the first long header arrives."""
        b = header.get("budget") or {}
        asked = f"{b.get('asked_warmup', '?')} + {b.get('asked_samples', '?')}"
        kept = f"{header.get('warmup', 0)} + {header.get('samples', 0)}"
        per = f"{float(header.get('batch_ms') or 0) / 1000:.3g} s"
        if self.stages:
            first = min(self.stages[0], self.rounds)
            plan = (f"{first} processes per variant to the first look, about {_s(self.needed_s(first))}; "
                    f"up to {self.rounds}, about {_s(self.needed_s(self.rounds))}, if the verdict needs them")
        else:
            plan = f"{processes} processes per variant, about {_s(self.needed_s(processes))}"
        return (f"{key}: one iteration takes {per}; within {self.what()}: "
                f"{kept} batches a process (warm-up + measured; asked {asked}), {plan}")

    def short_line(self, key: str, header: dict) -> str:
        """What the budget cannot give, and what budget would."""
        need = self.needed_s(self.minimum if not self.stages else min(self.stages[0], self.rounds))
        unit = "processes per variant the statistics need" if not self.stages else \
            "processes per arm of the sequential design's first look"
        n = self.minimum if not self.stages else min(self.stages[0], self.rounds)
        per = f"{float(header.get('batch_ms') or 0) / 1000:.3g} s"
        return (f"{key}: one iteration takes {per}, so the {n} {unit} take about {_s(need)}, more than "
                f"{self.what()}; give --max-time {math.ceil(need * 1.1):d} or more"
                + (" (or -p 6, the fixed design)" if self.stages else "")
                + (", or lighter parameters" if self.source == "--max-time" else
                   "; measuring them anyway"))

    def stage_fits(self, rounds: int, elapsed_s: float) -> bool:
        """Whether `rounds` more rounds fit in what is left of the budget."""
        return not self.shaped or elapsed_s + rounds * self.round_cost_s() <= self.max_time_s

    def stage_line(self, look: int, done: int, rounds: int, elapsed_s: float) -> str:
        return (f"stopped after look {look} ({done} processes per arm): the next stage ({rounds} more rounds, "
                f"about {_s(rounds * self.round_cost_s())}) would pass {self.what()} ({_s(elapsed_s)} spent); "
                f"give --max-time {math.ceil((elapsed_s + rounds * self.round_cost_s()) * 1.1):d} to let it run")

    def record(self) -> dict:
        """Kept with each process the budget shaped (process meta `budget`)."""
        return {"max_time_s": self.max_time_s, "source": self.source, "asked_processes": self.rounds,
                "per_process_ms": round(self.per_process_ms(), 3)}


def summary_of(measured: list[dict], n_processes: int) -> dict | None:
    """summary["time_budget"]: the protocol a budget gave a variant, from
    its processes that have measured batches (`measured`, of `n_processes`
    in all; None: no budget shaped it)."""
    shaped = [p for p in measured if isinstance(p.get("budget"), dict)]
    if not shaped:
        return None
    b = shaped[0]["budget"]
    h = shaped[0].get("header") or {}
    hb = h.get("budget") or {}
    return {"max_time_s": b.get("max_time_s"), "source": b.get("source"),
            "iteration_ms": h.get("batch_ms"),
            "asked": {"processes": b.get("asked_processes"), "warmup": hb.get("asked_warmup"),
                      "samples": hb.get("asked_samples")},
            "used": {"processes": n_processes, "warmup": h.get("warmup"), "samples": h.get("samples")}}
