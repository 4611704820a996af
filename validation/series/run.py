#!/usr/bin/env python3
"""Series: is a known step located, and do flat series stay flat (issue 14).

Real series: `opcost series --run BENCH --over spin=1|...|1+k|...` of this
checkout, spin=1 before label j and spin=1+k from j on (j random in 1..L-1),
k chosen so the extra dependent adds cost 3% or 5% of the benchmark (the
probe measures the chain alone: validation/compare/power.py's method), 10
and 30 labels; and flat series (spin=1 throughout). Every label runs in each
round in a fresh random order, as `series --run` does. Goals (docs/statistics.md):
the step located within one label in >= 90% of series, <= 0.05 false change
points per flat series.

Simulation (--simulate, fast): the detector (opcost.changepoint.analyse, the
same code) on synthetic log-normal per-process medians with the noise sigma
measured in the real series (or --sigma) and the same processes per label,
>= 200 series per case. The bootstrap resamples are cut to 1000 there: they
set the CIs only, not which change points are confirmed (that is the p-value
and the ratio against delta).

Bounded: --series N per case and --time-limit seconds for the real part
(cases are visited round-robin, so a time limit leaves them balanced).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))
from validation.harness.checkout import build_probe, checkout_opcost, probe_header  # noqa: E402

STEPS = (0.03, 0.05)
LENGTHS = (10, 30)


def spin_for(bench: str, target: float, base_ns: float, cpu: str) -> tuple[int, float]:
    """k extra adds whose measured alone-cost is closest to target * base
    (power.py's search, for any benchmark): (k, extra ns)."""
    one = probe_header(bench, 1, cpu)["spin"]["ns"]
    want = target * base_ns
    per_add = max(1e-3, (probe_header(bench, 201, cpu)["spin"]["ns"] - one) / 200)
    k = max(1, round(want / per_add))
    tried: dict[int, float] = {}
    for _ in range(5):
        tried[k] = probe_header(bench, 1 + k, cpu)["spin"]["ns"] - one
        nxt = max(1, round(k * want / tried[k])) if tried[k] > 0 else k * 2
        if nxt in tried:
            break
        k = nxt
    k = min(tried, key=lambda j: abs(tried[j] - want))
    return k, tried[k]


def opcost(args: list[str]) -> dict:
    """One `opcost series --run` of this checkout, its opcost.series/1 document."""
    cmd, env, _ = checkout_opcost(probe=True)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "series.json"
        cp = subprocess.run([*cmd, "series", *args, "--no-store", "--no-progress", "--json", str(out)],
                            capture_output=True, text=True, env=env)
        if cp.returncode != 0:
            raise SystemExit(f"opcost series failed ({cp.returncode}): {cp.stderr.strip()[-500:]}")
        return json.loads(out.read_text())


def base_cost(bench: str, opts: list[str]) -> float:
    doc = opcost(["--run", bench, "--over", "spin=1|1|1", *opts])
    return statistics.median(lb["median_ns"] for lb in doc["labels"])


def score(doc_cps: list[int], j: int | None) -> tuple[bool, int]:
    """(located within one label, false change points): with no step every
    change point is false; with one, those more than one label away are."""
    if j is None:
        return False, len(doc_cps)
    near = [c for c in doc_cps if abs(c - j) <= 1]
    return bool(near), len(doc_cps) - min(1, len(near))


def cases() -> list[tuple[float, int]]:
    return [(s, n) for s in STEPS for n in LENGTHS] + [(0.0, n) for n in LENGTHS]


def table(title: str, rows: dict, note: str) -> str:
    out = [title, f"{'case':<16} {'series':>6}  {'located within 1':>16}  {'false cps/series':>16}"]
    for (step, n), got in rows.items():
        if not got:
            continue
        name = f"{'flat' if not step else f'step {step:.0%}'}, {n} labels"
        loc = f"{sum(g[0] for g in got)}/{len(got)} {sum(g[0] for g in got) / len(got):.0%}" if step else "-"
        out.append(f"{name:<16} {len(got):>6}  {loc:>16}  {sum(g[1] for g in got) / len(got):>16.3f}")
    steps = [g for (s, _), got in rows.items() if s for g in got]
    flats = [g for (s, _), got in rows.items() if not s for g in got]
    if steps:
        share = sum(g[0] for g in steps) / len(steps)
        out.append(f"step located within one label: {share:.1%} of {len(steps)} series (goal >= 90%): "
                   + ("holds" if share >= 0.9 else "does NOT hold"))
    if flats:
        fp = sum(g[1] for g in flats) / len(flats)
        out.append(f"false change points per flat series: {fp:.3f} over {len(flats)} series (goal <= 0.05): "
                   + ("holds" if fp <= 0.05 else "does NOT hold"))
    out.append(note)
    return "\n".join(out)


def real(bench: str, args, rng: random.Random, deadline: float) -> tuple[dict, list[float]]:
    opts = ["-p", str(args.processes), "-n", str(args.samples), "-w", "1", "--target-ms", str(args.target_ms),
            "--cpu", args.cpu]
    base = base_cost(bench, opts)
    ks = {s: spin_for(bench, s, base, args.cpu.split(",")[0]) for s in STEPS}
    print(f"{bench}: spin=1 costs {base:.1f} ns; " + "; ".join(
        f"{s:.0%}: k={k} adds cost {x:.1f} ns ({x / base:.2%})" for s, (k, x) in ks.items()), flush=True)
    rows: dict = {c: [] for c in cases()}
    sigmas: list[float] = []
    for i in range(args.series):
        for step, n in cases():
            if time.monotonic() > deadline:
                return rows, sigmas
            j = rng.randrange(1, n) if step else None
            k = ks[step][0] if step else 0
            values = "|".join(str(1 + k if j is not None and lbl >= j else 1) for lbl in range(n))
            t = time.monotonic()
            doc = opcost(["--run", bench, "--over", f"spin={values}", "--seed", str(rng.randrange(10**6)), *opts])
            cps = [c["index"] for c in doc["change_points"]]
            rows[(step, n)].append(score(cps, j))
            sigmas.append(doc["noise"]["sigma"])
            print(f"  {bench} {'flat' if not step else f'{step:.0%}'} L={n} j={j} found {cps} "
                  f"sigma {doc['noise']['sigma']:.2%} ({time.monotonic() - t:.0f} s)", flush=True)
    return rows, sigmas


def simulate(sigma: float, processes: int, per_case: int, seed: int) -> dict:
    import warnings

    import numpy as np

    from opcost import changepoint

    rng = np.random.default_rng(seed)
    rows: dict = {c: [] for c in cases()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for step, n in cases():
            for _ in range(per_case):
                j = int(rng.integers(1, n)) if step else None
                labels = [100.0 * np.exp(rng.normal(0.0, sigma, processes)
                                         + (np.log1p(step) if j is not None and i >= j else 0.0)) for i in range(n)]
                a = changepoint.analyse(labels, resamples=1000, table=False)
                rows[(step, n)].append(score([c["index"] for c in a["change_points"]], j))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benches", default="syscall.null,ctx.pipe")
    ap.add_argument("--series", type=int, default=50, help="real series per case and benchmark (default 50)")
    ap.add_argument("--time-limit", type=float, default=3600, help="seconds for the real series (default 3600)")
    ap.add_argument("--processes", "-p", type=int, default=5, help="processes per label (default 5)")
    ap.add_argument("--samples", "-n", type=int, default=30)
    ap.add_argument("--target-ms", type=float, default=1,
                    help="short batches: on a shared machine most then escape preemption (default 1)")
    ap.add_argument("--cpu", default="1", help="the measuring CPU (ctx.pipe's helper goes where opcost puts it)")
    ap.add_argument("--simulate", type=int, default=200, metavar="N",
                    help="simulated series per case (default 200; 0: none)")
    ap.add_argument("--sigma", type=float, default=None,
                    help="noise of the simulation (log units; default: the median measured in the real series)")
    ap.add_argument("--no-real", action="store_true", help="only the simulation")
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    sigmas: dict[str, list[float]] = {}
    if not args.no_real:
        build_probe()
        benches = [b.strip() for b in args.benches.split(",") if b.strip()]
        for i, bench in enumerate(benches):
            # each benchmark gets its share of what is left of the time
            left = args.time_limit - (time.monotonic() - t0)
            rows, sigmas[bench] = real(bench, args, rng, time.monotonic() + left / (len(benches) - i))
            print(table(f"\nreal series, {bench} (opcost series --run {bench} --over spin=..., -p {args.processes} "
                        f"-n {args.samples} --target-ms {args.target_ms:g} --cpu {args.cpu})", rows,
                        f"{time.monotonic() - t0:.0f} s so far"), flush=True)
    if args.simulate:
        wanted = ({b: statistics.median(s) for b, s in sigmas.items() if s} if args.sigma is None
                  else {"--sigma": args.sigma})
        if not wanted:
            wanted = {"default 1%": 0.01}
        for name, sigma in wanted.items():
            t = time.monotonic()
            rows = simulate(sigma, args.processes, args.simulate, args.seed)
            print(table(f"\nsimulation: log-normal per-process medians, sigma {sigma:.2%} ({name}), "
                        f"{args.processes} processes per label", rows,
                        f"{time.monotonic() - t:.0f} s"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
