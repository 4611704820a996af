"""The golden outputs of `run`, `ab`, `compare`, `variants` and `show` on the
fake clock (and the html pages of the run and the A/B): captured before the reshape of issue 12 and compared after every
change (tests/test_golden.py), so a change of behaviour is seen, never
assumed. `python3 tests/golden_cases.py` rewrites tests/golden/ (do it only
for an intended change, and say which in the commit).

What varies between runs is masked: pids, CLOCK_MONOTONIC_RAW stamps, wall
times, dates, the temporary directory, the checkout's path, the machine's
environment."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
FAKE = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "--cpu", "0", "--no-progress"]
PROGRAM = "#include <stdio.h>\nint main(void) { volatile int x = 0; for (int i = 0; i < 1000; i++) x += i; return 0; }\n"

# name -> argv (after `opcost`); files they write are named in the argv
CASES = {
    "run": ["run", "syscall.null", "ctx.pipe:mode=process|thread", "signal.install", *FAKE, "-p", "3",
            "--json", "run.json", "--label", "base"],
    "run2": ["run", "syscall.null", "ctx.pipe:mode=process|thread", "signal.install", *FAKE, "-p", "4",
             "--label", "next"],
    "ab": ["ab", "syscall.null", "signal.install", "--a", "spin=1", "--b", "spin=21", *FAKE, "-p", "6",
           "--json", "ab.json", "--label", "ab"],
    "compare": ["compare", "base", "next", "--json", "compare.json"],
    "show": ["show", "base"],
    "show_ab": ["show", "ab"],
    "variants": ["variants", "prog.c", "-DA", "-DB", "--fake-clock", "1000", "-p", "3", "--cpu", "0",
                 "--no-progress", "--json", "variants.json"],
    # formats added since (issue 12): csv of a result and of a comparison
    "run_csv": ["run", "syscall.null", "ctx.pipe:mode=process|thread", *FAKE, "-p", "3", "--no-store",
                "--export", "csv:run.csv"],
    "compare_csv": ["compare", "base", "next", "--export", "csv:compare.csv"],
    # opcost report (issue 15): each format on stored runs and on a comparison
    "report_text": ["report", "base"],
    "report_markdown": ["report", "base", "next", "-f", "markdown"],
    "report_go": ["report", "base", "-f", "go"],
    "report_hyperfine": ["report", "base", "-f", "hyperfine-json"],
    "report_csv": ["report", "--last", "-f", "csv"],
    "report_json": ["report", "label:next", "-f", "json", "-o", "report.json"],
    "report_ab_markdown": ["report", "ab", "-f", "markdown"],
    "report_compare_text": ["report", "--compare", "base", "next", "-f", "text"],
    "report_compare_markdown": ["report", "--compare", "base", "next", "-f", "markdown"],
    "report_compare_hyperfine": ["report", "--compare", "base", "next", "-f", "hyperfine-json"],
    # a comparison with notes (inconclusive at +3%, 3 processes): stored last, so --last above is unchanged
    "run_100": ["run", "syscall.null", *FAKE, "-p", "3", "--label", "n100"],
    "run_103": ["run", "syscall.null", *FAKE[:1], "103", *FAKE[2:], "-p", "3", "--label", "n103"],
    "report_compare_notes_markdown": ["report", "--compare", "n100", "n103", "-f", "markdown"],
}
HTML_PAGES = ("run", "ab")   # name.html from name.json
_MASK_KEYS = {"pid", "start_raw_ns", "wall_s", "created", "finished", "env", "env_a", "env_b", "owner", "uuid"}


def _mask(obj):
    if isinstance(obj, dict):
        return {k: ("*" if k in _MASK_KEYS else _mask(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mask(v) for v in obj]
    return obj


def _text(s: str, tmp: str) -> str:
    s = s.replace(tmp, "TMP").replace(str(ROOT) + "/", "ROOT/")
    s = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "DATE", s)
    # the Go benchmark format names the machine: its CPU, architecture and CPU count
    s = re.sub(r"(?m)^(cpu|goarch): .*$", r"\1: MACHINE", s)
    s = re.sub(r"(?m)^(Benchmark\S*)-\d+\t", r"\1-N\t", s)
    return s


def capture() -> dict[str, str]:
    """name -> normalized output text; files as name.json."""
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "OPCOST_PROBE"}
        env.update(PYTHONPATH=str(ROOT / "src"), XDG_DATA_HOME=tmp, XDG_CACHE_HOME=str(Path(tmp, "cache")),
                   COLUMNS="200")
        Path(tmp, "prog.c").write_text(PROGRAM)
        for name, argv in CASES.items():
            cp = subprocess.run([sys.executable, "-m", "opcost", *argv], cwd=tmp, env=env, capture_output=True,
                                text=True, timeout=300, stdin=subprocess.DEVNULL)
            out[f"{name}.out"] = _text(f"exit {cp.returncode}\n--- stdout\n{cp.stdout}--- stderr\n{cp.stderr}", tmp)
            for a in argv:
                if a.endswith(".json"):
                    doc = json.loads(Path(tmp, a).read_text())
                    out[a] = _text(json.dumps(_mask(doc), indent=1, sort_keys=True), tmp) + "\n"
                elif a.endswith(".csv"):
                    name = a.split(":", 1)[1]
                    out[name] = _text(Path(tmp, name).read_text(), tmp)
    # The html pages (issue 15) of the run and of the A/B above, drawn from
    # their masked documents: the page of a real run would hold this
    # machine's environment. Byte-exact for the matplotlib of the test extra
    # (pyproject.toml pins it; the page's last line names the version).
    sys.path.insert(0, str(ROOT / "src"))
    from opcost.formats import html

    for name in HTML_PAGES:
        out[f"{name}.html"] = html.serialize(json.loads(out[f"{name}.json"])).decode("ascii")
    return out


if __name__ == "__main__":
    GOLDEN.mkdir(exist_ok=True)
    for f in GOLDEN.iterdir():
        f.unlink()
    for name, text in capture().items():
        (GOLDEN / name).write_text(text)
    print(f"wrote {len(list(GOLDEN.iterdir()))} files to {GOLDEN}")
