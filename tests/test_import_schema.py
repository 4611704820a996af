"""Issue 26, item 6.5: `opcost import` reads a file bounded and validates
each document against the JSON Schema shipped in the package
(src/opcost/schemas/, docschema.py). The schemas accept every document
opcost writes (the goldens, older goldens in tests/data/older-documents/,
and run/ab/variants/series --json, export and show --json on the fake
clock); what they refuse is one line naming the JSON path, exit 2, nothing
stored. The refusals of whole files are also in the malformed corpus
(tests/data/malformed.txt)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from opcost import docschema, transfer
from opcost.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--fake-clock", "100", "-n", "2", "-w", "1", "--target-ms", "1", "-p", "2", "--no-progress"]
# tests/golden masks what varies between runs with "*" (golden_cases._MASK_KEYS): put back a value of
# the type opcost writes there, so that the schema sees the document as it was written
UNMASK = {"pid": 4321, "start_raw_ns": 1, "wall_s": 0.25, "created": "2026-01-01T00:00:00Z",
          "finished": "2026-01-01T00:00:01Z", "env": {}, "env_a": {}, "env_b": {}, "owner": None,
          "uuid": "00000000-0000-4000-8000-00000000abcd"}


def unmask(o):
    if isinstance(o, dict):
        return {k: (UNMASK[k] if v == "*" and k in UNMASK else unmask(v)) for k, v in o.items()}
    if isinstance(o, list):
        return [unmask(v) for v in o]
    return o


def ok(cp):
    assert cp.returncode == 0 and "Traceback" not in cp.stderr, cp.stderr
    return cp.stdout


def valid(doc: dict) -> None:
    assert docschema.problem(doc, doc["schema"]) is None, docschema.problem(doc, doc["schema"])


def test_the_schemas_are_json_schemas_and_shipped():
    from jsonschema import Draft202012Validator

    for name, file in docschema.FILES.items():
        s = docschema.schema(name)
        Draft202012Validator.check_schema(s)
        assert s["title"] == name and s["properties"]["schema"] == {"const": name}
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"schemas/*.json"' in pyproject and '"jsonschema>=' in pyproject


GOLDEN = sorted((ROOT / "tests" / "golden").glob("*.json"))
OLDER = sorted((ROOT / "tests" / "data" / "older-documents").glob("*.json"))


@pytest.mark.parametrize("path", GOLDEN + OLDER, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_golden_and_older_document_validates(path):
    doc = unmask(docschema.loads(path.read_text()))
    valid(doc)


def test_golden_and_older_runs_are_imported(run_cli, tmp_path):
    """The result documents among them (older ones have no uuid, plan or labels) go through import."""
    names = []
    for i, path in enumerate(p for p in GOLDEN + OLDER if json.loads(p.read_text())["schema"] == "opcost.result/1"):
        doc = unmask(json.loads(path.read_text()))
        if "uuid" in doc:                          # the goldens' masked uuids were all one
            doc["uuid"] = f"00000000-0000-4000-8000-{i:012d}"
        (tmp_path / f"r{i}.json").write_text(json.dumps(doc, indent=1))
        names.append(f"r{i}.json")
    assert len(names) >= 3
    out = ok(run_cli("import", *names, "--store", str(tmp_path / "s.db")))
    assert out.count("imported 1 run(s)") == len(names), out


def test_documents_written_on_the_fake_clock_validate_and_round_trip(run_cli, tmp_path):
    (tmp_path / "prog.c").write_text("int main(void) { return 0; }\n")
    ok(run_cli("run", "syscall.null", "ctx.pipe:mode=process|thread", *FAST, "--label", "k=1",
               "--counters", "task-clock,context-switches,page-faults", "--json", "run.json"))
    ok(run_cli("run", "syscall.null", *FAST, "--parallel", "2", "--label", "k=2", "--json", "par.json"))
    ok(run_cli("run", "syscall.null", *FAST, "--label", "k=3", "--json", "run3.json"))
    ok(run_cli("ab", "syscall.null", "--a", "via=libc", "--b", "via=inline", *FAST, "--json", "ab.json"))
    ok(run_cli("variants", "prog.c", "-DA", "-DB", "--fake-clock", "1000", "-p", "2", "--no-progress",
               "--json", "variants.json"))
    ok(run_cli("series", "syscall.null", "--by", "k", "--json", "series.json"))
    ok(run_cli("series", "--run", "insn.chain", "--over", "n=1|2|4", *FAST, "--json", "series_run.json"))
    ok(run_cli("compare", "1", "2", "--json", "compare.json"))
    ok(run_cli("export", "1", "2", "3", "4", "5", "6", "-o", "all.jsonl"))
    ok(run_cli("show", "4", "--json", "show.json"))
    kinds = set()
    for name in ("run.json", "par.json", "run3.json", "ab.json", "variants.json", "series.json",
                 "series_run.json", "compare.json", "show.json"):
        doc = docschema.loads((tmp_path / name).read_text())
        valid(doc)
        kinds.add(doc["schema"])
    assert kinds == set(docschema.FILES)
    lines = (tmp_path / "all.jsonl").read_text().splitlines()
    assert len(lines) == 6
    for line in lines:
        valid(docschema.loads(line))
    # and import takes them all (validated as it reads them), into a store of their own
    out = ok(run_cli("import", "all.jsonl", "run.json", "--store", str(tmp_path / "other.db")))
    assert out.startswith("all.jsonl: imported 6 run(s)") and "run.json: imported 0 run(s); 1 already" in out
    ok(run_cli("export", "1", "2", "3", "4", "5", "6", "-o", "again.jsonl", "--store", str(tmp_path / "other.db")))
    assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "all.jsonl").read_bytes()


def _sample(doc):
    return doc["results"][0]["processes"][0]["samples"][0]


# name -> (how the exported run is broken: a function of the document, or of its text; the line's text)
SAMPLE = "$.results[0].processes[0].samples[0]"
BROKEN = {
    "string ns_per_op": (lambda d: _sample(d).update(ns_per_op="12.5"),
                         f"{SAMPLE}.ns_per_op: '12.5' is not of type 'number'"),
    "no ns_per_op": (lambda d: _sample(d).pop("ns_per_op"), f"{SAMPLE}: 'ns_per_op' is a required property"),
    "iters 1e40": (lambda d: _sample(d).update(iters=1e40), f"{SAMPLE}.iters: 1e+40 is greater than the maximum"),
    "iters 10**30": (lambda d: _sample(d).update(iters=10**30), f"{SAMPLE}.iters: {10**30} is greater than"),
    "negative iters": (lambda d: _sample(d).update(iters=-1), f"{SAMPLE}.iters: -1 is less than the minimum of 0"),
    "iters of 50 digits": (lambda d: _sample(d).update(iters=10**49), f"{SAMPLE}.iters: an integer of 50 digits"),
    "index 2**40": (lambda d: d["results"][0]["processes"][0].update(index=2**40),
                    "$.results[0].processes[0].index: 1099511627776 is greater than the maximum"),
    "summary median text": (lambda d: d["results"][0]["summary"].update(median_ns="fast"),
                            "$.results[0].summary.median_ns: 'fast' is not of type 'number', 'null'"),
    "argv numbers": (lambda d: d.update(argv=["opcost", 1]), "$.argv[1]: 1 is not of type 'string'"),
    "param object": (lambda d: d["results"][0]["params"].update(via={"a": 1}),
                     "$.results[0].params.via: {'a': 1} is not of type"),
    "lone surrogate": (lambda d: d.update(label="\ud800"), "$.label: text with a lone surrogate"),
    "lone surrogate key": (lambda d: d["env"].update({"\udfff": 1}), "$.env: a key with a lone surrogate"),
    "NaN": (lambda t: t.replace('"ns_per_op": ', '"ns_per_op": NaN, "was": ', 1),
            f"{SAMPLE}.ns_per_op: NaN is not a JSON number"),
    "-Infinity": (lambda t: t.replace('"tsc_per_op": ', '"tsc_per_op": -Infinity, "was": ', 1),
                  f"{SAMPLE}.tsc_per_op: -Infinity is not a JSON number"),
    "1e400": (lambda t: t.replace('"ns_per_op": ', '"ns_per_op": 1e400, "was": ', 1),
              f"{SAMPLE}.ns_per_op: 1e400 is beyond a double"),
    "nested 100000 deep": (lambda t: t[:-2] + ', "deep": ' + "[" * 100000 + "]" * 100000 + "}\n",
                           "nested deeper than 64 levels"),
    "nested 100 deep": (lambda t: t[:-2] + ', "deep": ' + "[" * 100 + "]" * 100 + "}\n",
                        "$.deep[0][0][0]...: nested deeper than 64 levels"),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, probe_bin):
    import subprocess

    from conftest import cli_argv, cli_env

    d = tmp_path_factory.mktemp("import-schema")
    for args in (["run", "syscall.null", *FAST, "--label", "base"], ["export", "base", "-o", "base.json"]):
        cp = subprocess.run(cli_argv(*args), env=cli_env(d), cwd=d, capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
        assert cp.returncode == 0, cp.stderr
    return (d / "base.json").read_text()


@pytest.mark.parametrize("how", BROKEN, ids=list(BROKEN))
@pytest.mark.parametrize("layout", ["document", "jsonl"])
def test_a_broken_document_is_one_line_naming_its_path_and_nothing_is_stored(run_cli, tmp_path, exported, how,
                                                                              layout):
    change, want = BROKEN[how]
    base = json.loads(exported)
    base["uuid"] = "00000000-0000-4000-8000-0000000000ff"
    if change.__code__.co_varnames[0] == "t":
        text = change(json.dumps(base, indent=None if layout == "jsonl" else 1) + "\n")
    else:
        change(base)
        text = json.dumps(base, indent=None if layout == "jsonl" else 1) + "\n"
    good = json.dumps(json.loads(exported) | {"uuid": "00000000-0000-4000-8000-0000000000fe"}, indent=None)
    name = "bad.jsonl" if layout == "jsonl" else "bad.json"
    (tmp_path / name).write_text(good + "\n" + text if layout == "jsonl" else text)
    store = tmp_path / "s.db"
    cp = run_cli("import", name, "--store", str(store))
    assert cp.returncode == 2 and cp.stdout == "" and "Traceback" not in cp.stderr, cp.stderr
    lines = cp.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"opcost: {name}"), lines
    if layout == "jsonl":
        assert lines[0].startswith(f"opcost: {name} line 2: "), lines
    assert want in lines[0], lines[0]
    assert not store.exists()                     # refused before the store was opened


def test_what_was_refused_crashed_the_readers_before(exported):
    """The same document, checked as import checks it: the reasons are the
    ones the issue saw (a string figure, a value the store cannot hold)."""
    doc = json.loads(exported)
    _sample(doc)["ns_per_op"] = "abc"
    with pytest.raises(UsageError, match=r"samples\[0\]\.ns_per_op: 'abc' is not of type 'number'"):
        transfer.check(doc, "f")
    assert transfer.check(json.loads(exported), "f")["schema"] == "opcost.result/1"


# --- the bounds of reading ---------------------------------------------------------

def test_a_file_larger_than_the_bound_is_refused_before_it_is_read(tmp_path, monkeypatch, exported):
    monkeypatch.setattr(docschema, "MAX_BYTES", len(exported) - 1)
    (tmp_path / "big.json").write_text(exported)
    read = []
    real_read = docschema.read_text
    monkeypatch.setattr(docschema, "read_text", lambda f, size: read.append(size) or real_read(f, size))
    with pytest.raises(UsageError, match=r"big\.json: 0 MiB, more than import reads"):
        transfer.read_file(str(tmp_path / "big.json"))
    assert read == [len(exported)]
    monkeypatch.setattr(docschema, "MAX_BYTES", len(exported))
    assert len(transfer.read_file(str(tmp_path / "big.json"))) == 1


def test_an_endless_pipe_is_refused_at_the_bound(tmp_path, monkeypatch):
    """A FIFO fed without end (valid text, so only the bound stops it)."""
    monkeypatch.setattr(docschema, "MAX_BYTES", 3 * 2**20)
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    stop = threading.Event()

    def feed():
        with open(fifo, "wb") as f:
            try:
                while not stop.is_set():
                    f.write(b"[" * 65536)
            except BrokenPipeError:
                pass

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    try:
        with pytest.raises(UsageError, match="endless: more than import reads .3 MiB; an endless device"):
            transfer.read_file(str(fifo))
    finally:
        stop.set()
        t.join(timeout=10)
    assert not t.is_alive()


@pytest.mark.parametrize("device,want", [("/dev/zero", "line 1: binary data (a NUL byte)"),
                                         ("/dev/urandom", "not UTF-8 text")])
def test_an_endless_device_is_refused_at_its_first_chunk(device, want):
    with pytest.raises(UsageError, match=want.replace("(", r"\(").replace(")", r"\)")):
        transfer.read_file(device)


def test_binary_after_text_names_its_line(tmp_path):
    (tmp_path / "f.json").write_bytes(b'{"schema":\n"opcost.result/1",\n\x00}\n')
    with pytest.raises(UsageError, match=r"f\.json line 3: binary data"):
        transfer.read_file(str(tmp_path / "f.json"))


def test_the_inlined_schema_judges_as_the_shipped_one(exported):
    """docschema validates with the $refs replaced by what they name (twice
    as fast); the shipped files, with their $refs resolved by a registry,
    find the same first problem in every broken document above."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match
    from referencing import Registry, Resource

    registry = Registry().with_resources((docschema.schema(n)["$id"], Resource.from_contents(docschema.schema(n)))
                                         for n in docschema.FILES)
    shipped = {n: Draft202012Validator(docschema.schema(n), registry=registry) for n in docschema.FILES}
    docs = [unmask(json.loads(p.read_text())) for p in GOLDEN + OLDER]
    for how, (change, _) in BROKEN.items():
        if change.__code__.co_varnames[0] == "d" and "surrogate" not in how and "digits" not in how:
            doc = json.loads(exported)
            change(doc)
            docs.append(doc)
    assert len(docs) >= 9 + 9
    for doc in docs:
        error = best_match(shipped[doc["schema"]].iter_errors(doc))
        want = None if error is None else f"{error.json_path}: "
        got = docschema.problem(doc, doc["schema"])
        assert (got is None) == (want is None) and (got is None or got.startswith(want)), (got, want)
