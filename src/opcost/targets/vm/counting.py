"""A counting boot (issue 34): the guest under TCG with opcost's plugin
(probe/plugin/opcount.c) loaded into QEMU, and what comes back.

- QEMU runs every vCPU on one thread (`-accel tcg,thread=single`, qemu.py):
  the plugin's window is one over all vCPUs, so a benchmark of two processes
  (ctx.pipe) is counted on both sides, on whichever vCPU each runs.
- The plugin writes the windows to a host file, in the order the guest ran
  them: the job's commands run one after the other, so each probe process's
  windows are the next (its warm-up and measured batches) of that file.
- The init sends where the kernel's text starts in this boot (KASLR) and,
  once per kernel image (the first counting boot of it), its text symbols
  as offsets from there: the kernel's functions (kallsyms), for
  per-function attribution; the user's are the probe's own (a static,
  non-PIE binary: the same addresses in the guest).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
import contextlib
import json

from ...errors import UsageError
from ... import emucount, probe
from ...emucount import Symbols
from .choice import cache_dir
from .restore import WANT


class Counting:
    """What one counting boot needs and leaves: the plugin's output file, the
    initramfs's request for the kernel's symbols; removed by close()."""

    def __init__(self, full_symbols: bool):
        plugin = emucount.plugin_path()
        if plugin is None:
            raise UsageError("the counting plugin (opcost-count.so) is not built: `make -C probe` in the source "
                             "tree, or reinstall opcost")
        fd, self.out = tempfile.mkstemp(prefix="opcost-vmcount-", suffix=".jsonl")
        os.close(fd)
        fd, self.want = tempfile.mkstemp(prefix="opcost-want-", suffix=".txt")
        os.write(fd, b"full\n" if full_symbols else b"text\n")
        os.close(fd)
        extra = os.environ.get("OPCOST_COUNT_PLUGIN_ARGS", "")
        self.plugin = f"{plugin},out={self.out},blocks=on" + (f",{extra}" if extra else "")

    def files(self) -> dict[str, Path]:
        return {WANT: Path(self.want)}

    def into(self, b, reqs: list, results: list, sha: str, offsets: list, qemu: str, arch: str) -> list:
        """The plugin's windows into each process's batches, in the order the
        guest ran them (emucount.inject_windows); the kernel's functions
        (this boot's _text, and the image's symbols: sent now, or known) and
        the probe's (the `arch` guest's probe) fold the blocks. Stops at a
        process that failed (how many windows it left is not known). Returns
        the image's symbols."""
        text, sent = kernel_text(b.kallsyms)
        if sent:
            offsets = sent
            cache_offsets(sha, sent)
        syms = symbols(text, offsets, str(probe.probe_path(arch)))
        head, windows = emucount.read_windows(self.out)
        at = 0
        for k, res in enumerate(results):
            if not isinstance(res, probe.ProcessResult) or res.header is None:
                break
            n = len(res.warmup) + len(res.samples) + emucount.FIXED_WINDOWS   # + its fixed part's (OPCOST_COUNTING=1)
            emucount.inject_windows(res.header, res.warmup, res.samples, list(reqs[k].emulated), head,
                                    windows[at:at + n], f"{os.path.basename(qemu)} (TCG)", syms)
            at += n
            res.header["vm"]["kernel_text"] = f"{text:#x}" if text else None
        return offsets

    def close(self) -> None:
        for p in (self.out, self.want):
            try:
                os.unlink(p)
            except OSError:
                pass


def cached_offsets(sha: str) -> list[tuple[int, str]] | None:
    """A kernel image's text symbols (offsets from _text), as its first
    counting boot sent them: the same for every boot of that image, so kept
    in the cache directory (kallsyms-SHA.json) and not sent again."""
    try:
        d = json.loads((cache_dir() / f"kallsyms-{sha}.json").read_text())
        return [(int(o), str(n)) for o, n in d["offsets"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cache_offsets(sha: str, offsets: list[tuple[int, str]]) -> None:
    path = cache_dir() / f"kallsyms-{sha}.json"
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"offsets": offsets}))
        os.replace(tmp, path)


def kernel_text(lines: list[bytes]) -> tuple[int | None, list[tuple[int, str]]]:
    """The init's K lines: (where _text is in this boot, [(offset, name)] of
    the kernel's text symbols when it sent them)."""
    text = None
    syms: list[tuple[int, str]] = []
    for ln in lines:
        a, _, b = ln.decode(errors="replace").partition(" ")
        try:
            if a == "_text":
                text = int(b, 16) or None
            elif a != "error":
                syms.append((int(a, 16), b.strip()))
        except ValueError:
            continue
    return text, syms


def symbols(text: int | None, offsets: list[tuple[int, str]], probe_exe: str | None):
    """The kernel's functions at this boot's addresses, and the probe's."""
    entries: list[tuple[int, int, str]] = []
    if text is not None and offsets:
        offs = sorted(offsets)
        for i, (off, name) in enumerate(offs):
            end = offs[i + 1][0] if i + 1 < len(offs) else off + 4096
            entries.append((text + off, text + end, name))
    if probe_exe:
        entries += Symbols.of_elf(probe_exe).entries
    return Symbols(entries)
