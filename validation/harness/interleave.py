"""Interleaved pairs, the way every comparison script measures: opcost and
the other tool (a hand-written reference, an anchor) for one operation, back
to back, which one first drawn at random, so that machine drift hits both
alike and their ratio is formed within the pair. If either side got under
--min-share of the CPU (cpushare: another task took it), the pair is run
again, up to --retries times; every attempt is kept. A side that gave no
figure because the CPU was taken from it (script.Disturbed: the tool says
so) is run again the same way, and fails the pair when it stays so. A round takes the
operations in a new random order (--seed)."""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from typing import Callable

from validation.harness.script import Disturbed, Failure, log

# One side: runs once, returns its figures with "cpu_share" (None: not known).
Side = Callable[[], dict]
# What an attempt keeps: (the side that ran first, each side's figures, disturbed) -> its record.
Record = Callable[[str, dict[str, dict], bool], dict]


def add_options(ap: argparse.ArgumentParser, min_share: float, min_share_help: str) -> None:
    ap.add_argument("--retries", type=int, default=3,
                    help="run a disturbed pair again up to this many times (default 3; 0: never)")
    ap.add_argument("--min-share", type=float, default=min_share, help=min_share_help)
    ap.add_argument("--seed", type=int, default=None, help="seed for the run order (default: random)")


@dataclass
class Interleave:
    rng: random.Random
    seed: int
    retries: int
    min_share: float
    word: str = "round"             # what the log and the records call a round: "round" or "run"
    isolate_failures: bool = False  # a Failure ends only its operation (recorded), not the script

    @classmethod
    def from_args(cls, ap: argparse.ArgumentParser, args: argparse.Namespace, **kw) -> Interleave:
        if args.retries < 0:
            ap.error("--retries must be >= 0")
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
        return cls(random.Random(seed), seed, args.retries, args.min_share, **kw)

    def pair(self, rnd: int, name: str, sides: dict[str, Side], record: Record) -> dict:
        """One pair, run again while disturbed: the last attempt's record with
        the round, the reruns and the earlier attempts; or, with
        isolate_failures, {round, error, attempts} when a side failed."""
        attempts: list[dict] = []
        no_figure = 0                   # attempts a side gave no figure (Disturbed), run again
        try:
            for attempt in range(1 + self.retries):
                order = list(sides)
                self.rng.shuffle(order)
                try:
                    got = {side: sides[side]() for side in order}
                except Disturbed as e:
                    no_figure += 1
                    if attempt >= self.retries:
                        if attempts:        # the last figures it had, disturbed: kept, as below
                            break
                        raise
                    log(f"{self.word} {rnd}: {name}: disturbed ({e}), again")
                    continue
                shares = [g["cpu_share"] for g in got.values() if g.get("cpu_share") is not None]
                disturbed = bool(shares) and min(shares) < self.min_share
                attempts.append(record(order[0], got, disturbed))
                if not disturbed:
                    break
                log(f"{self.word} {rnd}: {name}: disturbed (CPU share "
                    + ", ".join(f"{s} {got[s].get('cpu_share') or float('nan'):.2f}" for s in sides) + ")"
                    + (", again" if attempt < self.retries else ", kept"))
        except Failure as e:
            if not self.isolate_failures:
                raise
            log(f"{self.word} {rnd}: {name}: {e}")
            return {self.word: rnd, "error": str(e), "attempts": attempts}
        return dict(attempts[-1], **{self.word: rnd}, reruns=len(attempts) - 1 + no_figure, attempts=attempts[:-1],
                    **({"no_figure_reruns": no_figure} if no_figure else {}))

    def rounds(self, n: int, names: list[str], sides: Callable[[str], dict[str, Side]],
               record: Record) -> dict[str, list[dict]]:
        """n rounds over names, each in a new random order (an operation
        whose pair failed is not run again): per name, its pairs in order.
        Logs every round's ratios."""
        got: dict[str, list[dict]] = {k: [] for k in names}
        for rnd in range(1, n + 1):
            order = [k for k in names if not (got[k] and "error" in got[k][-1])]
            self.rng.shuffle(order)
            for k in order:
                got[k].append(self.pair(rnd, k, sides(k), record))
            log(f"{self.word} {rnd}/{n}: " + "  ".join(
                f"{k} " + ("-" if got[k][-1]["ratio"] is None else f"{got[k][-1]['ratio']:.3f}")   # None: a figure <= 0
            for k in names if got[k] and "ratio" in got[k][-1]))
        return got
