"""Driving probe processes: the request of each (seed, padding, its share of
the budget), one round's steps in its shuffled order (a step per variant,
or per batch for a target that runs several at once), --parallel's
concurrent copies, the progress told of every batch, and each finished
process kept into its variant and handed to the recorder at once."""

from __future__ import annotations

import random

from .. import interrupts, probe
from ..errors import OpcostError, ProbeError, ProbeTimeout, UsageError
from ..parallel import common_window, copy_result, place
from ..spec import Variant
from ..targets.base import Target
from .plan import RoundPlan
from .results import RunOptions, VariantResult, process_timeout


def named(msg: str, req: probe.ProbeRequest, v: Variant) -> str:
    """A probe's complaint about a build, with the build's temporary path
    replaced by the variant's name."""
    msg = msg.replace(f"{req.bench}: probe setup failed: ", "")
    for path in (v.exe, *(v.program or ())):
        if path:
            msg = msg.replace(f"program {path} ", "the program ").replace(path, v.name)
    return msg


class Driver:
    """Starts the probe processes of a run on `target`; `recorder` and
    `progress` (optional) are told of every process and every batch."""
    def __init__(self, results: list[VariantResult], opts: RunOptions, target: Target, plan: RoundPlan,
                 warn) -> None:
        self.results = results
        self.opts = opts
        self.target = target
        self.plan = plan
        self.warn = warn
        self.recorder = None
        self.progress = None
        self.rng = random.Random(opts.protocol.seed)
        self.seq = 0  # processes started, in order: proves the interleaving
        self.timeout = process_timeout(opts.protocol)

    def request(self, v: Variant, rnd: int, idx: int, pad: bool = True) -> probe.ProbeRequest:
        # pad=False (preflight) leaves the seeded run order and padding untouched
        p = self.opts.protocol
        return probe.ProbeRequest(
            bench=v.bench, params=v.probe_params(), arch=v.arch, protocol=p, cpus=v.cpu,
            counters=self.opts.counters, seed=p.seed * 100003 + rnd * 1009 + idx,
            pad_bytes=probe.pad_length(self.rng) if pad else 0, spin=v.spin,
            exe=v.exe or None, program=v.program or None, emulator=v.emulator or None, ops=v.ops,
            machine=v.machine, emulated=self.opts.emulated, budget_ms=self.plan.share_ms() if pad and not v.program else None)

    def progress_counter(self, vr: VariantResult | None = None):
        """The progress display told of every batch: a sample line each, or
        (a probe holding its samples) its progress lines, then not again for
        the samples that follow them."""
        seen: dict = {"held": False}

        def on_line(d: dict) -> None:
            kind = d.get("type")
            if kind == "header" and vr is not None:
                self.plan.on_header(vr, d)
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

    def steps(self, order: list[int], rnd: int) -> list:
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
                    p = self.opts.protocol
                    self.progress.skip((p.warmup + p.samples) * self.opts.copies_per_round())
                continue
            todo.append(i)
        run_batch = getattr(self.target, "run_batch", None)
        if run_batch is None or self.opts.parallel > 1:
            return [lambda i=i: [(i, self.round(self.results[i], rnd, i))] for i in todo]
        groups: dict = {}
        for i in todo:
            req = self.request(self.results[i].variant, rnd, i)
            groups.setdefault(getattr(self.target, "batch_key")(req), []).append((i, req))

        def step(items: list) -> list:
            if self.progress:
                self.progress.begin(", ".join(self.results[i].variant.key() for i, _ in items))
            out = run_batch([r for _, r in items], self.timeout, self.progress_counter())
            # each kept as soon as the batch is done; a usage error raised after the others are kept
            done = [(i, self.keep(self.results[i], rnd, res)) for (i, _), res in zip(items, out)]
            return sorted(done, key=lambda d: isinstance(d[1], UsageError))
        return [lambda items=items: step(items) for items in groups.values()]

    def round(self, vr: VariantResult, rnd: int, idx: int) -> OpcostError | None:
        """One round of a variant: its single process and, with --parallel N,
        N concurrent copies, in a random order (so drift does not favour one)."""
        if self.opts.parallel <= 1:
            return self.one_process(vr, rnd, idx)
        steps = [self.one_process, self.parallel_copies]
        self.rng.shuffle(steps)
        single_idx = len(vr.processes)
        for step in steps:
            err = step(vr, rnd, idx)
            if err is not None or vr.status == "unsupported":
                return err
        if vr.parallel_rounds and len(vr.processes) > single_idx:
            vr.parallel_rounds[-1]["single_process"] = vr.processes[single_idx]["index"]
        return None

    def parallel_copies(self, vr: VariantResult, rnd: int, idx: int) -> OpcostError | None:
        v = vr.variant
        cpus, wrapped = place(self.opts.parallel, self.target.allowed_cpus())
        reqs = []
        for c, cpu in enumerate(cpus):
            r = self.request(v, rnd, idx * 1000 + 1 + c)
            r.cpus = str(cpu)
            reqs.append(r)
        if self.progress:
            self.progress.begin(f"{v.key()} x{len(reqs)}")

        out = self.target.run_concurrent(reqs, self.timeout, self.progress_counter())
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

    def one_process(self, vr: VariantResult, rnd: int, idx: int) -> OpcostError | None:
        v = vr.variant
        req = self.request(v, rnd, idx)
        if self.progress:
            self.progress.begin(v.key())

        on_line = self.progress_counter(vr)
        try:
            res = self.target.run_process(req, self.timeout, on_line)
        except (ProbeError, ProbeTimeout, UsageError) as e:
            return e
        return self.keep(vr, rnd, res)

    def keep(self, vr: VariantResult, rnd: int, res) -> OpcostError | None:
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
        budget = self.plan.record(v.key())
        if budget is not None:   # a protocol the budget shaped
            proc["budget"] = budget
        if self.opts.stages:   # the look this process belongs to: marks a sequential run
            proc["stage"] = next(k for k, end in enumerate(self.opts.stages, 1) if rnd < end)
            if self.opts.boundary:
                proc["boundary"] = self.opts.boundary
        with interrupts.deferred():   # kept and recorded together, or neither
            vr.processes.append(proc)
            if self.recorder:
                self.recorder.process_done(vr, proc)
        return None
