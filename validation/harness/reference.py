"""The two sides of a comparison against a hand-written C loop (ref.c of
overhead/ and instructions/): building the reference, one reference process
and one opcost process at the same batch protocol (WARMUP + SAMPLES batches
of the same length), each with its median batch and CPU share."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
from pathlib import Path

from validation.harness.cpushare import opcost_share, run_timed
from validation.harness.script import Failure, tail

WARMUP, SAMPLES = 3, 20
TIMEOUT_S = 600


def build_ref(ref_c: Path, build_dir: Path, cc: str, extra: list[str]) -> Path:
    exe = build_dir / "ref"
    cmd = [cc, "-O2", *extra, "-o", str(exe), str(ref_c)]
    cp = subprocess.run(cmd, capture_output=True, text=True)
    if cp.returncode != 0:
        raise Failure(f"building the reference failed: {' '.join(cmd)}\n{cp.stderr.strip()}")
    return exe


def run_opcost(cmd: list[str], env: dict[str, str], spec: str, cpu: int, work: Path) -> dict:
    out = work / "opcost.json"
    if out.exists():
        out.unlink()
    argv = [*cmd, "run", spec, "-p", "1", "-n", str(SAMPLES), "-w", str(WARMUP),
            "--cpu", str(cpu), "--no-store", "--json", str(out)]
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                            timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise Failure(f"{' '.join(argv)}: no answer within {TIMEOUT_S} s") from None
    if cp.returncode != 0:
        raise Failure(f"{' '.join(argv)}: exit {cp.returncode}\n{tail(cp.stderr)}")
    try:
        doc = json.loads(out.read_text())
        r = doc["results"][0]
        median = float(r["summary"]["median_ns"])
        samples = r["processes"][0]["samples"]
        iters = int(samples[0]["iters"])
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise Failure(f"{' '.join(argv)}: cannot read results[0] from {out}: {e!r}") from None
    per_batch = [float(s["ns_per_op"]) for s in samples if "ns_per_op" in s]
    return {"median_ns": median, "iters": iters, "batches_ns": per_batch, "cpu_share": opcost_share(samples),
            "overhead_ns": r["summary"].get("overhead_ns"), "aux_ns": r["summary"].get("aux_ns")}


def run_ref(exe: Path, op: str, iters: int, cpu: int, rng: random.Random) -> dict:
    argv = [str(exe), op, str(iters), str(WARMUP + SAMPLES), str(cpu)]
    env = dict(os.environ)
    env["OPCOST_PAD"] = "x" * rng.randrange(0, 4097)  # same layout randomisation as opcost's runner
    cp, wall, share = run_timed(argv, env=env, timeout=TIMEOUT_S)
    if cp.returncode != 0:
        raise Failure(f"{' '.join(argv)}: exit {cp.returncode}\n{tail(cp.stderr)}")
    try:
        rows = [[float(x) for x in line.split()] for line in cp.stdout.splitlines()]
    except ValueError:
        raise Failure(f"{' '.join(argv)}: unexpected output {cp.stdout[:200]!r}") from None
    if len(rows) != WARMUP + SAMPLES:
        raise Failure(f"{' '.join(argv)}: expected {WARMUP + SAMPLES} batches, got {len(rows)}")
    measured = [r[0] for r in rows[WARMUP:]]
    flush = None
    if all(len(r) == 2 for r in rows):  # cold: second column = the flushes alone, timed right after
        # each batch; subtracted per batch, as opcost subtracts its aux loop
        measured = [r[0] - r[1] for r in rows[WARMUP:]]
        flush = statistics.median(r[1] for r in rows[WARMUP:])
    median = statistics.median(measured)
    return {"median_ns": median, "iters": iters, "batches_ns": measured, "flush_ns": flush,
            "cpu_share": share}
