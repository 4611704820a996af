"""A machine that is not there: answers from a benchmark table captured from
a real probe (`opcost-probe list --json`) and a script of what each variant's
probe processes do, so the runner and the recorder can be tested in one
process, fast and exactly: no probe, no subprocess.

The script maps a key, `bench` or `bench:key=value,...` (cpu= and spin=
included), to a Reply; the most specific key that matches a request wins,
`default` answers the rest. A Reply does what a probe can: measure ns_per_op
(each batch within 1% of it, drawn from the request's seed, so a run replays
the same figures), say the variant cannot be measured here (check() and
every process), crash (ProbeError) after some good processes, or take
`delay` seconds (ProbeTimeout past the timeout). `interrupt_at=k` raises
KeyboardInterrupt as the k-th process starts, as Ctrl-C there would.
`started` lists every process's request in the order they started.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProbeError, ProbeTimeout, UsageError
from ..pmu import Catalog
from ..probe import ProbeRequest, ProcessResult
from ..spec import split_spec

TSC_HZ = 2_000_000_000     # the fake clock's rate, as the probe's --fake-clock
CALIBRATION_NS = 1_000_000  # from a process's start to its header


@dataclass(frozen=True)
class Reply:
    """What the probe does for one variant."""
    ns_per_op: float = 100.0
    unsupported: str | None = None   # the reason, at check() and in every process
    crash: str | None = None         # processes fail with this (the probe's last stderr line)...
    crash_after: int = 0             # ...once this many of the variant's processes went well
    delay: float = 0.0               # seconds a process takes (sleeps)


class ReplayTarget:
    name = "replay"

    def __init__(self, table: dict, script: dict[str, Reply] | None = None, *, default: Reply = Reply(),
                 arch: str | None = None, arches: list[str] | None = None, cpus=(0, 1),
                 placements: dict[tuple[int, int], str] | None = None, interrupt_at: int | None = None,
                 env: dict | None = None, cpuid: dict | None = None, catalog=None):
        self.table = table
        self.arch = arch or table.get("arch") or "x86_64"
        self._arches = list(arches or [self.arch])
        self.cpus = sorted(cpus)
        self.placements = dict(placements or {})   # (a, b) -> class; else same (a == b) or core
        self.script = [(split_spec(key), reply) for key, reply in (script or {}).items()]
        self.default = default
        self.interrupt_at = interrupt_at
        self._env = env
        self._cpuid = cpuid
        self._catalog = catalog                     # pmu.Catalog of the replayed machine (None: empty)
        self.started: list[ProbeRequest] = []
        self._good: dict[tuple, int] = {}           # processes that went well, per variant
        self._clock_ns = 1_000_000_000_000         # the replayed CLOCK_MONOTONIC_RAW

    @classmethod
    def from_file(cls, path: str | Path, script: dict[str, Reply] | None = None, **kw) -> "ReplayTarget":
        return cls(json.loads(Path(path).read_text()), script, **kw)

    # --- what the machine is -------------------------------------------------------

    def host_arch(self) -> str:
        return self.arch

    def arches(self) -> list[str]:
        return list(self._arches)

    def benchmark_table(self, arch: str | None = None) -> dict:
        arch = arch or self.arch
        if arch not in self._arches:
            raise UsageError(f"no probe for arch={arch} that runs here; available: {', '.join(self._arches)}")
        return self.table

    def placement_of(self, a: int, b: int, arch: str | None = None) -> str:
        return self.placements.get((a, b)) or ("same" if a == b else "core")

    def allowed_cpus(self) -> list[int]:
        return list(self.cpus)

    def pmu_catalog(self):
        return self._catalog if self._catalog is not None else Catalog()

    def default_cpu(self) -> int:
        return self.cpus[-1]

    def cpuid(self, arch: str | None = None) -> dict | None:
        return self._cpuid

    def probe_version(self, arch: str | None = None) -> str | None:
        return "replay"

    def env(self) -> dict:
        if self._env is not None:
            return self._env
        return {"arch": {"value": self.arch, "source": "replay target"},
                "hostname": {"value": self.name, "source": "replay target"}}

    # --- probe processes -----------------------------------------------------------

    def check(self, req: ProbeRequest, timeout: float = 30) -> str | None:
        self._bench(req)
        return self._reply(req).unsupported

    def run_process(self, req: ProbeRequest, timeout: float, on_line=None) -> ProcessResult:
        self._start(req)
        reply = self._reply(req)
        if _waited_past(reply.delay, timeout):
            raise _timeout(timeout)
        start = self._clock_ns
        res = self._outcome(req, reply, start, on_line)
        self._clock_ns = start + round(res.wall_s * 1e9) + CALIBRATION_NS
        return res

    def run_concurrent(self, reqs: list[ProbeRequest], timeout: float, on_line=None) -> list:
        """Every request starts at one instant of the replayed clock (their
        batches overlap); a delay is waited once, the longest."""
        for r in reqs:
            self._start(r)
        replies = [self._reply(r) for r in reqs]
        start = self._clock_ns
        out: list = []  # a ProcessResult or the error of each
        _waited_past(max((r.delay for r in replies), default=0.0), timeout)
        for r, reply in zip(reqs, replies):
            try:
                if reply.delay > timeout:
                    raise _timeout(timeout)
                out.append(self._outcome(r, reply, start, on_line))
            except (ProbeError, ProbeTimeout, UsageError) as e:
                out.append(e)
        walls = [round(r.wall_s * 1e9) for r in out if isinstance(r, ProcessResult)]
        self._clock_ns = start + max(walls, default=0) + CALIBRATION_NS
        return out

    def _start(self, req: ProbeRequest) -> None:
        self._bench(req)
        self.started.append(req)
        if self.interrupt_at is not None and len(self.started) == self.interrupt_at:
            raise KeyboardInterrupt

    def _bench(self, req: ProbeRequest) -> dict | None:
        """The table's entry (None for a build: variants' exe or program);
        an unknown benchmark is refused as the probe refuses it."""
        if req.exe or req.program:
            return None
        for b in self.table["benchmarks"]:
            if b["name"] == req.bench:
                return b
        raise UsageError(f"unknown benchmark '{req.bench}' (opcost-probe list shows them)")

    def _reply(self, req: ProbeRequest) -> Reply:
        have = {**req.params, "cpu": req.cpus or "", "spin": str(req.spin)}
        best, most = self.default, -1
        for (bench, pairs), reply in self.script:
            if bench == req.bench and len(pairs) > most and all(have.get(k) == v for k, v in pairs):
                best, most = reply, len(pairs)
        return best

    def _outcome(self, req: ProbeRequest, reply: Reply, start_ns: int, on_line) -> ProcessResult:
        res = ProcessResult(pad_bytes=req.pad_bytes)
        if reply.unsupported is not None:
            res.unsupported = reply.unsupported
            if on_line:
                on_line({"type": "unsupported", "bench": req.bench, "params": req.params,
                         "reason": reply.unsupported})
            return res
        variant = (req.bench, tuple(sorted(req.params.items())), req.cpus, req.spin, req.exe, req.program)
        if reply.crash is not None and self._good.get(variant, 0) >= reply.crash_after:
            raise ProbeError(f"probe failed: {reply.crash}")
        t = CALIBRATION_NS
        res.first_line_s = res.last_line_s = t / 1e9
        for d in self._lines(req, reply, start_ns):
            if d["type"] == "header":
                res.header = d
            elif d["type"] == "sample":
                t += d["wall_ns"]
                (res.warmup if d["warmup"] else res.samples).append(d)
                if not d["warmup"]:
                    res.sample_spans.append((res.last_line_s, t / 1e9))
                res.last_line_s = t / 1e9
            else:
                res.trailer = d
            if on_line:
                on_line(d)
        res.wall_s = t / 1e9
        self._good[variant] = self._good.get(variant, 0) + 1
        return res

    def _lines(self, req: ProbeRequest, reply: Reply, start_ns: int) -> list[dict]:
        """The probe's JSON lines for one process on the fake clock: a
        header, the warm-up and measured batches, a trailer."""
        p = req.protocol
        b = self._bench(req) or {"op": "run"}
        cpus = [int(c) for c in req.cpus.split(",")] if req.cpus else [self.default_cpu()]
        iters = p.iters or max(1, round(p.target_ms * 1e6 / reply.ns_per_op))
        events = req.counters.split(",") if req.counters else []
        header = {"type": "header", "schema": "opcost.probe/1", "probe_version": "replay", "arch": req.arch,
                  "compiler": "replay", "pid": 0, "bench": req.bench, "op": b["op"], "params": dict(req.params),
                  "cpus": cpus, "clock": "fake", "tsc_hz": TSC_HZ, "tsc_hz_source": "replay target",
                  "overhead": {"clock_ns": 0, "loop_ns_per_iter": 0, "loop_subtracted": True,
                               "method": "none: replayed"},
                  "iters": iters, "iters_source": "fixed" if p.iters else "calibrated to target_ms",
                  "samples": p.samples, "warmup": p.warmup, "target_ms": p.target_ms, "fake_clock": True,
                  "counters": [{"name": e, "status": "<not supported>", "reason": "a replay target counts nothing"}
                               for e in events],
                  "argv": ["opcost-probe", *req.argv()]}
        if "placement" in req.params:
            header["placement"] = {"name": req.params["placement"], "cpus": cpus, "how": "replayed"}
        rng = random.Random(req.seed)
        lines, t = [header], start_ns + CALIBRATION_NS
        batches = [(i, True) for i in range(p.warmup)] + [(i, False) for i in range(p.samples)]
        for i, warmup in batches:
            per = reply.ns_per_op * (1 + rng.uniform(-0.01, 0.01))
            ns = per * iters
            s = {"type": "sample", "i": i, "warmup": warmup, "iters": iters, "ns": ns, "wall_ns": round(ns),
                 "start_raw_ns": t, "ns_per_op": per, "tsc_per_op": per * TSC_HZ / 1e9,
                 "user_ns": round(ns / 4), "sys_ns": round(ns * 3 / 4), "user_ns_per_op": per / 4,
                 "sys_ns_per_op": per * 3 / 4, "nvcsw": 0, "nivcsw": 0, "cpu_before": cpus[0],
                 "cpu_after": cpus[0], "steal_ticks": 0}
            if events:
                s["counters"] = {e: "<not supported>" for e in events}
            lines.append(s)
            t += round(ns)
        lines.append({"type": "trailer", "status": "ok", "samples": p.samples, "warmup": p.warmup})
        return lines


def _waited_past(delay: float, timeout: float) -> bool:
    """Sleep as long as the process takes, or until its timeout: True if it
    would have been killed."""
    if delay > 0:
        time.sleep(min(delay, timeout))
    return delay > timeout


def _timeout(timeout: float) -> ProbeTimeout:
    return ProbeTimeout(f"probe did not finish within {timeout:g} s (killed); raise --timeout if it is just slow")
