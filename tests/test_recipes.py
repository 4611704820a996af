"""The recipes of docs/architecture.md ("Where a new thing goes") stay one
file each: a format's name in the docs is checked against the code, a store
backend opened from a path needs no edit of commands/, a wrapped LocalTarget
overrides `wrap` alone (tests/test_targets.py)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))

import formats_listed  # noqa: E402

from opcost import formats, store  # noqa: E402
from opcost.commands import store as store_cmd  # noqa: E402


def test_the_docs_list_the_formats_the_code_has():
    assert formats_listed.problems() == []


def test_a_new_format_fails_the_docs_until_they_name_it(monkeypatch):
    fake = types.SimpleNamespace(NAME="yaml", KINDS=("result",))
    monkeypatch.setitem(formats.FORMATS, "yaml", fake)
    found = formats_listed.problems()
    assert len(found) == 4 and all("yaml" in p for p in found), found
    for page in ("architecture.md", "layout.md", "commands/run.md", "commands/report.md"):
        assert any(p.startswith(f"docs/{page}:") for p in found), (page, found)


def test_a_format_taking_another_kind_fails_the_report_table(monkeypatch):
    monkeypatch.setattr(formats.FORMATS["go"], "KINDS", ("result", "comparison"))
    assert formats_listed.problems() == [
        "docs/commands/report.md: `go` takes ['run']; its KINDS say ['run', 'comparison']"]


def test_store_copy_knows_a_file_backend_from_its_table_alone(monkeypatch, tmp_path):
    """A new backend opened from a path is one store per file for `store copy`
    (SRC = DST refused) without any edit of commands/store.py."""
    class FileStore:
        whole_url = False

    monkeypatch.setitem(store.BACKENDS, "duck", FileStore)
    (tmp_path / "d").mkdir()
    a, b = f"duck://{tmp_path}/x.db", f"duck://{tmp_path}/d/../x.db"
    assert store_cmd._where(a) == store_cmd._where(b) == f"duck:{tmp_path.resolve()}/x.db"
    assert store_cmd._where(f"sqlite://{tmp_path}/x.db") == store_cmd._where(str(tmp_path / "x.db"))
    assert store_cmd._where(f"sqlite://{tmp_path}/x.db") != store_cmd._where(a)
    assert store_cmd._where("postgresql://u:secret@h/db") != store_cmd._where("postgresql://u:secret@h/db2")
    assert "secret" not in store_cmd._where("postgresql://u:secret@h/db")
