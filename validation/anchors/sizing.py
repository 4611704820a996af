"""proc.fork sized like its anchor: `perf bench syscall fork` forks perf
itself, a larger parent than the bare probe. The anchor is run once untimed
and its process sampled in /proc; the probe's parent gets the anonymous
memory and mappings it lacks (resident=, mappings=), logged and kept in
--json as sized_like_anchor."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from validation.anchors.catalogue import Anchor, Row
from validation.anchors.sides import TIMEOUT_S, anchor_env, pinned
from validation.harness.script import log


def footprint(pid: int) -> dict | None:
    """A running process's anonymous resident bytes (RssAnon) and mapping
    count (lines of /proc/PID/maps); None once it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            vmas = sum(1 for _ in f)
        with open(f"/proc/{pid}/status") as f:
            anon = next((int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:")), None)
    except (OSError, ValueError, IndexError):
        return None
    return None if anon is None else {"anon_bytes": anon, "vmas": vmas}


def anchor_footprint(anchor: Anchor, cpu: int, interval: float = 0.02) -> dict | None:
    """Run the anchor once, untimed, and sample its process until it exits:
    the largest anonymous resident size and mapping count seen (its steady
    state in the measuring loop; the first samples may still be taskset or
    the loader). None if it exited before a sample."""
    argv, pre = pinned(anchor.argv, cpu)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=pre, env=anchor_env(anchor))
    best: dict | None = None
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(interval)
            got = footprint(proc.pid)
            if got:
                best = got if best is None else {k: max(best[k], got[k]) for k in best}
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return best


def size_like(anchor_fp: dict, probe_fp: dict, page: int = 4096) -> dict[str, str]:
    """Parameters that give the probe's parent the anchor's footprint:
    resident= the anonymous memory it lacks (whole pages), mappings= the
    mappings it lacks (less the one the resident= area adds)."""
    resident = max(0, anchor_fp["anon_bytes"] - probe_fp["anon_bytes"]) // page * page
    mappings = max(0, anchor_fp["vmas"] - probe_fp["vmas"] - (1 if resident else 0))
    return {"resident": str(resident), "mappings": str(mappings)}


def opcost_parent(cmd, env, spec: str, cpu: int, work: Path) -> dict | None:
    """The probe's own parent footprint for SPEC (header 'parent' of one
    tiny untimed run), or None when this opcost does not report it."""
    out = work / "parent.json"
    argv = [*cmd, "run", spec, "-p", "1", "-n", "1", "-w", "0", "--iters", "1", "--cpu", str(cpu), "--no-store",
            "--no-progress", "--json", str(out)]
    cp = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    try:
        par = json.loads(out.read_text())["results"][0]["processes"][0]["header"]["parent"]
        return {"anon_bytes": int(par["anon_bytes"]), "vmas": int(par["vmas"])}
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        log(f"{spec}: no parent footprint in opcost's header (exit {cp.returncode}): not sized")
        return None


def size_rows(rows: list[Row], resolved: dict[str, dict], benches: dict[str, set[str]], cmd: list[str],
              env: dict[str, str], cpu: int) -> None:
    """For each row sized_like_anchor whose opcost has resident= and
    mappings=: its resolved spec with the parent sized like the anchor's
    process, and resolved['sized'] = what was measured and added."""
    with tempfile.TemporaryDirectory(prefix="opcost-anchors-size-") as tmp:
        for r in rows:
            res = resolved[r.name]
            if not (r.sized_like_anchor and {"resident", "mappings"} <= benches.get(r.bench, set())):
                continue
            afp = anchor_footprint(res["anchor"], cpu)
            pfp = opcost_parent(cmd, env, res["spec"], cpu, Path(tmp))
            if afp and pfp:
                params = size_like(afp, pfp)
                res["spec"] = replace(r, params={**r.params, **params}).spec(benches[r.bench])
                res["sized"] = {"anchor": afp, "probe": pfp, "params": params}
                log(f"{r.name}: parent sized like {res['anchor'].tool}'s process ({afp['anon_bytes'] >> 10} KiB "
                    f"anonymous, {afp['vmas']} mappings; the bare probe: {pfp['anon_bytes'] >> 10} KiB, "
                    f"{pfp['vmas']}): {res['spec']}")
