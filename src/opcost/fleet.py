"""One study on many machines (`opcost fleet run`): per host, the session of
`opcost run` (plan, preflight, measure with the runner, record after every
process) on that host's SSH target (targets/ssh.py), its results stored
with the label host=NAME, so compare, series --by host and report work
across hosts. Layer 5: uses session, never the commands.

Hosts run in worker threads, at most `parallel_hosts` at once; each opens
the store itself (the stores take concurrent writers). The main thread only
waits: a signal (Ctrl-C, SIGTERM, SIGHUP) cancels every host (its running
probes lose their sessions, so the hosts kill them; each run is finished as
interrupted with what it measured), and every host's upload is removed.
A host that fails (unreachable, no probe for its architecture, connection
lost, probe crash) is one line; the others go on.

`fleet ab` is the same with `ab`'s variants and looks per host (given by
the command: `variants_of(target)`, `look_of(host)`): each host interleaves
its own arms and stores its own ab run; the fleet record (`open_record`,
`close_record`) is a run of kind fleet, with no results, whose plan names
the hosts, and whose label fleet=ID every host's run carries
(comparison.fleet_document puts them together).

`fleet variants` connects every host first (`connect_all`: each host's
`uname -m` is what its builds are for), builds once per architecture
there is, then measures (`run`); its `variants_of(target)` uploads the
host's builds beside its probe.
"""

from __future__ import annotations

import copy
import os
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from . import __version__, interrupts, session
from .console import warn
from .errors import HostLost, OpcostError, UsageError
from .safetext import printable
from .store import open_store
from .targets.ssh import HostKeyUnknown, SshTarget, check_host


def parse_hosts(text: str) -> list[str]:
    """--hosts FILE (one host a line, # comments) or h1,h2,...: the hosts,
    each checked, none twice."""
    if os.path.isfile(text):
        try:
            with open(text, encoding="utf-8", errors="replace") as f:
                raw = [ln.split("#", 1)[0].strip() for ln in f]
        except OSError as e:
            raise UsageError(f"--hosts {printable(text)}: cannot read it ({e.strerror})") from None
        hosts = [h for h in raw if h]
        if not hosts:
            raise UsageError(f"--hosts {printable(text)} names no host; put one host a line (user@name or an "
                             "ssh_config alias)")
    else:
        if "/" in text:
            raise UsageError(f"--hosts {printable(text)}: no such file; give a file of hosts or h1,h2,...")
        hosts = [h.strip() for h in text.split(",")]
        if any(not h for h in hosts):
            raise UsageError(f"--hosts '{printable(text)}' has an empty name; give h1,h2,... or a file")
    seen: set[str] = set()
    for h in hosts:
        check_host(h)
        if h in seen:
            raise UsageError(f"--hosts names {printable(h)} twice; give each host once")
        seen.add(h)
    return hosts


def host_exports(exports: list[tuple[str, str]], host: str, n_hosts: int) -> list[tuple[str, str]]:
    """--json/--export paths of one host: '{host}' in a path is the host's
    name; with several hosts every path must have it (one file each)."""
    out = []
    for fmt, path in exports:
        if "{host}" not in path and n_hosts > 1:
            raise UsageError(f"--export {fmt}:{printable(path)}: with {n_hosts} hosts, put {{host}} in the path "
                             "(one file per host, e.g. --json results-{host}.json)")
        out.append((fmt, path.replace("{host}", host)))
    return out


@dataclass
class HostOutcome:
    host: str
    status: str = "pending"            # ok | failed | usage | interrupted | pending
    reason: str | None = None
    run_id: int | None = None
    exit_code: int = 0
    results: list[dict] = field(default_factory=list)
    processes: int = 0
    cleaned: bool | None = None        # upload removed and master closed
    document: dict | None = None       # the host's run, opcost.result/1 (with its plan), as stored


