"""An ssh host's upload directory (targets/ssh.py's): a "keeper" session
makes a private directory there (`mktemp -d`, 0700) and holds it while it
reads its stdin; when that closes (the end, Ctrl-C, the connection drops) it
removes the directory. What goes there (the probe, `fleet variants`'
builds) is checked by sha256: `sha256sum` there, or read back whole when the
host has none."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from ..errors import HostLost
from .transport import SshTransport, kill, last_line, remote_command

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


class UploadDir:
    """The directory on one host: `open()` makes it (and learns the host's
    `uname -m`), `put()` uploads into it, `close()` has it removed."""

    def __init__(self, ssh: SshTransport):
        self.ssh = ssh
        self.host = ssh.host
        self.machine: str | None = None          # the host's `uname -m`
        self.path: str | None = None             # the directory there
        self.builds: dict[str, str] = {}         # a local build (variants) -> its uploaded copy there
        self._keeper: subprocess.Popen | None = None

    def open(self) -> None:
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
        self.path = line[4:]

    def put(self, local: Path, remote: str, what: str = "probe") -> None:
        """`local` to `remote` there, checked by sha256."""
        data = local.read_bytes()
        want = hashlib.sha256(data).hexdigest()
        got = self.ssh.run(remote_command(_UPLOAD + "\n" + _SUM, remote), data=data).strip()
        if got == "no-sha256sum":   # read it back whole and check it here
            back = self.ssh.run_bytes(remote_command('cat -- "$1"', remote))
            got = hashlib.sha256(back).hexdigest()
        got = got.split()[0] if got else ""
        if got != want:
            raise HostLost(f"{self.host}: the uploaded {what}'s sha256 is {got[:16] or 'missing'}..., "
                           f"not {want[:16]}... (transfer damaged); not run")

    def put_builds(self, paths: list[str]) -> None:
        """Builds made here (`fleet variants`) beside the probe, each once."""
        assert self.path is not None
        for path in paths:
            if path not in self.builds:
                remote = f"{self.path}/build-{len(self.builds) + 1}"
                self.put(Path(path), remote, "build")
                self.builds[path] = remote

    def close(self) -> bool:
        """Close the keeper's stdin, so that it removes the directory: whether
        it said it did. Safe to call twice."""
        removed = False
        if self._keeper is not None:
            try:
                out, _ = self._keeper.communicate(timeout=15)   # closes its stdin: the directory goes
                removed = b"removed" in (out or b"")
            except (subprocess.TimeoutExpired, OSError, ValueError):
                kill(self._keeper)
            self._keeper = None
        return removed
