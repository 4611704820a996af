"""Plans and runs probe processes for a list of variants.

Each round runs one fresh probe process per variant in a freshly randomised
order, so drift over the run spreads over all variants instead of turning into
a difference between them. After every process the result is saved (store and
--json), so a crash, a timeout or Ctrl-C loses nothing already measured.
"""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass, field

from . import interrupts, probe
from .errors import NothingMeasured, OpcostError, ProbeError, ProbeTimeout, UsageError
from .spec import Variant


@dataclass
class RunOptions:
    processes: int = 10
    samples: int = 20
    warmup: int = 3
    target_ms: float = 10.0
    iters: int | None = None
    counters: str | None = None
    fake_clock: float | None = None
    seed: int = 0
    timeout: float | None = None
    derived: list = field(default_factory=list)   # counters.Derived metrics to compute
    parallel: int = 1                             # > 1: also run this many copies at once per round


@dataclass
class VariantResult:
    variant: Variant
    op: str = ""
    status: str = "pending"        # pending | ok | unsupported | failed
    reason: str | None = None
    processes: list[dict] = field(default_factory=list)
    summary: dict | None = None
    parallel_rounds: list[dict] = field(default_factory=list)   # --parallel: one entry per round

    def to_json(self) -> dict:
        # While the run goes on, a variant with processes has no summary yet
        # (null): statistics are computed once, when the run ends.
        summary = self.summary if self.summary is not None else (None if self.processes else {"n_processes": 0})
        d = {"bench": self.variant.bench, "key": self.variant.key(), "params": self.variant.all_params(),
             "op": self.op, "unit": "ns", "status": self.status, "reason": self.reason,
             "processes": self.processes, "summary": summary}
        if self.summary and "parallel" in self.summary:
            d["parallel"] = self.summary["parallel"]
        return d


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


def process_timeout(opts: RunOptions) -> float:
    if opts.timeout:
        return opts.timeout
    # Generous: calibration plus every batch at ten times its target length.
    return 30.0 + (opts.warmup + opts.samples + 8) * opts.target_ms / 1000.0 * 10


def summarize_variant(processes: list[dict], derived: list | None = None, parallel_rounds: list | None = None,
                      copies: int = 1) -> dict:
    """The `summary` of one variant from its processes (and derived counter
    metrics, --parallel rounds): what a run stores at its end and what
    `show` computes for a run that never got there."""
    from .stats import summarize

    summary = summarize(processes)
    if summary.get("n_processes"):
        from .counters import derive, running_fractions

        if derived:
            summary["derived"] = derive(processes, derived)
        running = running_fractions(processes)
        if running:
            summary["counters_running"] = running
        if parallel_rounds:
            from .parallel import summarize_parallel

            summary["parallel"] = summarize_parallel(parallel_rounds, processes, copies)
    return summary


