"""`opcost probe build` and `opcost probe list`: probes for other architectures.

The package ships the probes that run on the machine it was installed on (the
host's, and i386 on x86_64). A probe for another architecture is built here
from the probe sources the package carries (or the source tree), with a cross
compiler, into the user's data directory, where `arch=` finds it. A probe the
host cannot run natively runs under qemu user-mode emulation when qemu is
installed: its timings mean nothing, its correctness does.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import probe
from .arches import ELF_MACHINE, elf_arch
from .errors import UsageError

# ELF e_machine of each architecture (and its ELF class): checks that the
# compiler built what was asked for.
_ELF_MACHINE = ELF_MACHINE

# Cross compilers Debian packages, per target, tried in order on another host.
_CROSS_CC = {"x86_64": ["x86_64-linux-gnu-gcc"], "i386": ["i686-linux-gnu-gcc"],
             "aarch64": ["aarch64-linux-gnu-gcc"], "arm": ["arm-linux-gnueabihf-gcc"]}
_DEBIAN_PACKAGE = {"x86_64": "gcc-x86-64-linux-gnu", "i386": "gcc-i686-linux-gnu",
                   "aarch64": "gcc-aarch64-linux-gnu", "arm": "gcc-arm-linux-gnueabihf"}


def cross_package(arch: str) -> str:
    """The Debian package of the cross compiler for `arch`."""
    return _DEBIAN_PACKAGE[arch]


def source_dir() -> Path:
    """The probe's C sources: shipped in the package, or the source tree."""
    shipped = Path(__file__).resolve().parent / "_probe" / "src"
    if (shipped / "Makefile").is_file():
        return shipped
    tree = Path(__file__).resolve().parents[2] / "probe"
    if (tree / "Makefile").is_file():
        return tree
    raise UsageError("the probe sources are not installed with this opcost; reinstall it with `pip install .`")


def default_cc(arch: str) -> list[str]:
    """The compiler for `arch`: the host's cc for the host, a Debian cross
    compiler otherwise (gcc -m32 for i386 on x86_64 when that works)."""
    if arch == probe.host_arch():
        return ["cc"]
    for name in _CROSS_CC.get(arch, []):
        if shutil.which(name):
            return [name]
    if arch == "i386" and probe.host_arch() == "x86_64" and shutil.which("cc") and _links_static(["cc", "-m32"]):
        return ["cc", "-m32"]
    raise UsageError(f"no compiler for arch={arch} here: install {_DEBIAN_PACKAGE[arch]} "
                     f"(apt-get install {_DEBIAN_PACKAGE[arch]}) or pass --cc")


def _links_static(cc: list[str]) -> bool:
    with tempfile.TemporaryDirectory(prefix="opcost-cc-") as d:
        src = Path(d) / "t.c"
        src.write_text("int main(void){return 0;}\n")
        try:
            cp = subprocess.run([*cc, "-static", "-o", str(Path(d) / "t"), str(src)], capture_output=True, timeout=60)
        except OSError:
            return False
        return cp.returncode == 0


def build(arch: str, cc: str | None = None, static: bool = True, out: Path | None = None,
          extra_make: list[str] | None = None) -> Path:
    """Compile the probe for `arch`; return its path. UsageError (exit 2)
    for an unknown arch, a missing compiler, a failed build or a binary for
    another architecture."""
    if arch not in _ELF_MACHINE:
        raise UsageError(f"--arch {arch} is not an architecture opcost knows; valid: {', '.join(_ELF_MACHINE)}")
    try:
        cc_argv = shlex.split(cc) if cc is not None else default_cc(arch)
    except ValueError as e:
        raise UsageError(f"--cc {cc!r}: {e}; quote it as the shell would, e.g. --cc 'gcc -m32'") from None
    if not cc_argv or not shutil.which(cc_argv[0]):
        raise UsageError(f"compiler {cc_argv[0] if cc_argv else cc!r} not found; install it or pass --cc")
    if not shutil.which("make"):
        raise UsageError("make not found; install it (apt-get install make)")
    out = Path(out) if out is not None else probe.user_probe_dir() / f"opcost-probe-{arch}"
    check_out(out, arch)
    src = source_dir()
    with tempfile.TemporaryDirectory(prefix="opcost-build-") as tmp:
        work = Path(tmp) / "probe"
        shutil.copytree(src, work, ignore=shutil.ignore_patterns("build", "opcost-probe", "tests", "__pycache__"))
        built = Path(tmp) / f"opcost-probe-{arch}"
        cmd = ["make", "-C", str(work), "-s", f"CC={shlex.join(cc_argv)}", f"OUT={built}",
               f"LDFLAGS={'-static' if static else ''}", *(extra_make or [])]
        cp = subprocess.run(cmd, capture_output=True, text=True)
        if cp.returncode != 0:
            lines = [ln for ln in (cp.stderr or cp.stdout).splitlines() if "error" in ln.lower()] or \
                (cp.stderr or cp.stdout).strip().splitlines()
            raise UsageError(f"building the {arch} probe with {shlex.join(cc_argv)} failed: "
                             f"{(lines or ['no output'])[0].strip()}")
        got = elf_arch(built)
        if got != arch:
            raise UsageError(f"{shlex.join(cc_argv)} builds {got or 'unknown'} binaries, not {arch}; "
                             f"pass --cc with a compiler for {arch} (e.g. {_CROSS_CC[arch][0]})")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp_out = out.with_name(out.name + ".tmp")
        shutil.copy2(built, tmp_out)
        os.chmod(tmp_out, 0o755)
        os.replace(tmp_out, out)
    return out


def check_out(out: Path, arch: str) -> None:
    """Before a build of several seconds: `out` can be written, as a file,
    in a directory that exists or can be made (nothing is created here)."""
    if not str(out).strip():
        raise UsageError(f"--out is empty; give the file to write, e.g. --out ./opcost-probe-{arch}")
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory; give the file to write, e.g. {out / f'opcost-probe-{arch}'}")
    d = out.parent
    while not (d.exists() or d.is_symlink()) and d != d.parent:
        d = d.parent
    if not d.is_dir():
        raise UsageError(f"--out {out}: {d} is a file, not a directory, so nothing can be written under it; "
                         f"give a path in a directory")
    if not os.access(d, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: cannot write in {d} (no permission, or a read-only file system); "
                         "give a path in a writable directory")


def probes() -> list[dict]:
    """Every architecture opcost knows, with the probe it would use and how it runs."""
    rows: list[dict] = []
    for arch in probe.KNOWN_ARCHES:
        info = probe.find_probe(arch)
        if info:
            how = f"emulated ({os.path.basename(info.emulator)}: timings mean nothing)" if info.emulator else "native"
            rows.append({"arch": arch, "path": str(info.path), "source": info.source, "runs": how})
        else:
            built = [p for p, _ in probe.candidates(arch) if p.is_file()]
            why = ("built, but the host cannot run it: install qemu-user" if built
                   else f"not built: `opcost probe build --arch {arch}`")
            rows.append({"arch": arch, "path": str(built[0]) if built else None, "source": None, "runs": why})
    return rows
