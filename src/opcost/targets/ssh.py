"""A remote machine reached with the user's own OpenSSH client: the fleet's
target (`opcost fleet run`, `--target ssh://HOST`). Everything the runner
asks (the benchmark table, CPUs, CPUID, the environment) comes from the
remote host, and every probe process runs there, with the same protocol as
locally.

This module is what opcost knows of the host; how it talks to it (the
master connection, sessions, host keys, killing) is targets/transport.py.
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

import hashlib
import os
import re
import secrets
import signal
import subprocess
from pathlib import Path

from .. import probe
from ..arches import arch_of_machine
from ..errors import HostLost, OpcostError, ProbeError, ProbeTimeout, UsageError
from .transport import (BOUND, COMMAND_TIMEOUT_S, CONNECT_TIMEOUT_S, PERSIST_S, HostKeyUnknown, SshTransport,
                        check_host, kill, last_line, remote_command)

# The remote side of a probe process: $1 is the padding (OPCOST_PAD, the
# setup randomisation), the rest the probe's command line, killed when its
# session ends.
_WRAPPER = "OPCOST_PAD=$1; export OPCOST_PAD; shift\n" + BOUND

# Holds the upload directory for as long as its session lives.
_KEEPER = r'''umask 077
printf 'machine %s\n' "$(uname -m)"
d=$(mktemp -d "${TMPDIR:-/tmp}/opcost-fleet.XXXXXXXX") || exit 1
trap 'rm -rf "$d"; exit 1' HUP INT TERM PIPE
printf 'dir %s\n' "$d"
while IFS= read -r _; do :; done
rm -rf "$d"
printf 'removed\n'
'''

_UPLOAD = r'''umask 077
cat > "$1" && chmod 700 "$1"'''

_SUM = r'''if command -v sha256sum >/dev/null 2>&1; then sha256sum < "$1"; else echo no-sha256sum; fi'''

# The probe's answers (table, CPUID, version), then the environment: one session.
_INFO = r'''m=$1; p=$2
printf '%sT\n' "$m"; "$p" list --json 2>/dev/null; t=$?
printf '\n%sI\n' "$m"; "$p" cpuid 2>/dev/null; i=$?
printf '\n%sV\n' "$m"; "$p" version 2>/dev/null; v=$?
printf '\n%sR %s %s %s\n' "$m" "$t" "$i" "$v"
'''


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
        self.remote_dir: str | None = None
        self.remote_probe: str | None = None
        self._keeper: subprocess.Popen | None = None
        self._table: dict | None = None
        self._cpuid: dict | None = None
        self._version: str | None = None
        self._env: dict | None = None
        self._cpus: list[int] = []
        self._placements: dict[tuple, str] = {}
        self._builds: dict[str, str] = {}          # a local build (variants) -> its uploaded copy there
        self.closed_cleanly: bool | None = None   # the upload was removed and the master closed

    def launch(self, req: probe.ProbeRequest, argv: list[str]) -> list[str]:
        """The local command line of one remote probe process (probe.run_process's `launch`)."""
        assert self.remote_probe is not None
        exe = self.remote_probe
        if req.exe or req.program:
            local = req.exe or (req.program or ("",))[-1]
            if req.emulator or (req.program and len(req.program) != 1) or local not in self._builds:
                raise UsageError(f"{self.host}: only the probe's own benchmarks and the builds of `opcost fleet "
                                 "variants` for its architecture run on an ssh host")
            if req.exe:
                exe = self._builds[local]
            else:   # `time -- PROGRAM` ends the arguments: the program there is its uploaded copy
                assert argv[-1] == local
                argv = [*argv[:-1], self._builds[local]]
        return self.ssh.argv(_WRAPPER, "x" * req.pad_bytes, exe, *argv)

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
        self._keep_dir()   # and learn `uname -m`
        assert self.machine is not None
        self.arch = arch_of_machine(self.machine)
        find = local_probe_for or _local_probe
        local = find(self.arch)
        if local is None:
            raise HostLost(f"{self.host}: no probe for its architecture ({self.machine}, arch {self.arch}); "
                           f"opcost has probes for {', '.join(probe.KNOWN_ARCHES)} (opcost probe build --arch ...)")
        self.remote_probe = f"{self.remote_dir}/opcost-probe-{self.arch}"
        self._upload(Path(local))
        self._env = self._collect_env()

    def _keep_dir(self) -> None:
        self._keeper = self.ssh.spawn(_KEEPER)
        assert self._keeper.stdout is not None
        first = self._keeper.stdout.readline().decode(errors="replace").strip()
        self.machine = first[8:] if first.startswith("machine ") else None
        line = self._keeper.stdout.readline().decode(errors="replace").strip() if self.machine else first
        if not line.startswith("dir /"):
            err = self._keeper.stderr.read().decode(errors="replace") if self._keeper.poll() is not None \
                and self._keeper.stderr else ""
            raise HostLost(f"{self.host}: cannot make a private directory there (mktemp -d): "
                           f"{last_line(err) or line or 'no answer'}")
        self.remote_dir = line[4:]

    def _upload(self, local: Path, remote: str | None = None, what: str = "probe") -> None:
        """`local` to `remote` there (default: the probe's place), checked by sha256."""
        data = local.read_bytes()
        want = hashlib.sha256(data).hexdigest()
        remote = remote or self.remote_probe
        assert remote is not None
        got = self.ssh.run(remote_command(_UPLOAD + "\n" + _SUM, remote), data=data).strip()
        if got == "no-sha256sum":   # read it back whole and check it here
            back = self.ssh.run_bytes(remote_command('cat -- "$1"', remote))
            got = hashlib.sha256(back).hexdigest()
        got = got.split()[0] if got else ""
        if got != want:
            raise HostLost(f"{self.host}: the uploaded {what}'s sha256 is {got[:16] or 'missing'}..., "
                           f"not {want[:16]}... (transfer damaged); not run")

    def upload_builds(self, paths: list[str]) -> None:
        """Builds made here for this host's architecture (`fleet variants`:
        probes with the user's operation linked in, static programs) into
        the upload directory beside the probe, each checked by sha256 like
        it; requests naming one run its copy there (launch)."""
        assert self.remote_dir is not None
        for path in paths:
            if path not in self._builds:
                remote = f"{self.remote_dir}/build-{len(self._builds) + 1}"
                self._upload(Path(path), remote, "build")
                self._builds[path] = remote

    def close(self) -> None:
        """Remove the upload (the keeper removes its directory when its stdin
        closes), close the connection. Safe to call twice, and after a failed
        connect."""
        removed = False
        self.ssh.kill_sessions()   # the probes first, then their directory
        if self._keeper is not None:
            try:
                out, _ = self._keeper.communicate(timeout=15)   # closes its stdin: the directory goes
                removed = b"removed" in (out or b"")
            except (subprocess.TimeoutExpired, OSError, ValueError):
                kill(self._keeper)
            self._keeper = None
        self.ssh.close()
        if self.closed_cleanly is None:
            self.closed_cleanly = removed or self.remote_dir is None

    def cancel(self, signum: int = signal.SIGINT) -> None:
        """From another thread: stop (Ctrl-C, SIGTERM). The probes running now
        lose their sessions (so the host kills them); whatever runs next raises
        Interrupted in the thread that runs it."""
        self.ssh.cancel(signum)

    # --- the probe there --------------------------------------------------------------

    def _probe_text(self, args: list[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
        assert self.remote_probe is not None
        try:
            cp = self.ssh.run_held(self.ssh.argv(_WRAPPER, "", self.remote_probe, *args), timeout)
        except subprocess.TimeoutExpired:
            raise ProbeTimeout(f"{self.host}: probe {' '.join(args)} did not answer within {timeout:.0f} s") \
                from None
        if cp.returncode != 0:
            if not self.alive() or cp.returncode == 255:
                raise self.ssh.lost("")
            raise ProbeError(f"probe {' '.join(args)} failed on {self.host}: "
                             f"{last_line(cp.stderr) or f'exit {cp.returncode}'}")
        return cp.stdout

    def _probe_json(self, args: list[str]) -> dict:
        import json

        text = self._probe_text(args)
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ProbeError(f"probe {' '.join(args)} on {self.host} printed invalid JSON: {e}") from e

    def _collect_env(self) -> dict:
        import json

        from ..env import Marked, collect, shell_script

        mark = "@@opcost-" + secrets.token_hex(6) + "@@"
        assert self.remote_probe is not None
        out = Marked(self.ssh.run(remote_command(_INFO + shell_script(), mark, self.remote_probe)), mark)
        sections = out.sections
        rcs = " ".join(sections.get("R", [])).split()   # the exit statuses of list, cpuid, version
        if len(rcs) != 3 or rcs[0] != "0":
            self._table = self._probe_json(["list", "--json"])   # says why (its own message), or answers after all
        else:
            try:
                self._table = json.loads("\n".join(sections.get("T", [])))
            except json.JSONDecodeError as e:
                raise ProbeError(f"probe list on {self.host} printed invalid JSON: {e}") from e
        try:
            self._cpuid = json.loads("\n".join(sections.get("I", []))) if rcs[1:2] == ["0"] else None
        except json.JSONDecodeError:
            self._cpuid = None
        self._version = ("\n".join(sections.get("V", [])).strip() or None) if rcs[2:3] == ["0"] else None
        status = " ".join(sections.get("S", []))
        m = re.search(r"Cpus_allowed_list:\s*(\S+)", status)
        self._cpus = _cpu_list(m.group(1)) if m else _cpu_list(out.files.get("/sys/devices/system/cpu/online", "0"))
        info = {"probe_version": self._version,
                "compiler": self._version.split(" ", 3)[-1] if self._version else None}
        env = collect(self._cpuid, info, snapshot=out.snapshot(f"ssh {self.host}"))
        env["fleet_host"] = {"value": self.host, "source": self.via}
        return env

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
        assert self._table is not None
        return self._table

    def placement_of(self, a: int, b: int, arch: str | None = None) -> str:
        import json

        self._only(arch)
        key = (a, b)
        if key not in self._placements:
            try:
                self._placements[key] = json.loads(self._probe_text(["placement", str(a), str(b)]))["name"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ProbeError(f"probe placement on {self.host} printed an unexpected answer: {e}") from e
        return self._placements[key]

    def allowed_cpus(self) -> list[int]:
        return list(self._cpus)

    def default_cpu(self) -> int:
        return self.allowed_cpus()[-1]

    def pmu_catalog(self):
        from ..pmu import Catalog

        return Catalog(notes=[f"named PMU events are not read from {self.host} over ssh: give perf's generic "
                              "names (cycles, instructions...) or raw rNNNN events"])

    def cpuid(self, arch: str | None = None) -> dict | None:
        return self._cpuid

    def probe_version(self, arch: str | None = None) -> str | None:
        return self._version

    def env(self) -> dict:
        assert self._env is not None
        return self._env

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
            from ..arches import elf_arch

            if elf_arch(path) == arch:
                return path
    return None


def _cpu_list(text: str) -> list[int]:
    out: list[int] = []
    for part in text.strip().split(","):
        a, _, b = part.partition("-")
        if a.strip().isdigit():
            out += list(range(int(a), int(b) + 1)) if b.strip().isdigit() else [int(a)]
    return sorted(set(out)) or [0]


__all__ = ["SshTarget", "HostKeyUnknown", "check_host", "remote_command", "OpcostError", "PERSIST_S",
           "CONNECT_TIMEOUT_S"]
