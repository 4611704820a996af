"""Keeps what was measured: the store and the --json file, updated as the run
goes so that an interruption or a later failure loses nothing.

- The store gets every probe process as soon as it is measured (one
  transaction each). If the store fails or stays locked by another program
  longer than opcost waits, the run goes on without it: the --json file (or,
  without one, a rescue file) gets everything, the store keeps what it had,
  and the run ends with exit 1 saying so. The rescue goes where it can be
  written: beside the store, else the temporary directory, else (a disk
  full everywhere) standard error at the end, and each move is said.
- A regular --json file is rewritten after a process whenever that costs
  little next to measuring (at most about a tenth of the time since the
  last write), so the front end's cost per process stays constant however
  long the run; streams (`-`, a FIFO, a device) get the document once, at
  the end. The final write happens on every way a run ends.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import shlex
import sys
import tempfile
import time
import uuid

from . import __version__, interrupts, output
from .errors import OpcostError, StoreGone
from . import formats
from .model import META, Plan, Run

# A regular export is rewritten when the time since the last write is at
# least this many times what the last write took.
_WRITE_SPACING = 10.0


class RunFiles:
    """The run's document in files: the exports (--json, --export), written
    as the run goes, and the rescue file that takes the whole document when
    a file or the store cannot (`rescue_folders` says where it may go)."""

    def __init__(self, exports: list[tuple[str, str]], warn) -> None:
        self.exports = exports          # (format, path) of the result document: --json, --export
        self.warn = warn
        self.rescue_path: str | None = None
        self.rescue_lost = False        # no rescue file could be written: the document is printed at the end
        self._rescue_next: list[str] = []   # the folders still to try for the rescue file
        self._last_write = 0.0
        self._write_cost = 0.0
        self._warned: set[str] = set()  # targets said to fail during the run

    def targets(self, final: bool) -> list[tuple[str, str]]:
        targets = list(self.exports) + ([("json", self.rescue_path)] if self.rescue_path else [])
        # Before the end: regular files only, and only formats cheap enough to
        # rewrite during the run (html draws its plots once, at the end).
        return targets if final else [(f, p) for f, p in targets
                                      if not output.is_stream(p) and getattr(formats.FORMATS[f], "LIVE", True)]

    @property
    def full_copy(self) -> str | None:
        """A file that holds the whole run whatever the store does: a
        regular --json/--export json file, or the rescue file."""
        if self.rescue_path is not None or self.rescue_lost:
            return self.rescue_path
        return next((p for f, p in self.exports if f == "json" and not output.is_stream(p)), None)

    def write(self, document, final: bool, force: bool = False, near=None, hint=lambda: "") -> None:
        """Write document() to every target (not too often: see _WRITE_SPACING);
        a target that fails starts the rescue (near: the store, whose folder
        is tried first). At the end, a target that failed raises its error
        (hint(): how the rescue file goes into a store, full_copy_said's)."""
        targets = self.targets(final)
        if not targets and not (final and self.rescue_lost):
            return
        now = time.monotonic()
        if not force and now - self._last_write < _WRITE_SPACING * self._write_cost:
            return
        doc = document()
        failed: str | None = None
        for fmt, path in targets:
            try:
                output.write(path, formats.serialize(fmt, doc), give_up=interrupts.pending)
            except OSError as e:
                said = f"cannot write {path} ({e.strerror or e})"
                if path == self.rescue_path:
                    self._rescue_elsewhere(e, doc)
                    continue
                if final:
                    failed = failed or said
                if self.rescue_path is None and not self.rescue_lost:
                    self._warned.add(path)       # said here: not again as "will try again"
                    self.start_rescue([path, near])
                    self._rescue_elsewhere(None, doc, said)
                elif not final and path not in self._warned:
                    self._warned.add(path)
                    self.warn(f"{said}; will try again")
        if final and self.rescue_lost:
            self._print_lost(doc)
        self._last_write = time.monotonic()
        self._write_cost = self._last_write - now
        if failed is not None:
            raise OpcostError(f"{failed}; everything measured is in {self.full_copy_said(hint())}")

    def full_copy_said(self, store_hint: str = "") -> str:
        """Where the whole run is, as the last message says it."""
        if self.rescue_lost:
            return ("no file: it was lost" if sys.stdout.isatty() else
                    "the result document printed on standard output (save it: no file could be written)")
        said = str(self.full_copy)
        if self.rescue_path is not None and store_hint:
            said += f" ({store_hint.format(path=shlex.quote(self.rescue_path))})"
        return said

    def _print_lost(self, doc: dict) -> None:
        if sys.stdout.isatty():
            print("opcost: no folder could take this run's rescue file and standard output is a terminal: "
                  "what it measured is lost", file=sys.stderr)
            return
        print("opcost: no folder could take this run's rescue file: its result document (opcost.result/1) "
              "goes to standard output", file=sys.stderr)
        sys.stdout.flush()
        sys.stdout.buffer.write(formats.serialize("json", doc))
        sys.stdout.flush()

    def start_rescue(self, near: list) -> None:
        folders = rescue_folders(near)
        self.rescue_path = _rescue_in(folders[0]) if folders else None
        self._rescue_next = folders[1:]
        self.rescue_lost = self.rescue_path is None

    def _rescue_elsewhere(self, err: OSError | None, doc: dict, said: str = "") -> None:
        """The rescue file could not be written (err; None: not tried yet):
        the next folder that takes it, else standard output at the end.
        said: why the rescue began (a target that failed), said in the same
        line as where the run goes."""
        data = formats.serialize("json", doc)
        before = f"{said}; " if said else ""
        named = False         # a line has said where the run goes
        while True:
            if err is not None:
                gone = self.rescue_path
                self.rescue_path = _rescue_in(self._rescue_next.pop(0)) if self._rescue_next else None
                self.rescue_lost = self.rescue_path is None
                self.warn(f"{before}cannot write {gone} ({err.strerror or err}); "
                          + (f"the run goes to {self.rescue_path} instead" if self.rescue_path else
                             "no other folder takes it"))
                before, named = "", True
            if self.rescue_path is None:
                if before:
                    self.warn(f"{before}no folder takes a rescue file")
                return
            try:
                output.write(self.rescue_path, data, give_up=interrupts.pending)
                if not named:
                    self.warn(f"{before}the whole run goes to {self.rescue_path}")
                return
            except OSError as e:
                err = e


class Recorder:
    """The run's life cycle: into the store as it is measured, and into its
    files (RunFiles); when the store fails, the run goes on without it."""

    def __init__(self, *, store, exports: list[tuple[str, str]], env: dict, argv: list[str], label: str | None,
                 kind: str = "run", warn=None, labels: dict[str, str] | None = None, plan: Plan | None = None):
        self.store = store
        self.env = env
        self.argv = argv
        self.label = label
        self.labels = dict(labels or {})
        self.uuid = str(uuid.uuid4())   # the run's identity in every store it goes to (export/import)
        self.kind = kind
        self.plan = plan                # what was asked (model.Plan), stored and in the document
        self.warn = warn or (lambda msg: None)
        self.files = RunFiles(exports, self.warn)
        self.run_id: int | None = None
        self.result_ids: dict[int, int] = {}
        self.results: list = []         # the runner's VariantResults
        self.status = "running"
        self.store_error: OpcostError | None = None   # why the store was given up
        self.store_missed = 0                         # processes measured after that
        self.created: str | None = None    # when the run began and ended (UTC), in every document of it
        self.finished: str | None = None
        self._lost_store = None

    @property
    def exports(self) -> list[tuple[str, str]]:
        return self.files.exports

    def _targets(self, final: bool) -> list[tuple[str, str]]:
        return self.files.targets(final)

    @property
    def rescue_path(self) -> str | None:
        return self.files.rescue_path

    @property
    def full_copy(self) -> str | None:
        return self.files.full_copy

    @property
    def full_copy_said(self) -> str:
        """Where the whole run is, and how it goes back into the store that missed it."""
        return self.files.full_copy_said(self._import_hint())

    def _import_hint(self) -> str:
        """How a rescue file goes into a store ({path}: the file): the one
        that missed part of the run; with --no-store, or a store that is
        gone, any; none when the store holds the whole run."""
        if self._lost_store is not None and self.run_id is not None and not isinstance(self.store_error, StoreGone):
            where = getattr(self._lost_store, "path", "")
            return (f"`opcost import {{path}}{' --store ' + shlex.quote(str(where)) if where else ''}` "
                    f"completes run {self.run_id} there")
        if self.store is None:
            return "`opcost import {path}` stores it"
        return ""

    # --- the run's life ----------------------------------------------------------

    def start(self, results) -> None:
        """The run and its variants into the store. Nothing is measured yet,
        so a store that fails here (damaged, locked too long) stops the run
        with its error rather than going on without it."""
        self.results = results
        self.created = _utc_now()
        if self.store:
            # The run and its results in one transaction: a store that fails
            # here keeps nothing (no empty run left "running").
            self.run_id, ids = self.store.begin_run(
                results=[{"position": pos, "bench": vr.variant.bench, "params": vr.variant.all_params(),
                          "op": vr.op, "unit": "ns", "key": vr.variant.key()} for pos, vr in enumerate(results)],
                label=self.label, env=self.env, argv=self.argv, opcost_version=__version__, kind=self.kind,
                labels=self.labels, plan=None if self.plan is None else self.plan.to_dict(), uuid=self.uuid)
            self.result_ids = {id(vr): rid for vr, rid in zip(results, ids)}
        self._write(final=False, force=True)

    def process_done(self, vr, proc: dict) -> None:
        if self.store:
            try:
                self.store.add_process(self.result_ids[id(vr)], idx=proc["index"], header=proc["header"],
                                       samples=proc["warmup"] + proc["samples"], trailer=proc["trailer"],
                                       meta={k: proc[k] for k in META if k in proc})
            except OpcostError as e:
                self._lose_store(e)
        if self.store is None and self.store_error is not None:
            self.store_missed += 1
        self._write(final=False)

    def variant_updated(self, vr) -> None:
        """A variant's status changed (unsupported, failed) during the run."""
        self._store_result(vr)
        self._write(final=False)

    def finish(self, status: str) -> None:
        """Final statuses and summaries into the store, then every export."""
        self.status = status
        self.finished = _utc_now()
        for vr in self.results:
            self._store_result(vr)
        if self.store:
            try:
                self.store.finish_run(self.run_id, status)
            except OpcostError as e:
                self._lose_store(e)
        elif self._lost_store is not None:
            # One quick try to give the run a final status in the store it
            # lost (we waited for a locked one already): "failed", as it misses
            # processes; else `history` shows it abandoned once we are gone.
            try:
                self._lost_store.lock_wait = 0
                self._lost_store.finish_run(self.run_id, "failed")
                # and what it misses, where that is: history and show say it
                self._lost_store.record_missed(self.run_id, self.store_missed, self.full_copy)
            except (OpcostError, AttributeError):
                pass
        self._write(final=True, force=True)

    def document(self) -> dict:
        store_missed = ({"reason": str(self.store_error), "processes": self.store_missed}
                        if self.store_error is not None else None)
        # created/finished/kind as a stored run's document has them, so that
        # an imported --json file keeps when the run was measured.
        stored = ({"created": self.created, "finished": self.finished, "kind": self.kind}
                  if self.created is not None else None)
        return Run([vr.to_model() for vr in self.results], self.env, self.argv, self.status, self.run_id,
                   self.label, stored=stored, store_missed=store_missed, labels=self.labels, uuid=self.uuid,
                   plan=self.plan).to_json()

    # --- when the store fails ----------------------------------------------------

    def _store_result(self, vr) -> None:
        if self.store and id(vr) in self.result_ids:
            try:
                self.store.set_result(self.result_ids[id(vr)], status=vr.status, reason=vr.reason,
                                      summary=vr.summary)
            except OpcostError as e:
                self._lose_store(e)

    def _lose_store(self, err: OpcostError) -> None:
        store, self.store, self.store_error = self.store, None, err
        self.warn(f"{err}")
        if self.full_copy:
            self.warn(f"the store misses the rest of this run; {self.full_copy} gets all of it")
        else:
            self.files.start_rescue([getattr(store, "path", None)])
            self.warn("the store misses the rest of this run; all of it goes to "
                      + (f"{self.rescue_path} (a result document, opcost.result/1)" if self.rescue_path else
                         "standard output at the end (no folder takes a rescue file)"))
        self._lost_store = store if self.run_id is not None else None

    def _write(self, final: bool, force: bool = False) -> None:
        self.files.write(self.document, final, force, near=getattr(self._lost_store or self.store, 'path', None),
                         hint=self._import_hint)


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def state_dir() -> str:
    """$XDG_STATE_HOME/opcost, XDG_STATE_HOME defaulting to ~/.local/state."""
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "opcost")


def rescue_folders(near: list) -> list[str]:
    """Where a rescue file may go, in order: beside each of `near` (the file
    that could not be written, the store; None: none), the temporary
    directory ($TMPDIR, else /tmp), the working directory, the state
    directory (state_dir, made if need be); each once, and only those that
    exist and may be written."""
    wanted = [os.path.dirname(os.path.abspath(os.fspath(p))) for p in near
              if p is not None and not output.is_stream(os.fspath(p))]
    wanted += [tempfile.gettempdir(), os.getcwd() if os.path.isdir(".") else ".", state_dir()]
    out: list[str] = []
    seen: set[str] = set()
    for folder in wanted:
        if folder == wanted[-1]:
            with contextlib.suppress(OSError):
                os.makedirs(folder, exist_ok=True)
        real = os.path.realpath(folder)
        if real not in seen and os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            seen.add(real)
            out.append(folder)
    return out


def _rescue_in(folder: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return os.path.join(folder, f"opcost-unsaved-{stamp}-{os.getpid()}.json")
