"""What the validation scripts that time opcost against a hand-written C
loop share (overhead/run.py, instructions/run.py): building the reference,
running one opcost process and one reference process with the same batch
protocol, how much of the CPU each got, and the whole interleaved
comparison (compare_main); each script brings its operations and band."""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARMUP, SAMPLES = 3, 20
TIMEOUT_S = 600


class Failure(Exception):
    pass


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def default_cpu() -> int:
    return max(os.sched_getaffinity(0))


def build_ref(ref_c: Path, build_dir: Path, cc: str, extra: list[str]) -> Path:
    exe = build_dir / "ref"
    cmd = [cc, "-O2", *extra, "-o", str(exe), str(ref_c)]
    cp = subprocess.run(cmd, capture_output=True, text=True)
    if cp.returncode != 0:
        raise Failure(f"building the reference failed: {' '.join(cmd)}\n{cp.stderr.strip()}")
    return exe


def checkout_opcost(repo: Path, probe: bool = False) -> tuple[list[str], dict[str, str], str]:
    """`python -m opcost` from the checkout at repo (its src/ first on
    PYTHONPATH; probe: also its probe/opcost-probe, via OPCOST_PROBE):
    (argv prefix, env, description)."""
    env = dict(os.environ)
    src = str(repo / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if probe:
        env["OPCOST_PROBE"] = str(repo / "probe" / "opcost-probe")
    return [sys.executable, "-m", "opcost"], env, f"{Path(sys.executable).name} -m opcost (PYTHONPATH={src})"


def script_main(main) -> None:
    """Run a validation script's main(): exit with its code; a Failure is
    one line and exit 2, ^C exit 130."""
    try:
        sys.exit(main())
    except Failure as e:
        log(f"run.py: {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        log("run.py: interrupted")
        sys.exit(130)


def tail(text: str, n: int = 8) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[-n:])


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


def opcost_share(samples: list[dict]) -> float | None:
    """CPU time of the measuring side (+ its helper) over wall time, summed
    over the measured batches: about 1 when nothing else ran on the CPU."""
    cpu = wall = 0
    try:
        for s in samples:
            h = s.get("helper") or {}
            cpu += s["user_ns"] + s["sys_ns"] + h.get("user_ns", 0) + h.get("sys_ns", 0)
            wall += s["wall_ns"]
    except (KeyError, TypeError):
        return None
    return cpu / wall if wall > 0 else None


def run_timed(argv: list[str], *, env: dict[str, str] | None = None, preexec_fn=None,
              timeout: float = TIMEOUT_S) -> tuple[subprocess.CompletedProcess, float, float | None]:
    """Run one program to its end, output captured: (completed, wall seconds,
    CPU share). The scripts run one process at a time, so the change in
    RUSAGE_CHILDREN is this program with all its reaped tasks; CPU share is
    that CPU time over the wall time, about 1 when nothing else took the CPU."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                            timeout=timeout, preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired:
        raise Failure(f"{' '.join(argv)}: no answer within {timeout:g} s") from None
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return cp, wall, (cpu / wall if wall > 0 else None)


def run_ref(exe: Path, op: str, iters: int, cpu: int, rng: random.Random) -> dict:
    argv = [str(exe), op, str(iters), str(WARMUP + SAMPLES), str(cpu)]
    env = dict(os.environ)
    env["OPCOST_PAD"] = "x" * rng.randrange(0, 4097)  # same layout randomisation as opcost's runner
    cp, wall, share = run_timed(argv, env=env)
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


def fmt_ns(x: float) -> str:
    return f"{x:,.1f}"


def compare_main(argv: list[str] | None, *, doc: str, here: Path, ops: list[tuple[str, str, str]],
                 band: str, schema: str, opcost_command, aux_fields: bool = False) -> int:
    """The whole script: options, the interleaved rounds of opcost/reference
    pairs (disturbed pairs run again), the table and the JSON. ops: (name
    shown, opcost spec, ref.c OP); band: default LO,HI; opcost_command():
    (argv prefix, env, description); aux_fields: keep the reference's flush
    and opcost's aux cost per attempt (instruction cold forms)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    ap.add_argument("--cpu", type=int, default=None,
                    help="CPU for opcost, the reference and their helpers (default: the last allowed CPU)")
    ap.add_argument("--json", metavar="OUT", help="write the figures as JSON to OUT")
    ap.add_argument("--check", action="store_true", help="exit 1 when a ratio is outside the band")
    ap.add_argument("--band", default=band, help=f"accepted ratio band LO,HI (default {band})")
    ap.add_argument("--ops", default=",".join(o[0] for o in ops),
                    help="operations to check, comma-separated (default: all)")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"), help="C compiler for ref.c (default $CC or cc)")
    ap.add_argument("--ref-cflags", default="",
                    help="extra flags for building ref.c, e.g. -static (default: none, plain cc -O2)")
    ap.add_argument("--retries", type=int, default=3,
                    help="run a disturbed pair again up to this many times (default 3; 0: never)")
    ap.add_argument("--min-share", type=float, default=0.8,
                    help="a process whose CPU time is under this fraction of its wall time was "
                         "disturbed (default 0.8)")
    ap.add_argument("--seed", type=int, default=None, help="seed for the run order (default: random)")
    args = ap.parse_args(argv)

    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if args.retries < 0:
        ap.error("--retries must be >= 0")
    try:
        lo, hi = (float(x) for x in args.band.split(","))
    except ValueError:
        ap.error(f"--band must be LO,HI, e.g. {band}")
    allowed = os.sched_getaffinity(0)
    cpu = default_cpu() if args.cpu is None else args.cpu
    if cpu not in allowed:
        ap.error(f"--cpu {cpu}: not a CPU this process may use ({', '.join(map(str, sorted(allowed)))})")
    want = [w.strip() for w in args.ops.split(",") if w.strip()]
    by_name = {o[0]: o for o in ops}
    bad = [w for w in want if w not in by_name]
    if bad or not want:
        ap.error(f"--ops: unknown {', '.join(bad) or '(empty)'}; valid: {', '.join(by_name)}")
    ops = [by_name[w] for w in want]
    ref_cflags = args.ref_cflags.split()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)

    cmd, env, cmd_desc = opcost_command()
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"opcost-{here.name}-") as tmp:
        work = Path(tmp)
        ref = build_ref(here / "ref.c", work, args.cc, ref_cflags)
        log(f"opcost: {cmd_desc}; reference: {' '.join([args.cc, '-O2', *ref_cflags])} {here / 'ref.c'}; "
            f"cpu {cpu}; {args.rounds} rounds; seed {seed}")

        # Learn each operation's batch length, so a reference process can run
        # before its opcost partner in the shuffled rounds. Discarded.
        iters: dict[str, int] = {}
        pre = list(ops)
        rng.shuffle(pre)
        for name, spec, _ in pre:
            iters[name] = run_opcost(cmd, env, spec, cpu, work)["iters"]
            log(f"calibration: {name}: {iters[name]} iterations per batch")

        rounds: dict[str, list[dict]] = {o[0]: [] for o in ops}
        for rnd in range(args.rounds):
            order = list(ops)
            rng.shuffle(order)
            for name, spec, refop in order:
                # One pair: the two processes back to back, in random order.
                # If another task took the CPU from either of them (CPU time
                # well under wall time), the pair is run again, up to
                # --retries times; every attempt is kept in the JSON.
                attempts = []
                for attempt in range(1 + args.retries):
                    sides = ["opcost", "ref"]
                    rng.shuffle(sides)
                    got = {}
                    for side in sides:
                        if side == "opcost":
                            got[side] = run_opcost(cmd, env, spec, cpu, work)
                            iters[name] = got[side]["iters"]
                        else:
                            got[side] = run_ref(ref, refop, iters[name], cpu, rng)
                    a, b = got["opcost"], got["ref"]
                    shares = [x["cpu_share"] for x in (a, b) if x["cpu_share"] is not None]
                    disturbed = bool(shares) and min(shares) < args.min_share
                    attempts.append({
                        "first": sides[0], "opcost_ns": a["median_ns"], "ref_ns": b["median_ns"],
                        "ratio": a["median_ns"] / b["median_ns"], "opcost_iters": a["iters"],
                        "ref_iters": b["iters"], "opcost_cpu_share": a["cpu_share"],
                        "ref_cpu_share": b["cpu_share"], "disturbed": disturbed,
                        "opcost_overhead_ns": a.get("overhead_ns"),
                        **({"ref_flush_ns": b.get("flush_ns"), "opcost_aux_ns": a.get("aux_ns")}
                           if aux_fields else {}),
                        "opcost_batches_ns": a["batches_ns"], "ref_batches_ns": b["batches_ns"],
                    })
                    if not disturbed:
                        break
                    log(f"round {rnd + 1}: {name}: disturbed (CPU share opcost "
                        f"{a['cpu_share'] or float('nan'):.2f}, ref {b['cpu_share'] or float('nan'):.2f})"
                        + (", again" if attempt < args.retries else ", kept"))
                final = dict(attempts[-1], round=rnd + 1, reruns=len(attempts) - 1, attempts=attempts[:-1])
                rounds[name].append(final)
            log(f"round {rnd + 1}/{args.rounds}: " + "  ".join(
                f"{n} {rounds[n][-1]['ratio']:.3f}" for n, _, _ in ops))

    rows = []
    for name, spec, refop in ops:
        rs = rounds[name]
        ratios = [r["ratio"] for r in rs]
        med = statistics.median(ratios)
        rows.append({
            "operation": name, "opcost_spec": spec, "ref_op": refop,
            "opcost_median_ns": statistics.median(r["opcost_ns"] for r in rs),
            "ref_median_ns": statistics.median(r["ref_ns"] for r in rs),
            "ratio": med, "ratio_min": min(ratios), "ratio_max": max(ratios),
            "pass": lo <= med <= hi, "reruns": sum(r["reruns"] for r in rs),
            "disturbed_kept": sum(r["disturbed"] for r in rs), "rounds": rs,
        })

    head = ("operation", "opcost ns", "reference ns", "opcost/ref", "per-round min-max", "reruns", "")
    table = [head] + [(r["operation"], fmt_ns(r["opcost_median_ns"]), fmt_ns(r["ref_median_ns"]),
                       f"{r['ratio']:.3f}", f"{r['ratio_min']:.3f}-{r['ratio_max']:.3f}",
                       f"{r['reruns']}" + (f" ({r['disturbed_kept']} kept)" if r["disturbed_kept"] else ""),
                       "PASS" if r["pass"] else "FAIL") for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    for k, t in enumerate(table):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(t, widths))).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print(f"\nmedians over {args.rounds} rounds on CPU {cpu}; ratio = median of per-round "
          f"opcost/ref; band {lo:g}-{hi:g}; {time.monotonic() - t_start:.0f} s")
    print(f"reruns: pairs run again because a side's CPU time was under {args.min_share:g} of its wall time "
          f"(another task on CPU {cpu}); 'kept': still disturbed after --retries {args.retries}")

    if args.json:
        doc = {
            "schema": schema,
            "opcost": cmd_desc, "cc": args.cc, "ref_cflags": ["-O2", *ref_cflags],
            "cpu": cpu, "rounds": args.rounds, "seed": seed,
            "warmup": WARMUP, "samples": SAMPLES, "band": [lo, hi],
            "retries": args.retries, "min_share": args.min_share,
            "machine": {"node": platform.node(), "kernel": platform.release(), "arch": platform.machine()},
            "operations": rows,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    failed = [r["operation"] for r in rows if not r["pass"]]
    return 1 if (args.check and failed) else 0
