"""What a boot's commands did, as the runner's process results: each
command's samples checked and its boot recorded under header.vm, and the
processes of one variant in one boot pooled into one figure."""

from __future__ import annotations

import os

from ... import probe
from ...errors import ProbeError, UsageError
from .protocol import Command
from ...model import process_median


def finish(req: probe.ProbeRequest, res: probe.ProcessResult, c: Command, rec: dict, accel: str, qemu: str):
    """One command of a boot's job as the runner's process result (or the
    error it ended with); `rec` (the boot's record) goes to header.vm."""
    res.wall_s = (c.ended_s or 0) - (c.started_s or 0)
    res.front_end = f"outside the guest ({accel})"
    rc = c.status
    last_err = (c.stderr or [""])[-1].removeprefix("opcost-probe: ")
    if rc == probe.PROBE_EXIT_UNSUPPORTED and res.unsupported is not None:
        return res
    if rc == probe.PROBE_EXIT_USAGE:
        return UsageError(last_err or f"{req.bench}: probe rejected its arguments")
    if rc != 0:
        return ProbeError(f"probe failed in the guest: {last_err or f'exit status {rc}'}")
    if res.header is None or res.trailer is None:
        return ProbeError("probe output ended early in the guest (header or trailer missing)")
    rec["probe_wall_s"] = round(res.wall_s, 3)
    res.header["vm"] = rec
    if accel == "tcg":
        res.header["emulator"] = f"{os.path.basename(qemu)} (TCG)"
        res.emulator = res.header["emulator"]
    return res


def pooled(parts: list):
    """The processes of one variant in one boot as one figure: an error or
    unsupported if any ended so; else the first's header, every measured and
    warm-up batch of all of them (renumbered), and each process's own facts
    (its median among them) under header.vm.processes."""
    for p in parts:
        if isinstance(p, Exception) or p.unsupported is not None:
            return p
    first = parts[0]
    if len(parts) == 1:
        return first
    vm = dict(first.header["vm"])

    # each process's own figure: the within-boot spread against the between-boot one (stats.boot_spread)
    vm["processes"] = [{"pid": p.header.get("pid"), "position_in_boot": p.header["vm"]["position_in_boot"],
                        "pad_bytes": p.pad_bytes, "samples": len(p.samples), "wall_s": round(p.wall_s, 3),
                        "median_ns": process_median(p.samples, p.header) if p.samples else None}
                       for p in parts]
    vm.pop("position_in_boot", None)
    first.header = dict(first.header, vm=vm)
    first.samples = [dict(s, i=n) for n, s in enumerate(s for p in parts for s in p.samples)]
    first.warmup = [dict(s, i=n) for n, s in enumerate(s for p in parts for s in p.warmup)]
    first.trailer = dict(first.trailer or {}, samples=len(first.samples), warmup=len(first.warmup))
    first.wall_s = sum(p.wall_s for p in parts)
    return first
