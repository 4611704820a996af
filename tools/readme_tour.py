#!/usr/bin/env python3
"""The README's tour, from today's code: runs each `$ opcost ...` command of
the README's blocks (TOUR below) in a private store, keeps the parts of its
output TOUR names, and prints the blocks; `--write` puts them into README.md.

The timed commands (`run`, `ab`, `variants`) are real runs, on this machine:
take them at rest and say when and at what load (`--write` prints the line
to put in the README). `series --run` runs on the fake clock (100 ns per
operation plus the injected spin), since its point is the output's shape.
`--fake` runs everything on the fake clock (what tests/test_readme.py does,
comparing the README's blocks with these line by line, figures aside). The
fleet's block needs the tests' sshd hosts and is not made here
(tests/test_readme.py checks it against a real fleet run).

    python3 tools/readme_tour.py            # print the blocks
    python3 tools/readme_tour.py --write    # and put them into README.md
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FAKE = ["--fake-clock", "100"]
MORE = "..."


@dataclass(frozen=True)
class Step:
    """One `$ opcost` line: its command, whether it is timed for real (else
    on the fake clock), and what of its output the README shows: a list of
    paragraphs (blank-line separated), each named by a regex its first line
    matches (searched in order) with how many of its lines (None: all), or
    MORE, which prints `...` for what is left out there."""
    command: str
    real: bool
    show: tuple


TOUR: tuple[tuple[Step, ...], ...] = (
    (Step("run syscall.null ctx.pipe signal.catch -p 5 -n 10", True,
          ((r"^benchmark ", None), MORE)),),
    (Step("report --last --format markdown", False,
          ((r"^\*\*run ", None), (r"^\| benchmark ", None), MORE)),),
    (Step("ab syscall.null --a spin=1 --b spin=201", True,
          ((r"^A/B, interleaved", None), (r"^benchmark ", None), (r"^sequential design", None),
           (r"^(geometric mean|\d+ benchmarks? \()", None), MORE)),),
    (Step("series --run syscall.null --over 'spin=1|1|1|201|201|201' -p 5 -n 10", False,
          ((r"^syscall\.null by spin", 1), MORE, (r"^\s*spin ", None), (r"^change points", 2), MORE)),),
    (Step("variants docs/examples/div.c -D DIV -D SHIFT -p 6", True,
          (MORE, (r"^benchmark ", None), MORE, (r"^benchmark ", None), MORE)),),
    # exact counts under qemu-x86_64 (the same on the fake clock: counts are not timings)
    (Step("ab syscall.null --a spin=1 --b spin=11 --counters instructions:u --verdict-on instructions:u -p 4", True,
          ((r"^benchmark ", None), MORE)),),
)


def paragraphs(text: str) -> list[list[str]]:
    out: list[list[str]] = []
    cur: list[str] = []
    for line in text.splitlines():
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


class Missing(Exception):
    """A paragraph TOUR names is not in the output: the output changed."""


def trim(step: Step, text: str) -> list[str]:
    """The lines of `text` the README shows for `step`."""
    paras = paragraphs(text)
    lines: list[str] = []
    at = 0
    for item in step.show:
        if item == MORE:
            lines.append(MORE)
            continue
        pattern, n = item
        while at < len(paras) and not re.search(pattern, paras[at][0]):
            at += 1
        if at == len(paras):
            raise Missing(f"`opcost {step.command}`: no paragraph starting like /{pattern}/ in its output:\n{text}")
        if lines and lines[-1] != MORE:
            lines.append("")
        lines += paras[at][:n]
        at += 1
    return lines


def argv_of(step: Step, fake: bool) -> list[str]:
    argv = shlex.split(step.command)
    measuring = argv[0] in ("run", "ab", "variants") or (argv[0] == "series" and "--run" in argv)
    return argv + (FAKE if measuring and (fake or not step.real) else [])


def run(argv: list[str], data_home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPCOST_PROBE"}
    env.update(PYTHONPATH=str(ROOT / "src"), XDG_DATA_HOME=str(data_home), XDG_CACHE_HOME=str(data_home / "cache"),
               COLUMNS="400")
    cp = subprocess.run([sys.executable, "-m", "opcost", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=900, stdin=subprocess.DEVNULL)
    if cp.returncode != 0:
        raise SystemExit(f"readme_tour: opcost {' '.join(argv)}: exit {cp.returncode}\n{cp.stderr}")
    return cp.stdout


def tour(fake: bool, data_home: Path) -> list[list[str]]:
    """Each block's lines, `$ opcost ...` and the output shown under it."""
    blocks = []
    for steps in TOUR:
        lines = []
        for step in steps:
            lines.append(f"$ opcost {step.command}")
            lines += trim(step, run(argv_of(step, fake), data_home))
        blocks.append(lines)
    return blocks


def readme_blocks(text: str) -> list[tuple[int, int, list[str]]]:
    """The README's fenced blocks that TOUR makes: (first line, end line, lines)."""
    lines = text.splitlines()
    firsts = {f"$ opcost {steps[0].command}" for steps in TOUR}
    out, start = [], None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if start is None:
                start = i
            else:
                body = lines[start + 1:i]
                if body and body[0] in firsts:
                    out.append((start + 1, i, body))
                start = None
    return out


def write(blocks: list[list[str]]) -> None:
    text = README.read_text()
    lines = text.splitlines()
    found = {b[2][0]: b for b in readme_blocks(text)}
    for block in reversed(sorted(blocks, key=lambda b: found[b[0]][0])):
        start, end, _ = found[block[0]]
        lines[start:end] = block
    README.write_text("\n".join(lines) + "\n")


def machine_line() -> str:
    import datetime
    import platform

    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.machine())
    load = Path("/proc/loadavg").read_text().split()[:3]
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, {model}, "
            f"Linux {platform.release()}, load average {' '.join(load)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fake", action="store_true", help="every measuring command on the fake clock")
    ap.add_argument("--write", action="store_true", help="put the blocks into README.md")
    a = ap.parse_args()
    before = machine_line()
    with tempfile.TemporaryDirectory(prefix="opcost-readme-") as d:
        blocks = tour(a.fake, Path(d))
    after = machine_line()
    for b in blocks:
        print("```\n" + "\n".join(b) + "\n```\n")
    print(f"taken from {before}\n        to {after}", file=sys.stderr)
    if a.write:
        write(blocks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