class Fleet:
    def __init__(self, hosts: list[str], specs: list[str], cpu: str | None, settings: session.Settings,
                 ssh_config: str | None, parallel_hosts: int, say=warn, *,
                 variants_of: Callable[[Any], list] | None = None, look_of: Callable[[str], Any] | None = None,
                 fleet_id: str | None = None):
        """variants_of(target): the variants to measure on a host (default:
        `specs` as `run` plans them); look_of(host): the sequential look of
        that host's runner (ab without -p); fleet_id: the label fleet=ID of
        every host's run (a fleet record's). With variants_of, the document
        is the fleet's: no host writes exports of its own."""
        self.hosts = hosts
        self.specs = specs
        self.cpu = cpu
        self.settings = settings
        self.ssh_config = ssh_config
        self.parallel_hosts = max(1, min(parallel_hosts, len(hosts)))
        self.say = say
        self.variants_of = variants_of
        self.look_of = look_of
        self.fleet_id = fleet_id
        self.targets = {h: SshTarget(h, ssh_config) for h in hosts}
        self.outcomes = {h: HostOutcome(h) for h in hosts}
        self._slots = threading.Semaphore(self.parallel_hosts)
        self._stop: int | None = None
        self._ended: list[str] = []

    def check_keys(self) -> list[HostKeyUnknown]:
        """Every host's key, before any session is opened anywhere."""
        out = []
        for h in self.hosts:
            try:
                self.targets[h].check_key()
            except HostKeyUnknown as e:
                out.append(e)
        return out

    def connect_all(self) -> dict[str, str]:
        """Connect every host (at most parallel_hosts at a time), before `run`:
        {host: its architecture} of those connected; one that cannot be is
        failed (one line at the end), and `run` leaves it out."""
        self._each(self._connect)
        return {h: t.arch for h, t in self.targets.items() if self.outcomes[h].status == "pending" and t.arch}

    @property
    def stopped(self) -> int | None:
        """The signal that cancelled the hosts (None: none did)."""
        return self._stop

    def close_all(self) -> None:
        """Every host's upload removed and connection closed (a study refused
        after connect_all)."""
        for h, t in self.targets.items():
            t.close()
            self.outcomes[h].cleaned = t.closed_cleanly

    def run(self) -> None:
        self._each(self._host)

    def _each(self, work: Callable[[str], None]) -> None:
        self._ended = []
        threads = [threading.Thread(target=work, args=(h,), name=f"fleet-{h}", daemon=True)
                   for h in self.hosts]
        for t in threads:
            t.start()
        # Not Thread.join: a signal raised inside it can leave the thread marked as
        # ended while it still runs (CPython gh-90882). Each host says it ended.
        while len(self._ended) < len(threads):
            try:
                time.sleep(0.1)
                if interrupts.received() is not None and self._stop is None:
                    self.cancel(interrupts.received() or 2)
            except KeyboardInterrupt as e:
                self.cancel(getattr(e, "signum", 2))
        for t in threads:
            t.join()

    def cancel(self, signum: int) -> None:
        self._stop = signum
        for t in self.targets.values():
            t.cancel(signum)

    def _host(self, host: str) -> None:
        try:
            self._host_slot(host)
        finally:
            self._ended.append(host)

    def _connect(self, host: str) -> None:
        out = self.outcomes[host]
        try:
            with self._slots:
                if self._stop is not None:
                    out.status, out.reason = "interrupted", "not started (interrupted)"
                    return
                try:
                    self.targets[host].connect()
                except KeyboardInterrupt:
                    out.status, out.reason = "interrupted", "interrupted"
                except OpcostError as e:
                    out.status, out.reason, out.exit_code = "failed", str(e), e.exit_code
                except Exception as e:   # a bug on one host must not take the others down
                    out.status, out.reason, out.exit_code = "failed", f"internal error: {e!r}", 1
                if out.status != "pending":
                    self.targets[host].close()
                    out.cleaned = self.targets[host].closed_cleanly
        finally:
            self._ended.append(host)

    def _host_slot(self, host: str) -> None:
        out = self.outcomes[host]
        if out.status != "pending":   # not connected (connect_all said why)
            return
        with self._slots:
            if self._stop is not None:
                out.status, out.reason = "interrupted", "not started (interrupted)"
                self.targets[host].close()   # connected by connect_all: its upload goes
                return
            target = self.targets[host]
            try:
                self._measure(host, target, out)
            except KeyboardInterrupt:
                out.status, out.reason = "interrupted", "interrupted"
            except UsageError as e:
                out.status, out.reason, out.exit_code = "usage", str(e), e.exit_code
            except OpcostError as e:
                out.status, out.reason, out.exit_code = "failed", str(e), e.exit_code
            except Exception as e:   # a bug on one host must not take the others down
                out.status, out.reason, out.exit_code = "failed", f"internal error: {e!r}", 1
            finally:
                target.close()
                out.cleaned = target.closed_cleanly

    def _measure(self, host: str, target: SshTarget, out: HostOutcome) -> None:
        if target.remote_probe is None:   # not yet connected (connect_all)
            target.connect()
        s = copy.copy(self.settings)
        s.labels = {**self.settings.labels, "host": host, **({"fleet": self.fleet_id} if self.fleet_id else {})}
        s.exports = [] if self.variants_of else host_exports(self.settings.exports, host, len(self.hosts))
        if self.parallel_hosts > 1:
            s.progress = False
        if self.variants_of is not None:
            variants = self.variants_of(target)
        else:
            variants = session.plan_variants(self.specs, session.cpu_option(self.cpu, target), target)
        look = self.look_of(host) if self.look_of is not None else None
        m = session.measure(s, variants, target, look=look, warn=lambda msg: self.say(f"{host}: {msg}"))
        out.run_id = m.recorder.run_id
        out.document = {**m.recorder.document(), "kind": s.kind}
        out.results = m.results
        out.processes = sum(len(vr.processes) for vr in m.outcome.results)
        o = m.outcome
        out.exit_code = o.exit_code
        if m.recorder.store_error is not None and out.exit_code == 0:
            out.exit_code = m.recorder.store_error.exit_code
        if o.status == "interrupted":
            out.status, out.reason = "interrupted", "interrupted"
        elif o.error is not None:
            out.status, out.reason = "failed", str(o.error)
        elif out.exit_code != 0:
            failed = [vr.variant.key() for vr in o.results if vr.status == "failed"]
            out.status, out.reason = "failed", ("failed: " + ", ".join(failed)) if failed else "failed"
        else:
            out.status = "ok"

    def exit_code(self) -> int:
        codes = [o.exit_code for o in self.outcomes.values()]
        if any(o.status == "usage" for o in self.outcomes.values()):
            return 2
        if self._stop is not None or interrupts.received() is not None:
            return 128 + (self._stop or interrupts.received() or 2)
        if any(o.status != "ok" for o in self.outcomes.values()):
            return max([c for c in codes if c] or [1])
        return 0


