#!/usr/bin/env python3
"""Bimodal process medians: is the `bimodal` flag (stats.levels) right, and
does `outliers` (stats.mad_outliers) leave levels alone? Seeded simulation
with opcost's own functions (docs/statistics.md, "Bimodal processes").

Per scenario and number of processes n, over --trials simulated variants:
- flagged: how often stats.levels finds two levels (on one level: the
  false-flag rate; on two: the detection rate), and, when Hartigan's dip
  test is installed (`pip install diptest`), how often it rejects
  unimodality at 5% (the method not chosen, for comparison);
- possible: how often the minor level holds >= 2 processes at all (one
  process alone is an outlier by definition, so this bounds detection);
- level flagged as outliers: how often >= 2 processes of the minor level
  are flagged by stats.mad_outliers, and by the rule before (every value
  beyond 3 MADs);
- the CV: `cv` (SD-based, what summarize reports and `unstable` tests),
  the robust CV (1.4826 MAD / median) and the true CV of the mixture.

Scenarios: one level (normal at CV 2% and 5%, log-normal sigma 0.3,
Student t with 3 degrees of freedom, the upper level of the real A/A pool
alone), two levels (70/30 and 83/17 at level ratios 0.56 and 0.9, spread
within each level 1%, 2%, 5%), and the real A/A pool itself
(validation/compare/data/aa_pool.json: 17% of syscall.null's processes at
about 0.56 of the median), resampled.

--table prints stats.LEVEL_CRITICAL (the statistic's 99% point for one
normal level, 200,000 seeded samples per n).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
from opcost import stats  # noqa: E402

POOL = ROOT / "validation" / "compare" / "data" / "aa_pool.json"
TABLE_N = list(range(4, 61)) + [70, 80, 90, 100, 120, 150, 200, 250, 300, 400, 500, 700, 1000]


def table(reps: int, seed: int) -> None:
    out = []
    for n in TABLE_N:
        out.append(f"{n}: {stats.level_null(n, 1 - stats.LEVEL_ALPHA, reps, seed + n):.4g}")
    lines, line = [], ""
    for item in out:
        if len(line) + len(item) + 2 > 100:
            lines.append(line.rstrip())
            line = ""
        line += item + ", "
    lines.append(line.rstrip().rstrip(","))
    print("LEVEL_CRITICAL: dict[int, float] = {\n    " + "\n    ".join(lines) + "\n}")


def scenarios(pool: dict) -> list[tuple[str, object]]:
    upper = np.asarray([v for v in pool["syscall.null"] if v > 0.8])
    out: list[tuple[str, object]] = [
        ("one level: normal, CV 2%", lambda r, n: (1 + 0.02 * r.standard_normal(n), None)),
        ("one level: normal, CV 5%", lambda r, n: (1 + 0.05 * r.standard_normal(n), None)),
        ("one level: log-normal, sigma 0.3", lambda r, n: (np.exp(0.3 * r.standard_normal(n)), None)),
        ("one level: Student t3, scale 2%", lambda r, n: (1 + 0.02 * r.standard_t(3, n), None)),
        ("one level: real pool above 0.8", lambda r, n: (r.choice(upper, n), None)),
    ]
    for major, minor in ((70, 30), (83, 17)):
        for ratio in (0.56, 0.9):
            for within in (0.01, 0.02, 0.05):
                def gen(r, n, p=minor / 100, ratio=ratio, within=within):
                    low = r.random(n) < p
                    return np.where(low, ratio, 1.0) * np.exp(within * r.standard_normal(n)), low
                out.append((f"{major}/{minor} at {ratio}, within {within:.0%}", gen))
    for name, vals in pool.items():
        a = np.asarray(vals)
        def real(r, n, a=a):
            x = r.choice(a, n)
            return x, x < 0.8
        out.append((f"real A/A pool: {name}", real))
    return out


def run(trials: int, ns: list[int], seed: int) -> None:
    try:
        import diptest  # type: ignore[import-not-found]
    except ImportError:
        diptest = None
    pool = json.loads(POOL.read_text())["pools"]
    print(f"{trials} simulated variants per row, seed {seed}; levels at alpha {stats.LEVEL_ALPHA}, "
          f">= {stats.LEVEL_MIN_PROCESSES} processes a level, >= {stats.LEVEL_MIN_REL:.0%} apart\n")
    head = ("| scenario | n | flagged bimodal | dip test p < 0.05 | minor level >= 2 processes | "
            "level flagged as outliers: now / before | minor share / location found | cv / robust CV / true CV |")
    print(head)
    print("|" + "---|" * head.count("|")[:-1] if False else "|---|---|---|---|---|---|---|---|")
    for name, gen in scenarios(pool):
        for n in ns:
            rng = np.random.default_rng([seed, n, abs(hash(name)) % (2 ** 31)])
            flag = dip = possible = lvl_now = lvl_before = 0
            share, loc, cvs, rcvs, xs_all = [], [], [], [], []
            for _ in range(trials):
                x, low = gen(rng, n)
                xs_all.append(x)
                lv = stats.levels(x)
                flag += lv is not None
                if lv is not None:
                    minor = lv["levels"][-1]
                    share.append(minor["share"])
                    loc.append(minor["of_median"])
                if diptest is not None:
                    dip += diptest.diptest(np.log(x))[1] < 0.05
                cvs.append(stats.cv(x))
                med = np.median(x)
                rcvs.append(1.4826 * np.median(np.abs(x - med)) / med)
                if low is not None:
                    minor_mask = low if low.sum() * 2 <= n else ~low
                    possible += minor_mask.sum() >= stats.LEVEL_MIN_PROCESSES
                    now = set(stats.mad_outliers(x))
                    mad = 1.4826 * np.median(np.abs(x - med))
                    before = set(np.nonzero(np.abs(x - med) > stats.OUTLIER_MADS * mad)[0].tolist()) if mad else set()
                    idx = set(np.nonzero(minor_mask)[0].tolist())
                    lvl_now += len(idx & now) >= 2
                    lvl_before += len(idx & before) >= 2
            allx = np.concatenate(xs_all)
            true_cv = allx.std() / allx.mean()
            found = f"{np.mean(share):.0%} at {np.mean(loc):.2f}" if share else "-"
            dip_s = f"{dip / trials:.3f}" if diptest is not None else "n/a"
            pos = f"{possible / trials:.3f}" if name[0].isdigit() or name.startswith("real") else "-"
            outl = f"{lvl_now / trials:.3f} / {lvl_before / trials:.3f}" if pos != "-" else "-"
            print(f"| {name} | {n} | {flag / trials:.3f} | {dip_s} | {pos} | {outl} | {found} | "
                  f"{np.mean(cvs):.1%} / {np.mean(rcvs):.1%} / {true_cv:.1%} |")
        sys.stdout.flush()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=2000, help="simulated variants per row")
    ap.add_argument("--n", default="10,20,40", help="processes per variant")
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--table", action="store_true", help="print stats.LEVEL_CRITICAL and stop")
    ap.add_argument("--table-reps", type=int, default=200_000)
    args = ap.parse_args()
    t0 = time.time()
    if args.table:
        table(args.table_reps, args.seed)
    else:
        run(args.trials, [int(v) for v in args.n.split(",")], args.seed)
    print(f"\n({time.time() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
