#!/usr/bin/env python3
"""The whole test suite N times in a row, each time from a fresh clone.

    python3 tools/suite_runs.py N [--hog [CPU]] [--pytest-args ARGS] [--pytest-only]

Each run clones this repository's committed HEAD (uncommitted changes are not
in it) into a new temporary directory, runs `./test.sh` there (or, with
--pytest-only, only the probes' builds and test.sh's pytest line: no apt, no
`pip install .`, no mypy), and prints one line: passed, failed, skipped, the
pytest phase's wall time (from pytest's own JUnit report), the whole command's,
and the failed tests' names. --hog keeps one CPU busy (a spinning process
pinned there, the last CPU unless given) for the whole of every run; it is
bounded by the runs' time limit and killed at the end. Each run's output is
kept in --out (a new temporary directory by default, named at the start).
Exit 0 when every run passed, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = ["python3", "-m", "pytest", "-q", "-n", "auto", "--dist", "loadgroup"]   # test.sh's last line
# test.sh's probe builds: the host's and the three cross probes, before pytest
BUILD = " && ".join(["make -C probe -s"] + [f"make -C probe -s CC={cc}-gcc OUT=build/opcost-probe-{arch}" for cc, arch in
                                              (("i686-linux-gnu", "i386"), ("aarch64-linux-gnu", "aarch64"),
                                               ("arm-linux-gnueabihf", "arm"))])


class Parser(argparse.ArgumentParser):
    def error(self, message: str):   # one line, exit 2
        self.exit(2, f"suite_runs.py: {message}\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = Parser(prog="suite_runs.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, help="how many runs, one after another")
    ap.add_argument("--hog", nargs="?", const=-1, type=int, metavar="CPU",
                    help="a CPU hog pinned on CPU (default: the last one) during every run")
    ap.add_argument("--pytest-args", default="", metavar="ARGS",
                    help="more arguments for pytest, one string (e.g. 'tests/test_cli.py')")
    ap.add_argument("--pytest-only", action="store_true",
                    help="build the probe and run pytest only (not test.sh's installs and checks)")
    ap.add_argument("--timeout", type=float, default=5400, metavar="S",
                    help="each run's time limit in seconds (default 5400, CI's)")
    ap.add_argument("--repo", type=Path, default=ROOT, help="the repository to clone (default: this one)")
    ap.add_argument("--out", type=Path, help="directory for each run's output (default: a new temporary one)")
    a = ap.parse_args(argv)
    if a.n < 1:
        ap.error(f"N {a.n}: give at least 1 run")
    if not (a.repo / ".git").exists():
        ap.error(f"--repo {a.repo}: not a git checkout; give the top of one")
    if a.timeout <= 0:
        ap.error(f"--timeout {a.timeout:g}: give a positive number of seconds")
    cpus = sorted(os.sched_getaffinity(0))
    if a.hog == -1:
        a.hog = cpus[-1]
    if a.hog is not None and a.hog not in cpus:
        ap.error(f"--hog {a.hog}: not a CPU this process may use (it may use {','.join(map(str, cpus))})")
    try:
        a.pytest_args = shlex.split(a.pytest_args)
    except ValueError as e:
        ap.error(f"--pytest-args: {e}; give the arguments as a shell would split them")
    return a


def start_hog(cpu: int, bound_s: float, tag: str) -> subprocess.Popen:
    """A spinning process on `cpu`, ended by `timeout` after bound_s at the
    latest. Its command line ends with `tag` (the --out directory): this
    tool's hog is told apart from another's (a test of this tool run beside
    a hog of this tool)."""
    return subprocess.Popen(["timeout", "-s", "KILL", str(int(bound_s)), "taskset", "-c", str(cpu),
                             sys.executable, "-c", "while True: pass", tag],
                            stdin=subprocess.DEVNULL, start_new_session=True)


def stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)   # its own session: timeout and the spinner
    except ProcessLookupError:
        pass
    p.wait()


def junit_counts(path: Path) -> dict | None:
    """passed/failed/skipped, pytest's time and the failed tests, from pytest's JUnit XML."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tests = sum(int(s.get("tests", 0)) for s in suites)
    failures = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    failed = []
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            mod = case.get("classname", "").replace(".", "/")
            failed.append(f"{mod}.py::{case.get('name')}" if mod else str(case.get("name")))
    return {"passed": tests - failures - skipped, "failed": failures, "skipped": skipped,
            "time": sum(float(s.get("time", 0)) for s in suites), "names": failed}


def one_run(i: int, a: argparse.Namespace, out: Path) -> bool:
    work = Path(tempfile.mkdtemp(prefix=f"opcost-suite-run{i}-"))
    log = out / f"run{i}.log"
    junit = out / f"run{i}.xml"
    try:
        clone = work / "opcost"
        cp = subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(a.repo), str(clone)],
                            capture_output=True, text=True)
        if cp.returncode:
            print(f"run {i}/{a.n}: git clone failed: {cp.stderr.strip()}", flush=True)
            return False
        env = dict(os.environ)
        shared = a.repo.resolve().parent / "shared"   # test.sh looks beside the checkout; the clone has nothing beside it
        if "OPCOST_SHARED" not in env and shared.is_dir():
            env["OPCOST_SHARED"] = str(shared)
        pytest_args = [f"--junitxml={junit}", *a.pytest_args]
        if a.pytest_only:
            cmd = ["bash", "-c", BUILD + ' && exec "$@"', "run", *PYTEST, *pytest_args]
        else:
            cmd = ["./test.sh", *pytest_args]
        t0 = time.monotonic()
        with open(log, "wb") as f:
            p = subprocess.Popen(cmd, cwd=clone, env=env, stdin=subprocess.DEVNULL, stdout=f,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = p.wait(timeout=a.timeout)
            except subprocess.TimeoutExpired:
                stop(p)
                rc = None
        wall = time.monotonic() - t0
        c = junit_counts(junit)
        if c is None:
            why = "timed out" if rc is None else f"exited {rc}"
            print(f"run {i}/{a.n}: the test command {why} after {wall:.0f} s before pytest wrote its "
                  f"results (see {log})", flush=True)
            return False
        names = ", ".join(c["names"][:20]) + (f" (+{len(c['names']) - 20} more)" if len(c["names"]) > 20 else "")
        end = " TIMED OUT" if rc is None else ("" if rc == 0 else f" exit {rc}")
        print(f"run {i}/{a.n}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped; "
              f"pytest {c['time']:.0f} s, whole command {wall:.0f} s{end}"
              + (f"; failed: {names}" if names else ""), flush=True)
        return rc == 0 and c["failed"] == 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="opcost-suite-runs-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"{a.n} run(s) of {'pytest' if a.pytest_only else './test.sh'} from fresh clones of "
          f"{subprocess.run(['git', '-C', str(a.repo), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}"
          f"{f', a CPU hog on CPU {a.hog}' if a.hog is not None else ''}; output in {out}", flush=True)
    hog = start_hog(a.hog, a.n * a.timeout, str(out)) if a.hog is not None else None
    ok = True
    try:
        for i in range(1, a.n + 1):
            ok = one_run(i, a, out) and ok
    finally:
        if hog is not None:
            stop(hog)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
