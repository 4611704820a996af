"""What differs between the guest architectures the vm target boots, in one
small table (as opcost.arches does for the probes): the QEMU program, its
CPU model under each accelerator, the serial console's device name, the
Debian package that has the QEMU, the machine type when the architecture
has one only, the device the init's data port is on, and how a kernel image
of the architecture is recognised (image_arch: the architecture is read
from the image, never asked). A new architecture is one entry here."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GuestArch:
    name: str            # opcost's architecture name (arches.py), the probe's
    qemu: str            # the system emulator
    qemu_package: str    # where Debian has it
    cpu: dict            # accel -> QEMU's -cpu
    console: str         # the kernel's first serial port
    image: str           # what a kernel image of it is called, for messages
    machine: str = ""    # its only machine type ("": microvm or pc, choice.py)
    data: tuple = ()     # QEMU's arguments for the data port (the init's, chardev "data"), "" : ttyS1 as -serial
    kvm_host: str = ""   # KVM only on a host of this architecture


GUEST_ARCHES: dict[str, GuestArch] = {
    "x86_64": GuestArch("x86_64", "qemu-system-x86_64", "qemu-system-x86", {"tcg": "max", "kvm": "host"},
                        "ttyS0", "bzImage/vmlinuz, e.g. arch/x86/boot/bzImage or /boot/vmlinuz-$(uname -r)",
                        kvm_host="x86_64"),
    # arm64: `virt` (no microvm there); the console on its PL011 (ttyAMA0, up from the kernel's first lines)
    # and the data port on a PCI 16550 (pci-serial: ttyS0 in the guest, probe/vminit/init.c): the cloud kernel
    # has 8250_pci built in, virtio only as modules. Under TCG `max` with pauth-impdef=on: every feature QEMU
    # emulates (as x86_64's max), but pointer authentication with QEMU's own cheap hash instead of the
    # architected QARMA, whose emulation doubled a boot here (7.0 s against 3.3 s; cortex-a57: 2.6 s, but an
    # ARMv8.0 core without LSE atomics, PAN or pointer authentication the kernel would use).
    "aarch64": GuestArch("aarch64", "qemu-system-aarch64", "qemu-system-arm",
                         {"tcg": "max,pauth-impdef=on", "kvm": "host"}, "ttyAMA0",
                         "arm64 Image, e.g. arch/arm64/boot/Image(.gz) or Debian's /boot/vmlinuz-*-arm64",
                         machine="virt", data=("-chardev", "stdio,id=data", "-device", "pci-serial,chardev=data"),
                         kvm_host="aarch64"),
}
DEFAULT_ARCH = "x86_64"
ARM64_MAGIC = b"ARM\x64"   # the arm64 Image header's magic, at 0x38 (Documentation/arch/arm64/booting.rst)


def image_arch(head: bytes) -> str | None:
    """The guest architecture of a kernel image from its first bytes (at
    least 0x240): x86_64 for a bzImage (its boot header 'HdrS'), aarch64 for
    an arm64 Image or a gzip-compressed one (as Debian ships it on some
    releases; QEMU's -kernel decompresses those), else None."""
    if len(head) >= 0x206 and head[0x1FE:0x200] == b"\x55\xaa" and head[0x202:0x206] == b"HdrS":
        return "x86_64"
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 0x40)
        except zlib.error:
            return None
    return "aarch64" if head[0x38:0x3C] == ARM64_MAGIC else None


_ARCH: dict[tuple, str] = {}


def kernel_arch(kernel: Path) -> str:
    """The guest architecture of a checked kernel image (image.check_kernel), read
    from its header once per file version; x86_64 when unreadable (an
    extracted vmlinux, a stand-in)."""
    try:
        st = kernel.stat()
        key = (str(kernel), st.st_mtime_ns, st.st_size)
        if key not in _ARCH:
            with open(kernel, "rb") as f:
                _ARCH[key] = image_arch(f.read(4096)) or DEFAULT_ARCH
        return _ARCH[key]
    except OSError:
        return DEFAULT_ARCH
