"""opcost made like its anchor's process, which is run once untimed and read
in /proc (watched):
- proc.fork sized like it: `perf bench syscall fork` forks perf itself, a
  larger parent than the bare probe; the probe's parent gets the anonymous
  memory, the mappings holding anonymous pages (a library's written data:
  fork copies their page-table entries) and the other mappings it lacks
  (resident=, written=, mappings=), kept in --json as sized_like_anchor;
- mem.mmap placed like it: where lat_mmap's mapping lies decides whether
  each munmap frees a page-table page; opcost gets the same pagetable=,
  kept in --json as placed_like_anchor."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from validation.anchors.catalogue import Anchor, Row
from validation.anchors.sides import TIMEOUT_S, anchor_env, pinned
from validation.harness.script import log


def footprint(pid: int) -> dict | None:
    """A running process's anonymous resident bytes (RssAnon), mapping count
    and mappings holding anonymous pages (a nonzero Anonymous: in
    /proc/PID/smaps, whose page-table entries fork copies); None once it is
    gone or unreadable."""
    try:
        with open(f"/proc/{pid}/smaps") as f:
            vmas = written = 0
            for line in f:
                if line.startswith("Anonymous:"):
                    written += int(line.split()[1]) > 0
                elif not line[:1].isupper():  # a mapping's first line starts with its address
                    vmas += 1
        with open(f"/proc/{pid}/status") as f:
            anon = next((int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:")), None)
    except (OSError, ValueError, IndexError):
        return None
    return None if anon is None else {"anon_bytes": anon, "vmas": vmas, "vmas_written": written}


@contextlib.contextmanager
def watched(anchor: Anchor, cpu: int) -> Iterator[subprocess.Popen]:
    """The anchor run once, untimed, pinned as in the report, for its
    processes to be read in /proc; on leaving, every process of it is
    killed (lmbench's benchmp children outlive a killed parent, and one would
    go on timing on the measuring CPU into the report's first runs)."""
    argv, pre = pinned(anchor.argv, cpu)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=pre, env=anchor_env(anchor))
    try:
        yield proc
    finally:
        for pid in reversed(descendants(proc.pid)) if proc.poll() is None else ():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.wait()


def anchor_footprint(anchor: Anchor, cpu: int, interval: float = 0.02) -> dict | None:
    """Run the anchor once, untimed, and sample its process until it exits:
    the largest anonymous resident size and mapping count seen (its steady
    state in the measuring loop; the first samples may still be taskset or
    the loader). None if it exited before a sample."""
    best: dict | None = None
    with watched(anchor, cpu) as proc:
        deadline = time.monotonic() + TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(interval)
            got = footprint(proc.pid)
            if got:
                best = got if best is None else {k: max(best[k], got[k]) for k in best}
    return best


def size_like(anchor_fp: dict, probe_fp: dict, page: int = 4096, written: bool = False) -> dict[str, str]:
    """Parameters that give the probe's parent the anchor's footprint:
    resident= the anonymous memory it lacks (whole pages), mappings= the
    mappings it lacks (less the one the resident= area adds). With written
    (the probe has written= and both sides counted vmas_written): written=
    the mappings holding anonymous pages it lacks (less the resident= area),
    each one written page, taken from resident= and mappings=."""
    resident = max(0, anchor_fp["anon_bytes"] - probe_fp["anon_bytes"]) // page * page
    w = 0
    if written and "vmas_written" in anchor_fp and "vmas_written" in probe_fp:
        w = max(0, anchor_fp["vmas_written"] - probe_fp["vmas_written"] - (1 if resident else 0))
        resident = max(0, resident - w * page)
    mappings = max(0, anchor_fp["vmas"] - probe_fp["vmas"] - (1 if resident else 0) - w)
    return {"resident": str(resident), "mappings": str(mappings), **({"written": str(w)} if written else {})}