def open_record(settings: session.Settings, hosts: list[str]) -> tuple[int | None, str]:
    """The fleet record, before any host is measured: a run of kind fleet
    (no results; its plan is the settings' with the hosts) labelled with
    the user's labels and fleet=ID, ID new. (None, ID) with --no-store."""

    fleet_id = uuid.uuid4().hex[:12]
    if settings.no_store:
        return None, fleet_id

    plan = replace(settings.plan, kind="fleet", hosts=list(hosts), stages=list(settings.stages),
                   boundary=settings.boundary, of=None if settings.kind == "ab" else settings.kind)
    with open_store(settings.store, on_wait=warn) as store:
        run_id = store.create_run(label=settings.label, env={}, argv=settings.argv, opcost_version=__version__,
                                  kind="fleet", labels={**settings.labels, "fleet": fleet_id}, plan=plan.to_dict())
    return run_id, fleet_id


def close_record(settings: session.Settings, run_id: int | None, f: Fleet) -> tuple[int | None, str | None]:
    """The record's end: complete when every host completed, interrupted
    after a signal, failed otherwise; removed when no host stored a run
    (bad input on every host, none reachable: nothing to put together).
    Returns the record's id (None: none kept) and None, or why the store
    would not take its end."""
    if run_id is None:
        return None, None
    statuses = {o.status for o in f.outcomes.values()}
    status = "complete" if statuses == {"ok"} else "interrupted" if "interrupted" in statuses else "failed"
    nothing = all(o.run_id is None for o in f.outcomes.values())

    try:
        with open_store(settings.store, on_wait=warn) as store:
            if nothing:
                store.delete_runs([run_id])
                return None, None
            store.finish_run(run_id, status)
    except OpcostError as e:
        return run_id, str(e)
    return run_id, None


__all__ = ["Fleet", "HostOutcome", "parse_hosts", "host_exports", "open_record", "close_record", "HostLost"]
