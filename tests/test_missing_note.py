"""Issue 38, item 2's last sentence: `history` and `show` of an incomplete
run say how many processes it lacks and where they may be: the rescue file
its opcost recorded when it got the store back at the end
(store.record_missed: labels opcost.missing, opcost.rescue), else, for an
abandoned run, the places a rescue file goes. The import that completes the
run removes the record. SQLite; the recording by a run whose store was lost
and came back is tests/test_rescue_putback.py's scenario on PostgreSQL."""

from __future__ import annotations

import copy
import tempfile

from test_import_large import doc, opcost, write

from opcost.record import state_dir
from opcost.store import open_store


def _partial(full: dict, n: int) -> dict:
    part = copy.deepcopy(full)
    part["status"] = "failed"
    part["results"][0]["processes"] = part["results"][0]["processes"][:n]
    part["results"][0]["summary"] = None
    return part


def test_a_recorded_loss_is_said_by_history_and_show_until_the_rescue_is_imported(tmp_path, capsys):
    store = str(tmp_path / "s.db")
    full = doc(6, 5)
    assert opcost(capsys, "import", write(tmp_path / "part.json", _partial(full, 2)), "--store", store)[0] == 0
    rescue = write(tmp_path / "opcost-unsaved-x.json", full)
    with open_store(store) as s:
        s.record_missed(1, 4, rescue)
        s.record_missed(1, 4, rescue)          # said twice (a retry): recorded once
    said = f"run 1 lacks 4 process(es) its store missed mid-run: {rescue} holds the whole run"
    code, out, _ = opcost(capsys, "history", "--store", store)
    assert code == 0 and said in out and "opcost.missing=" not in out and "LABELS" not in out, out
    code, out, _ = opcost(capsys, "show", "1", "--store", store)
    assert code == 0 and out.split("\n")[1].startswith(said), out
    code, out, _ = opcost(capsys, "import", rescue, "--store", store)
    assert code == 0 and "run 1: 4 process(es) added, now complete" in out
    for args in (("history",), ("show", "1")):
        code, out, _ = opcost(capsys, *args, "--store", store)
        assert code == 0 and "lacks" not in out and "rescue" not in out, out


def test_without_a_record_an_abandoned_run_names_the_places_of_a_rescue_file(tmp_path, capsys):
    store = str(tmp_path / "s.db")
    part = _partial(doc(4, 5), 1) | {"status": "abandoned"}
    assert opcost(capsys, "import", write(tmp_path / "part.json", part), "--store", store)[0] == 0
    places = f"beside the store (or the --json file), {tempfile.gettempdir()}, the working directory it ran in, " \
             f"{state_dir()}"
    code, out, _ = opcost(capsys, "history", "--store", store)
    assert code == 0 and "it may lack processes: if its store was lost mid-run" in out and places in out, out
    code, out, _ = opcost(capsys, "show", "1", "--store", store)
    assert code == 0 and out.split("\n")[1].startswith("run 1 is abandoned: it may lack processes") and places in out


def test_a_run_that_gets_its_store_back_records_what_it_missed(run_cli, tmp_path, probe_bin):
    """SQLite: the store locked past the wait mid-run (the run goes on into a
    rescue file), then released before the run ends: its end marks the run
    failed and records what the store missed and where it is."""
    import json
    import subprocess
    import time

    from conftest import cli_argv, cli_env
    from test_store_lock import FAST, _lock_after_first_processes

    assert run_cli("run", "syscall.null", *FAST, "-p", "1").returncode == 0
    db = tmp_path / "opcost" / "opcost.db"
    proc = subprocess.Popen(cli_argv("run", "syscall.null", *FAST, "-p", "200"), cwd=tmp_path,
                            env=cli_env(tmp_path, OPCOST_STORE_WAIT="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    conn = _lock_after_first_processes(db, proc)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "opcost").glob("opcost-unsaved-*.json")) and time.monotonic() < deadline:
        time.sleep(0.01)
    conn.execute("ROLLBACK")         # the store is back before the run ends
    conn.close()
    assert proc.poll() is None, "the run ended before its store came back"
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "Traceback" not in err, err
    rescue = list((tmp_path / "opcost").glob("opcost-unsaved-*.json"))
    assert len(rescue) == 1
    doc = json.loads(rescue[0].read_text())
    missed = doc["store_missed"]["processes"]
    history = run_cli("history").stdout
    assert f"run {doc['run_id']} lacks {missed} process(es) its store missed mid-run: {rescue[0]} holds" in history
    assert run_cli("import", str(rescue[0])).returncode == 0
    assert "lacks" not in run_cli("history").stdout
