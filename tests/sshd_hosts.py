"""Three "hosts" for the fleet's tests and benchmark: Debian's sshd run
directly (`sshd -D -f CONFIG`) on 127.0.0.2, 127.0.0.3 and 127.0.0.4, each
on a free port, with a host key, a client key, an ssh_config and a
known_hosts file generated here. Nothing leaves 127.0.0.0/8.

`start(dir)` -> Hosts (or raises Unavailable with the reason); `Hosts.stop()`.
The ssh_config names the hosts fleet1..fleet3, and `fleet-unknown` (fleet1's
sshd with an empty known_hosts: its key is unknown).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


class Unavailable(Exception):
    pass


@dataclass
class Host:
    name: str
    address: str
    port: int
    config: Path
    log: Path
    proc: subprocess.Popen | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def session_pids(self) -> list[int]:
        """sshd processes serving this host's connections (children of the listener)."""
        if self.proc is None:
            return []
        out = []
        for pid in _descendants(self.proc.pid):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith("sshd"):
                out.append(pid)
        return out

    def kill(self) -> None:
        """The host goes away: its listener and every connection it serves."""
        pids = ([self.proc.pid] if self.proc else []) + self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc:
            self.proc.wait(timeout=5)


@dataclass
class Hosts:
    dir: Path
    ssh_config: Path
    hosts: list[Host] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def restart(self, host: Host) -> None:
        if not host.alive():
            host.proc = _spawn(host)

    def stop(self) -> None:
        for h in self.hosts:
            if h.alive():
                h.kill()


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def _sshd() -> str | None:
    return shutil.which("sshd") or next((p for p in ("/usr/sbin/sshd", "/sbin/sshd") if os.access(p, os.X_OK)), None)


def _spawn(h: Host) -> subprocess.Popen:
    sshd = _sshd()
    assert sshd
    p = subprocess.Popen([sshd, "-D", "-f", str(h.config), "-E", str(h.log)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise Unavailable(f"sshd exited {p.returncode}: {h.log.read_text(errors='replace')[-300:]}")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex((h.address, h.port)) == 0:
                return p
        time.sleep(0.05)
    p.kill()
    raise Unavailable("sshd did not listen within 10 s")


def start(d: Path) -> Hosts:
    if os.geteuid() != 0:
        raise Unavailable("not root: sshd runs as root here")
    if not _sshd() or not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        raise Unavailable("openssh-server/openssh-client not installed (test.sh installs them)")
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # sshd's privilege separation directory
    for name in ("host_key", "client_key"):
        cp = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"opcost-test-{name}",
                             "-f", str(d / name)], capture_output=True, text=True)
        if cp.returncode != 0:
            raise Unavailable(f"ssh-keygen failed: {cp.stderr.strip()}")
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    host_pub = (d / "host_key.pub").read_text().split()
    known, conf = [], []
    hosts = Hosts(d, d / "ssh_config")
    for i, addr in enumerate(ADDRESSES, 1):
        port = _free_port(addr)
        name = f"fleet{i}"
        cfg = d / f"sshd_config.{i}"
        cfg.write_text(f"""ListenAddress {addr}:{port}
HostKey {d / 'host_key'}
PidFile {d / f'sshd.{i}.pid'}
AuthorizedKeysFile {d / 'authorized_keys'}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxSessions 100
MaxStartups 100
LogLevel VERBOSE
""")
        known.append(f"[{addr}]:{port} {host_pub[0]} {host_pub[1]}")
        conf.append(f"""Host {name}
  HostName {addr}
  Port {port}
""")
        hosts.hosts.append(Host(name, addr, port, cfg, d / f"sshd.{i}.log"))
    (d / "known_hosts").write_text("\n".join(known) + "\n")
    (d / "known_hosts.empty").write_text("")
    h1 = hosts.hosts[0]
    conf.append(f"""Host fleet-unknown
  HostName {h1.address}
  Port {h1.port}
  UserKnownHostsFile {d / 'known_hosts.empty'}
""")
    conf.append(f"""Host *
  User root
  IdentityFile {d / 'client_key'}
  IdentitiesOnly yes
  UserKnownHostsFile {d / 'known_hosts'}
  GlobalKnownHostsFile /dev/null
  CheckHostIP no
  LogLevel ERROR
""")
    hosts.ssh_config.write_text("\n".join(conf))
    try:
        for h in hosts.hosts:
            h.proc = _spawn(h)
    except Exception:
        hosts.stop()
        raise
    return hosts


def start_or_skip(d: Path) -> Hosts:
    """start(d) for a pytest test: a host that cannot start skips it, or fails
    it where the hosts are required (OPCOST_REQUIRE_SSHD=1, as test.sh sets)."""
    import pytest

    try:
        return start(d)
    except Unavailable as e:
        if os.environ.get("OPCOST_REQUIRE_SSHD") == "1":
            pytest.fail(f"sshd hosts are required here (OPCOST_REQUIRE_SSHD=1) but cannot start: {e}")
        pytest.skip(f"no sshd hosts: {e}")
