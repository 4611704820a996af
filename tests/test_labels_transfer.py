"""Issue 14, from the command line: `--label KEY=VALUE` on the measuring
commands, `history --where/--bench`, `history delete`, and moving runs
between stores with `export` and `import` (lossless, each run once)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

from conftest import cli_argv, cli_env

from opcost.store import open_store

FAST = ["--fake-clock", "100", "-n", "3", "-w", "1", "--target-ms", "1", "-p", "2", "--no-progress"]


def ok(cp: subprocess.CompletedProcess) -> str:
    assert cp.returncode == 0, cp.stderr
    assert "Traceback" not in cp.stderr
    return cp.stdout


def _three_runs(run_cli) -> None:
    ok(run_cli("run", "syscall.null", *FAST, "--label", "base", "--label", "commit=abc123",
               "--label", "kernel=6.18-rc3"))
    ok(run_cli("run", "signal.catch", *FAST, "--label", "commit=def456", "--label", "kernel=6.18-rc3"))
    ok(run_cli("ab", "syscall.null", "--a", "via=libc", "--b", "via=inline", *FAST, "--label", "commit=abc123"))


def test_labels_reach_the_run_its_documents_and_history(run_cli, tmp_path):
    out = tmp_path / "run.json"
    cp = run_cli("run", "syscall.null", *FAST, "--label", "base", "--label", "commit=abc123",
                 "--label", "note=any text, even = and spaces", "--json", str(out))
    assert "stored as run 1 (base, commit=abc123, note=any text, even = and spaces)" in ok(cp) + cp.stderr
    doc = json.loads(out.read_text())
    want = {"name": "base", "commit": "abc123", "note": "any text, even = and spaces"}
    assert doc["label"] == "base" and doc["labels"] == dict(sorted(want.items()))
    shown = json.loads(ok(run_cli("show", "1", "--json", "-")))
    assert shown["labels"] == doc["labels"] and shown["uuid"] == doc["uuid"]     # one identity, file and store
    listed = json.loads(ok(run_cli("history", "--json")))
    assert listed[0]["labels"] == want and listed[0]["label"] == "base"
    table = ok(run_cli("history"))
    assert "LABELS" in table and "commit=abc123" in table


def test_history_where_and_bench(run_cli, store_url):
    def run_cli(*args, run_cli=run_cli):                       # every call on the store of the backend
        return run_cli(*args, "--store", store_url)
    _three_runs(run_cli)

    def ids(*args):
        return [r["id"] for r in json.loads(ok(run_cli("history", "--json", *args)))]
    assert ids() == [3, 2, 1]
    assert ids("--where", "commit=abc123") == [3, 1]
    assert ids("--where", "commit=abc123", "--bench", "syscall.null") == [3, 1]
    assert ids("--where", "commit=abc123", "--bench", "signal.catch") == []
    assert ids("--where", "kernel=6.18-rc3", "--where", "commit=def456") == [2]       # AND
    assert ids("--where", "name=base") == [1]
    assert ids("--bench", "signal.catch") == [2]
    assert ids("--where", "commit=abc123", "--limit", "1") == [3]
    assert "no stored run matches commit=nope" in ok(run_cli("history", "--where", "commit=nope"))
    assert ok(run_cli("history", "--where", "commit=def456")).splitlines()[1].split()[0] == "2"


def test_history_delete(run_cli, tmp_path):
    _three_runs(run_cli)
    cp = run_cli("history", "delete", "1", "3")
    assert cp.returncode == 2 and "--yes" in cp.stderr                               # no terminal to ask on
    cp = run_cli("history", "delete", "2", "nosuch", "--yes")
    assert cp.returncode == 2 and "nosuch" in cp.stderr
    assert len(json.loads(ok(run_cli("history", "--json")))) == 3                   # nothing deleted
    assert ok(run_cli("history", "delete", "1", "label:base", "3", "--yes")) == "deleted 2 run(s): 1, 3\n"
    assert [r["id"] for r in json.loads(ok(run_cli("history", "--json")))] == [2]
    ok(run_cli("run", "syscall.null", *FAST))
    assert json.loads(ok(run_cli("history", "--json")))[0]["id"] == 4                # ids never come back


def _on_a_terminal(tmp_path: Path, args: list[str], answer: str) -> tuple[int, str]:
    """Run opcost with stdin/stdout/stderr on a pty, answer its question."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cli_argv(*args), env=cli_env(tmp_path), cwd=tmp_path, stdin=slave, stdout=slave,
                         stderr=slave)
    os.close(slave)
    text = b""
    deadline = time.monotonic() + 60
    answered = False
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            text += chunk
        if not answered and b"[y/N]" in text:
            os.write(master, answer.encode() + b"\n")
            answered = True
        if p.poll() is not None and not r:
            break
    p.wait(timeout=30)
    os.close(master)
    return p.returncode, text.decode(errors="replace")


def test_history_delete_asks_on_a_terminal(run_cli, tmp_path):
    _three_runs(run_cli)
    rc, text = _on_a_terminal(tmp_path, ["history", "delete", "2"], "n")
    assert rc == 1 and "commit=def456" in text and "nothing deleted" in text
    assert len(json.loads(ok(run_cli("history", "--json")))) == 3
    rc, text = _on_a_terminal(tmp_path, ["history", "delete", "2"], "y")
    assert rc == 0 and "deleted 1 run(s): 2" in text
    assert [r["id"] for r in json.loads(ok(run_cli("history", "--json")))] == [3, 1]


