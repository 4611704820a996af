"""Plans and runs probe processes for a list of variants.

Each round runs one fresh probe process per variant in a freshly randomised
order, so drift over the run spreads over all variants instead of turning into
a difference between them. After every process the result is saved (store and
--json), so a crash, a timeout or Ctrl-C loses nothing already measured.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from . import probe
from .errors import OpcostError, ProbeError, ProbeTimeout, UsageError
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


@dataclass
class VariantResult:
    variant: Variant
    op: str = ""
    status: str = "pending"        # pending | ok | unsupported | failed
    reason: str | None = None
    processes: list[dict] = field(default_factory=list)
    summary: dict | None = None

    def to_json(self) -> dict:
        return {"bench": self.variant.bench, "key": self.variant.key(), "params": self.variant.all_params(),
                "op": self.op, "unit": "ns", "status": self.status, "reason": self.reason,
                "processes": self.processes, "summary": self.summary or {"n_processes": 0}}


@dataclass
class Outcome:
    results: list[VariantResult]
    status: str                     # complete | interrupted | failed
    error: OpcostError | None = None

    @property
    def exit_code(self) -> int:
        if self.status == "interrupted":
            return 130
        if self.error is not None:
            return self.error.exit_code
        return 1 if any(r.status == "failed" for r in self.results) else 0


def process_timeout(opts: RunOptions) -> float:
    if opts.timeout:
        return opts.timeout
    # Generous: calibration plus every batch at ten times its target length.
    return 30.0 + (opts.warmup + opts.samples + 8) * opts.target_ms / 1000.0 * 10


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

    def run(self) -> Outcome:
        from .stats import summarize

        if self.recorder:
            self.recorder.start(self.results)
        status, error = "complete", None
        try:
            for rnd in range(self.opts.processes):
                order = list(range(len(self.results)))
                self.rng.shuffle(order)
                for i in order:
                    vr = self.results[i]
                    if vr.status in ("unsupported", "failed"):
                        if self.progress:
                            self.progress.skip(self.opts.warmup + self.opts.samples)
                        continue
                    err = self._one_process(vr, rnd, i)
                    if isinstance(err, UsageError):
                        vr.status, vr.reason = "failed", str(err)
                        raise err
                    if err is not None:
                        error = error if isinstance(error, ProbeTimeout) else err
                        vr.status, vr.reason = "failed", str(err)
                        self.warn(f"{vr.variant.key()}: {err}")
                    else:
                        vr.summary = summarize(vr.processes)
                    if self.recorder:
                        self.recorder.variant_updated(vr)
        except KeyboardInterrupt:
            status = "interrupted"
        except UsageError as e:
            status, error = "failed", e
        for vr in self.results:
            if vr.status == "pending":
                vr.status = "ok" if vr.processes else ("failed" if status == "complete" else "pending")
                if vr.status == "ok" and vr.summary is None:
                    vr.summary = summarize(vr.processes)
        if self.recorder:
            for vr in self.results:
                self.recorder.variant_updated(vr)
            self.recorder.finish(status if status != "complete" or error is None else "failed")
        return Outcome(self.results, status, error)

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
        vr.processes.append(proc)
        if self.recorder:
            self.recorder.process_done(vr, proc)
        return None
