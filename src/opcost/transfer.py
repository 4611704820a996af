"""Moving runs between stores: `opcost export` writes stored runs as
`opcost.result/1` JSON, `opcost import` reads such files back into a store.

The file format, one rule: a file holds either one document (one run: as
`show --json` and `run --json` write it, indented) or JSON lines (two or more
runs: one compact document per line). `import` takes both, and any
`opcost.result/1` document (`run --json` files too). A file is checked whole
before anything is stored, and stored in one transaction: a bad file stores
nothing. A run's identity is its uuid (runs of older opcost documents: a
hash of their content), so importing a run twice stores it once."""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
import time
from collections import deque
from itertools import repeat
from typing import Any

import orjson

from . import docschema, labels
from .errors import UsageError
from .model import COMPARISON_SCHEMA, RESULT_SCHEMA, plan_problem
from .safetext import printable
from .store import open_store, rows
from .store.base import RESULT_STATUSES, RUN_STATUSES, identity


def serialize(docs: list[dict]) -> bytes:
    """One run: the indented document; several: JSON lines."""
    if len(docs) == 1:
        return (json.dumps(docs[0], indent=1, allow_nan=False) + "\n").encode()
    return "".join(json.dumps(d, separators=(",", ":"), allow_nan=False) + "\n" for d in docs).encode()


def read_file(path: str) -> list[dict]:
    """The checked documents of one file (see the module's rule); a problem
    is one UsageError naming the file and the line. Reading is bounded
    (docschema: size, nesting, numbers, text) and each document is validated
    against the schema of opcost.result/1 (`schemas/result-1.json`)."""
    name = printable(path)
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            text = docschema.read_text(f, st.st_size if stat.S_ISREG(st.st_mode) else None)
    except IsADirectoryError:
        raise UsageError(f"{name} is a directory; give files written by `opcost export` or `run --json`") from None
    except docschema.DocumentProblem as e:
        raise UsageError(f"{name}{'' if e.line is None else f' line {e.line}'}: {e}") from None
    except OSError as e:
        raise UsageError(f"cannot read {name} ({e.strerror or e}); give files written by `opcost export` "
                         "or `run --json`") from None
    if not text.strip():
        raise UsageError(f"{name} is empty; give files written by `opcost export` or `run --json`")
    try:
        whole = docschema.loads(text)
    except (json.JSONDecodeError, docschema.DocumentProblem) as e:
        if text.lstrip().split("\n", 1)[0].strip() in ("{", "["):    # one indented document
            if isinstance(e, docschema.DocumentProblem):
                raise UsageError(f"{name}: {printable(str(e))}") from None
            raise UsageError(f"{name} line {e.lineno}: {_json_problem(e, text)}") from None
        return _json_lines(name, text)
    return [check(whole, name if text.strip().count("\n") else f"{name} line 1")]


def _json_lines(name: str, text: str) -> list[dict]:
    docs = []
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = docschema.loads(line)
        except docschema.DocumentProblem as e:
            raise UsageError(f"{name} line {n}: {printable(str(e))}") from None
        except json.JSONDecodeError as e:
            raise UsageError(f"{name} line {n}: {_json_problem(e, line)}") from None
        docs.append(check(doc, f"{name} line {n}"))
    return docs


def _json_problem(e: json.JSONDecodeError, text: str) -> str:
    body = text.strip()
    if body.startswith(("{", "[")) and (e.pos >= len(text.rstrip()) or not body.endswith(("}", "]"))):
        return "truncated JSON (it ends in the middle of a document); export it again"
    return (f"not JSON ({e.msg}: column {e.colno}); give a file of `opcost export` (one document, or one "
            "per line)")


def _fail(where: str, what: str) -> UsageError:
    return UsageError(f"{where}: {what}")