def test_export_import_round_trip_is_byte_identical(run_cli, tmp_path, store_url):
    """From a store of each backend into an SQLite file and out again: the same bytes."""
    plain = run_cli

    def run_cli(*args):
        return plain(*args) if "--store" in args else plain(*args, "--store", store_url)
    _three_runs(run_cli)
    ok(run_cli("export", "1", "2", "3", "-o", "all.jsonl"))
    ok(run_cli("export", "label:base", "-o", "one.json"))
    lines = (tmp_path / "all.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(ln)["schema"] == "opcost.result/1" for ln in lines)
    one = (tmp_path / "one.json").read_bytes()
    assert json.loads(one) == json.loads(lines[0]) and one.count(b"\n") > 3     # one run: indented
    assert one == ok(run_cli("show", "1", "--json", "-")).encode()               # as `show --json` writes it

    other = tmp_path / "other.db"
    out = ok(run_cli("import", "all.jsonl", "--store", str(other)))
    assert out == "all.jsonl: imported 3 run(s) (1, 2, 3)\n"
    ok(run_cli("export", "1", "2", "3", "-o", "again.jsonl", "--store", str(other)))
    assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "all.jsonl").read_bytes()
    doc = json.loads(lines[1])
    assert doc["labels"] == {"commit": "def456", "kernel": "6.18-rc3"} and doc["env"]
    assert doc["results"][0]["processes"][0]["samples"]                        # raw samples travel

    # again, and the single file of a run already there: nothing new
    out = ok(run_cli("import", "all.jsonl", "one.json", "--store", str(other)))
    assert out == "all.jsonl: imported 0 run(s); 3 already stored (1, 2, 3)\none.json: imported 0 run(s); " \
                  "1 already stored (1)\n"
    assert len(json.loads(ok(run_cli("history", "--json", "--store", str(other))))) == 3
    # the ab run is still an ab run, shown as its comparison
    assert ok(run_cli("show", "3", "--store", str(other))).startswith("run 3, ")
    assert ok(run_cli("show", "3", "--store", str(other))) == ok(run_cli("show", "3"))
    with open_store(str(other), readonly=True) as store:
        assert store.load_run(3)["kind"] == "ab"


def test_import_into_a_store_with_runs_gives_new_ids_and_keeps_run_json_identity(run_cli, tmp_path):
    out = tmp_path / "run.json"
    ok(run_cli("run", "syscall.null", *FAST, "--label", "commit=x", "--json", str(out)))
    ok(run_cli("run", "syscall.null", *FAST, "--label", "commit=y"))
    # run.json is run 1, already here (same uuid): not stored twice
    assert ok(run_cli("import", str(out))).endswith("imported 0 run(s); 1 already stored (1)\n")
    ok(run_cli("export", "2", "-o", "two.json"))
    other = tmp_path / "other.db"
    ok(run_cli("run", "syscall.null", *FAST, "--store", str(other)))
    ok(run_cli("run", "syscall.null", *FAST, "--store", str(other)))
    assert ok(run_cli("import", "two.json", str(out), "--store", str(other))) == (
        "two.json: imported 1 run(s) (3)\n" f"{out}: imported 1 run(s) (4)\n")
    runs = json.loads(ok(run_cli("history", "--json", "--store", str(other))))
    assert [(r["id"], r["labels"]) for r in runs][:2] == [(4, {"commit": "x"}), (3, {"commit": "y"})]


def test_a_bad_file_stores_nothing(run_cli, tmp_path):
    _three_runs(run_cli)
    ok(run_cli("export", "1", "2", "3", "-o", "all.jsonl"))
    data = (tmp_path / "all.jsonl").read_text()
    lines = data.splitlines(keepends=True)
    (tmp_path / "cut.jsonl").write_text(lines[0] + lines[1] + lines[2][:len(lines[2]) // 2])
    (tmp_path / "mixed.jsonl").write_text(lines[0] + "{\"schema\": \"opcost.comparison/1\"}\n" + lines[2])
    bad_plan = {**json.loads(lines[1]), "plan": {"kind": "ab", "delta": "5%"}}
    (tmp_path / "plan.jsonl").write_text(lines[0] + json.dumps(bad_plan) + "\n")
    other = tmp_path / "other.db"
    for name, want in (("cut.jsonl", "cut.jsonl line 3: truncated"),
                       ("mixed.jsonl", "mixed.jsonl line 2: an opcost.comparison/1 document"),
                       ("plan.jsonl", "plan.jsonl line 2: plan.delta is not what a plan holds there")):
        cp = run_cli("import", str(tmp_path / "all.jsonl"), name, "--store", str(other))
        assert cp.returncode == 2 and cp.stdout == "" and want in cp.stderr, cp.stderr
        assert len(cp.stderr.strip().splitlines()) == 1
    assert not other.exists()                         # checked before the store was even opened
    ok(run_cli("import", "all.jsonl", "--store", str(other)))
    assert len(json.loads(ok(run_cli("history", "--json", "--store", str(other))))) == 3
