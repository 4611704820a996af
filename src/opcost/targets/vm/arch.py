"""What differs between the guest architectures the vm target boots, in one
small table (as opcost.arches does for the probes): the QEMU program, its
CPU model under each accelerator, the serial console's device name, the
Debian package that has the QEMU, and how a kernel image of the
architecture is recognised. x86_64 only for now; a new architecture is one
entry here plus its image check (image.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GuestArch:
    name: str            # opcost's architecture name (arches.py), the probe's
    qemu: str            # the system emulator
    qemu_package: str    # where Debian has it
    cpu: dict            # accel -> QEMU's -cpu
    console: str         # the kernel's first serial port
    image: str           # what a kernel image of it is called, for messages


GUEST_ARCHES: dict[str, GuestArch] = {
    "x86_64": GuestArch("x86_64", "qemu-system-x86_64", "qemu-system-x86", {"tcg": "max", "kvm": "host"},
                        "ttyS0", "bzImage/vmlinuz, e.g. arch/x86/boot/bzImage or /boot/vmlinuz-$(uname -r)"),
}
DEFAULT_ARCH = "x86_64"
