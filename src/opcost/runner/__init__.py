"""Plans and runs probe processes for a list of variants.

Each round runs one fresh probe process per variant in a freshly randomised
order, so drift over the run spreads over all variants instead of turning into
a difference between them. After every process the result is saved (store and
--json), so a crash, a timeout or Ctrl-C loses nothing already measured.
Probe processes start on the run's target (targets/): this machine, another
one, or a replay of scripted outcomes.

The package, by responsibility: `plan` plans the rounds (stages, the time
budget), `driver` drives the probe processes (requests, a round's steps,
--parallel's copies, each process kept and recorded at once), `results`
holds what is collected (VariantResult, Outcome); Runner here runs the
rounds and finishes the run.
"""

from __future__ import annotations

import importlib
import signal
import threading
import time

from .. import interrupts
from ..errors import NothingMeasured, OpcostError, ProbeError, ProbeTimeout, UsageError
from ..spec import Variant
from ..summaries import summarize_variant
from ..targets.base import Target
from .driver import Driver, named
from .plan import RoundPlan
from .results import Outcome, RunOptions, VariantResult, process_timeout

__all__ = ["Outcome", "RunOptions", "Runner", "VariantResult", "process_timeout", "PROGRAM_CHECK_S"]

_TOP = __name__.rpartition(".")[0]   # opcost: the statistics' modules are its


def _import_quietly(names: list[str]) -> None:
    """The background import: a failure is met again, and raised, by the
    main thread's own import (Runner._statistics_imported)."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            return


def _while_importing(names: list[str], work, reqs) -> None:
    """`work(reqs, begin)` (the vm target's preflight boots: seconds of QEMU
    in which nothing is measured) while the statistics the run's end will
    need (`names`: stats; abtest and scipy too when the command compares:
    about 1.3 s that otherwise follow the last boot) are imported in a
    thread. The target calls `begin()` once its requests passed the checks
    it makes before any boot (a refusal then imports nothing heavy), and the
    thread is joined before anything is measured, so the import never
    competes with a measuring guest for the host's CPUs."""
    importer = threading.Thread(target=_import_quietly, args=(names,), name="opcost-import", daemon=True)
    try:
        work(reqs, importer.start)
    finally:
        if importer.ident is not None:
            importer.join()


