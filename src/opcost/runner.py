"""Plans and runs probe processes for a list of variants.

Each round runs one fresh probe process per variant in a freshly randomised
order, so drift over the run spreads over all variants instead of turning into
a difference between them. After every process the result is saved (store and
--json), so a crash, a timeout or Ctrl-C loses nothing already measured.
Probe processes start on the run's target (targets/): this machine, another
one, or a replay of scripted outcomes.
"""

from __future__ import annotations

import importlib
import math
import random
import signal
import threading
import time
from dataclasses import dataclass, field

from . import interrupts, probe
from .budget import Budget, process_cost_s
from .errors import NothingMeasured, OpcostError, ProbeError, ProbeTimeout, UsageError
from .model import Process, Result
from .summaries import summarize_variant
from .protocol import Protocol
from .spec import Variant
from .targets.base import Target


def _import_quietly(names: list[str]) -> None:
    """The background import: a failure is met again, and raised, by the
    main thread's own import (Runner._statistics_imported)."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            return


def _named(msg: str, req: probe.ProbeRequest, v: Variant) -> str:
    """A probe's complaint about a build, with the build's temporary path
    replaced by the variant's name."""
    msg = msg.replace(f"{req.bench}: probe setup failed: ", "")
    for path in (v.exe, *(v.program or ())):
        if path:
            msg = msg.replace(f"program {path} ", "the program ").replace(path, v.name)
    return msg


PROGRAM_CHECK_S = 600.0   # the untimed check run of a whole program (variants), without --timeout


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