def check(doc: Any, where: str) -> dict:
    """An opcost.result/1 document that the store can take as it is."""

    if not isinstance(doc, dict):
        raise _fail(where, f"a JSON {type(doc).__name__}, not an opcost.result/1 document (an object)")
    schema = doc.get("schema")
    if schema == COMPARISON_SCHEMA:
        raise _fail(where, f"an {COMPARISON_SCHEMA} document (a comparison); import takes the runs, "
                    f"{RESULT_SCHEMA} (`opcost export RUN`)")
    if schema != RESULT_SCHEMA:
        raise _fail(where, f"schema {printable(json.dumps(schema))}, expected \"{RESULT_SCHEMA}\"")

    def need(cond: bool, what: str) -> None:
        if not cond:
            raise _fail(where, f"{what} (not a whole {RESULT_SCHEMA} document)")

    need(isinstance(doc.get("results"), list), "results must be a list")
    need(isinstance(doc.get("env", {}), dict), "env must be an object")
    need(isinstance(doc.get("argv", []), list), "argv must be a list")
    need(doc.get("status", "running") in RUN_STATUSES, f"status must be one of {', '.join(RUN_STATUSES)}")
    for k in ("created", "finished", "label", "kind", "uuid", "opcost_version"):
        need(doc.get(k) is None or isinstance(doc.get(k), str), f"{k} must be text")
    if doc.get("plan") is not None:
        problem = plan_problem(doc["plan"])
        need(problem is None, str(problem))
    tags = doc.get("labels", {})
    need(isinstance(tags, dict) and all(isinstance(v, str) for v in tags.values()),
         "labels must be an object of text values")
    for k in tags:
        try:
            labels.check_key(k)
        except UsageError as e:
            raise _fail(where, str(e)) from None
    for i, r in enumerate(doc["results"]):
        need(isinstance(r, dict) and isinstance(r.get("bench"), str) and isinstance(r.get("params", {}), dict),
             f"results[{i}] must have bench (text) and params (an object)")
        need(r.get("status", "pending") in RESULT_STATUSES,
             f"results[{i}].status must be one of {', '.join(RESULT_STATUSES)}")
        need(r.get("summary") is None or isinstance(r.get("summary"), dict), f"results[{i}].summary must be an object")
        need(isinstance(r.get("processes", []), list), f"results[{i}].processes must be a list")
        for j, p in enumerate(r.get("processes") or []):
            need(isinstance(p, dict) and isinstance(p.get("index"), int)
                 and all(isinstance(p.get(k, []), list) and all(isinstance(s, dict) for s in p.get(k) or [])
                         for k in ("samples", "warmup")),
                 f"results[{i}].processes[{j}] must have index (a number) and samples, warmup (lists of objects)")
        idx = [p["index"] for p in r.get("processes") or []]
        need(len(idx) == len(set(idx)), f"results[{i}] has two processes with the same index")
    problem = docschema.problem(doc, RESULT_SCHEMA)    # every field's type, as docs/result-json.md gives it
    if problem is not None:
        raise _fail(where, f"{printable(problem)} (not a valid {RESULT_SCHEMA} document; docs/result-json.md)")
    return doc


def held_after(url: str | None, docs: list[dict]) -> str:
    """After a signal: how many of `docs` the store at `url` holds, read back
    from it (not counted while storing: a transaction may have committed
    just before the signal), as a message's clause."""

    want = {identity(d) for d in docs}
    try:
        with open_store(url, readonly=True) as store:
            have = {r.get("uuid") for r in store.list_runs()}
    except Exception as e:      # the store gone too: say so rather than guess
        return f"what the store holds could not be read back ({printable(str(e))[:200]})"
    n = len(want & have)
    return (f"read back after the signal, the store holds {n} of the {len(want)} run(s) given"
            + (f"; {len(want) - n} not stored (run the same command again to store them)" if n < len(want) else ""))


