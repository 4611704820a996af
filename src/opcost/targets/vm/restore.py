"""Counting boots from a snapshot (issue 39): under TCG, with opcost's
counting plugin, a guest's instruction counts do not depend on which boot
it is (the PVH entry gives every boot the same kernel layout), so the boot
need not be redone each round. An arm's first counting boot runs an init
that, once up, says "R ready" and waits for its job on the data port
(probe/vminit/init.c, the file /opcost/wait); QEMU then saves the machine
(QMP `stop`, `migrate` to a file, `cont`) and the job is sent. Its later
rounds start QEMU with the same arguments and `-incoming defer`, load that
file (`migrate-incoming`), `cont`, and send their own job: the kernel's
whole start is skipped.

The snapshots are kept in a private temporary directory for the run
(removed when it ends, also on Ctrl-C; not across runs; the folder of a run
killed outright, whose lock no process holds any more, is removed by the
next run that makes one), one per machine:
its QEMU arguments (kernel, kernel parameters, machine type, CPUs, memory,
CPU model, QEMU, the plugin and its arguments but its output file) and the
files its initramfs holds (`opcost variants`' builds, by path, size and
time). A restore that fails or hangs falls back to a fresh boot, which
makes the snapshot again; a machine whose snapshot cannot be saved boots
fresh for the rest of the run. Timing runs never come here: there the boot
is the statistical unit (--vm-restore, docs/kernels.md)."""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ProbeError, ProbeTimeout
from .protocol import BootFailed, trace

WANT = "/opcost/want-kallsyms"   # the job's request for the kernel's symbols (counting.py)
WAIT = "/opcost/wait"            # in the initramfs: the init waits for its job on the data port


@dataclass
class Resume:
    """What a boot through a snapshot does beside a fresh one (boot.run_guest):
    the job to send once the guest waits, and where the snapshot is written
    (the first boot) or read from (a restore), and what that took."""
    job: bytes
    save_to: str | None = None
    restore_from: str | None = None
    save_s: float | None = None
    save_error: str | None = None
    load_s: float | None = None


def _migrated(qmp, what: str, limit: float) -> None:
    """Wait for QMP's migration (out or in) to complete, within `limit` s."""
    t0 = time.monotonic()
    while True:
        st = qmp.cmd("query-migrate") or {}
        status = st.get("status")   # type: ignore[union-attr]
        if status == "completed":
            return
        if status in ("failed", "cancelled"):
            raise ProbeError(f"{what} {status}: {st.get('error-desc', 'QEMU said no more')}")   # type: ignore
        if time.monotonic() - t0 > limit:
            raise ProbeTimeout(f"{what} took more than {limit:g} s")
        time.sleep(0.02)


def save(qmp, r: Resume, limit: float) -> None:
    """The guest waits for its job: stop it, write it to r.save_to, let it
    go on. A failure is kept in r.save_error (the boot goes on without a
    snapshot)."""
    t0 = time.monotonic()
    try:
        qmp.cmd("stop")
        qmp.cmd("migrate", uri="exec:cat > " + shlex.quote(str(r.save_to)))
        _migrated(qmp, "saving the guest", limit)
        r.save_s = time.monotonic() - t0
    except (ProbeError, ProbeTimeout, OSError, ValueError) as e:
        r.save_error = str(e)
    qmp.cmd("cont")
    trace(0.0, f"saved {r.save_s if r.save_s is not None else r.save_error}")


def load(qmp, r: Resume, limit: float) -> None:
    """A QEMU started with -incoming defer: the guest from r.restore_from."""
    t0 = time.monotonic()
    qmp.cmd("migrate-incoming", uri="exec:cat " + shlex.quote(str(r.restore_from)))
    _migrated(qmp, "restoring the guest", limit)
    r.load_s = time.monotonic() - t0


_PREFIX = "opcost-vmsnap-"


