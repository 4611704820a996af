"""MkDocs hook: the command-line reference, generated from the parsers when
the site is built, so it cannot drift from `opcost --help`.

It builds `opcost.commands.build_parser()` (the parser `opcost` itself runs,
ranges included) and adds one page per subcommand, `cli/NAME.md` (its usage,
options and help, and those of its own subcommands: `probe build`, `store
copy`...), plus `cli/index.md`, and lists them in the nav under "Command-line
reference". Nothing is written into docs/: the pages exist in the build only.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTION = "Command-line reference"
WIDTH = "100"   # argparse wraps at $COLUMNS: fixed, so a build does not depend on the terminal


def _parser() -> argparse.ArgumentParser:
    os.environ["COLUMNS"] = WIDTH
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    from opcost import commands

    return commands.build_parser()


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(name, parser, one-line help) of each subcommand, in --help's order."""
    out = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help or "" for c in a._choices_actions}
            out += [(name, sp, helps.get(name, "")) for name, sp in a.choices.items()]
    return out


def _block(parser: argparse.ArgumentParser) -> str:
    return "```text\n" + parser.format_help().rstrip() + "\n```\n"


def pages() -> dict[str, str]:
    """The generated pages: path under docs/ -> markdown."""
    root = _parser()
    subs = _subparsers(root)
    index = ["# Command-line reference", "",
             "Generated from the parsers when this site is built (`docs/hooks/cli_reference.py`): "
             "exactly what `opcost --help` and `opcost COMMAND --help` print.", "",
             "| command | what it does |", "|---|---|"]
    out = {}
    for name, sp, help_ in subs:
        index.append(f"| [`opcost {name}`]({name}.md) | {help_.replace('|', '&#124;')} |")
        text = [f"# `opcost {name}`", "", help_, "", _block(sp)]
        for sub, ssp, shelp in _subparsers(sp):
            text += [f"## `opcost {name} {sub}`", "", shelp, "", _block(ssp)]
        out[f"cli/{name}.md"] = "\n".join(text)
    index += ["", "## `opcost`", "", _block(root)]
    out["cli/index.md"] = "\n".join(index)
    return out


def on_config(config, **kwargs):
    names = ["cli/index.md"] + [p for p in pages() if p != "cli/index.md"]
    nav = config["nav"] = [e for e in (config["nav"] or []) if not (isinstance(e, dict) and SECTION in e)]
    nav.append({SECTION: names})
    return config


def on_files(files, config, **kwargs):
    from mkdocs.structure.files import File

    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    return files