def load_settled(store, run_id: int, wait: bool, warn) -> dict:
    """Run `run_id` to copy or export. One still being measured ("running",
    its opcost alive): with `wait`, waited for (polled every second) until
    it has ended; else copied as a partial snapshot, marked "interrupted"
    (a copied run is never "running" where it goes), said, and completed
    in place by a later copy or import once the run has ended."""

    doc = store.load_run(run_id)
    if doc.get("status") != "running":
        return doc
    if wait:
        warn(f"run {run_id} is still being measured: waiting for it to end (--wait)")
        while doc.get("status") == "running":
            time.sleep(1.0)
            doc = store.load_run(run_id)
        return doc
    n = sum(len(r.get("processes") or []) for r in doc.get("results") or [])
    warn(f"run {run_id} is still being measured: copied as a partial snapshot ({n} process(es) so far), "
         "marked interrupted; copy it again once it has ended to complete it in place (or give --wait)")
    return doc | {"status": "interrupted"}


# --- a large file: read as it is stored -------------------------------------------

def streamed(path: str) -> bool:
    """Whether `import` reads this file as a stream (a regular file of more
    than docschema.STREAM_FROM bytes) rather than whole."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > docschema.STREAM_FROM


class StreamedRun:
    """One document of a streamed file, for the store's import: `head`, its
    run-level fields before its results (uuid and run_id among them);
    `processes()`, each (result position, process, plain samples) as it is
    read and checked; then `skeleton`, the document without its processes,
    checked as `check` checks a whole one. Errors are UsageError, as
    read_file's."""

    def __init__(self, reader: Any, where: str, head: dict, keys: Any):
        self.reader = reader
        self.where = where
        self.head = head
        self.uuid: str = head["uuid"]
        self.skeleton: dict | None = None
        self._keys = keys      # the document's remaining top-level keys (docschema.Stream.members)
        self.parser: ProcessParser | None = None     # a worker process parsing processes ahead

    def processes(self, prepared: bool = False) -> Any:
        """(result position, process, plain) of each process as it is read.
        prepared (the store's import of a new run), with a worker process
        (`parser`): a plain process may come as its header, trailer and
        the like (no samples) with `plain` its sample rows' columns
        (ProcessParser.prepare)."""
        s, doc = self.reader, dict(self.head)
        results: list = []
        try:
            for _ in s.items():
                pos = len(results)
                if s.peek() != "{":
                    results.append(s.value()[0])
                    continue
                res: dict = {}
                results.append(res)
                for key in s.members():
                    if key != "processes" or s.peek() != "[":
                        res[key] = s.value()[0]
                        continue
                    res[key] = []
                    seen: set = set()
                    if self.parser is not None and prepared:
                        yield from self._parsed_apart(pos, seen)
                        continue
                    for j in s.items():
                        proc, text = s.process()
                        yield pos, *self._checked(proc, text, pos, j, seen)
            doc["results"] = results
            for key in self._keys:
                doc[key] = s.value()[0]
        except docschema.SchemaProblem as e:
            raise _fail(self.where, f"{printable(str(e))} (not a valid {RESULT_SCHEMA} document; "
                        "docs/result-json.md)") from None
        except docschema.DocumentProblem as e:
            raise _fail(self.where if e.line is None else self._line(e.line), printable(str(e))) from None
        for k in ("uuid", "run_id"):
            if doc.get(k) != self.head.get(k):
                raise _fail(self.where, f"{k} after the results: a file over {docschema.STREAM_FROM // 2**20} MiB "
                            "is stored as it is read, so its uuid and run_id come before its results (as "
                            "`opcost export` writes them)")
        self.skeleton = check(doc, self.where)

    def _checked(self, proc: Any, text: str, pos: int, j: int, seen: set) -> tuple[Any, bool]:
        proc, plain = docschema.checked_process(proc, text, f"$.results[{pos}].processes[{j}]")
        self._shape(proc, pos, j, seen)
        return proc, plain

    def _parsed_apart(self, pos: int, seen: set) -> Any:
        """A result's list of processes as `processes` reads it, each parsed,
        checked and turned into rows by the worker while the store inserts
        the one before: up to _AHEAD of them split off the text ahead (the
        text from the oldest on kept, docschema.Stream.keep). What the worker
        cannot parse as one value, and a list's last process, are read here
        as the single reading does, in order; a problem met reading ahead
        is raised once every process before it is stored."""
        s, parser = self.reader, self.parser
        assert parser is not None
        s.take("[")
        if s.peek() == "]":
            s.pos += 1
            return
        pending: deque = deque()      # (j, absolute start, future), oldest first
        ahead: docschema.DocumentProblem | None = None    # met reading ahead: raised after pending
        j, whole = 0, False            # the next to split off; whole: it is read here
        try:
            while True:
                while not pending and (whole or ahead is not None):
                    if ahead is not None:
                        raise ahead
                    proc, text = s.process()
                    yield pos, *self._checked(proc, text, pos, j, seen)
                    j, whole = j + 1, False
                    if self._ends(s):
                        return
                while not whole and ahead is None and len(pending) < _AHEAD:
                    try:
                        s.peek()
                        start = s.base + s.pos
                        s.keep = pending[0][1] if pending else start
                        text = s.split()
                        if text is None:
                            whole = True
                            break
                        pending.append((j, start, parser.submit(text, f"$.results[{pos}].processes[{j}]")))
                        j += 1
                        s.take(",")       # split found `},{"index":` after it
                    except docschema.DocumentProblem as e:
                        ahead = e
                if not pending:
                    continue
                k, start, fut = pending.popleft()
                got = fut.result()
                if got[0] == "unparsed":    # not one JSON value for orjson: read again here, as process() does
                    for *_, f in pending:
                        f.cancel()
                    pending.clear()
                    s.keep, s.pos, ahead = None, start - s.base, None
                    proc, text = s.whole_process()
                    yield pos, *self._checked(proc, text, pos, k, seen)
                    j, whole = k + 1, False
                    if self._ends(s):
                        return
                    continue
                s.keep = pending[0][1] if pending else None
                if got[0] == "schema":
                    raise docschema.SchemaProblem(got[1])
                if got[0] == "document":
                    raise docschema.DocumentProblem(got[1])
                proc, plain = got[1], got[2]
                self._shape(proc if plain is False else {**proc, "samples": [], "warmup": []}, pos, k, seen)
                yield pos, proc, plain
        finally:
            s.keep = None
            for *_, f in pending:
                f.cancel()

    @staticmethod
    def _ends(s: Any) -> bool:
        """After a process: True at its list's end, False before another."""
        nxt = s.peek()
        s.pos += 1
        if nxt == "]":
            return True
        if nxt != ",":
            s._bad("Expecting ',' delimiter", s.pos - 1)
        return False

    def _shape(self, proc: Any, i: int, j: int, seen: set) -> None:
        ok = isinstance(proc, dict) and isinstance(proc.get("index"), int) and all(
            isinstance(proc.get(k, []), list) and all(map(isinstance, proc.get(k) or [], repeat(dict)))
            for k in ("samples", "warmup"))
        if not ok:
            raise _fail(self.where, f"results[{i}].processes[{j}] must have index (a number) and samples, warmup "
                        f"(lists of objects) (not a whole {RESULT_SCHEMA} document)")
        if proc["index"] in seen:
            raise _fail(self.where, f"results[{i}] has two processes with the same index (not a whole "
                        f"{RESULT_SCHEMA} document)")
        seen.add(proc["index"])

    def _line(self, line: int | None) -> str:
        return self.where.split(" line ")[0] + (f" line {line}" if line is not None else "")