def _locked(d: Path) -> int:
    """d/lock, created locked (flock, held until this process ends: also
    when it is killed outright) and only then given its name, so that a
    sweep never finds it unlocked while its run lives."""
    fd = os.open(d / "lock.new", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(d / "lock.new", d / "lock")
    return fd


def sweep(tmp: Path) -> list[Path]:
    """Remove the snapshot folders in `tmp` of runs killed outright (SIGKILL
    leaves their 50-70 MiB behind): those whose lock no process holds.
    flock, not a pid, says so: a pid may be reused or in another pid
    namespace sharing this folder. Returns what it removed."""
    gone = []
    for d in tmp.glob(_PREFIX + "*"):
        try:
            fd = os.open(d / "lock", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:      # being made (no lock yet), not ours, or gone
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:      # its run lives
            os.close(fd)
            continue
        shutil.rmtree(d, ignore_errors=True)
        os.close(fd)
        gone.append(d)
    return gone


@dataclass
class Plan:
    key: tuple
    job: bytes
    files: dict[str, Path]


@dataclass
class Snapshots:
    """This run's snapshots, one per machine (the key), in a private
    temporary directory removed when the run ends."""
    made: dict[tuple, str] = field(default_factory=dict)       # key -> snapshot file
    images: dict[tuple, bytes] = field(default_factory=dict)   # key -> the initramfs it was booted with
    unsaved: set = field(default_factory=set)                  # keys whose save failed: fresh boots
    once: bool = False          # the run plans one round: no later boot to restore, nothing saved
    _dir: tempfile.TemporaryDirectory | None = None
    _lock: int | None = None      # the fd holding the folder's lock while the run lives

    def directory(self) -> Path:
        if self._dir is None:   # its finalizer removes it when the run ends (exit, Ctrl-C)
            sweep(Path(tempfile.gettempdir()))
            self._dir = tempfile.TemporaryDirectory(prefix=_PREFIX)
            self._lock = _locked(Path(self._dir.name))
        return Path(self._dir.name)

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
        self.made.clear()
        self.images.clear()

    def plan(self, argv_key: tuple, cmds_job: bytes, files: dict[str, Path] | None) -> Plan | None:
        """The key of this machine and the job to send, or None when the
        machine boots fresh (its snapshot could not be saved, or the run
        plans one round: saving would cost half a second for nothing)."""
        if self.once:
            return None
        files = dict(files or {})
        want = files.pop(WANT, None)
        stat = []
        for g, h in sorted(files.items()):
            st = os.stat(h)
            stat.append((g, str(h), st.st_size, st.st_mtime_ns))
        key = (*argv_key, tuple(stat))
        if key in self.unsaved:
            return None
        job = cmds_job + (b"want " + Path(want).read_bytes().strip() + b"\n" if want else b"") + b"go\n"
        return Plan(key, job, files)

    def boot(self, p: Plan, guest, image_of) -> tuple:
        """Boot `p`'s machine: restored when it has a snapshot, else fresh,
        saving one. `guest(image, resume)` is boot.run_guest;
        `image_of(files)` the initramfs. Returns (the boot, its record)."""
        cause = None
        if p.key in self.made:
            r = Resume(p.job, restore_from=self.made[p.key])
            try:
                b = guest(self.images[p.key], r)
                return b, {"way": "restored", "load_s": round(r.load_s or 0, 3)}
            except (BootFailed, ProbeError, ProbeTimeout) as e:
                cause = str(e).split("; the console")[0]
                trace(0.0, f"restore failed: {cause}")
                os.unlink(self.made.pop(p.key))
        d = self.directory()
        wait = d / "wait"
        wait.touch()
        image = image_of({**p.files, WAIT: wait})
        r = Resume(p.job, save_to=str(d / f"snap-{len(self.made)}-{time.monotonic_ns()}.qemu"))
        b = guest(image, r)
        rec: dict = {"way": "fresh"}
        if cause:
            rec["restore_failed"] = cause
        if r.save_error is None and r.save_to and os.path.isfile(r.save_to):
            self.made[p.key], self.images[p.key] = r.save_to, image
            rec.update(saved_s=round(r.save_s or 0, 3), snapshot_mib=round(os.path.getsize(r.save_to) / 2**20, 1))
        else:
            self.unsaved.add(p.key)
            rec["save_failed"] = r.save_error or "no snapshot written"
        return b, rec
