"""A remote machine reached with the user's own OpenSSH client: the fleet's
target (`opcost fleet run`). Everything the runner asks (the benchmark
table, CPUs, CPUID, the environment) comes from the remote host, and every
probe process runs there, with the same protocol as locally.

How it talks to the host:
- `ssh` is always started with an argument list (never a local shell), with
  `BatchMode=yes` and `StrictHostKeyChecking=yes` (an unknown host key is
  refused, never accepted), the user's ~/.ssh/config (or `-F FILE`), agent
  and ProxyJump left alone. The host name is checked (no leading '-', no
  whitespace or control character) and always follows `--`.
- One multiplexed connection per host: a master (`ControlMaster=yes`, its
  socket in a private 0700 directory, `ControlPersist` a few seconds: it
  leaves the foreground once connected and ends by itself once no session
  is left, so even a killed opcost leaves no master behind), every other
  command a session over it; closed with `ssh -O exit` at the end.
- The remote command line is built only from fixed strings and values quoted
  with shlex.quote: `sh -c SCRIPT sh ARG...`. The host needs a POSIX shell,
  `uname`, `mktemp` and `cat`; no Python.
- The upload: a "keeper" session makes a private directory (`mktemp -d`,
  0700) and holds it while it reads its stdin; when that closes (the end,
  Ctrl-C, the connection drops) it removes the directory. The probe for the
  host's `uname -m` goes there, checked by sha256 (`sha256sum` there, or read
  back whole when the host has none).
- A remote probe runs under a wrapper that waits on its session's stdin:
  when the session ends (the local ssh is killed, the connection drops) the
  wrapper kills the probe (its helpers die with it: PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .. import probe
from ..arches import arch_of_machine
from ..errors import HostLost, OpcostError, ProbeError, ProbeTimeout, UsageError
from ..text import printable

CONNECT_TIMEOUT_S = 20.0      # the master's connection and authentication
PERSIST_S = 10                # the master ends this long after its last session
COMMAND_TIMEOUT_S = 60.0      # one short remote command (uname, upload, env)

# The remote side of a probe process: stdin (the session) is watched by a
# shell builtin loop; when it closes, the probe is killed. $1 is the padding
# (OPCOST_PAD, the setup randomisation), the rest the probe's command line.
_WRAPPER = r'''OPCOST_PAD=$1; export OPCOST_PAD; shift
exec 3<&0 </dev/null
"$@" &
p=$!
{ while IFS= read -r _ <&3; do :; done; kill -KILL "$p" 2>/dev/null; } &
w=$!
wait "$p"; rc=$?
kill "$w" 2>/dev/null
exit "$rc"'''

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

# What env.collect reads, read there by a POSIX shell. $1 marks sections.
_ENV_FILES = ("/proc/cpuinfo /proc/cmdline /proc/meminfo /proc/sys/kernel/perf_event_paranoid "
              "/sys/hypervisor/type /sys/kernel/realtime /sys/kernel/debug/sched/preempt "
              "/sys/devices/system/cpu/online /sys/devices/system/cpu/smt/control "
              "/sys/devices/system/cpu/cpufreq/boost /sys/devices/system/cpu/intel_pstate/no_turbo "
              "/sys/devices/system/clocksource/clocksource0/current_clocksource "
              "/sys/devices/system/clocksource/clocksource0/available_clocksource "
              "/sys/devices/system/node/online "
              "/sys/devices/system/cpu/cpu[0-9]*/cpu_capacity "
              "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor "
              "/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list "
              "/sys/devices/system/cpu/cpu0/cache/index[0-9]*/level "
              "/sys/devices/system/cpu/cpu0/cache/index[0-9]*/type "
              "/sys/devices/system/cpu/cpu0/cache/index[0-9]*/size "
              "/sys/devices/system/cpu/cpu0/cache/index[0-9]*/shared_cpu_list "
              "/sys/devices/system/cpu/vulnerabilities/*")
_ENV_DIRS = ("/sys/devices/system/cpu /sys/devices/system/cpu/cpu0/cache /sys/devices/system/cpu/vulnerabilities "
             "/sys/bus/event_source/devices")
# The probe's answers (table, CPUID, version), then the environment: one session.
_INFO = r'''m=$1; p=$2
printf '%sT\n' "$m"; "$p" list --json 2>/dev/null; t=$?
printf '\n%sI\n' "$m"; "$p" cpuid 2>/dev/null; i=$?
printf '\n%sV\n' "$m"; "$p" version 2>/dev/null; v=$?
printf '\n%sR %s %s %s\n' "$m" "$t" "$i" "$v"
'''

_ENV_SCRIPT = r'''m=$1
for f in ''' + _ENV_FILES + r'''; do
  if [ -f "$f" ] && [ -r "$f" ]; then printf '%sF %s\n' "$m" "$f"; cat -- "$f" 2>/dev/null; printf '\n'; fi
done
for d in ''' + _ENV_DIRS + r'''; do
  if [ -d "$d" ]; then printf '%sD %s\n' "$m" "$d"; ls -1 -- "$d" 2>/dev/null; fi
done
printf '%sU\n' "$m"; uname -m; uname -n; uname -r; uname -v
printf '%sG\n' "$m"; getconf GNU_LIBC_VERSION 2>/dev/null
r=$(uname -r)
if [ -r /proc/config.gz ] && command -v zcat >/dev/null 2>&1; then
  printf '%sC /proc/config.gz\n' "$m"; zcat /proc/config.gz 2>/dev/null | grep '^CONFIG_PREEMPT'
elif [ -r "/boot/config-$r" ]; then
  printf '%sC %s\n' "$m" "/boot/config-$r"; grep '^CONFIG_PREEMPT' "/boot/config-$r"
fi
printf '%sS\n' "$m"; grep '^Cpus_allowed_list' /proc/self/status
printf '%sZ\n' "$m"
'''

_BAD_HOST = re.compile(r"[\s\x00-\x1f\x7f]")


def check_host(name: str) -> str:
    """A host as ssh takes it (name, user@name, an alias of ssh_config): one
    clear line (UsageError) for what ssh would read as an option or what no
    host is called."""
    if not name:
        raise UsageError("a host name is empty; give NAME or user@NAME (e.g. --hosts lab1,lab2)")
    if name.startswith("-"):
        raise UsageError(f"host '{printable(name)}' starts with '-', which ssh would read as an option; "
                         "give a host name or user@name")
    if _BAD_HOST.search(name):
        raise UsageError(f"host '{printable(name)}' contains whitespace or a control character; "
                         "give a host name or user@name")
    return name


def remote_command(script: str, *args: str) -> str:
    """The one string ssh hands to the remote login shell: `sh -c SCRIPT sh
    ARG...`, every piece quoted."""
    return " ".join(["sh", "-c", shlex.quote(script), "sh", *(shlex.quote(a) for a in args)])


class HostKeyUnknown(UsageError):
    """The host's key is not in known_hosts (or differs): refused before any
    session, with its fingerprint and how to add it."""


class SshTarget:
    """One remote host. `connect()` before use, `close()` after (also when
    interrupted); `cancel(signum)` (from another thread) stops what runs."""

    def __init__(self, host: str, ssh_config: str | None = None):
        self.name = check_host(host)
        self.host = host
        self.ssh_config = ssh_config
        self.arch: str | None = None
        self.machine: str | None = None
        self.remote_dir: str | None = None
        self.remote_probe: str | None = None
        self._ctl_dir: str | None = None
        self._master: subprocess.Popen | None = None   # the master until it goes to the background
        self._master_pid: int | None = None             # the master in the background
        self._master_log: Path | None = None
        self._keeper: subprocess.Popen | None = None
        self._table: dict | None = None
        self._cpuid: dict | None = None
        self._version: str | None = None
        self._env: dict | None = None
        self._cpus: list[int] = []
        self._placements: dict[tuple, str] = {}
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._cancelled: int | None = None
        self.closed_cleanly: bool | None = None   # the upload was removed and the master closed

    # --- ssh command lines ----------------------------------------------------------

    def _opts(self) -> list[str]:
        out = ["ssh"]
        if self.ssh_config:
            out += ["-F", self.ssh_config]
        return out + ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]

    def _base(self) -> list[str]:
        assert self._ctl_dir is not None
        return self._opts() + ["-o", f"ControlPath={self._ctl_dir}/cm", "-o", "ControlMaster=no"]

    def _argv(self, script: str, *args: str) -> list[str]:
        return [*self._base(), "--", self.host, remote_command(script, *args)]

    def launch(self, req: probe.ProbeRequest, argv: list[str]) -> list[str]:
        """The local command line of one remote probe process (probe.run_process's `launch`)."""
        if req.exe or req.program:
            raise UsageError(f"{self.host}: only the probe's own benchmarks run on a fleet host "
                             "(no --exe builds or programs)")
        assert self.remote_probe is not None
        return self._argv(_WRAPPER, "x" * req.pad_bytes, self.remote_probe, *argv)

    # --- host keys ------------------------------------------------------------------

    def _resolved(self) -> dict[str, str]:
        """`ssh -G`: the configuration ssh would use for the host (no network)."""
        cp = subprocess.run([*self._opts(), "-G", "--", self.host], capture_output=True, text=True,
                            timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
        if cp.returncode != 0:
            raise UsageError(f"{self.host}: ssh cannot read its configuration: "
                             f"{_last_line(cp.stderr) or f'exit {cp.returncode}'}")
        out: dict[str, str] = {}
        for line in cp.stdout.splitlines():
            k, _, v = line.partition(" ")
            out.setdefault(k.lower(), v)
        return out

    def key_known(self) -> bool:
        """Whether a known_hosts file ssh reads for this host holds a key
        for it (`ssh-keygen -F`, no network)."""
        conf = self._resolved()
        name = conf.get("hostkeyalias") or conf.get("hostname") or self.host
        port = conf.get("port", "22")
        if port != "22" and not conf.get("hostkeyalias"):
            name = f"[{name}]:{port}"
        files = (conf.get("userknownhostsfile", "") + " " + conf.get("globalknownhostsfile", "")).split()
        for f in files:
            path = os.path.expanduser(f)
            if f == "none" or not os.path.isfile(path):
                continue
            cp = subprocess.run(["ssh-keygen", "-F", name, "-f", path], capture_output=True, text=True,
                                timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
            if cp.returncode == 0 and cp.stdout.strip():
                return True
        return False

    def check_key(self) -> None:
        """HostKeyUnknown when ssh would refuse the host's key. No session
        is opened: known_hosts is read locally; for a key not found there,
        one connection that offers no authentication learns the key's
        fingerprint (and whether ssh accepts it some other way: a CA, a
        KnownHostsCommand)."""
        if self.key_known():
            return
        cmd = [*self._opts(), "-v", "-o", "ControlPath=none", "-o", "PubkeyAuthentication=no",
               "-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no",
               "-o", "GSSAPIAuthentication=no", "-o", "HostbasedAuthentication=no",
               "-o", "NumberOfPasswordPrompts=0", "-o", f"ConnectTimeout={int(CONNECT_TIMEOUT_S)}",
               "--", self.host, "true"]
        try:
            cp = subprocess.run(cmd, capture_output=True, text=True, timeout=CONNECT_TIMEOUT_S + 10,
                                stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return   # unreachable: the connection says so below
        err = cp.stderr
        if "Host key verification failed" not in err:
            return   # accepted (then refused auth, as asked), or unreachable: said when connecting
        m = re.search(r"Server host key: (\S+) (\S+)", err)
        fp = f"{m.group(1)} {m.group(2)}" if m else "fingerprint not shown by ssh"
        conf = self._resolved()
        port = conf.get("port", "22")
        if "IDENTIFICATION HAS CHANGED" in err or "Host key for" in err and "has changed" in err:
            raise HostKeyUnknown(f"{self.host}: its host key CHANGED ({fp}); refused. If the host was "
                                 "reinstalled, check the key on it, remove the old one with "
                                 f"`ssh-keygen -R {conf.get('hostname', self.host)}` and add the new one")
        raise HostKeyUnknown(
            f"{self.host}: unknown host key ({fp}); refused, no session opened. After checking it on the "
            f"host (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), add it: ssh-keyscan -p {port} "
            f"{conf.get('hostname', self.host)} >> ~/.ssh/known_hosts")

    # --- connecting and closing -------------------------------------------------------

    def connect(self, local_probe_for=None) -> None:
        """The master connection, the host's architecture, the upload (checked),
        the table, CPUs and environment. `local_probe_for(arch)` is the local
        path of the static probe for an architecture (default: the packaged or built one, never
        run under an emulator here: the binary itself goes to the host)."""
        short = tempfile.gettempdir() if len(tempfile.gettempdir()) < 40 else "/tmp"
        self._ctl_dir = tempfile.mkdtemp(prefix="opcost-ssh-", dir=short)   # 0700
        self._master_log = Path(self._ctl_dir) / "master.log"
        with open(self._master_log, "wb") as log:
            self._master = subprocess.Popen(
                [*self._opts(), "-o", f"ControlPath={self._ctl_dir}/cm", "-o", "ControlMaster=yes",
                 "-o", f"ControlPersist={PERSIST_S}", "-o", f"ConnectTimeout={int(CONNECT_TIMEOUT_S)}",
                 "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3", "-N", "--", self.host],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S + 10
        while self._master.poll() is None:   # it goes to the background once connected
            if self._cancelled is not None:
                _kill(self._master)
                self._check_cancel()
            if time.monotonic() > deadline:
                _kill(self._master)
                raise HostLost(f"{self.host}: cannot connect: no connection within {CONNECT_TIMEOUT_S + 10:.0f} s")
            time.sleep(0.05)
        if self._master.returncode != 0 or not self._sock().exists():
            raise HostLost(f"{self.host}: cannot connect: {self._master_error()}")
        self._master_pid = self._check_master()
        self._check_cancel()
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

    def _master_error(self) -> str:
        text = self._master_log.read_text(errors="replace") if self._master_log else ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("debug")]
        if any("Host key verification failed" in ln for ln in lines):
            return "host key verification failed (unknown or changed host key)"
        return lines[-1] if lines else f"ssh exit {self._master.returncode if self._master else '?'}"

    def _sock(self) -> Path:
        assert self._ctl_dir is not None
        return Path(self._ctl_dir) / "cm"

    def _check_master(self) -> int | None:
        """The background master's pid (`ssh -O check`), None if it is gone."""
        try:
            cp = subprocess.run([*self._base(), "-O", "check", "--", self.host], capture_output=True, text=True,
                                timeout=10, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None
        m = re.search(r"pid=(\d+)", cp.stderr + cp.stdout)
        return int(m.group(1)) if cp.returncode == 0 and m else None

    def _keep_dir(self) -> None:
        self._keeper = subprocess.Popen(self._argv(_KEEPER), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, start_new_session=True)
        assert self._keeper.stdout is not None
        first = self._keeper.stdout.readline().decode(errors="replace").strip()
        self.machine = first[8:] if first.startswith("machine ") else None
        line = self._keeper.stdout.readline().decode(errors="replace").strip() if self.machine else first
        if not line.startswith("dir /"):
            err = self._keeper.stderr.read().decode(errors="replace") if self._keeper.poll() is not None \
                and self._keeper.stderr else ""
            raise HostLost(f"{self.host}: cannot make a private directory there (mktemp -d): "
                           f"{_last_line(err) or line or 'no answer'}")
        self.remote_dir = line[4:]

    def _upload(self, local: Path) -> None:
        data = local.read_bytes()
        want = hashlib.sha256(data).hexdigest()
        assert self.remote_probe is not None
        got = self._run(remote_command(_UPLOAD + "\n" + _SUM, self.remote_probe), data=data).strip()
        if got == "no-sha256sum":   # read it back whole and check it here
            back = self._run_bytes(remote_command('cat -- "$1"', self.remote_probe))
            got = hashlib.sha256(back).hexdigest()
        got = got.split()[0] if got else ""
        if got != want:
            raise HostLost(f"{self.host}: the uploaded probe's sha256 is {got[:16] or 'missing'}..., "
                           f"not {want[:16]}... (transfer damaged); not run")

    def close(self) -> None:
        """Remove the upload (the keeper removes its directory when its stdin
        closes), close the master (`ssh -O exit`), remove the local socket
        directory. Safe to call twice, and after a failed connect."""
        removed = False
        with self._lock:
            procs = list(self._procs)
        for p in procs:
            _kill(p)
        if self._keeper is not None:
            try:
                out, _ = self._keeper.communicate(timeout=15)   # closes its stdin: the directory goes
                removed = b"removed" in (out or b"")
            except (subprocess.TimeoutExpired, OSError, ValueError):
                _kill(self._keeper)
            self._keeper = None
        if self._master is not None and self._master.poll() is None:
            _kill(self._master)   # never connected
        if self._ctl_dir is not None and self.alive():
            try:
                subprocess.run([*self._base(), "-O", "exit", "--", self.host], capture_output=True,
                               timeout=10, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                pass
            deadline = time.monotonic() + 5
            while self._pid_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            if self._pid_alive() and self._master_pid is not None:
                try:
                    os.kill(self._master_pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self._master = None
        if self._ctl_dir is not None:
            shutil.rmtree(self._ctl_dir, ignore_errors=True)
            self._ctl_dir = None
        if self.closed_cleanly is None:
            self.closed_cleanly = removed or self.remote_dir is None

    def cancel(self, signum: int = signal.SIGINT) -> None:
        """From another thread: stop (Ctrl-C, SIGTERM). The probes running now
        lose their sessions (so the host kills them); whatever runs next raises
        Interrupted in the thread that runs it."""
        self._cancelled = signum
        with self._lock:
            procs = list(self._procs)
        for p in procs:
            _kill(p)

    def _check_cancel(self) -> None:
        if self._cancelled is not None:
            from ..interrupts import Interrupted

            raise Interrupted(self._cancelled)

    def _pid_alive(self) -> bool:
        if self._master_pid is None:
            return False
        try:
            stat = Path(f"/proc/{self._master_pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]

    def alive(self) -> bool:
        """The master connection is up (its process there, its socket too)."""
        return self._ctl_dir is not None and self._pid_alive() and self._sock().exists()

    def _lost(self, what: str) -> HostLost:
        return HostLost(f"{self.host}: connection lost{what}: {self._master_error()}")

    # --- remote commands --------------------------------------------------------------

    def _track(self, p: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(p)
        if self._cancelled is not None:
            _kill(p)

    def _untrack_dead(self) -> None:
        with self._lock:
            self._procs = {p for p in self._procs if p.poll() is None}

    def _run(self, command: str, data: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S) -> str:
        """One short remote command over the master; its stdout as text."""
        return self._run_bytes(command, data, timeout).decode(errors="replace")

    def _run_bytes(self, command: str, data: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S) -> bytes:
        """One short remote command over the master; its stdout."""
        self._check_cancel()
        argv = [*self._base(), "--", self.host, command]
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        self._track(p)
        try:
            out, err = p.communicate(data or b"", timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(p)
            raise HostLost(f"{self.host}: a remote command did not answer within {timeout:.0f} s") from None
        finally:
            self._untrack_dead()
        self._check_cancel()
        if p.returncode != 0:
            if not self.alive() or p.returncode == 255:
                raise self._lost("")
            raise HostLost(f"{self.host}: remote command failed: "
                           f"{_last_line(err.decode(errors='replace')) or f'exit {p.returncode}'}")
        return out

    def _probe_text(self, args: list[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
        assert self.remote_probe is not None
        cp = self._probe_cp(args, timeout)
        if cp.returncode != 0:
            if not self.alive() or cp.returncode == 255:
                raise self._lost("")
            raise ProbeError(f"probe {' '.join(args)} failed on {self.host}: "
                             f"{_last_line(cp.stderr) or f'exit {cp.returncode}'}")
        return cp.stdout

    def _probe_cp(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        self._check_cancel()
        assert self.remote_probe is not None
        r, w = os.pipe()   # the session's stdin, held open while it runs (the wrapper watches it)
        try:
            p = subprocess.Popen(self._argv(_WRAPPER, "", self.remote_probe, *args), stdin=r,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
            self._track(p)
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(p)
                raise ProbeTimeout(f"{self.host}: probe {' '.join(args)} did not answer within {timeout:.0f} s") \
                    from None
        finally:
            os.close(r)
            os.close(w)
            self._untrack_dead()
        self._check_cancel()
        return subprocess.CompletedProcess(args, p.returncode, out, err)

    def _probe_json(self, args: list[str]) -> dict:
        import json

        text = self._probe_text(args)
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ProbeError(f"probe {' '.join(args)} on {self.host} printed invalid JSON: {e}") from e

    def _collect_env(self) -> dict:
        import json

        from ..env import Snapshot, collect

        mark = "@@opcost-" + secrets.token_hex(6) + "@@"
        assert self.remote_probe is not None
        text = self._run(remote_command(_INFO + _ENV_SCRIPT, mark, self.remote_probe))
        files: dict[str, str] = {}
        dirs: dict[str, list[str]] = {}
        sections: dict[str, list[str]] = {}
        kind, name, lines = "", "", []   # type: ignore[var-annotated]
        config: tuple[str, str] | None = None

        def flush() -> None:
            nonlocal config
            if kind == "F":
                files[name] = "\n".join(lines)
            elif kind == "D":
                dirs[name] = [ln for ln in lines if ln]
            elif kind == "C":
                config = (name, "\n".join(lines))
            elif kind == "R":
                sections[kind] = [name]
            elif kind:
                sections[kind] = lines

        for line in text.split("\n"):
            if line.startswith(mark):
                flush()
                head = line[len(mark):]
                kind, name, lines = head[:1], head[2:], []
            else:
                lines.append(line)
        flush()
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
        uname = (sections.get("U", []) + ["", "", "", ""])[:4]
        glibc = next((ln.strip() for ln in sections.get("G", []) if ln.strip()), None)
        status = " ".join(sections.get("S", []))
        m = re.search(r"Cpus_allowed_list:\s*(\S+)", status)
        self._cpus = _cpu_list(m.group(1)) if m else _cpu_list(files.get("/sys/devices/system/cpu/online", "0"))
        snap = Snapshot(files, dirs, (uname[0], uname[1], uname[2], uname[3]), glibc, config,
                        source=f"ssh {self.host}")
        info = {"probe_version": self._version,
                "compiler": self._version.split(" ", 3)[-1] if self._version else None}
        env = collect(self._cpuid, info, snapshot=snap)
        env["fleet_host"] = {"value": self.host, "source": "opcost fleet run --hosts"}
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

    def check(self, req: probe.ProbeRequest, timeout: float = 30) -> str | None:
        self._check_cancel()
        try:
            return probe.check(req, timeout, launch=self.launch)
        except (ProbeError, ProbeTimeout) as e:
            self._check_cancel()
            if not self.alive():
                raise self._lost(" during the preflight") from e
            raise

    def run_process(self, req: probe.ProbeRequest, timeout: float, on_line=None) -> probe.ProcessResult:
        self._check_cancel()
        try:
            res = probe.run_process(req, timeout, on_line, launch=self.launch, on_proc=self._track)
        except (ProbeError, ProbeTimeout) as e:
            self._check_cancel()
            if not self.alive() or "exit status 255" in str(e):
                raise self._lost(f" while measuring {req.bench}") from e
            raise
        finally:
            self._untrack_dead()
        res.front_end = f"ssh {self.host}"
        return res

    def run_concurrent(self, reqs: list[probe.ProbeRequest], timeout: float, on_line=None) -> list:
        self._check_cancel()
        try:
            out = probe.run_concurrent(reqs, timeout, on_line, launch=self.launch, on_proc=self._track)
        finally:
            self._untrack_dead()
        self._check_cancel()
        if not self.alive():
            raise self._lost(" while measuring")
        for r in out:
            if isinstance(r, probe.ProcessResult):
                r.front_end = f"ssh {self.host}"
        return out


def _local_probe(arch: str) -> Path | None:
    """The static probe for `arch` on this machine (not under an emulator:
    the binary is what goes to the host)."""
    for path, _ in probe._candidates(arch):
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


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and not ln.startswith("debug")]
    return lines[-1] if lines else ""


def _kill(p: subprocess.Popen) -> None:
    """A local ssh we started (its own session): killed with its group, reaped.
    Unlike probe._kill_group, only while it runs: an ssh leaves no helpers in
    its group, and a reaped pid's group may be another's by now."""
    probe._close_stdin(p)
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


__all__ = ["SshTarget", "HostKeyUnknown", "check_host", "remote_command", "OpcostError"]