def opcost_parent(cmd, env, spec: str, cpu: int, work: Path) -> dict | None:
    """The probe's own parent footprint for SPEC (header 'parent' of one
    tiny untimed run), or None when this opcost does not report it."""
    out = work / "parent.json"
    argv = [*cmd, "run", spec, "-p", "1", "-n", "1", "-w", "0", "--iters", "1", "--cpu", str(cpu), "--no-store",
            "--no-progress", "--json", str(out)]
    cp = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    try:
        par = json.loads(out.read_text())["results"][0]["processes"][0]["header"]["parent"]
        got = {"anon_bytes": int(par["anon_bytes"]), "vmas": int(par["vmas"])}
        return {**got, "vmas_written": int(par["vmas_written"])} if "vmas_written" in par else got
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
                params = size_like(afp, pfp, written="written" in benches[r.bench])
                res["spec"] = replace(r, params={**r.params, **params}).spec(benches[r.bench])
                res["sized"] = {"anchor": afp, "probe": pfp, "params": params}
                log(f"{r.name}: parent sized like {res['anchor'].tool}'s process ({afp['anon_bytes'] >> 10} KiB "
                    f"anonymous, {afp['vmas']} mappings, {afp.get('vmas_written', '?')} with anonymous pages; "
                    f"the bare probe: {pfp['anon_bytes'] >> 10} KiB, {pfp['vmas']}, "
                    f"{pfp.get('vmas_written', '?')}): {res['spec']}")


def pmd_bytes() -> int:
    """The address range one page-table page maps (x86-64: 2 MiB): the PMD
    huge page's size where the kernel says it, else 2 MiB."""
    try:
        return int(Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").read_text())
    except (OSError, ValueError):
        return 2 << 20


def descendants(pid: int) -> list[int]:
    """pid and every process under it (lmbench's benchmp forks its children)."""
    out, pending = [], [pid]
    while pending:
        p = pending.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                pending += [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                pass
    return out


def mapping_placement(maps: str, path: str, size: int, pmd: int) -> dict | None:
    """Where the mapping of `path` (size bytes) lies in one /proc/PID/maps
    text: its address and the other mappings in the page-table range of its
    first page; None when it is not mapped there now. 'pagetable': shared
    when another mapping is in that range (the page-table page outlives each
    munmap), own when none is (each munmap frees it)."""
    rows = []
    for line in maps.splitlines():
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        rows.append((lo, hi, f[5] if len(f) > 5 else "[anon]"))
    mine = next(((lo, hi) for lo, hi, name in rows if name == path and hi - lo == size), None)
    if mine is None:
        return None
    start = mine[0] & ~(pmd - 1)
    others = [f"{lo:#x}-{hi:#x} {name}" for lo, hi, name in rows
              if (lo, hi) != mine and lo < start + pmd and hi > start]
    return {"address": f"{mine[0]:#x}", "neighbours": others, "pagetable": "shared" if others else "own"}


def anchor_placement(anchor: Anchor, cpu: int, path: str, size: int, seconds: float = 20.0) -> dict | None:
    """Run the anchor once, untimed, until its mapping of `path` has been
    seen three times in its processes' /proc/PID/maps; where it lay
    (mapping_placement), or None if never seen or not the same each time."""
    seen: list[dict] = []
    pmd = pmd_bytes()
    with watched(anchor, cpu) as proc:
        deadline = time.monotonic() + seconds
        while proc.poll() is None and time.monotonic() < deadline and len(seen) < 3:
            for pid in descendants(proc.pid):
                try:
                    got = mapping_placement(Path(f"/proc/{pid}/maps").read_text(), path, size, pmd)
                except OSError:
                    continue
                if got:
                    seen.append(got)
            time.sleep(0.01)
    if not seen or any(s["pagetable"] != seen[0]["pagetable"] for s in seen):
        return None
    return seen[0]


def place_rows(rows: list[Row], resolved: dict[str, dict], benches: dict[str, set[str]], cpu: int) -> None:
    """For each row pagetable_like_anchor whose opcost has pagetable=: the
    anchor's mapping found in its process (anchor_placement; the anchor runs
    without ASLR, so it lies there in every run), and the resolved spec with
    pagetable= the same: own or shared. resolved['placed'] says what was seen."""
    for r in rows:
        res = resolved[r.name]
        if not (r.pagetable_like_anchor and "pagetable" in benches.get(r.bench, set())):
            continue
        anchor = res["anchor"]
        got = anchor_placement(anchor, cpu, anchor.argv[-1], r.pagetable_like_anchor)
        if got is None:
            log(f"{r.name}: {anchor.tool}'s mapping of {anchor.argv[-1]} not seen in its process: "
                "opcost's left where mmap puts it (pagetable=any)")
            continue
        res["spec"] = replace(r, params={**r.params, "pagetable": got["pagetable"]}).spec(benches[r.bench])
        res["placed"] = got
        log(f"{r.name}: {anchor.tool}'s mapping at {got['address']} "
            + (f"shares its page-table range with {len(got['neighbours'])} other mapping(s)" if got["neighbours"]
               else "is alone in its page-table range") + f": {res['spec']}")
