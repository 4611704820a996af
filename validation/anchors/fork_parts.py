#!/usr/bin/env python3
"""Fork's parts: where `perf bench syscall fork` and opcost's proc.fork differ, measured.

The anchors report compares opcost's proc.fork (fork + the child's _exit(0)
+ waitpid, in the static probe, its parent sized like perf's process) with
`perf bench syscall fork`. They differ in the child's way out (perf's runs
exit(0) in a process of dozens of shared libraries) and, unless written=
is given, in the parent's shape (perf's anonymous pages lie in about 125
written library mappings, each copied by fork). This script measures each
part, all variants INTERLEAVED (--runs rounds, each in a new random order),
pinned to one CPU:

  perf bench syscall fork      perf's own loop, in perf's process
  perf's libs, exit(0)         the same loop, hand-written (fork_loop.c), linked
                               against perf's own shared libraries (lazy binding,
                               as perf): perf's process shape, perf's child
  perf's libs, _exit(0)        ... the child calls _exit(0) (opcost's child)
  perf's libs (now), _exit(0)  ... bound at load time: the child resolves no symbol
  static, _exit(0)             the loop in a static binary (the bare probe's shape)
  opcost proc.fork             the bare probe
  opcost proc.fork sized       the probe's parent given perf's anonymous bytes and
                               mapping count (resident=, mappings=)
  ... and written=             ... and perf's mappings holding anonymous pages
                               (written=: the anchors report's sizing)

Figures are per fork, waiting for the CPU left out on every side: opcost
does it itself (wall time less run delay); the loops and perf are their
usecs/op times their CPU share (CPU time of the whole process tree over its
wall time; 1 when nothing else ran). vs perf: the median of the per-round
ratios (min-max). Under the table: each process's shape (anonymous bytes,
mappings, mappings holding anonymous pages, page tables) read in /proc
while it runs.

Needs perf >= 6.2 (`perf bench syscall fork`), a C compiler, ldd.
Usage: validation/anchors/fork_parts.py [--runs 5] [--cpu N] [--loops 1000] [--seed S] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from validation.anchors.model import Anchor, Tools  # noqa: E402
from validation.anchors.parsers import parse_perf_bench  # noqa: E402
from validation.anchors.sides import opcost_benches, opcost_command, pinned, run_anchor, run_opcost  # noqa: E402
from validation.anchors.sizing import anchor_footprint, descendants, opcost_parent, size_like  # noqa: E402
from validation.harness.report import write_document  # noqa: E402
from validation.harness.script import Failure, log, pick_cpu, script_main  # noqa: E402

LOOP_C = Path(__file__).resolve().parent / "fork_loop.c"
SKIP_LIBS = ("libc.so", "ld-linux", "linux-vdso")


def shared_libraries(ldd_output: str) -> list[str]:
    """The libraries `ldd BINARY` resolves (name => /path (addr)), less libc,
    the loader and the vDSO, which every dynamically linked program has."""
    libs = []
    for line in ldd_output.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(/\S+)", line)
        if m and not any(s in m.group(1) for s in SKIP_LIBS):
            libs.append(m.group(2))
    return libs


def build(work: Path, perf: str) -> dict[str, Path]:
    """fork_loop.c built three ways: static; against perf's libraries bound
    lazily (as perf is); the same bound at load time."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise Failure("no C compiler (cc or gcc) to build fork_loop.c")
    ldd = subprocess.run(["ldd", perf], capture_output=True, text=True)
    libs = shared_libraries(ldd.stdout)
    if ldd.returncode != 0 or not libs:
        raise Failure(f"ldd {perf}: no shared libraries ({(ldd.stdout + ldd.stderr).strip()[:200]}): "
                      "perf's process shape cannot be rebuilt")
    out = {}
    for name, flags in (("static", ["-static"]),
                        ("libs", ["-Wl,--no-as-needed", *libs, "-Wl,-z,lazy"]),
                        ("libs-now", ["-Wl,--no-as-needed", *libs, "-Wl,-z,now"])):
        out[name] = work / f"fork_loop-{name}"
        cp = subprocess.run([cc, "-O2", "-o", str(out[name]), str(LOOP_C), *flags], capture_output=True, text=True)
        if cp.returncode != 0:
            raise Failure(f"building fork_loop ({name}): {cp.stderr.strip()[-300:]}")
    log(f"fork_loop linked against perf's {len(libs)} shared libraries")
    return out


