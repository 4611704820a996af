"""The SSH transport: one multiplexed OpenSSH connection to a host and the
commands run over it. It knows ssh, its options, its host keys and its
processes; it knows nothing of the probe, its table or the host's
environment (targets/ssh.py, the fleet's target, holds those), so another
target that runs commands over ssh reuses it as it is. Three parts:
`HostKeys` (what ssh would say of the host's key, no session opened),
`Master` (the master connection: its socket directory and process) and
`SshTransport` (the sessions over it, and stopping them), which holds the
other two.

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
  with shlex.quote: `sh -c SCRIPT sh ARG...`. The host needs a POSIX shell.
- `BOUND`: the start of a remote script whose command is killed when its
  session ends (the local ssh killed, the connection dropped): the script
  waits on the session's stdin (`run_held` holds it open).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from ..errors import HostLost, UsageError
from ..interrupts import Interrupted
from ..safetext import printable

CONNECT_TIMEOUT_S = 20.0      # the master's connection and authentication
PERSIST_S = 10                # the master ends this long after its last session
COMMAND_TIMEOUT_S = 60.0      # one short remote command (uname, upload, env)

# The remote side of a command bound to its session: stdin (the session) is
# watched by a shell builtin loop; when it closes, the command is killed.
# "$@" is the command; a caller may put its own lines before this.
BOUND = r'''exec 3<&0 </dev/null
"$@" &
p=$!
{ while IFS= read -r _ <&3; do :; done; kill -KILL "$p" 2>/dev/null; } &
w=$!
wait "$p"; rc=$?
kill "$w" 2>/dev/null
exit "$rc"'''

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
    user, at, host = name.rpartition("@")
    if at and not user:
        raise UsageError(f"host '{printable(name)}' has no user before '@'; give user@name, or the name alone")
    if at and (not host or host.startswith(":")):
        raise UsageError(f"host '{printable(name)}' has no name after '@'; give user@name (e.g. me@lab1)")
    return name


def remote_command(script: str, *args: str) -> str:
    """The one string ssh hands to the remote login shell: `sh -c SCRIPT sh
    ARG...`, every piece quoted."""
    return " ".join(["sh", "-c", shlex.quote(script), "sh", *(shlex.quote(a) for a in args)])


class HostKeyUnknown(UsageError):
    """The host's key is not in known_hosts (or differs): refused before any
    session, with its fingerprint and how to add it."""


class HostKeys:
    """What ssh would say of one host's key, learnt without opening a
    session: its configuration (`ssh -G`), its known_hosts files
    (`ssh-keygen -F`), and for a key found in none of them one connection
    that offers no authentication."""

    def __init__(self, host: str, opts: list[str]):
        self.host = host
        self.opts = opts                           # ssh and the options every command shares

    def resolved(self) -> dict[str, str]:
        """`ssh -G`: the configuration ssh would use for the host (no network)."""
        cp = subprocess.run([*self.opts, "-G", "--", self.host], capture_output=True, text=True,
                            timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
        if cp.returncode != 0:
            raise UsageError(f"{self.host}: ssh cannot read its configuration: "
                             f"{last_line(cp.stderr) or f'exit {cp.returncode}'}")
        out: dict[str, str] = {}
        for line in cp.stdout.splitlines():
            k, _, v = line.partition(" ")
            out.setdefault(k.lower(), v)
        return out

    def known(self) -> bool:
        """Whether a known_hosts file ssh reads for this host holds a key
        for it (`ssh-keygen -F`, no network)."""
        conf = self.resolved()
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

    def check(self) -> None:
        """HostKeyUnknown when ssh would refuse the host's key. No session
        is opened: known_hosts is read locally; for a key not found there,
        one connection that offers no authentication learns the key's
        fingerprint (and whether ssh accepts it some other way: a CA, a
        KnownHostsCommand)."""
        if self.known():
            return
        cmd = [*self.opts, "-v", "-o", "ControlPath=none", "-o", "PubkeyAuthentication=no",
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
        conf = self.resolved()
        port = conf.get("port", "22")
        if "IDENTIFICATION HAS CHANGED" in err or "Host key for" in err and "has changed" in err:
            raise HostKeyUnknown(f"{self.host}: its host key CHANGED ({fp}); refused. If the host was "
                                 "reinstalled, check the key on it, remove the old one with "
                                 f"`ssh-keygen -R {conf.get('hostname', self.host)}` and add the new one")
        raise HostKeyUnknown(
            f"{self.host}: unknown host key ({fp}); refused, no session opened. After checking it on the "
            f"host (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), add it: ssh-keyscan -p {port} "
            f"{conf.get('hostname', self.host)} >> {self.known_hosts_file(conf)}")

    @staticmethod
    def known_hosts_file(conf: dict[str, str]) -> str:
        """The file ssh adds host keys to: the first UserKnownHostsFile of
        `ssh -G` (a config or -F may name another than ~/.ssh/known_hosts)."""
        files = [f for f in conf.get("userknownhostsfile", "").split() if f != "none"]
        if not files:
            return "~/.ssh/known_hosts"
        home = files[0].startswith("~/")     # left to the shell to expand
        return ("~/" if home else "") + shlex.quote(files[0][2:] if home else files[0])


class Master:
    """The multiplexed master connection to one host: its private socket
    directory, its process (in the foreground until connected, then in the
    background, found again by `ssh -O check`), its log. Sessions run over
    its socket (`base()`)."""

    def __init__(self, host: str, opts: list[str]):
        self.host = host
        self.opts = opts                           # ssh and the options every command shares
        self.ctl_dir: str | None = None
        self._proc: subprocess.Popen | None = None   # the master until it goes to the background
        self._pid: int | None = None                 # the master in the background
        self._log: Path | None = None

    def base(self) -> list[str]:
        """ssh, as a session over this master."""
        assert self.ctl_dir is not None
        return self.opts + ["-o", f"ControlPath={self.ctl_dir}/cm", "-o", "ControlMaster=no"]

    def start(self, check_cancel: Callable[[], None]) -> None:
        """Connect (HostLost when it cannot); `check_cancel()` is asked while
        waiting, and what it raises ends the attempt."""
        short = tempfile.gettempdir() if len(tempfile.gettempdir()) < 40 else "/tmp"
        self.ctl_dir = tempfile.mkdtemp(prefix="opcost-ssh-", dir=short)   # 0700
        self._log = Path(self.ctl_dir) / "master.log"
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen(
                [*self.opts, "-o", f"ControlPath={self.ctl_dir}/cm", "-o", "ControlMaster=yes",
                 "-o", f"ControlPersist={PERSIST_S}", "-o", f"ConnectTimeout={int(CONNECT_TIMEOUT_S)}",
                 "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3", "-N", "--", self.host],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S + 10
        while self._proc.poll() is None:   # it goes to the background once connected
            try:
                check_cancel()
            except BaseException:
                kill(self._proc)
                raise
            if time.monotonic() > deadline:
                kill(self._proc)
                raise HostLost(f"{self.host}: cannot connect: no connection within {CONNECT_TIMEOUT_S + 10:.0f} s")
            time.sleep(0.05)
        if self._proc.returncode != 0 or not self._sock().exists():
            raise HostLost(f"{self.host}: cannot connect: {self.error()}")
        self._pid = self._check()

    def error(self) -> str:
        """What the master's log says went wrong, in one line."""
        text = self._log.read_text(errors="replace") if self._log else ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("debug")]
        if any("Host key verification failed" in ln for ln in lines):
            return "host key verification failed (unknown or changed host key)"
        if lines:
            return lines[-1]
        if self._proc is not None and self._proc.returncode not in (0, None):
            return f"ssh exit {self._proc.returncode}"
        # exit 0 is the master going to the background once connected: the loss came later, unsaid
        return ("its ssh connection ended without a message (the host rebooted, or its sshd or the network "
                "went away?)" if not self._pid_alive() else "ssh could not use its connection (exit 255) and "
                "said nothing")

    def _sock(self) -> Path:
        assert self.ctl_dir is not None
        return Path(self.ctl_dir) / "cm"

    def _check(self) -> int | None:
        """The background master's pid (`ssh -O check`), None if it is gone."""
        try:
            cp = subprocess.run([*self.base(), "-O", "check", "--", self.host], capture_output=True, text=True,
                                timeout=10, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None
        m = re.search(r"pid=(\d+)", cp.stderr + cp.stdout)
        return int(m.group(1)) if cp.returncode == 0 and m else None

    def close(self) -> None:
        """Close the master (`ssh -O exit`, killed if it lingers), remove the
        socket directory. Safe to call twice, and after a failed start."""
        if self._proc is not None and self._proc.poll() is None:
            kill(self._proc)   # never connected
        if self.ctl_dir is not None and self.alive():
            try:
                subprocess.run([*self.base(), "-O", "exit", "--", self.host], capture_output=True,
                               timeout=10, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                pass
            deadline = time.monotonic() + 5
            while self._pid_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            if self._pid_alive() and self._pid is not None:
                try:
                    os.kill(self._pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self._proc = None
        if self.ctl_dir is not None:
            shutil.rmtree(self.ctl_dir, ignore_errors=True)
            self.ctl_dir = None

    def _pid_alive(self) -> bool:
        if self._pid is None:
            return False
        try:
            stat = Path(f"/proc/{self._pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]

    def alive(self) -> bool:
        """The master connection is up (its process there, its socket too)."""
        return self.ctl_dir is not None and self._pid_alive() and self._sock().exists()


class SshTransport:
    """The connection to one host. `connect()` before use, `close()` after
    (also when interrupted); `cancel(signum)` (from another thread) kills
    what runs, and whatever runs next raises Interrupted."""

    def __init__(self, host: str, ssh_config: str | None = None, port: int | None = None):
        self.host = check_host(host)
        self.ssh_config = ssh_config
        self.port = port
        self.master = Master(self.host, self.opts())
        self.keys = HostKeys(self.host, self.opts())
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self.cancelled: int | None = None

    # --- ssh command lines ----------------------------------------------------------

    def opts(self) -> list[str]:
        out = ["ssh"]
        if self.ssh_config:
            out += ["-F", self.ssh_config]
        if self.port is not None:
            out += ["-p", str(self.port)]
        return out + ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]

    def base(self) -> list[str]:
        return self.master.base()

    def argv(self, script: str, *args: str) -> list[str]:
        """The local command line of `sh -c SCRIPT sh ARG...` there, over the master."""
        return [*self.base(), "--", self.host, remote_command(script, *args)]

    # --- host keys ------------------------------------------------------------------

    def resolved(self) -> dict[str, str]:
        """`ssh -G`: the configuration ssh would use for the host (no network)."""
        return self.keys.resolved()

    def check_key(self) -> None:
        """HostKeyUnknown when ssh would refuse the host's key (no session opened)."""
        self.keys.check()

    # --- connecting and closing -------------------------------------------------------

    def connect(self) -> None:
        """The master connection (HostLost when it cannot be had)."""
        self.master.start(self.check_cancel)
        self.check_cancel()

    def close(self) -> None:
        """Kill the sessions still running, close the master, remove the
        local socket directory. Safe to call twice, and after a failed connect."""
        self.kill_sessions()
        self.master.close()

    def kill_sessions(self) -> None:
        """End every session still running (their local ssh killed)."""
        with self._lock:
            procs = list(self._procs)
        for p in procs:
            kill(p)

    def cancel(self, signum: int = signal.SIGINT) -> None:
        """From another thread: stop (Ctrl-C, SIGTERM). The sessions running
        now end (their commands there are killed, when BOUND); whatever runs
        next raises Interrupted in the thread that runs it."""
        self.cancelled = signum
        self.kill_sessions()

    def check_cancel(self) -> None:
        if self.cancelled is not None:
            raise Interrupted(self.cancelled)

    def alive(self) -> bool:
        """The master connection is up (its process there, its socket too)."""
        return self.master.alive()

    def lost(self, what: str) -> HostLost:
        return HostLost(f"{self.host}: connection lost{what}: {self.master.error()}")

    # --- remote commands --------------------------------------------------------------

    def track(self, p: subprocess.Popen) -> None:
        """A local ssh of a session: killed by cancel() and close()."""
        with self._lock:
            self._procs.add(p)
        if self.cancelled is not None:
            kill(p)

    def untrack_dead(self) -> None:
        with self._lock:
            self._procs = {p for p in self._procs if p.poll() is None}

    def spawn(self, script: str, *args: str) -> subprocess.Popen:
        """A long session (stdin, stdout, stderr pipes, bytes): the caller
        talks to it and ends it (kill(), or closing its stdin)."""
        p = subprocess.Popen(self.argv(script, *args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        return p

    def run(self, command: str, data: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S) -> str:
        """One short remote command over the master; its stdout as text."""
        return self.run_bytes(command, data, timeout).decode(errors="replace")

    def run_bytes(self, command: str, data: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S) -> bytes:
        """One short remote command over the master; its stdout."""
        self.check_cancel()
        argv = [*self.base(), "--", self.host, command]
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        self.track(p)
        try:
            out, err = p.communicate(data or b"", timeout=timeout)
        except subprocess.TimeoutExpired:
            kill(p)
            raise HostLost(f"{self.host}: a remote command did not answer within {timeout:.0f} s") from None
        finally:
            self.untrack_dead()
        self.check_cancel()
        if p.returncode != 0:
            if not self.alive() or p.returncode == 255:
                raise self.lost("")
            raise HostLost(f"{self.host}: remote command failed: "
                           f"{last_line(err.decode(errors='replace')) or f'exit {p.returncode}'}")
        return out

    def run_held(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        """A local command line (of argv()) run with its stdin held open
        while it runs (a BOUND script watches it): its exit status and text
        output; subprocess.TimeoutExpired after `timeout` (the session killed)."""
        self.check_cancel()
        r, w = os.pipe()
        try:
            p = subprocess.Popen(argv, stdin=r, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
            self.track(p)
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill(p)
                raise
        finally:
            os.close(r)
            os.close(w)
            self.untrack_dead()
        self.check_cancel()
        return subprocess.CompletedProcess(argv, p.returncode, out, err)


def last_line(text: str) -> str:
    """The last line of ssh's stderr that is not a debug line."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and not ln.startswith("debug")]
    return lines[-1] if lines else ""


def kill(p: subprocess.Popen) -> None:
    """A local ssh we started (its own session): killed with its group, reaped.
    Unlike probe's process groups, only while it runs: an ssh leaves no
    helpers in its group, and a reaped pid's group may be another's by now."""
    if p.stdin is not None:
        try:
            p.stdin.close()
        except OSError:
            pass
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