class Runner:
    """`target` runs the probe processes (targets.Target); `recorder`
    receives every finished process (store, --json); `progress` is told
    about every batch. Both are optional. With `opts.stages`, after every
    stage but the last `look(number, results)` (number 1-based) says whether
    to go on; it may mark variants `settled` (measured no more). The rounds
    go on in the same run: round numbers, run order and padding continue, and
    every process is recorded as before."""

    def __init__(self, variants: list[Variant], opts: RunOptions, target: Target, recorder=None, progress=None,
                 warn=None, look=None):
        self.results = [VariantResult(v, op=v.op) for v in variants]
        self.opts = opts
        self.target = target
        self.recorder = recorder
        self.progress = progress
        self.warn = warn or (lambda msg: None)
        self.look = look
        self.rng = random.Random(opts.protocol.seed)
        self.seq = 0  # processes started, in order: proves the interleaving
        self.timeout = process_timeout(opts.protocol)
        self._importer: threading.Thread | None = None   # the statistics' background import
        self.budget: Budget | None = None   # the time budget (budget.py), set when the rounds start
        self._cap: int | None = None        # processes per variant the budget keeps (the fixed design)
        self._said = False                  # the budget's plan line, said once
        self._t_start = 0.0

    def preflight(self) -> None:
        """Before anything is stored: wrong input raises UsageError, variants
        this machine cannot measure are marked unsupported with the reason.
        A build (opcost variants) is named by its variant, not its temporary
        binary; a whole program's process timeout comes from how long its
        untimed check run took (unless --timeout is given)."""
        t0 = time.monotonic()
        prepare = getattr(self.target, "prepare", None)   # the vm target: one preflight boot per machine
        if prepare is not None:
            prepare([self._request(vr.variant, 0, 0, pad=False) for vr in self.results])
        for vr in self.results:
            v = vr.variant
            req = self._request(v, 0, 0, pad=False)
            try:
                # a program's check is one whole run, which may take minutes (seed 004's
                # libgcc build: 52 s on a Cortex-A7; more under qemu): --timeout, else 10 min
                reason = (self.target.check(req, self.opts.protocol.timeout or PROGRAM_CHECK_S) if v.program
                          else self.target.check(req))
            except ProbeError as e:
                if not v.name:
                    raise
                raise ProbeError(f"variant {v.name}: {_named(str(e), req, v)}") from None
            if reason is not None:
                vr.status, vr.reason = "unsupported", reason
                self.warn(f"{v.key()}: cannot be measured here: {reason}")
        p = self.opts.protocol
        if p.timeout is None and any(vr.variant.program for vr in self.results):
            per = (time.monotonic() - t0) / max(1, len(self.results))
            self.timeout = 60.0 + 20.0 * per * (p.warmup + p.samples)

    def _request(self, v: Variant, rnd: int, idx: int, pad: bool = True) -> probe.ProbeRequest:
        # pad=False (preflight) leaves the seeded run order and padding untouched
        p = self.opts.protocol
        return probe.ProbeRequest(
            bench=v.bench, params=v.probe_params(), arch=v.arch, protocol=p, cpus=v.cpu,
            counters=self.opts.counters, seed=p.seed * 100003 + rnd * 1009 + idx,
            pad_bytes=probe.pad_length(self.rng) if pad else 0, spin=v.spin,
            exe=v.exe or None, program=v.program or None, emulator=v.emulator or None, ops=v.ops,
            machine=v.machine, emulated=self.opts.emulated,
            budget_ms=self.budget.per_process_ms() if self.budget and pad and not v.program else None)

    def _summarize(self, vr: VariantResult) -> dict:
        return summarize_variant(vr.processes, self.opts.derived, vr.parallel_rounds, self.opts.parallel)

    def run(self) -> Outcome:
        """Every round, then the end: from the first signal on (Ctrl-C, SIGTERM,
        SIGHUP) measuring stops, and finishing (summaries from exactly the
        processes recorded, final statuses, the final writes) cannot be cut
        short by a second one."""
        status, error, signum = "complete", None, None
        try:
            with interrupts.deferred():   # the run is created whole, or not at all
                if self.recorder:
                    self.recorder.start(self.results)
                self._start_statistics_import()
        except KeyboardInterrupt as e:    # raised once it was created: finish it below
            status, signum = "interrupted", getattr(e, "signum", signal.SIGINT)
        # an OpcostError (a damaged store...) propagates: nothing was measured
        try:
            ends = self.opts.stages or (self.opts.protocol.processes,)
            self._plan_budget(ends[-1])
            start = 0
            for number, end in enumerate(ends if status == "complete" else (), 1):
                for rnd in range(start, end):
                    if self._cap is not None and rnd >= self._cap:
                        break
                    error = self._one_round(rnd, end if self._cap is None else min(end, self._cap), error)
                start = end
                if number == len(ends) or not self.look:
                    break
                self._statistics_imported()
                if not self.look(number, self.results) or not self._next_stage_fits(number, end, ends[number]):
                    break
        except KeyboardInterrupt as e:
            status, signum = "interrupted", getattr(e, "signum", signal.SIGINT)
        except OpcostError as e:
            status, error = "failed", e
        except Exception as e:
            if interrupts.received() is not None:   # a signal that came out wrapped (raised in an import)
                status, signum = "interrupted", interrupts.received()
            else:   # a bug must not leave the run "running": finish it, then say what broke
                status, error = "failed", OpcostError(f"internal error, the run was stopped: {e!r}")
        interrupts.hold()
        self._statistics_imported()
        for vr in self.results:
            if vr.status == "pending":
                vr.status = "ok" if vr.processes else ("failed" if status == "complete" else "pending")
            # From exactly the processes kept (and recorded): never one fewer.
            vr.summary = self._summarize(vr) if vr.processes else None
        if status == "complete" and error is None and not any(vr.processes for vr in self.results):
            error = NothingMeasured("nothing was measured: no variant produced a result (the reasons are above)")
        if self.recorder:
            try:
                self.recorder.finish(status if status != "complete" or error is None else "failed")
            except OpcostError as e:   # a final export that cannot be written: the run stays as stored
                error = error or e
        return Outcome(self.results, status, error, signum)

    def _plan_budget(self, rounds: int) -> None:
        """The run's time budget (budget.py), before its first process: each
        process is then told its share (--budget-ms)."""
        pending = sum(1 for vr in self.results if vr.status == "pending")
        self.budget = Budget.of(self.opts.protocol, rounds, pending, 2 if self.opts.parallel > 1 else 1,
                                self.opts.stages)
        self._t_start = time.monotonic()

    def _budget_header(self, vr: VariantResult, header: dict) -> None:
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
            self._cap = max(b.minimum, fit)
        if not self._said:
            self.warn(b.plan_line(key, header, self._cap or b.rounds))
            self._said = True

    def _next_stage_fits(self, look: int, done: int, end: int) -> bool:
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

    def _start_statistics_import(self) -> None:
        """Import the statistics (numpy; scipy too when a look will need it)
        before they are needed: finishing a run, even after Ctrl-C, must never
        be the first to import numpy. Where the front end keeps off the
        measuring CPUs (the target's `front_end_apart`), the import runs in a
        thread while the first processes measure (about 0.3 s, and 0.5 s of
        scipy before `ab`'s first look, off the critical path: docs/statistics.md);
        elsewhere (one CPU, a replay) now, signals held, as before. Signals are
        only ever raised in the main thread, so the thread's import is never
        cut in half."""
        names = [f"{__package__}.stats"] + ([f"{__package__}.abtest"] if self.look else [])
        apart = getattr(self.target, "front_end_apart", None)
        reqs = [self._request(vr.variant, 0, 0, pad=False) for vr in self.results if vr.status == "pending"]
        if apart is None or not reqs or self.opts.parallel > 1 or not apart(reqs):   # --parallel: every CPU
            importlib.import_module(names[0])
            return
        self._importer = threading.Thread(target=_import_quietly, args=(names,), name="opcost-import", daemon=True)
        self._importer.start()

    def _statistics_imported(self) -> None:
        """Wait for the background import, if any (then import in this
        thread: instant, or the ImportError it met, raised here)."""
        if self._importer is not None:
            self._importer.join()
            self._importer = None
            importlib.import_module(f"{__package__}.stats")

    def _progress_counter(self, vr: VariantResult | None = None):
        """The progress display told of every batch: a sample line each, or
        (a probe holding its samples) its progress lines, then not again for
        the samples that follow them."""
        seen: dict = {"held": False}

        def on_line(d: dict) -> None:
            kind = d.get("type")
            if kind == "header" and vr is not None:
                self._budget_header(vr, d)
            if not self.progress:
                return
            if kind == "header":
                seen["held"] = d.get("output") == "held"
            elif kind == "progress":
                done = int(d.get("batches", 0))
                self.progress.advance(max(0, done - seen.get("n", 0)))
                seen["n"] = done
            elif kind == "sample" and not seen["held"]:
                self.progress.advance()
        return on_line
    def _one_round(self, rnd: int, total: int, error: OpcostError | None) -> OpcostError | None:
        """One process of every variant still measured, in a fresh random
        order; returns the run's error so far (a timeout wins)."""
        order = list(range(len(self.results)))
        self.rng.shuffle(order)
        for step in self._steps(order, rnd):
            for i, err in step():
                error = self._settle(self.results[i], err, error)
        if self.progress:
            self.progress.round_done(rnd + 1, total)
        return error

    def _settle(self, vr: VariantResult, err: OpcostError | None, error: OpcostError | None) -> OpcostError | None:
        if isinstance(err, UsageError):
            vr.status, vr.reason = "failed", str(err)
            raise err
        if err is not None:
            error = error if isinstance(error, ProbeTimeout) else err
            vr.status, vr.reason = "failed", str(err)
            self.warn(f"{vr.variant.key()}: {err}")
            if self.recorder:
                self.recorder.variant_updated(vr)
        return error

    def _steps(self, order: list[int], rnd: int) -> list:
        """The round's steps in its order, each a call giving (variant index,
        error or None) for what it ran. One variant a step; but a target that
        runs several probe processes in one go (the vm target: one boot per
        machine per round, targets/vm/) gets the round's requests grouped
        by its `batch_key`, a step per group, in the order of its first."""
        todo = []
        for i in order:
            vr = self.results[i]
            if vr.status in ("unsupported", "failed") or vr.settled:
                if self.progress:
                    self.progress.skip((self.opts.protocol.warmup + self.opts.protocol.samples) * self._copies_per_round())
                continue
            todo.append(i)
        run_batch = getattr(self.target, "run_batch", None)
        if run_batch is None or self.opts.parallel > 1:
            return [lambda i=i: [(i, self._round(self.results[i], rnd, i))] for i in todo]
        groups: dict = {}
        for i in todo:
            req = self._request(self.results[i].variant, rnd, i)
            groups.setdefault(getattr(self.target, "batch_key")(req), []).append((i, req))

        def step(items: list) -> list:
            if self.progress:
                self.progress.begin(", ".join(self.results[i].variant.key() for i, _ in items))
            out = run_batch([r for _, r in items], self.timeout, self._progress_counter())
            # each kept as soon as the batch is done; a usage error raised after the others are kept
            done = [(i, self._keep(self.results[i], rnd, res)) for (i, _), res in zip(items, out)]
            return sorted(done, key=lambda d: isinstance(d[1], UsageError))
        return [lambda items=items: step(items) for items in groups.values()]

    def _copies_per_round(self) -> int:
        return 1 + (self.opts.parallel if self.opts.parallel > 1 else 0)

    def _round(self, vr: VariantResult, rnd: int, idx: int) -> OpcostError | None:
        """One round of a variant: its single process and, with --parallel N,
        N concurrent copies, in a random order (so drift does not favour one)."""
        if self.opts.parallel <= 1:
            return self._one_process(vr, rnd, idx)
        steps = [self._one_process, self._parallel_copies]
        self.rng.shuffle(steps)
        single_idx = len(vr.processes)
        for step in steps:
            err = step(vr, rnd, idx)
            if err is not None or vr.status == "unsupported":
                return err
        if vr.parallel_rounds and len(vr.processes) > single_idx:
            vr.parallel_rounds[-1]["single_process"] = vr.processes[single_idx]["index"]
        return None

    def _parallel_copies(self, vr: VariantResult, rnd: int, idx: int) -> OpcostError | None:
        from .parallel import common_window, copy_result, place

        v = vr.variant
        cpus, wrapped = place(self.opts.parallel, self.target.allowed_cpus())
        reqs = []
        for c, cpu in enumerate(cpus):
            r = self._request(v, rnd, idx * 1000 + 1 + c)
            r.cpus = str(cpu)
            reqs.append(r)
        if self.progress:
            self.progress.begin(f"{v.key()} x{len(reqs)}")

        out = self.target.run_concurrent(reqs, self.timeout, self._progress_counter())
        copies = []
        ok = [r for r in out if not isinstance(r, OpcostError) and r.unsupported is None]
        window = common_window(ok) if len(ok) == len(out) else None
        for c, (cpu, res) in enumerate(zip(cpus, out)):
            if isinstance(res, OpcostError):
                return type(res)(f"parallel copy {c} on CPU {cpu}: {res}")
            if res.unsupported is not None:
                vr.status, vr.reason = "unsupported", f"parallel copy {c} on CPU {cpu}: {res.unsupported}"
                self.warn(f"{v.key()}: cannot be measured here: {vr.reason}")
                return None
            copies.append(copy_result(c, cpu, res, window))
        self.seq += 1
        vr.parallel_rounds.append({"round": rnd, "seq": self.seq, "copies": copies, "wrapped": wrapped,
                                   "window_s": list(window) if window else None})
        return None

    def _one_process(self, vr: VariantResult, rnd: int, idx: int) -> OpcostError | None:
        v = vr.variant
        req = self._request(v, rnd, idx)
        if self.progress:
            self.progress.begin(v.key())

        on_line = self._progress_counter(vr)
        try:
            res = self.target.run_process(req, self.timeout, on_line)
        except (ProbeError, ProbeTimeout, UsageError) as e:
            return e
        return self._keep(vr, rnd, res)

    def _keep(self, vr: VariantResult, rnd: int, res) -> OpcostError | None:
        """A finished probe process (or how it failed) into the variant's results."""
        if isinstance(res, (ProbeError, ProbeTimeout, UsageError)):
            return res
        v = vr.variant
        if res.unsupported is not None:
            vr.status, vr.reason = "unsupported", res.unsupported
            self.warn(f"{v.key()}: cannot be measured here: {res.unsupported}")
            return None
        vr.op = (res.header or {}).get("op", vr.op)
        self.seq += 1
        proc = {"index": len(vr.processes), "round": rnd, "seq": self.seq, "pad_bytes": res.pad_bytes,
                "wall_s": round(res.wall_s, 4), **({"front_end": res.front_end} if res.front_end else {}),
                "header": res.header, "samples": res.samples, "warmup": res.warmup, "trailer": res.trailer}
        if self.budget is not None and v.key() in self.budget.shaped:   # a protocol the budget shaped
            proc["budget"] = self.budget.record()
        if self.opts.stages:   # the look this process belongs to: marks a sequential run
            proc["stage"] = next(k for k, end in enumerate(self.opts.stages, 1) if rnd < end)
            if self.opts.boundary:
                proc["boundary"] = self.opts.boundary
        with interrupts.deferred():   # kept and recorded together, or neither
            vr.processes.append(proc)
            if self.recorder:
                self.recorder.process_done(vr, proc)
        return None
