"""The user's input about a guest, checked before anything boots: the
kernel image (its boot header) and the kernel parameters."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ...errors import UsageError


def check_kernel(path: str, what: str = "--kernel") -> Path:
    """An x86 Linux kernel image (bzImage: the boot protocol's 'HdrS' header),
    or UsageError saying what was given and what would be right."""
    p = Path(path).expanduser()
    right = "give a bzImage/vmlinuz, e.g. arch/x86/boot/bzImage or /boot/vmlinuz-$(uname -r)"
    if not p.is_file():
        raise UsageError(f"{what} {path}: no such file; {right}")
    try:
        with open(p, "rb") as f:
            head = f.read(0x240)
    except OSError as e:
        raise UsageError(f"{what} {path}: cannot be read ({e.strerror}); {right}") from None
    if len(head) < 0x240 or head[0x1FE:0x200] != b"\x55\xaa" or head[0x202:0x206] != b"HdrS":
        raise UsageError(f"{what} {path} is not an x86 Linux kernel image (no bzImage boot header); {right}")
    return p.resolve()


def check_cmdline(text: str, what: str = "--kernel-cmdline") -> str:
    """Kernel parameters as plain words: no quotes (QEMU's -append and the
    kernel's parser treat them differently), no newline or control character."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise UsageError(f"{what} {text!r} contains a newline or control character; write the kernel "
                         "parameters on one line, e.g. mitigations=off nosmt")
    if '"' in text or "'" in text or "\\" in text:
        raise UsageError(f"{what} {text!r} contains a quote or backslash, which would not reach the guest "
                         "kernel as written; write plain key=value words, e.g. mitigations=off")
    return " ".join(text.split())


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
