"""Issue 11's malformed-input corpus (tests/data/malformed.txt): every
invocation there is bad input, and each must end the same way: exit 2, exactly
one line on stderr starting with "opcost:" (and the text the line asks for),
nothing on stdout, no traceback, nothing written (every file under the case's
directory, which is its cwd and XDG_DATA_HOME with a store of two runs,
unchanged, and no new file), and neither numpy nor scipy imported: arguments
are refused before anything heavy loads.

The one exception class, COMPILER_MESSAGES: `opcost variants` with a SOURCE
that does not compile prints the compiler's own messages, indented, under its
one `opcost:` line (marked `!compiler` in the corpus).

The invocations run in parallel, a few at a time, once per session; each case
is then its own test."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import cli_argv, cli_env
from test_store import _v1_store, damage

# One worker runs the whole corpus (pytest-xdist --dist loadgroup): `outcomes`
# below runs every case once, in threads of its own; on two workers it would run twice.
pytestmark = pytest.mark.xdist_group("malformed")

CORPUS = Path(__file__).with_name("data") / "malformed.txt"
COMPILER_MESSAGES = "!compiler"
FAST = "--fake-clock 100 -p 2 -n 1 -w 0 --target-ms 1"
CONTROL = {"{nl}": "\n", "{tab}": "\t", "{cr}": "\r", "{esc}": "\x1b", "{del}": "\x7f",
           "{xff}": "\udcff"}   # the byte 0xff, not UTF-8: subprocess passes it as that byte (os.fsencode)
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")   # what `cat -v` would show as ^X or M-^X
# Options that write a file another module owns (the --json/--export writer) are not in this corpus.
NOT_HERE = {("run", "--json"), ("ab", "--json"), ("variants", "--json"), ("compare", "--json"), ("show", "--json"),
            ("series", "--json")}


# Every text field a run document stores (issue 38): name -> its path in the document.
TEXT_FIELDS = {"label": ("label",), "labelvalue": ("labels", "k"), "kind": ("kind",), "uuid": ("uuid",),
               "created": ("created",), "finished": ("finished",), "version": ("opcost_version",),
               "argv": ("argv", 0), "env": ("env", "cpu_model_name", "value"), "bench": ("results", 0, "bench"),
               "key": ("results", 0, "key"), "param": ("results", 0, "params", "via"),
               "op": ("results", 0, "op"), "unit": ("results", 0, "unit"), "reason": ("results", 0, "reason"),
               "header": ("results", 0, "processes", 0, "header", "compiler")}


def with_text(doc: dict, path: tuple, text: str) -> dict:
    """A copy of doc with `text` at path (appended to what is there)."""
    doc = json.loads(json.dumps(doc))
    where = doc
    for k in path[:-1]:
        where = where[k]
    old = where.get(path[-1]) if isinstance(where, dict) else where[path[-1]]
    where[path[-1]] = (old if isinstance(old, str) else "") + text
    return doc


def load_corpus() -> list[tuple[int, bool, list[str], str | None]]:
    """(line number, compiler-messages class, argv template, expected text) per invocation."""
    cases = []
    for n, line in enumerate(CORPUS.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        text, _, expect = ("", "", line[3:]) if line.startswith("=> ") else line.partition(" => ")
        multi = text.startswith(COMPILER_MESSAGES + " ")
        argv = shlex.split(text.removeprefix(COMPILER_MESSAGES + " ").replace("{fast}", FAST))
        cases.append((n, multi, argv, expect.strip() or None))
    return cases


CASES = load_corpus()


def fill(arg: str, tmp: Path) -> str:
    arg = arg.replace("{tmp}", str(tmp))
    for k, v in CONTROL.items():
        arg = arg.replace(k, v)
    return arg


def snapshot(d: Path) -> dict[str, str]:
    """Every file and directory under d, with a hash of its content."""
    out = {}
    for root, dirs, files in os.walk(d):
        for name in dirs:
            out[os.path.relpath(os.path.join(root, name), d) + "/"] = "dir"
        for name in files:
            p = os.path.join(root, name)
            out[os.path.relpath(p, d)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="session")
def template(tmp_path_factory, probe_bin) -> Path:
    """What every case starts from: a store with runs `base` and `other`, and the files the corpus names."""
    t = tmp_path_factory.mktemp("malformed-template")
    env = cli_env(t)
    for spec, label in (("syscall.null", "base"), ("ctx.pipe:mode=thread", "other")):
        cp = subprocess.run(cli_argv("run", spec, *FAST.split(), "--label", label, "--no-progress"), env=env,
                            cwd=t, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert cp.returncode == 0, cp.stderr
    # files for `opcost import`: the two runs exported, then broken in the ways a copy breaks
    cp = subprocess.run(cli_argv("export", "base", "other", "-o", "all.jsonl"), env=env, cwd=t,
                        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    lines = (t / "all.jsonl").read_text().splitlines(keepends=True)
    new = json.loads(lines[0]) | {"uuid": "00000000-0000-4000-8000-000000000001", "run_id": 50}
    (t / "new.json").write_text(json.dumps(new) + "\n")          # a run the store does not hold
    (t / "cut.jsonl").write_text(lines[0] + lines[1][:len(lines[1]) // 2])
    (t / "badline.jsonl").write_text(lines[0] + "not json at all\n" + lines[1])
    (t / "comparison.json").write_text('{"schema": "opcost.comparison/1", "comparisons": []}\n')
    (t / "badkey.json").write_text(json.dumps(new | {"labels": {"bad key": "x"}}) + "\n")
    (t / "noresults.json").write_text(json.dumps({k: v for k, v in new.items() if k != "results"}) + "\n")
    (t / "empty.json").write_text("")
    # issue 26: documents the store could not hold, or that readers could not read, once stored
    def broken(name: str, key: str, value: str, doc: dict = new) -> None:
        doc = json.loads(json.dumps(doc))
        doc["results"][0]["processes"][0]["samples"][0][key] = "@@"
        (t / name).write_text(json.dumps(doc).replace('"@@"', value) + "\n")
    broken("strns.json", "ns_per_op", '"12.5"')
    broken("iters.json", "iters", "1e40")
    broken("bigint.json", "iters", "9" * 60)
    broken("nan.json", "ns_per_op", "NaN")
    broken("inf.json", "ns_per_op", "1e400")
    (t / "surrogate.json").write_text(json.dumps(new | {"label": "\ud800"}) + "\n")
    # issue 38: NUL in every stored text field (a PostgreSQL store cannot hold it)
    for name, path in TEXT_FIELDS.items():
        (t / f"nul-{name}.json").write_text(json.dumps(with_text(new, path, "a\0b")) + "\n")
    (t / "deep.json").write_text(json.dumps(new)[:-1] + ', "deep": ' + "[" * 100000 + "]" * 100000 + "}\n")
    (t / "prog.c").write_text("int main(void) { return 0; }\n")
    (t / "op.c").write_text("#include <stdint.h>\nuint64_t opcost_op(uint64_t x) { return x + 1; }\n")
    (t / "bad.c").write_text("int main(void) { return undeclared; }\n")
    (t / "notes.txt").write_text("not a source\n")
    (t / "afile").write_text("a plain file\n")
    bz = bytearray(0x800)   # a bzImage's boot header (protocol 2.15): 1 setup sector, 0x40 paragraphs of kernel
    bz[0x1F1], bz[0x1F4], bz[0x1FE:0x200], bz[0x202:0x206] = 1, 0x40, b"\x55\xaa", b"HdrS"
    bz[0x206:0x208], bz[0x238:0x23C] = (0x20F).to_bytes(2, "little"), (128).to_bytes(4, "little")
    (t / "k.bz").write_bytes(bytes(bz))
    (t / "trunc.bz").write_bytes(bytes(bz[:0x7F0]))   # its header says 0x800 bytes
    arm = bytearray(0x400)
    arm[0x38:0x3C] = b"ARM\x64"
    (t / "arm.img").write_bytes(bytes(arm))   # an arm64 Image's header (no EFI stub): recognised
    arm[0:2], arm[0x3C:0x40], arm[0x40:0x44] = b"MZ", (0x40).to_bytes(4, "little"), b"PE\0\0"
    arm[0x46:0x48] = (1).to_bytes(2, "little")                                  # one section, no optional header
    arm[0x58 + 16:0x58 + 24] = (0x100000).to_bytes(4, "little") + (0x1000).to_bytes(4, "little")   # ends at 1 MiB
    (t / "armcut.img").write_bytes(bytes(arm))   # its EFI stub's PE header says 1 MiB + 4 KiB: cut short
    (t / "armcut.img.gz").write_bytes(gzip.compress(bytes(arm)))   # whole, but what it holds is cut short
    (t / "armstop.img.gz").write_bytes(gzip.compress(bytes(arm) + os.urandom(4096))[:600])   # its stream stops
    (t / "subdir").mkdir()
    (t / "garbage.db").write_bytes(b"this is not a database\n" * 50)
    shutil.copy(t / "opcost" / "opcost.db", t / "damaged.db")
    damage(t / "damaged.db")
    conn = sqlite3.connect(t / "foreign.db")
    conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.commit()
    conn.close()
    _v1_store(t / "v1.db")
    return t


def run_case(template: Path, root: Path, case) -> dict:
    n, multi, argv, expect = case
    d = root / f"case{n}"
    shutil.copytree(template, d)
    before = snapshot(d)
    args = [fill(a, d) for a in argv]
    cmd = [*cli_argv()[:1], "-X", "importtime", *cli_argv(*args)[1:]]
    try:
        cp = subprocess.run(cmd, env=cli_env(d), cwd=d, capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:   # accepted, and measuring: a failure of this case alone
        cp = subprocess.CompletedProcess(cmd, "timeout after 60 s", (e.stdout or b"").decode(errors="replace"),
                                         (e.stderr or b"").decode(errors="replace"))
    imports = {ln.rsplit("|", 1)[1].strip() for ln in cp.stderr.splitlines() if ln.startswith("import time:")}
    stderr = [ln for ln in cp.stderr.splitlines() if not ln.startswith("import time:")]
    after = snapshot(d)
    shutil.rmtree(d, ignore_errors=True)
    return {"args": args, "rc": cp.returncode, "stdout": cp.stdout, "stderr": stderr, "imports": imports,
            "changed": sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))}


@pytest.fixture(scope="session")
def outcomes(template, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("malformed-cases")
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(lambda c: run_case(template, root, c), CASES)
        return {c[0]: r for c, r in zip(CASES, done)}


@pytest.mark.parametrize("case", CASES, ids=[f"L{c[0]}:{shlex.join(c[2])[:60]}" for c in CASES])
def test_malformed_input_is_one_line_exit_2_nothing_written(outcomes, case):
    n, multi, argv, expect = case
    r = outcomes[n]
    text = "\n".join(r["stderr"])
    assert r["rc"] == 2, (r["args"], r["rc"], text, r["stdout"][:2000])
    assert "Traceback" not in text + r["stdout"], text
    assert r["stdout"] == "", r["stdout"][:2000]
    lines = r["stderr"]
    assert lines and lines[0].startswith("opcost: ") and lines[0].strip() != "opcost:", text
    if multi:   # COMPILER_MESSAGES: the compiler's own lines follow, indented
        assert len(lines) >= 2 and all(ln.startswith("  ") for ln in lines[1:]), text
    else:
        assert len(lines) == 1, text
    if expect:
        assert fill(expect, Path("/")) in lines[0], (expect, lines[0])
    assert not RAW.search(text), ("a control character reached the terminal raw", text)   # issue 38: `cat -v`
    assert r["changed"] == [], f"written: {r['changed']}"
    heavy = sorted(m for m in r["imports"] if m.split(".")[0] in {"numpy", "scipy", "matplotlib"})
    assert heavy == [], f"imported before refusing: {heavy[:5]}"


def _parser_options() -> dict[str, set[str]]:
    """Every subcommand (`probe build` as one) and its long options."""
    import argparse

    from opcost.commands import build_parser

    out = {}

    def walk(p, prefix):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
        if prefix:
            out[prefix] = {max(a.option_strings, key=len) for a in p._actions if a.option_strings} - {"--help"}

    walk(build_parser(), "")
    return out


def test_corpus_covers_every_subcommand_and_option():
    assert len(CASES) >= 180
    assert [argv[0] for _, multi, argv, _ in CASES if multi] == ["variants"]   # the one exception class
    used: dict[str, set[str]] = {}
    for _, _, argv, _ in CASES:
        cmd = " ".join(argv[:2]) if argv[:1] in (["probe"], ["fleet"], ["store"]) else (argv[0] if argv else "")
        used.setdefault(cmd, set()).update(a.split("=")[0] for a in argv if a.startswith("-"))
    options = _parser_options()
    assert {"run", "ab", "variants", "compare", "history", "show", "list", "env", "probe build",
            "probe list"} <= set(used)
    for cmd, opts in options.items():
        if cmd in ("probe", "fleet"):
            continue
        short = {"-p": "--processes", "-n": "--samples", "-w": "--warmup", "-D": "-D"}
        given = {short.get(o, o) for o in used.get(cmd, set())}
        missing = {o for o in opts if (cmd, o) not in NOT_HERE} - given
        assert not missing, (cmd, missing)


def test_every_numeric_option_has_a_documented_bound():
    """One rule for every count: each option taking a number is in protocol.BOUNDS,
    and --help shows its range."""
    import argparse

    from opcost.commands import build_parser
    from opcost.protocol import BOUNDS

    numeric = set()

    def walk(p):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub in a.choices.values():
                    walk(sub)
            elif a.metavar in ("N", "MS", "SEC", "NS", "PCT") or isinstance(a.default, (int, float)) \
                    and not isinstance(a.default, bool):
                numeric.add(a.dest)
                assert a.dest in BOUNDS, a.dest
                assert re.search(r"\[>?[0-9.e+]+\.\.<?[0-9.e+]+\]$", a.help), (a.dest, a.help)

    walk(build_parser())
    assert numeric == set(BOUNDS)
    assert {"processes", "samples", "warmup", "iters", "parallel", "limit", "seed", "timeout", "target_ms",
            "fake_clock", "delta"} <= numeric


def test_help_documents_the_bounds(run_cli):
    cp = run_cli("run", "--help")
    assert cp.returncode == 0
    flat = " ".join(cp.stdout.split())
    for text in ("[1..1000]", "[1..10000]", "[>0..86400]", "[1..2147483647]", "[0..4294967295]"):
        assert text in flat, text
    assert "[>0..<100]" in " ".join(run_cli("compare", "--help").stdout.split())



def test_stored_control_text_never_reaches_a_terminal_raw(template, tmp_path):
    """Issue 38: a run imported with ESC, BEL, CR and a C1 CSI in every stored
    text field is accepted, and every output that prints it (history, its
    --where echo, show, report as text/markdown/csv, compare, argparse's
    errors) escapes them: nothing `cat -v` would show as a control."""
    d = tmp_path / "case"
    shutil.copytree(template, d)
    doc = json.loads((d / "new.json").read_text())
    for path in TEXT_FIELDS.values():
        if path not in (("uuid",), ("created",), ("finished",)):
            doc = with_text(doc, path, "\x1b[1mBOLD\x07\r\x9b2J")
    doc["labels"]["name"] = doc["label"]
    (d / "esc.json").write_text(json.dumps(doc) + "\n")

    def opcost(*args):
        cp = subprocess.run(cli_argv(*args), env=cli_env(d), cwd=d, capture_output=True, timeout=60,
                            stdin=subprocess.DEVNULL)
        return subprocess.CompletedProcess(cp.args, cp.returncode, cp.stdout.decode(), cp.stderr.decode())

    cp = opcost("import", "esc.json")
    assert cp.returncode == 0, cp.stderr
    ref = "id:50"
    outputs = {
        "history": opcost("history"),
        "where": opcost("history", "--where", "k=\x1b[31m\x07"),
        "argparse": opcost("history", "--frob\x1b[2J\nx"),
        "show": opcost("show", ref),
        "text": opcost("report", ref),
        "markdown": opcost("report", ref, "-f", "markdown"),
        "csv": opcost("report", ref, "-f", "csv"),
        "compare": opcost("compare", "base", ref),   # refused (its bench differs), the refusal escaped
        # every other output format, and the JSON that reaches a terminal (escaped by the encoder)
        **{fmt: opcost("report", ref, "-f", fmt) for fmt in ("json", "go", "hyperfine-json", "html")},
        "show-json": opcost("show", ref, "--json", "-"),
        "export": opcost("export", ref),
    }
    from opcost.formats import FORMATS
    assert {f.replace("_", "-") for f in FORMATS} <= set(outputs), "an output format left unchecked"
    for name, cp in outputs.items():
        assert "Traceback" not in cp.stderr, (name, cp.stderr)
        for stream in (cp.stdout, cp.stderr):
            text = stream.replace("\r\n", "\n") if name == "csv" else stream
            assert not RAW.search(text), (name, RAW.search(text), stream[:3000])
    assert outputs["where"].returncode == 0 and "k=\\x1b[31m\\x07" in outputs["where"].stdout
    assert outputs["argparse"].returncode == 2 and outputs["argparse"].stderr.count("\n") == 1
    failed = {name: cp.stderr for name, cp in outputs.items() if cp.returncode and name not in ("argparse", "compare")}
    assert not failed, failed
    assert "\\x1b[1mBOLD\\x07\\r\\x9b2J" in outputs["show"].stdout
    assert "\\x1b[1mBOLD" in outputs["csv"].stdout and "\\x1b[1mBOLD" in outputs["text"].stdout