PROGRAM_CHECK_S = 600.0   # the untimed check run of a whole program (variants), without --timeout


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
        self.warn = warn or (lambda msg: None)
        self.look = look
        self.plan = RoundPlan(opts, self.warn)
        self.driver = Driver(self.results, opts, target, self.plan, self.warn)
        self.recorder = recorder
        self.progress = progress
        self._importer: threading.Thread | None = None   # the statistics' background import

    # the recorder and the progress display may be given after construction (session.measure)
    @property
    def recorder(self):
        return self.driver.recorder

    @recorder.setter
    def recorder(self, value) -> None:
        self.driver.recorder = value

    @property
    def progress(self):
        return self.driver.progress

    @progress.setter
    def progress(self, value) -> None:
        self.driver.progress = value

    def preflight(self) -> None:
        """Before anything is stored: wrong input raises UsageError, variants
        this machine cannot measure are marked unsupported with the reason.
        A build (opcost variants) is named by its variant, not its temporary
        binary; a whole program's process timeout comes from how long its
        untimed check run took (unless --timeout is given)."""
        t0 = time.monotonic()
        prepare = getattr(self.target, "prepare", None)   # the vm target: one preflight boot per machine
        if prepare is not None:
            reqs = [self.driver.request(vr.variant, 0, 0, pad=False) for vr in self.results]
            fit = getattr(self.target, "fit_cpus", None)   # the vm target: its guests' CPUs, from the whole run
            if fit is not None:
                fit(reqs)
            rounds = getattr(self.target, "plan_rounds", None)   # the vm target: a snapshot only for later rounds
            if rounds is not None:
                rounds(self.plan.ends()[-1])
            names = [f"{_TOP}.stats"] + ([f"{_TOP}.abtest"] if self.look or self.opts.compares else [])
            _while_importing(names, prepare, reqs)
            said = getattr(self.target, "accel_line", lambda: None)()   # the vm target: whether KVM is used, first
            if said:
                self.warn(said)
        for vr in self.results:
            v = vr.variant
            req = self.driver.request(v, 0, 0, pad=False)
            try:
                # a program's check is one whole run, which may take minutes (seed 004's
                # libgcc build: 52 s on a Cortex-A7; more under qemu): --timeout, else 10 min
                reason = (self.target.check(req, self.opts.protocol.timeout or PROGRAM_CHECK_S) if v.program
                          else self.target.check(req))
            except ProbeError as e:
                if not v.name:
                    raise
                raise ProbeError(f"variant {v.name}: {named(str(e), req, v)}") from None
            if reason is not None:
                vr.status, vr.reason = "unsupported", reason
                self.warn(f"{v.key()}: cannot be measured here: {reason}")
        p = self.opts.protocol
        if p.timeout is None and any(vr.variant.program for vr in self.results):
            per = (time.monotonic() - t0) / max(1, len(self.results))
            self.driver.timeout = 60.0 + 20.0 * per * (p.warmup + p.samples)

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
        if status == "complete":
            status, error, signum = self._measure()
        else:
            self.plan.start(self.results)
        return self._finish(status, error, signum)

    def _measure(self) -> tuple[str, OpcostError | None, int | None]:
        """The stages' rounds, each stage but the last followed by the look;
        (status, error, signal) as they end."""
        status, error, signum = "complete", None, None
        try:
            ends = self.plan.ends()
            self.plan.start(self.results)
            start = 0
            for number, end in enumerate(ends, 1):
                for rnd in range(start, end):
                    if not self.plan.kept(rnd):
                        break
                    error = self._one_round(rnd, self.plan.total(end), error)
                start = end
                if number == len(ends) or not self.look:
                    break
                self._statistics_imported()
                if not self.look(number, self.results) or not self.plan.next_stage_fits(number, end, ends[number]):
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
        return status, error, signum

    def _finish(self, status: str, error: OpcostError | None, signum: int | None) -> Outcome:
        """Signals held: the summaries from exactly the processes kept, the
        final statuses, the recorder's last write."""
        interrupts.hold()
        self._statistics_imported()
        for vr in self.results:
            if vr.status == "pending":
                vr.status = "ok" if vr.processes else ("failed" if status == "complete" else "pending")
            # From exactly the processes kept (and recorded): never one fewer.
            vr.summary = (summarize_variant(vr.processes, self.opts.derived, vr.parallel_rounds, self.opts.parallel)
                          if vr.processes else None)
        if status == "complete" and error is None and not any(vr.processes for vr in self.results):
            error = NothingMeasured("nothing was measured: no variant produced a result (the reasons are above)")
        if self.recorder:
            try:
                self.recorder.finish(status if status != "complete" or error is None else "failed")
            except OpcostError as e:   # a final export that cannot be written: the run stays as stored
                error = error or e
        return Outcome(self.results, status, error, signum)

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
        names = [f"{_TOP}.stats"] + ([f"{_TOP}.abtest"] if self.look else [])
        apart = getattr(self.target, "front_end_apart", None)
        reqs = [self.driver.request(vr.variant, 0, 0, pad=False) for vr in self.results if vr.status == "pending"]
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
            importlib.import_module(f"{_TOP}.stats")

    def _one_round(self, rnd: int, total: int, error: OpcostError | None) -> OpcostError | None:
        """One process of every variant still measured, in a fresh random
        order; returns the run's error so far (a timeout wins)."""
        order = list(range(len(self.results)))
        self.driver.rng.shuffle(order)
        for step in self.driver.steps(order, rnd):
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

