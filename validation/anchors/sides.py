"""One measurement of each side of an anchors pair: opcost (this checkout's,
else the one on PATH) with its figure and CPU share, and one anchor command
pinned to the CPU with the figure its parser reads; also the benchmarks and
parameters this opcost declares."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Callable

from validation.anchors.catalogue import Anchor
from validation.harness.checkout import REPO, Command, checkout_opcost, installed_opcost
from validation.harness.cpushare import opcost_share, run_timed
from validation.anchors.parsers import NoFigure
from validation.harness.script import Disturbed, Failure, tail

TIMEOUT_S = 300


def opcost_command() -> Command:
    """`python -m opcost` from this checkout (the code under test), else opcost on PATH."""
    if (REPO / "src" / "opcost").is_dir():
        return checkout_opcost()
    got = installed_opcost()
    if not got:
        raise Failure("no opcost: neither src/opcost in this checkout nor opcost on PATH")
    return got


def opcost_benches(cmd: list[str], env: dict[str, str]) -> dict[str, set[str]]:
    argv = [*cmd, "list", "--json"]
    cp = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    if cp.returncode != 0:
        raise Failure(f"{shlex.join(argv)}: exit {cp.returncode}\n{tail(cp.stderr, 6)}")
    try:
        doc = json.loads(cp.stdout)
        generic = {p["name"] for p in doc.get("generic_params", [])}
        return {b["name"]: {p["name"] for p in b.get("params", [])} | generic for b in doc["benchmarks"]}
    except (ValueError, KeyError, TypeError) as e:
        raise Failure(f"{shlex.join(argv)}: unexpected output ({e!r})") from None


def run_opcost(cmd, env, spec: str, cpu: int, extra: list[str], work: Path, whole_process_share: bool = False,
               minus_spec: str | None = None, minus_div: int = 1) -> dict:
    """One opcost measurement. cpu_share: CPU time over wall time of the
    measured batches from opcost's own per-batch rusage (measuring side and
    helper), or, with whole_process_share (benchmarks whose samples leave
    their workers' CPU time out: msg.hackbench, proc.fork), of the whole opcost process
    tree (the CLI's Python start-up included: close to 1 when undisturbed).
    minus_spec: measured in the same opcost run (its rounds interleave the
    two) and its median / minus_div subtracted, as an anchor that subtracts a part."""
    out = work / "opcost.json"
    if out.exists():
        out.unlink()
    specs = [spec, *([minus_spec] if minus_spec else [])]
    argv = [*cmd, "run", *specs, *extra, "--cpu", str(cpu), "--no-store", "--no-progress", "--json", str(out)]
    cp, wall, tree_share = run_timed(argv, env=env, timeout=TIMEOUT_S)
    try:
        rs = json.loads(out.read_text())["results"][:len(specs)]
        if len(rs) != len(specs):
            raise IndexError
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        rs = None
    for r, sp in zip(rs or [], specs):
        if r.get("status") not in (None, "ok"):
            raise Failure(f"opcost {sp}: {r.get('status')}: {r.get('reason') or tail(cp.stderr, 2)}")
    if cp.returncode != 0 or rs is None:
        raise Failure(f"{shlex.join(argv)}: exit {cp.returncode}\n{tail(cp.stderr, 6)}")
    try:
        medians = [float(r["summary"]["median_ns"]) for r in rs]
        got = {"ns_per_op": medians[0] - sum(medians[1:]) / minus_div, "cv_processes": rs[0]["summary"].get("cv"),
               "wall_s": wall, "op": rs[0].get("op"),
               "cpu_share": tree_share if whole_process_share else opcost_share(
                   [x for r in rs for p in r.get("processes") or [] for x in p.get("samples") or []])}
    except (KeyError, TypeError, ValueError) as e:
        raise Failure(f"opcost {spec}: no summary.median_ns in {out}: {e!r}") from None
    if minus_spec:
        got.update(whole_ns=medians[0], minus_ns=medians[1])
    return got


def pinned(argv: list[str], cpu: int) -> tuple[list[str], Callable[[], None] | None]:
    """argv under `taskset -c CPU`; without taskset, argv and a preexec_fn that pins the child."""
    ts = shutil.which("taskset")
    if ts:
        return [ts, "-c", str(cpu), *argv], None
    return argv, lambda: os.sched_setaffinity(0, {cpu})


def anchor_env(anchor: Anchor) -> dict[str, str] | None:
    return {**os.environ, **anchor.env} if anchor.env else None


def run_anchor(anchor: Anchor, cpu: int) -> dict:
    argv, pre = pinned(anchor.argv, cpu)
    cp, wall, share = run_timed(argv, preexec_fn=pre, timeout=TIMEOUT_S, env=anchor_env(anchor))
    if cp.returncode != 0:
        raise Failure(f"{shlex.join(argv)}: exit {cp.returncode}\n{tail(cp.stdout + cp.stderr, 6)}")
    text = {"stdout": cp.stdout, "stderr": cp.stderr}.get(anchor.stream, cp.stdout + "\n" + cp.stderr)
    try:
        got = anchor.parse(text)
    except NoFigure as e:
        raise Disturbed(f"{shlex.join(argv)}: {e}") from None
    except ValueError as e:
        raise Failure(f"{shlex.join(argv)}: {e}; output:\n{tail(cp.stdout + cp.stderr, 6)}") from None
    got["wall_s"] = wall
    got["cpu_share"] = share
    return got

