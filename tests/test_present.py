"""One presenter and one declaration of each shared option (issue 24, item 3):
every command that ends with a document ends through present.py (exports,
the table's stream, colour, width, "stored as", exit code), and every option
several subcommands share is declared once, in commands/__init__.py (--delta
in protocol.py). The copies these replace had drifted: `series` coloured with
isatty() and ignored NO_COLOR; --store had two help texts."""

from __future__ import annotations

import argparse
import ast
import io
import re
from types import SimpleNamespace

import pytest

from opcost import present as P
from opcost.commands import build_parser, check_args
from opcost.protocol import DEFAULT_DELTA

from conftest import ROOT, cli_argv, cli_env, on_tty

SRC = ROOT / "src" / "opcost"
FAST = ["-p", "3", "-n", "3", "-w", "1", "--target-ms", "1", "--no-progress"]


def _parsers(p: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (sub)command's parser, by its path (('fleet', 'run'), ...)."""
    yield path, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _parsers(sub, path + (name,))


def _options(flag: str) -> dict[tuple[str, ...], argparse.Action]:
    return {path: a for path, p in _parsers(build_parser()) for a in p._actions if flag in a.option_strings}


def _add_argument_sites(flag: str) -> list[str]:
    """Every add_argument("FLAG", ...) call in the package's source."""
    sites = []
    for f in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "add_argument" \
                    and any(isinstance(a, ast.Constant) and a.value == flag for a in node.args):
                sites.append(f"{f.relative_to(SRC)}:{node.lineno}")
    return sites


# --- one declaration of each shared option ------------------------------------------

def test_store_is_declared_once_with_one_help_text():
    opts = _options("--store")
    assert {" ".join(p) for p in opts} == {"run", "ab", "variants", "series", "fleet run", "fleet ab", "fleet variants",
                                           "compare", "show",
                                           "report", "history", "export", "import"}
    assert len({(a.help, a.metavar, a.default) for a in opts.values()}) == 1
    (help_,) = {a.help for a in opts.values()}
    assert "postgresql://" in help_ and "default:" in help_
    assert [s.split(":")[0] for s in _add_argument_sites("--store")] == ["commands/__init__.py"]


def test_export_json_and_delta_are_declared_once():
    for flag, where in (("--export", ["commands/__init__.py"]), ("--delta", ["protocol.py"]),
                        # --json FILE (a document) and --json (a listing on stdout): one helper each
                        ("--json", ["commands/__init__.py", "commands/__init__.py"])):
        assert [s.split(":")[0] for s in _add_argument_sites(flag)] == where, flag
    flags = {p: a for p, a in _options("--json").items() if a.nargs == 0}
    assert {" ".join(p) for p in flags} == {"list", "env", "history", "probe list"}
    assert {a.help for a in flags.values()} == {"JSON on stdout"}
    files = {p: a for p, a in _options("--json").items() if a.nargs != 0}
    assert {" ".join(p) for p in files} == {" ".join(p) for p in _options("--export")}
    assert len({a.help for a in _options("--export").values()}) == 1
    deltas = _options("--delta")
    assert {" ".join(p) for p in deltas} == {"ab", "fleet ab", "fleet variants", "variants", "series", "compare",
                                             "report"}
    assert {(a.default, a.metavar) for a in deltas.values()} == {(DEFAULT_DELTA, "PCT")}


@pytest.mark.parametrize("given,fraction", [(None, 0.02), ("5", 0.05), ("2.5%", 0.025), ("0.5", 0.005)])
def test_delta_is_a_fraction_once_parsed(given, fraction):
    """--delta is typed in percent and converted once (protocol.BOUNDS); no
    command divides it by 100 again."""
    for argv in (["compare", "a", "b"], ["ab", "syscall.null", "--a", "", "--b", ""], ["report", "--last"]):
        args = build_parser().parse_args(argv + (["--delta", given] if given else []))
        check_args(args)
        assert args.delta == fraction, argv
    hits = [f"{f.relative_to(SRC)}:{i}" for f in SRC.rglob("*.py")
            for i, line in enumerate(f.read_text().splitlines(), 1) if re.search(r"delta\s*/\s*100\b", line)]
    assert hits == []


# --- one presenter ------------------------------------------------------------------

def test_commands_end_through_the_presenter():
    """No command chooses its own stream, colour or width, writes its own
    exports or says "stored as" itself: those live in present.py alone."""
    pattern = re.compile(r"\b(use_color|table_stream|terminal_width|isatty|export\.write|finish)\(|stored as")
    found = [f"{f.name}:{i}: {line.strip()}" for f in sorted((SRC / "commands").glob("*.py"))
             for i, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]
    # history's prompt asks only on a terminal (stdin and stderr), not a table's colour
    assert found == [x for x in found if x.startswith("history.py:") and "stdin.isatty()" in x], found
    for name in ("ab", "compare", "run", "series", "show", "variants"):
        assert "present(" in (SRC / "commands" / f"{name}.py").read_text(), name
    assert "present_fleet(" in (SRC / "commands" / "fleet.py").read_text()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _table(doc, *, color, width):
    return f"table of {doc['x']} color={color} width={width}"


def test_present_chooses_the_stream_colour_and_width(monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.delenv("NO_COLOR", raising=False)
    out, err = _Tty(), io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    assert P.present({"x": 1}, _table, []) == 0
    assert out.getvalue() == "table of 1 color=True width=120\n" and err.getvalue() == ""
    monkeypatch.setenv("NO_COLOR", "1")
    P.present({"x": 2}, _table, [])
    assert out.getvalue().endswith("table of 2 color=False width=120\n")
    # an export to stdout: the table goes to stderr (not a terminal: no colour, full width) ...
    written = []
    monkeypatch.setattr("opcost.formats.write", lambda exports, doc: written.append((exports, doc)))
    P.present({"x": 3}, _table, [("json", "-")])
    assert written == [([("json", "-")], {"x": 3})]
    assert err.getvalue() == "table of 3 color=False width=None\n"
    # ... and for `show`, whose document alone is then the answer, nowhere
    P.present({"x": 4}, _table, [("csv", "-")], alone=True)
    assert "table of 4" not in out.getvalue() + err.getvalue() and written[-1][1] == {"x": 4}


def _measured(exports, *, recorded: bool, code: int = 0):
    """session.Measured's shape; `recorded`: the recorder wrote `exports` (a result)."""
    settings = SimpleNamespace(exports=exports, label="base", labels={"name": "base", "commit": "abc"},
                               store="/nonexistent/s.db")
    recorder = SimpleNamespace(exports=exports if recorded else [], run_id=7, store_error=None)
    outcome = SimpleNamespace(status="ok", error=None, exit_code=code, signum=None)
    return SimpleNamespace(settings=settings, recorder=recorder, outcome=outcome)


def test_present_after_measuring_says_where_and_gives_the_exit_code(monkeypatch, capsys):
    written = []
    monkeypatch.setattr("opcost.formats.write", lambda exports, doc: written.append(exports))
    m = _measured([("json", "r.json")], recorded=True)
    # a result: the recorder wrote its exports during the run, not again here
    assert P.present({"x": 1}, _table, m.settings.exports, measured=m) == 0
    assert written == []
    cap = capsys.readouterr()
    assert cap.out == "table of 1 color=False width=None\n"
    assert cap.err == "\nstored as run 7 (base, commit=abc) in /nonexistent/s.db\n"
    m = _measured([("json", "c.json")], recorded=False, code=1)   # a comparison: written here
    assert P.present({"x": 2}, _table, m.settings.exports, measured=m) == 1
    assert written == [[("json", "c.json")]]
    assert capsys.readouterr().out == "table of 2 color=False width=None\n"
    # no document (a measured series too short to analyse): only the end of the run
    m = _measured([("json", "c.json")], recorded=False)
    assert P.present(None, _table, m.settings.exports, measured=m) == 0
    cap = capsys.readouterr()
    assert "table of" not in cap.out and "stored as run 7" in cap.err


def test_fleet_table_leaves_stdout_to_a_json_document(capsys):
    """Bug fixed: `fleet run --hosts one --json -` printed the table on stdout
    after the document; the table now goes where every command's goes."""
    host = SimpleNamespace(results=[{"r": 1}], run_id=3, processes=6, cleaned=True, status="ok", reason=None)
    f = SimpleNamespace(hosts=["h1"], outcomes={"h1": host}, exit_code=lambda: 0)
    settings = SimpleNamespace(exports=[("json", "-")], store="/nonexistent/s.db")
    assert P.present_fleet(f, settings, lambda rs, color, width: f"{len(rs)} result(s)") == 0
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err == "== h1 ==\n1 result(s)\nopcost: h1: stored as run 3 (host=h1) in /nonexistent/s.db\n"
    settings.exports = [("json", "h1.json")]
    P.present_fleet(f, settings, lambda rs, color, width: f"{len(rs)} result(s)")
    assert capsys.readouterr().out == "== h1 ==\n1 result(s)\n"


# --- the bug: series ignored NO_COLOR -----------------------------------------------

def test_series_honours_no_color(run_cli, tmp_path):
    """A step of 30% (fake clock) between commits c and d: on a terminal the
    verdict is red, and with NO_COLOR set not coloured at all (no-color.org:
    an empty NO_COLOR is unset). `series` used isatty() alone."""
    for commit, ns in (("a", "100"), ("b", "100"), ("c", "100"), ("d", "130"), ("e", "130"), ("f", "130")):
        cp = run_cli("run", "syscall.null", "--fake-clock", ns, *FAST, "--label", f"commit={commit}")
        assert cp.returncode == 0, cp.stderr
    env = cli_env(tmp_path, COLUMNS="200")
    env.pop("NO_COLOR", None)
    argv = cli_argv("series", "syscall.null", "--by", "commit")
    coloured = on_tty(argv, env, tmp_path)
    assert "\x1b[31mslower\x1b[0m" in coloured and "> d (label 4, after c)" in coloured
    assert "\x1b[" not in on_tty(argv, {**env, "NO_COLOR": "1"}, tmp_path)
    assert "\x1b[31mslower" in on_tty(argv, {**env, "NO_COLOR": ""}, tmp_path)
    piped = run_cli("series", "syscall.null", "--by", "commit", env={"NO_COLOR": ""})
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout and " slower" in piped.stdout
