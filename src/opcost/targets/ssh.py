"""A remote machine reached with the user's own OpenSSH client: the fleet's
target (`opcost fleet run`, `--target ssh://HOST`). Everything the runner
asks (the benchmark table, CPUs, CPUID, the environment) comes from the
remote host, and every probe process runs there, with the same protocol as
locally.

This module is what opcost knows of the host; how it talks to it (the
master connection, sessions, host keys, killing) is targets/transport.py,
the upload directory targets/ssh_upload.py, the probe there and what it
reads of the host targets/ssh_probe.py.
- The upload: a "keeper" session makes a private directory (`mktemp -d`,
  0700) and holds it while it reads its stdin; when that closes (the end,
  Ctrl-C, the connection drops) it removes the directory. The probe for the
  host's `uname -m` goes there, checked by sha256 (`sha256sum` there, or read
  back whole when the host has none). The host needs a POSIX shell,
  `uname`, `mktemp` and `cat`; no Python. `fleet variants` uploads its
  builds for the host's architecture there too (`upload_builds`), checked
  the same way and removed with the directory; a request for a build runs
  its uploaded copy.
- A remote probe runs under a wrapper bound to its session (transport.BOUND):
  when the session ends (the local ssh is killed, the connection drops) the
  wrapper kills the probe (its helpers die with it: PR_SET_PDEATHSIG).
- The environment: env.shell_script(), made from env's one list of sources,
  read in the same session as the probe's table, CPUID and version.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from .. import probe
from ..arches import arch_of_machine, elf_arch
from ..errors import HostLost, OpcostError, ProbeError, ProbeTimeout, UsageError
from ..pmu import Catalog
from . import ssh_probe
from .ssh_probe import WRAPPER, HostFacts
from .ssh_upload import UploadDir
from .transport import CONNECT_TIMEOUT_S, PERSIST_S, HostKeyUnknown, SshTransport, check_host, remote_command


class SshTarget:
    """One remote host. `connect()` before use, `close()` after (also when
    interrupted); `cancel(signum)` (from another thread) stops what runs."""

    def __init__(self, host: str, ssh_config: str | None = None, port: int | None = None,
                 via: str = "opcost fleet run --hosts"):
        self.ssh = SshTransport(host, ssh_config, port)
        self.via = via                             # how the user named it (the env's fleet_host source)
        self.name = self.host = self.ssh.host
        self.ssh_config = ssh_config
        self.arch: str | None = None
        self.machine: str | None = None
        self.upload = UploadDir(self.ssh)
        self.remote_probe: str | None = None
        self._facts: HostFacts | None = None
        self._placements: dict[tuple, str] = {}
        self.closed_cleanly: bool | None = None   # the upload was removed and the master closed

    def launch(self, req: probe.ProbeRequest, argv: list[str]) -> list[str]:
        """The local command line of one remote probe process (probe.run_process's `launch`)."""
        assert self.remote_probe is not None
        exe = self.remote_probe
        builds = self.upload.builds
        if req.exe or req.program:
            local = req.exe or (req.program or ("",))[-1]
            if req.emulator or (req.program and len(req.program) != 1) or local not in builds:
                raise UsageError(f"{self.host}: only the probe's own benchmarks and the builds of `opcost fleet "
                                 "variants` for its architecture run on an ssh host")
            if req.exe:
                exe = builds[local]
            else:   # `time -- PROGRAM` ends the arguments: the program there is its uploaded copy
                assert argv[-1] == local
                argv = [*argv[:-1], builds[local]]
        return self.ssh.argv(WRAPPER, "x" * req.pad_bytes, exe, *argv)

    def check_key(self) -> None:
        """HostKeyUnknown when ssh would refuse the host's key (no session opened)."""
        self.ssh.check_key()

    def alive(self) -> bool:
        return self.ssh.alive()

    # --- connecting and closing -------------------------------------------------------

    def connect(self, local_probe_for=None) -> None:
        """The master connection, the host's architecture, the upload (checked),
        the table, CPUs and environment. `local_probe_for(arch)` is the local
        path of the static probe for an architecture (default: the packaged or built one, never
        run under an emulator here: the binary itself goes to the host)."""
        self.ssh.connect()
        self.upload.open()   # and learn `uname -m`
        self.machine = self.upload.machine
        assert self.machine is not None
        self.arch = arch_of_machine(self.machine)
        find = local_probe_for or _local_probe
        local = find(self.arch)
        if local is None:
            raise HostLost(f"{self.host}: no probe for its architecture ({self.machine}, arch {self.arch}); "
                           f"opcost has probes for {', '.join(probe.KNOWN_ARCHES)} (opcost probe build --arch ...)")
        self.remote_probe = f"{self.upload.path}/opcost-probe-{self.arch}"
        self.upload.put(Path(local), self.remote_probe)
        self._facts = ssh_probe.read_host(self.ssh, self.remote_probe, self.via)

    def upload_builds(self, paths: list[str]) -> None:
        """Builds made here for this host's architecture (`fleet variants`:
        probes with the user's operation linked in, static programs) into
        the upload directory beside the probe, each checked by sha256 like
        it; requests naming one run its copy there (launch)."""
        self.upload.put_builds(paths)

    def close(self) -> None:
        """Remove the upload (the keeper removes its directory when its stdin
        closes), close the connection. Safe to call twice, and after a failed
        connect."""
        self.ssh.kill_sessions()   # the probes first, then their directory
        removed = self.upload.close()
        self.ssh.close()
        if self.closed_cleanly is None:
            self.closed_cleanly = removed or self.upload.path is None

    def cancel(self, signum: int = signal.SIGINT) -> None:
        """From another thread: stop (Ctrl-C, SIGTERM). The probes running now
        lose their sessions (so the host kills them); whatever runs next raises
        Interrupted in the thread that runs it."""
        self.ssh.cancel(signum)

    def _host(self) -> HostFacts:
        assert self._facts is not None, "connect() first"
        return self._facts

    # --- the Target interface ---------------------------------------------------------

    def host_arch(self) -> str:
        assert self.arch is not None
        return self.arch

    def arches(self) -> list[str]:
        return [self.host_arch()]

    def _only(self, arch: str | None) -> None:
        if arch is not None and arch != self.arch:
            raise UsageError(f"arch={arch}: {self.host} is {self.arch} and runs only its own probe there")

    def benchmark_table(self, arch: str | None = None) -> dict:
        self._only(arch)
        return self._host().table

    def placement_of(self, a: int, b: int, arch: str | None = None) -> str:
        self._only(arch)
        if (a, b) not in self._placements:
            assert self.remote_probe is not None
            self._placements[(a, b)] = ssh_probe.placement(self.ssh, self.remote_probe, a, b)
        return self._placements[(a, b)]

    def allowed_cpus(self) -> list[int]:
        return list(self._facts.cpus) if self._facts else []

    def default_cpu(self) -> int:
        return self.allowed_cpus()[-1]

    def pmu_catalog(self):
        return Catalog(notes=[f"named PMU events are not read from {self.host} over ssh: give perf's generic "
                              "names (cycles, instructions...) or raw rNNNN events"])

    def cpuid(self, arch: str | None = None) -> dict | None:
        return self._facts.cpuid if self._facts else None

    def probe_version(self, arch: str | None = None) -> str | None:
        return self._facts.version if self._facts else None

    def env(self) -> dict:
        return self._host().env

    def front_end_apart(self, reqs: list[probe.ProbeRequest]) -> bool:
        """The front end is on another machine: its work never shares a measuring CPU."""
        return True

    def check(self, req: probe.ProbeRequest, timeout: float = 30) -> str | None:
        self.ssh.check_cancel()
        try:
            return probe.check(req, timeout, launch=self.launch)
        except (ProbeError, ProbeTimeout) as e:
            self.ssh.check_cancel()
            if not self.alive():
                raise self.ssh.lost(" during the preflight") from e
            raise

    def run_process(self, req: probe.ProbeRequest, timeout: float, on_line=None) -> probe.ProcessResult:
        self.ssh.check_cancel()
        try:
            res = probe.run_process(req, timeout, on_line, launch=self.launch, on_proc=self.ssh.track)
        except (ProbeError, ProbeTimeout) as e:
            self.ssh.check_cancel()
            if not self.alive() or "exit status 255" in str(e):
                raise self.ssh.lost(f" while measuring {req.bench}") from e
            raise
        finally:
            self.ssh.untrack_dead()
        res.front_end = f"ssh {self.host}"
        return res

    def run_concurrent(self, reqs: list[probe.ProbeRequest], timeout: float, on_line=None) -> list:
        self.ssh.check_cancel()
        try:
            out = probe.run_concurrent(reqs, timeout, on_line, launch=self.launch, on_proc=self.ssh.track)
        finally:
            self.ssh.untrack_dead()
        self.ssh.check_cancel()
        if not self.alive():
            raise self.ssh.lost(" while measuring")
        for r in out:
            if isinstance(r, probe.ProcessResult):
                r.front_end = f"ssh {self.host}"
        return out


def _local_probe(arch: str) -> Path | None:
    """The static probe for `arch` on this machine (not under an emulator:
    the binary is what goes to the host)."""
    for path, _ in probe.candidates(arch):
        if path.is_file() and os.access(path, os.X_OK):
            if elf_arch(path) == arch:
                return path
    return None


__all__ = ["SshTarget", "HostKeyUnknown", "check_host", "remote_command", "OpcostError", "PERSIST_S",
           "CONNECT_TIMEOUT_S"]
