"""The user's input about a guest, checked before anything boots: the
kernel image (its boot header) and the kernel parameters."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
import os
import shutil
import subprocess
import zlib

from ...errors import UsageError
from .arch import GUEST_ARCHES, image_arch


def check_kernel(path: str, what: str = "--kernel") -> Path:
    """A Linux kernel image the vm target boots (arch.image_arch: an x86
    bzImage, an arm64 Image), or UsageError saying what was given and what
    would be right."""
    p = Path(path).expanduser()
    right = "give a kernel image: " + " or ".join(a.image for a in GUEST_ARCHES.values())
    if not p.is_file():
        raise UsageError(f"{what} {path}: no such file; {right}")
    try:
        with open(p, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise UsageError(f"{what} {path}: cannot be read ({e.strerror}); {right}") from None
    arch = image_arch(head)
    if arch is None:
        raise UsageError(f"{what} {path} is not a Linux kernel image the vm target boots (neither an x86 bzImage's "
                         f"boot header nor an arm64 Image's); {right}")
    if arch != "x86_64":
        size, end, packed = p.stat().st_size, pe_end(head), head[:2] == b"\x1f\x8b"
        if packed:   # an Image.gz: its gzip stream must end, and the Image it holds be whole
            size, end, broken = _gunzipped(p)
            if broken:
                raise UsageError(f"{what} {path} is {broken} (a partial copy or download?); {right}")
        if end and size < end:
            raise UsageError(f"{what} {path} is cut short: {size} bytes{' uncompressed' if packed else ''}, its PE "
                             f"header's sections end at {end} (a partial copy or download?); {right}")
        return p.resolve()
    setup = (head[0x1F1] or 4) + 1
    syssize = int.from_bytes(head[0x1F4:0x1F8], "little")
    size = p.stat().st_size
    if syssize and size < setup * 512 + syssize * 16:
        raise UsageError(f"{what} {path} is cut short: {size} bytes, its boot header says "
                         f"{setup * 512 + syssize * 16} (a partial copy or download?); {right}")
    return p.resolve()


def pe_end(head: bytes) -> int | None:
    """Where the last section of an arm64 Image's PE/COFF header (its EFI
    stub, CONFIG_EFI) ends in the file, or None without one: a complete
    Image is at least that long."""
    if head[:2] != b"MZ" or len(head) < 0x40:
        return None
    pe, = struct.unpack_from("<I", head, 0x3C)
    if head[pe:pe + 4] != b"PE\0\0" or len(head) < pe + 24:
        return None
    nsec, = struct.unpack_from("<H", head, pe + 6)
    opt, = struct.unpack_from("<H", head, pe + 20)
    table = pe + 24 + opt
    if len(head) < table + 40 * nsec:
        return None
    return max((sum(struct.unpack_from("<II", head, table + 40 * i + 16)) for i in range(nsec)), default=None)


_GUNZIPPED: dict[tuple, tuple[int, int | None, str | None]] = {}


def _gunzipped(p: Path) -> tuple[int, int | None, str | None]:
    """An Image.gz read through once (about 0.1 s for Debian's 27 MB Image
    here; once per file version): the length of the Image it holds, where
    its PE header's sections end (pe_end; None without an EFI stub), and
    what is wrong with the file, or None: its gzip stream stops before its
    end (no trailer: a cut-short file) or does not decompress (zlib checks
    the trailer's CRC-32 and length too). An arm64 Image without an EFI
    stub has no such check when raw: its header's image_size counts the
    BSS, which the file does not hold (docs/kernels.md)."""
    st = p.stat()
    key = (str(p), st.st_mtime_ns, st.st_size)
    if key not in _GUNZIPPED:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        head, n, broken = b"", 0, None
        try:
            with open(p, "rb") as f:
                while not d.eof and (chunk := f.read(1 << 20)):
                    out = d.decompress(chunk)
                    head += out[:max(0, 4096 - len(head))]
                    n += len(out)
        except zlib.error as e:
            broken = f"damaged: its gzip stream does not decompress ({e})"
        if broken is None and not d.eof:
            broken = "cut short: its gzip stream stops before its end"
        _GUNZIPPED[key] = (n, pe_end(head), broken)
    return _GUNZIPPED[key]


def cmdline_size(kernel: Path) -> int | None:
    """The longest command line the kernel takes (x86 boot protocol 2.06+:
    cmdline_size at 0x238; before: 255; arm64: 2048), or None if unknown."""
    try:
        with open(kernel, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if image_arch(head) == "aarch64":
        return 2048   # arm64's COMMAND_LINE_SIZE (arch/arm64/include/uapi/asm/setup.h): the device tree's bootargs
    if len(head) < 0x23C or head[0x202:0x206] != b"HdrS":
        return None
    version = int.from_bytes(head[0x206:0x208], "little")
    return int.from_bytes(head[0x238:0x23C], "little") if version >= 0x206 else 255


def check_fits(kernel: Path, cmdline: str, ours: int, what: str = "--kernel-cmdline") -> None:
    """UsageError when `cmdline`, with the `ours` characters opcost adds,
    is longer than the kernel takes (the kernel would cut it: its end lost)."""
    limit = cmdline_size(kernel)
    if limit and len(cmdline) + ours > limit:
        raise UsageError(f"{what}: {len(cmdline)} characters, and opcost adds up to {ours}; {kernel} takes at most "
                         f"{limit} (its boot header's cmdline_size): give at most {max(0, limit - ours)}")


def check_cmdline(text: str, what: str = "--kernel-cmdline") -> str:
    """Kernel parameters as plain words: no quotes (QEMU's -append and the
    kernel's parser treat them differently), no newline or control character."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise UsageError(f"{what} {text!r} contains a newline or control character; write the kernel "
                         "parameters on one line, e.g. mitigations=off nosmt")
    if '"' in text or "'" in text or "\\" in text:
        raise UsageError(f"{what} {text!r} contains a quote or backslash, which would not reach the guest "
                         "kernel as written; write plain key=value words, e.g. mitigations=off")
    for word in text.split():
        if word.split("=", 1)[0] in ("init", "rdinit") and "=" in word:
            raise UsageError(f"{what} {text!r}: {word.split('=', 1)[0]}= would replace opcost's init in the guest "
                             "(it runs the probe): leave it out")
    return " ".join(text.split())


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# The bzImage's payload (boot protocol 2.08+: payload_offset/payload_length at 0x248) by its magic: how to
# decompress it, with the Python standard library or the compressor's own tool (Debian: lz4, zstd).
_PAYLOADS = ((b"\x1f\x8b", "gzip", None), (b"\xfd7zXZ\x00", "xz", None), (b"\x5d\x00\x00", "lzma", None),
             (b"BZh", "bzip2", None), (b"\x02\x21\x4c\x18", "lz4", ["lz4", "-dcq"]),
             (b"\x28\xb5\x2f\xfd", "zstd", ["zstd", "-dcq"]))
XEN_ELFNOTE_PHYS32_ENTRY = 18   # the PVH entry point's ELF note (Linux: CONFIG_PVH)


def _decompress(payload: bytes) -> tuple[bytes | None, str]:
    import bz2, lzma, zlib   # the decompressors: only a kernel's first PVH extraction (then cached) needs them

    for magic, name, tool in _PAYLOADS:
        if not payload.startswith(magic):
            continue
        try:
            if name == "gzip":
                return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(payload), name
            if name in ("xz", "lzma"):
                return lzma.LZMADecompressor(lzma.FORMAT_AUTO).decompress(payload), name
            if name == "bzip2":
                return bz2.BZ2Decompressor().decompress(payload), name
        except (OSError, ValueError, lzma.LZMAError, zlib.error) as e:
            return None, f"its {name} payload does not decompress ({e})"
        if tool is None or shutil.which(tool[0]) is None:
            return None, f"its payload is {name}-compressed and `{tool[0] if tool else name}` is not installed"
        cp = subprocess.run(tool, input=payload, capture_output=True, timeout=120)
        # lz4's legacy frame ends with the kernel's 4-byte size: lz4 complains after writing everything
        return (cp.stdout or None), name
    return None, f"its payload's compression is not known ({payload[:4].hex()})"


def has_pvh_note(elf: bytes) -> bool:
    """An x86_64 ELF with the PVH entry note: QEMU's -kernel enters it at once
    (no decompression in the guest)."""
    if elf[:5] != b"\x7fELF\x02":
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if p_type != 4:   # PT_NOTE
            continue
        off, end = p_offset, p_offset + p_filesz
        while off + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", elf, off)
            name = elf[off + 12:off + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and ntype == XEN_ELFNOTE_PHYS32_ENTRY:
                return True
            off += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def pvh_vmlinux(kernel: Path, sha: str, cache: Path) -> tuple[Path | None, str]:
    """The uncompressed kernel (vmlinux) of the bzImage `kernel` when it has a
    PVH entry, made once per image (cache/vmlinux-SHA.elf), or None; and
    why, said."""
    out = cache / f"vmlinux-{sha}.elf"
    if out.is_file():
        return out, "the bzImage's vmlinux entered at its PVH entry (remembered)"
    data = kernel.read_bytes()
    if len(data) < 0x250 or struct.unpack_from("<H", data, 0x206)[0] < 0x208:
        return None, "its boot protocol is older than 2.08 (no payload to extract)"
    off = ((data[0x1F1] or 4) + 1) * 512
    po, pl = struct.unpack_from("<II", data, 0x248)
    elf, how = _decompress(data[off + po:off + po + pl])
    if elf is None:
        return None, how
    if not has_pvh_note(elf):
        return None, "its vmlinux has no PVH entry (CONFIG_PVH)"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(elf)
        os.replace(tmp, out)
    except OSError as e:
        return None, f"its vmlinux cannot be written to {cache} ({e.strerror})"
    return out, f"the bzImage's vmlinux ({how}) entered at its PVH entry"