def shape(pid: int) -> dict | None:
    """A process's shape as fork sees it: anonymous resident bytes, mappings,
    mappings holding anonymous pages (fork copies their page-table entries and
    gives each an anon_vma; a file mapping without them it skips), the 2 MiB
    page-table ranges those lie in, and its page tables (VmPTE)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        smaps = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return None
    field = dict(re.findall(r"^(\w+):\s+(\d+) kB", status, re.M))
    vmas, written, ranges, cur = 0, 0, set(), (0, 0)
    for line in smaps.splitlines():
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
        if m:
            vmas, cur = vmas + 1, (int(m.group(1), 16), int(m.group(2), 16))
        elif line.startswith("Anonymous:") and int(line.split()[1]) > 0:
            written += 1
            ranges.update(range(cur[0] >> 21, ((cur[1] - 1) >> 21) + 1))
    if "RssAnon" not in field or "VmPTE" not in field:
        return None
    return {"anon_bytes": int(field["RssAnon"]) * 1024, "vmas": vmas, "vmas_written": written,
            "pmd_ranges_written": len(ranges), "pte_bytes": int(field["VmPTE"]) * 1024}


def shape_while_running(argv: list[str], env: dict[str, str] | None, comm: str | None,
                        seconds: float = 1.5) -> dict | None:
    """Start argv, wait `seconds`, read the shape of its process (or, with
    comm, of its first descendant so named), then kill what it started."""
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(seconds)
        pids = sorted(descendants(proc.pid)) if comm else [proc.pid]
        for pid in pids:
            try:
                if comm is None or Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                    return shape(pid)
            except OSError:
                continue
        return None
    finally:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass
        proc.wait()


def spec(params: dict[str, str]) -> str:
    return "proc.fork:" + ",".join(f"{k}={v}" for k, v in params.items())


def loop_anchor(binary: Path, how: str, loops: int) -> Anchor:
    return Anchor("fork_loop", [str(binary), how, str(loops)], parse_perf_bench)


def figure(got: dict) -> float:
    """ns per fork with waiting for the CPU left out (opcost: itself; others: x CPU share)."""
    share = got.get("cpu_share")
    return got["ns_per_op"] * (min(1.0, share) if share else 1.0)


def options() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--cpu", type=int, default=None, help="CPU for every side (default: the last allowed CPU)")
    ap.add_argument("--loops", type=int, default=1000,
                    help="forks per perf and loop run (default 1000, as the anchors report)")
    ap.add_argument("--seed", type=int, default=None, help="seed of the rounds' orders (default: drawn, printed)")
    ap.add_argument("--json", metavar="OUT", help="also write every figure as JSON to OUT")
    return ap


def variants(perf: str, bins: dict[str, Path], loops: int, cmd, env, cpu: int, sized: list[str],
             work: Path) -> dict:
    """name -> a function measuring it once: (ns per fork, CPU share, whether opcost)."""
    def ext(anchor: Anchor):
        return lambda: (lambda g: (figure(g), g["cpu_share"], False))(run_anchor(anchor, cpu))

    def opc(spec: str):
        return lambda: (lambda g: (g["ns_per_op"], g["cpu_share"], True))(
            run_opcost(cmd, env, spec, cpu, [], work, whole_process_share=True))

    return {
        "perf bench syscall fork": ext(Anchor("perf bench", [perf, "bench", "syscall", "fork", "-l", str(loops)],
                                              parse_perf_bench)),
        "perf's libs, exit(0)": ext(loop_anchor(bins["libs"], "exit", loops)),
        "perf's libs, _exit(0)": ext(loop_anchor(bins["libs"], "_exit", loops)),
        "perf's libs (now), _exit(0)": ext(loop_anchor(bins["libs-now"], "_exit", loops)),
        "static, _exit(0)": ext(loop_anchor(bins["static"], "_exit", loops)),
        "opcost proc.fork": opc("proc.fork"),
        **{f"opcost {sp}": opc(sp) for sp in sized},
    }


def table(runs: dict[str, list[tuple[float, float, bool]]]) -> list[dict]:
    ref = [f for f, _, _ in runs["perf bench syscall fork"]]
    rows = []
    for name, got in runs.items():
        ratios = [f / r for (f, _, _), r in zip(got, ref)]
        shares = [s for _, s, _ in got if s]
        rows.append({"variant": name, "us_per_fork": statistics.median(f for f, _, _ in got) / 1000,
                     "vs_perf": statistics.median(ratios), "vs_perf_min": min(ratios), "vs_perf_max": max(ratios),
                     "cpu_share": statistics.median(shares) if shares else None,
                     "per_round_us": [round(f / 1000, 3) for f, _, _ in got]})
    return rows


def markdown(rows: list[dict], shapes: dict[str, dict | None]) -> str:
    out = ["| variant | us per fork | vs perf (min-max) | CPU share |", "|---|---|---|---|"]
    for r in rows:
        share = f"{r['cpu_share']:.2f}" if r["cpu_share"] is not None else "-"
        out.append(f"| {r['variant']} | {r['us_per_fork']:.1f} | {r['vs_perf']:.3f} ({r['vs_perf_min']:.3f}-"
                   f"{r['vs_perf_max']:.3f}) | {share} |")
    out += ["", "| process | anonymous | mappings | with anonymous pages | in 2 MiB ranges | page tables |",
            "|---|---|---|---|---|---|"]
    for name, s in shapes.items():
        out.append(f"| {name} | " + (f"{s['anon_bytes'] >> 10} KiB | {s['vmas']} | {s['vmas_written']} | "
                                     f"{s['pmd_ranges_written']} | {s['pte_bytes'] >> 10} KiB |" if s else
                                     "not read | | | | |"))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = options()
    args = ap.parse_args(argv)
    if args.runs < 1 or args.loops < 1:
        ap.error("--runs and --loops must be >= 1")
    cpu = pick_cpu(ap, args.cpu)
    tools = Tools()
    perf = tools.which("perf")
    if not perf or "fork" not in tools.perf_syscall():
        raise Failure("needs perf with `perf bench syscall fork` (perf >= 6.2; apt-get install linux-perf)")
    seed = args.seed if args.seed is not None else random.randrange(2 ** 32)
    rng = random.Random(seed)
    cmd, env, desc = opcost_command()
    # long enough (3000 forks) to be read in /proc while it runs
    anchor = Anchor("perf bench", [perf, "bench", "syscall", "fork", "-l", str(max(args.loops, 3000))],
                    parse_perf_bench)
    t0, load0 = time.monotonic(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="opcost-fork-parts-") as tmp:
        work = Path(tmp)
        bins = build(work, perf)
        afp, pfp = anchor_footprint(anchor, cpu), opcost_parent(cmd, env, "proc.fork", cpu, work)
        if not (afp and pfp):
            raise Failure("could not read perf's process or the probe's parent to size proc.fork")
        sized = [spec(size_like(afp, pfp))]
        if "written" in opcost_benches(cmd, env).get("proc.fork", set()):
            sized.append(spec(size_like(afp, pfp, written=True)))
        else:
            log("this opcost's proc.fork has no written=: sized by resident= and mappings= only")
        long_run = ["run", sized[-1], "-p", "1", "-n", "10000", "--cpu", str(cpu), "--no-store", "--no-progress"]
        shapes = {"perf (perf bench syscall fork)": shape_while_running(pinned(anchor.argv, cpu)[0], None, None),
                  "fork_loop linked against perf's libraries": shape_while_running(
                      pinned([str(bins["libs"]), "exit", "100000"], cpu)[0], None, None),
                  f"the probe, {sized[-1]}": shape_while_running([*cmd, *long_run], env, "opcost-probe", 3.0)}
        sides = variants(perf, bins, args.loops, cmd, env, cpu, sized, work)
        runs: dict[str, list] = {name: [] for name in sides}
        log(f"{args.runs} rounds of {len(sides)} variants on CPU {cpu}, seed {seed}, load {load0:.1f}")
        for r in range(args.runs):
            order = list(sides)
            rng.shuffle(order)
            for name in order:
                runs[name].append(sides[name]())
            log(f"round {r + 1}: " + ", ".join(f"{n} {runs[n][-1][0] / 1000:.1f} us" for n in sides))
    rows = table(runs)
    load1 = os.getloadavg()[0]
    print(markdown(rows, shapes))
    print(f"\n{args.runs} interleaved rounds on CPU {cpu} (seed {seed}), perf and the loops {args.loops} forks a run; "
          f"load average {load0:.1f} at the start, {load1:.1f} at the end; {time.monotonic() - t0:.0f} s")
    if args.json:
        write_document(args.json, {"schema": "opcost.validation-fork-parts/1", "opcost": desc, "cpu": cpu,
                                   "runs": args.runs, "loops": args.loops, "seed": seed, "sized": sized,
                                   "load": [load0, load1], "shapes": shapes}, rows)
    return 0


if __name__ == "__main__":
    script_main(main)