# --- a large file's processes parsed by a second process ------------------------------
#
# A streamed file's processes are parsed (orjson), checked and turned into the
# store's sample rows by worker processes while this one inserts the process
# before (`StreamedRun.processes(prepared=True)`): on two cores an import
# costs about the larger of the two halves rather than their sum. Two
# workers where the import may use two CPUs: the worker's half is the
# larger (about 5 ms of a 10^3-sample process against 3 here), so one
# worker kept this process waiting about half its time. Only streamed files
# (over docschema.STREAM_FROM): a smaller import does not pay the start of
# a process.

_WORKERS = 2      # on two CPUs: the importer waits for one worker about half its time (issue 38)
_AHEAD = 2 * _WORKERS        # processes at the workers or done, not yet stored: bounds the memory


def _worker_start() -> None:
    """In the worker: a signal is for the importing process, which stops
    the worker (ProcessParser.close). An importer killed outright (SIGKILL,
    no close) leaves its worker waiting on a queue whose writing end the
    worker itself holds (a fork): a thread watches the parent and ends the
    worker when it has gone (within 0.2 s)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="opcost-parent-watch", daemon=True).start()


def _prepare(text: str, where: str) -> tuple:
    """In the worker: one process's text, parsed as Stream.process parses it
    and checked as StreamedRun checks it. ("unparsed",): not one value for
    orjson (the importer reads it itself); ("schema" | "document", words):
    refused; ("proc", process, False): valid, its samples not plain; else
    ("proc", the process without samples and warmup, (warmup count,
    iters, ns_per_op, tsc_per_op, data)): each a column of its sample rows,
    warmup first (what RunImporting._put_process inserts)."""
    try:
        proc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return ("unparsed",)
    try:
        proc, plain = docschema.checked_process(proc, text, where)
    except docschema.SchemaProblem as e:
        return ("schema", str(e))
    except docschema.DocumentProblem as e:
        return ("document", str(e))
    if not plain or not isinstance(proc, dict):
        return ("proc", proc, False)
    warmup, samples = proc.pop("warmup", None) or [], proc.pop("samples", None) or []
    return ("proc", proc, rows.sample_columns(warmup, samples, True))


class ProcessParser:
    """The worker processes of an import's streamed files, started when
    first used (a fork: nothing to import again), stopped by close(): their
    work cancelled, waited for (a task is one process: milliseconds).
    Results are taken in the order of submission."""

    def __init__(self) -> None:
        self._pool: Any = None

    def submit(self, text: str, where: str) -> Any:
        if self._pool is None:
            import multiprocessing    # only for an import of a streamed file
            from concurrent.futures import ProcessPoolExecutor    # as multiprocessing

            workers = _WORKERS if len(os.sched_getaffinity(0)) > 1 else 1
            self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                             initializer=_worker_start)
        return self._pool.submit(_prepare, text, where)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "ProcessParser":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def stream_file(path: str, heads: list, parser: ProcessParser | None = None) -> Any:
    """The StreamedRun of each document of a large file, in order (each
    one's processes read before the next is looked for); `heads` gets each
    run's head as it is read (what a signal's message reads back). Raises
    docschema.NeedsWhole before anything is read past a first document
    that cannot be stored as it is read (not an object, no uuid before its
    results)."""
    name = printable(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise UsageError(f"cannot read {name} ({e.strerror or e}); give files written by `opcost export` "
                         "or `run --json`") from None
    with f:
        s = docschema.Stream(f)
        first = True
        try:
            while True:
                nxt = s.peek()
                if nxt == "" and not first:
                    return
                if nxt != "{":
                    if first:
                        raise docschema.NeedsWhole()
                    s.take("{")
                start = s.line_at(s.pos)
                keys = s.members()
                head: dict = {}
                for key in keys:
                    if key == "results" and s.peek() == "[":
                        break
                    head[key] = s.value()[0]
                else:       # no list of results
                    if first:
                        raise docschema.NeedsWhole()
                    check(head, f"{name} line {start}")
                multiline = s.line_at(s.pos) > start
                where = name if first and multiline else f"{name} line {start}"
                if not (isinstance(head.get("uuid"), str) and head["uuid"]) or "results" in head:
                    if first:
                        raise docschema.NeedsWhole()
                    raise _fail(where, f"no uuid before the results: a file over {docschema.STREAM_FROM // 2**20}"
                                " MiB is stored as it is read (as `opcost export` writes it, uuid first)")
                check(head | {"results": []}, where)      # the wrong kind of file is refused at once
                heads.append(head)
                run = StreamedRun(s, where, head, keys)
                run.parser = parser
                yield run
                if run.skeleton is None:
                    raise RuntimeError("a streamed run's processes were not all read")
                first = False
        except docschema.DocumentProblem as e:
            raise _fail(name + (f" line {e.line}" if e.line is not None else ""), printable(str(e))) from None
