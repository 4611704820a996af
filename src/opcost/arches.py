"""Architecture names: opcost's name for a `uname -m` machine, and the
architecture an ELF executable is for, from its header. No imports from
opcost (layer 1): setup.py loads this file by path at build time, before the
package exists, so `pip install .` names the probe it builds the way opcost
looks it up at run time."""

from __future__ import annotations

from pathlib import Path

# `uname -m` (platform.machine()) -> opcost's architecture name.
# 32-bit Arm: armv7l, or armv8l for a 32-bit kernel (or a 32-bit personality,
# `linux32`) on an ARMv8 core; armv6l is not armv7 and not listed.
MACHINE_ALIASES = {"amd64": "x86_64", "x86_64": "x86_64", "i386": "i386", "i486": "i386", "i586": "i386",
                   "i686": "i386", "aarch64": "aarch64", "arm64": "aarch64", "arm": "arm", "armv7l": "arm",
                   "armv8l": "arm", "armhf": "arm"}

# ELF e_machine and class (1: 32-bit, 2: 64-bit) of each architecture opcost builds for.
ELF_MACHINE = {"x86_64": (62, 2), "i386": (3, 1), "aarch64": (183, 2), "arm": (40, 1)}

# Other e_machine values, to say what a binary opcost cannot run is for.
_OTHER_MACHINES = {2: "sparc", 8: "mips", 20: "powerpc", 21: "powerpc64", 22: "s390", 43: "sparc64",
                   243: "riscv", 258: "loongarch"}


def arch_of_machine(machine: str) -> str:
    """opcost's name for a `uname -m` machine (armv7l -> arm, amd64 ->
    x86_64); an unknown machine is returned as it is."""
    return MACHINE_ALIASES.get(machine.lower(), machine)


def native_arch(machine: str, pointer_bits: int) -> str:
    """The architecture of this userland: `uname -m`'s, except that a 32-bit
    userland (Python with 32-bit pointers) on a 64-bit Arm kernel is arm,
    which is what its compiler builds and its kernel runs."""
    arch = arch_of_machine(machine)
    return "arm" if arch == "aarch64" and pointer_bits == 32 else arch


def elf_header(path: Path) -> tuple[int, int] | None:
    """(e_machine, ELF class) of an ELF file; None if it is not ELF or cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[5] not in (1, 2):
        return None
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big"), head[4]


def elf_arch(path: Path) -> str | None:
    """The architecture (x86_64, i386, aarch64, arm) an ELF executable is for,
    from its header; None for anything else."""
    h = elf_header(path)
    if h is None:
        return None
    for arch, mc in ELF_MACHINE.items():
        if mc == h:
            return arch
    return None


def describe_elf(path: Path) -> str | None:
    """What an ELF file is built for, for a message ("arm", "riscv 64-bit",
    "ELF machine 1234"); None if it is not ELF."""
    h = elf_header(path)
    if h is None:
        return None
    known = elf_arch(path)
    if known:
        return known
    machine, cls = h
    name = _OTHER_MACHINES.get(machine, f"ELF machine {machine}")
    return f"{name} {'64' if cls == 2 else '32'}-bit"