class Runner:
    """`recorder` receives every finished process (store, --json); `progress`
    is told about every batch. Both are optional."""

    def __init__(self, variants: list[Variant], opts: RunOptions, recorder=None, progress=None, warn=None):
        self.results = [VariantResult(v, op=v.op) for v in variants]
        self.opts = opts
        self.recorder = recorder
        self.progress = progress
        self.warn = warn or (lambda msg: None)
        self.rng = random.Random(opts.seed)
        self.seq = 0  # processes started, in order: proves the interleaving

    def preflight(self) -> None:
        """Before anything is stored: wrong input raises UsageError, variants
        this machine cannot measure are marked unsupported with the reason."""
        for vr in self.results:
            reason = probe.check(self._request(vr.variant, 0, 0, pad=False))
            if reason is not None:
                vr.status, vr.reason = "unsupported", reason
                self.warn(f"{vr.variant.key()}: cannot be measured here: {reason}")

    def _request(self, v: Variant, rnd: int, idx: int, pad: bool = True) -> probe.ProbeRequest:
        # pad=False (preflight) leaves the seeded run order and padding untouched
        return probe.ProbeRequest(
            bench=v.bench, params=v.params, arch=v.arch, cpus=v.cpu, samples=self.opts.samples,
            warmup=self.opts.warmup, target_ms=self.opts.target_ms, iters=self.opts.iters,
            counters=self.opts.counters, fake_clock=self.opts.fake_clock,
            seed=self.opts.seed * 100003 + rnd * 1009 + idx, pad_bytes=probe.pad_length(self.rng) if pad else 0, spin=v.spin)

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
                # Finishing a run (even after Ctrl-C) must never be the first
                # to import numpy: import the statistics now, signals held.
                from . import stats  # noqa: F401
        except KeyboardInterrupt as e:    # raised once it was created: finish it below
            status, signum = "interrupted", getattr(e, "signum", signal.SIGINT)
        # an OpcostError (a damaged store...) propagates: nothing was measured
        try:
            for rnd in range(self.opts.processes if status == "complete" else 0):
                order = list(range(len(self.results)))
                self.rng.shuffle(order)
                for i in order:
                    vr = self.results[i]
                    if vr.status in ("unsupported", "failed"):
                        if self.progress:
                            self.progress.skip((self.opts.warmup + self.opts.samples) * self._copies_per_round())
                        continue
                    err = self._round(vr, rnd, i)
                    if isinstance(err, UsageError):
                        vr.status, vr.reason = "failed", str(err)
                        raise err
                    if err is not None:
                        error = error if isinstance(error, ProbeTimeout) else err
                        vr.status, vr.reason = "failed", str(err)
                        self.warn(f"{vr.variant.key()}: {err}")
                        if self.recorder:
                            self.recorder.variant_updated(vr)
                if self.progress:
                    self.progress.round_done(rnd + 1, self.opts.processes)
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
        for vr in self.results:
            if vr.status == "pending":
                vr.status = "ok" if vr.processes else ("failed" if status == "complete" else "pending")
            # From exactly the processes kept (and recorded): never one fewer.
            vr.summary = self._summarize(vr) if vr.processes else None
        if status == "complete" and error is None and not any(vr.processes for vr in self.results):
            error = NothingMeasured("nothing was measured: no variant produced a result (the reasons are above)")
        if self.recorder:
            self.recorder.finish(status if status != "complete" or error is None else "failed")
        return Outcome(self.results, status, error, signum)

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
        cpus, wrapped = place(self.opts.parallel)
        reqs = []
        for c, cpu in enumerate(cpus):
            r = self._request(v, rnd, idx * 1000 + 1 + c)
            r.cpus = str(cpu)
            reqs.append(r)
        if self.progress:
            self.progress.begin(f"{v.key()} x{len(reqs)}")

        def on_line(d):
            if self.progress and d.get("type") == "sample":
                self.progress.advance()

        out = probe.run_concurrent(reqs, process_timeout(self.opts), on_line)
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

        def on_line(d):
            if self.progress and d.get("type") == "sample":
                self.progress.advance()

        try:
            res = probe.run_process(req, process_timeout(self.opts), on_line)
        except (ProbeError, ProbeTimeout, UsageError) as e:
            return e
        if res.unsupported is not None:
            vr.status, vr.reason = "unsupported", res.unsupported
            self.warn(f"{v.key()}: cannot be measured here: {res.unsupported}")
            return None
        vr.op = res.header.get("op", vr.op)
        self.seq += 1
        proc = {"index": len(vr.processes), "round": rnd, "seq": self.seq, "pad_bytes": res.pad_bytes,
                "wall_s": round(res.wall_s, 4), "header": res.header, "samples": res.samples,
                "warmup": res.warmup, "trailer": res.trailer}
        with interrupts.deferred():   # kept and recorded together, or neither
            vr.processes.append(proc)
            if self.recorder:
                self.recorder.process_done(vr, proc)
        return None
