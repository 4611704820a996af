"""Architecture names (src/opcost/arches.py): `uname -m` -> the probe's name,
which `pip install .` (setup.py) and opcost share, and the architecture an
ELF binary is for, read from its header (variants says why a build cannot
run here with it)."""

from __future__ import annotations

import importlib.util
import platform
import struct
import sys
from pathlib import Path

import pytest

from opcost import arches

ROOT = Path(__file__).resolve().parents[1]


def elf(tmp_path: Path, machine: int, cls: int, little: bool = True, name: str = "a.out") -> Path:
    """A file with just an ELF identification and e_machine."""
    order = "little" if little else "big"
    head = b"\x7fELF" + bytes([cls, 1 if little else 2, 1]) + b"\0" * 9 + (2).to_bytes(2, order) \
        + machine.to_bytes(2, order)
    p = tmp_path / name
    p.write_bytes(head + b"\0" * 44)
    return p


@pytest.mark.parametrize("machine,arch", [("x86_64", "x86_64"), ("amd64", "x86_64"), ("i686", "i386"),
                                          ("aarch64", "aarch64"), ("arm64", "aarch64"), ("armv7l", "arm"),
                                          ("armv8l", "arm"), ("ARMV7L", "arm"), ("riscv64", "riscv64")])
def test_machine_names(machine, arch):
    assert arches.arch_of_machine(machine) == arch


def test_32bit_userland_on_a_64bit_arm_kernel_is_arm():
    assert arches.native_arch("aarch64", 32) == "arm"
    assert arches.native_arch("aarch64", 64) == "aarch64"
    assert arches.native_arch("armv7l", 32) == "arm"
    assert arches.native_arch("x86_64", 64) == "x86_64"


@pytest.mark.parametrize("machine,cls,arch", [(62, 2, "x86_64"), (3, 1, "i386"), (183, 2, "aarch64"),
                                              (40, 1, "arm")])
def test_elf_arch_from_the_header(tmp_path, machine, cls, arch):
    assert arches.elf_arch(elf(tmp_path, machine, cls)) == arch
    assert arches.describe_elf(elf(tmp_path, machine, cls)) == arch


def test_other_and_non_elf_files(tmp_path):
    assert arches.elf_arch(elf(tmp_path, 243, 2)) is None
    assert arches.describe_elf(elf(tmp_path, 243, 2)) == "riscv 64-bit"
    assert arches.describe_elf(elf(tmp_path, 20, 1, little=False)) == "powerpc 32-bit"
    assert arches.describe_elf(elf(tmp_path, 4321, 1)) == "ELF machine 4321 32-bit"
    assert arches.elf_arch(elf(tmp_path, 40, 2)) is None        # arm's machine, 64-bit class: not arm
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    assert arches.elf_arch(script) is None and arches.describe_elf(script) is None
    assert arches.describe_elf(tmp_path / "missing") is None
    assert arches.elf_arch(Path(sys.executable).resolve()) == arches.native_arch(
        platform.machine(), struct.calcsize("P") * 8)


def _setup_module(monkeypatch, machine: str, pointer_bits: int):
    """setup.py as `pip install .` runs it on another machine (its setup()
    call is behind __main__, so importing it builds nothing)."""
    monkeypatch.setattr(platform, "machine", lambda: machine)
    real = struct.calcsize
    monkeypatch.setattr(struct, "calcsize", lambda f: pointer_bits // 8 if f == "P" else real(f))
    spec = importlib.util.spec_from_file_location("opcost_setup_under_test", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("machine,bits,want", [("armv7l", 32, "arm"), ("armv8l", 32, "arm"),
                                               ("aarch64", 32, "arm"), ("aarch64", 64, "aarch64"),
                                               ("x86_64", 64, "x86_64")])
def test_install_names_the_probe_for_the_board(monkeypatch, machine, bits, want):
    """On a 32-bit Arm board `pip install .` builds with the native cc (the
    Makefile's default) and ships opcost-probe-arm, the name opcost looks up."""
    mod = _setup_module(monkeypatch, machine, bits)
    assert mod.ARCH == want


def test_install_names_the_probe_for_what_cc_built(monkeypatch, tmp_path):
    mod = _setup_module(monkeypatch, "aarch64", 64)
    assert mod.shipped_arch("aarch64", elf(tmp_path, 40, 1)) == "arm"      # a 32-bit cc under a 64-bit kernel
    assert mod.shipped_arch("arm", elf(tmp_path, 40, 1, name="b")) == "arm"
    assert mod.shipped_arch("arm", tmp_path / "missing") == "arm"


def test_install_without_the_arm_compiler_says_so_in_one_line(monkeypatch, capsys):
    mod = _setup_module(monkeypatch, "x86_64", 64)
    monkeypatch.setattr(mod.shutil, "which", lambda name: None)
    assert mod.BuildProbe._try_arm(ROOT) is None
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "no arm compiler (apt-get install gcc-arm-linux-gnueabihf)" in out[0]
