"""The guest's whole userland, written by opcost: a newc cpio of the static
init (probe/vminit/init.c), the static probe, the builds of `opcost
variants` and the job (which commands to run), as the kernel unpacks an
initramfs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
import dataclasses
import tempfile

from ... import probe
from ...arches import elf_arch
from ...errors import UsageError


def cpio_newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A newc ("070701") cpio archive of (name, mode, data) entries, as the
    kernel unpacks an initramfs: 110-byte ASCII header, name NUL-terminated,
    both padded to 4 bytes, then the data padded to 4; closed by TRAILER!!!."""
    out = bytearray()
    for ino, (name, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], 1):
        nb = name.encode() + b"\0"
        nlink = 2 if mode & 0o040000 else 1
        fields = (ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(nb), 0)
        out += b"070701" + b"".join(b"%08X" % v for v in fields) + nb
        out += b"\0" * (-len(out) % 4)
        out += data
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def job_text(cmds: list[tuple]) -> bytes:
    """The init's job: per command its arguments and environment, and, as a
    third element, the executable in the guest when it is not the probe
    (`opcost variants`' builds: guest_files)."""
    lines = ["opcost-vminit/1"]
    for argv, env, *exe in cmds:
        for a in argv:
            if "\n" in a:
                raise UsageError(f"argument {a!r} contains a newline; it cannot reach the guest")
            lines.append("arg " + a)
        lines += [f"env {k}={v}" for k, v in env.items()]
        if exe and exe[0]:
            lines.append("exe " + exe[0])
        lines.append("end")
    return ("\n".join(lines) + "\n").encode()


def vminit_path(arch: str | None = None) -> Path | None:
    """The static init for guests of `arch` (default: this machine's):
    shipped in the package beside the probe, or built in the source tree
    (`make -C probe`, with CC= and OUT= for another architecture)."""
    arch = arch or probe.host_arch()
    here = Path(__file__).resolve().parents[2]   # src/opcost
    native = [here.parents[1] / "probe" / "opcost-probe-vminit"] if arch == probe.host_arch() else []
    for p in (here / "_probe" / f"opcost-vminit-{arch}", *native,
              here.parents[1] / "probe" / "build" / f"opcost-probe-{arch}-vminit"):
        if p.is_file():
            return p
    return None


def guest_probe(arch: str) -> Path:
    """The static probe that runs in a guest of `arch`: the first of the
    probe's places (probe.candidates) that has it. Another architecture's
    needs no qemu-user here (the guest runs it); UsageError if not built."""
    if arch == probe.host_arch():
        return probe.probe_path(arch)
    for path, _ in probe.candidates(arch):
        if path.is_file():
            return path
    raise UsageError(f"no {arch} probe for the {arch} guest; build one: "
                     f"make -C probe CC={arch}-linux-gnu-gcc OUT=build/opcost-probe-{arch}")


_STRIPPED: dict[tuple, bytes] = {}


def stripped(exe: Path) -> bytes:
    """The binary without its debug information (`strip`, binutils) when
    strip is there: a smaller initramfs unpacks sooner, under TCG a second
    of every boot. Made once per binary and process, in a private temporary
    directory removed at once."""
    st = exe.stat()
    key = (str(exe), st.st_mtime_ns, st.st_size)
    if key not in _STRIPPED:
        data = exe.read_bytes()
        # another architecture's binary: its binutils' strip (the host's knows only its own)
        arch = elf_arch(exe)
        tool = (shutil.which(f"{arch}-linux-gnu-strip") if arch and arch != probe.host_arch() else None) \
            or shutil.which("strip")
        if tool:
            with tempfile.TemporaryDirectory(prefix="opcost-strip-") as d:
                out = os.path.join(d, "exe")
                cp = subprocess.run([tool, "-o", out, str(exe)], capture_output=True)
                if cp.returncode == 0:
                    data = Path(out).read_bytes()
        _STRIPPED[key] = data
    return _STRIPPED[key]


def initramfs(job: bytes, init: Path, probe_exe: Path, files: dict[str, Path] | None = None) -> bytes:
    """`files`: more executables, guest path (/opcost/NAME) -> host path."""
    extra = [(g.lstrip("/"), 0o100755, stripped(h)) for g, h in (files or {}).items()]
    return cpio_newc([("opcost", 0o040755, b""), ("dev", 0o040755, b""), ("proc", 0o040555, b""),
                      ("sys", 0o040555, b""), ("tmp", 0o041777, b""),
                      ("init", 0o100755, stripped(init)), ("opcost/probe", 0o100755, stripped(probe_exe)),
                      *extra, ("opcost/job", 0o100644, job)])


def guest_files(reqs: list[probe.ProbeRequest]) -> tuple[list[tuple], dict[str, Path]]:
    """What `opcost variants` built for each request, carried into the
    guest: per request (the request as it runs there, the executable in the
    guest or None for the probe), and the files the initramfs holds
    (/opcost/build-N -> host path). A probe with the user's operation linked
    in (exe) runs instead of the probe; a whole program runs under the
    guest's probe (`time -- /opcost/build-N`), so it must be static (the
    guest has no libc). A build for another architecture never gets here
    (UsageError: the guest runs x86_64)."""
    files: dict[str, Path] = {}
    names: dict[str, str] = {}

    def into(path: str) -> str:
        if path not in names:
            names[path] = f"/opcost/build-{len(names) + 1}"
            files[names[path]] = Path(path)
        return names[path]

    # named in the order of their paths, not of this round's requests: each round's guest holds a build under
    # one name (a guest restored from a snapshot of the first round's, restore.py, runs the later rounds' jobs)
    for path in sorted({r.exe or (r.program or ("",))[0] for r in reqs if (r.exe or r.program) and not r.emulator}):
        into(path)
    out: list[tuple[probe.ProbeRequest, str | None]] = []
    for r in reqs:
        if r.emulator:
            raise UsageError(f"{r.exe or (r.program or ('?',))[-1]} is built for another architecture (it runs under "
                             f"{os.path.basename(r.emulator)}); the guest runs x86_64 builds only")
        if r.exe:
            out.append((dataclasses.replace(r, exe=None), into(r.exe)))
        elif r.program:
            out.append((dataclasses.replace(r, program=(into(r.program[0]), *r.program[1:])), None))
        else:
            out.append((r, None))
    return out, files
