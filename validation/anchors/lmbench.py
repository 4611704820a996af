"""lmbench's rows: every opcost benchmark with an lmbench counterpart, the
exact lmbench command, and where the two definitions differ (read from
lmbench's source, lat_*.c at intel/lmbench 941a0dc).

lmbench times ENOUGH microseconds per repetition and prints the median of
-N repetitions (on stderr). Here every command gets ENOUGH=50000 (its
compiled-in ENOUGH, REAL_SHORT) and TIMING_O=0 LOOP_O=0 (its suite's
defaults when unconfigured): left to itself it calibrates both overheads in
every process (about 2 s), and on a shared VM that calibration swings the
null syscall by 2x. lat_pipe asks for at least SHORT (1 s) per repetition
whatever ENOUGH says. All its processes run under `taskset -c CPU`, as the
opcost side runs with placement=same on that CPU."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from validation.anchors.model import RATIO_BAND, Anchor, Config, Row, Tools
from validation.anchors.parsers import parse_lat_ctx, parse_lat_mmap, parse_lmbench

ENV = {"ENOUGH": "50000", "TIMING_O": "0", "LOOP_O": "0"}
# lat_syscall stat|fstat|open use this file unless given one (FNAME in lat_syscall.c).
LAT_SYSCALL_FILE = "/usr/include/linux/types.h"
# lat_proc exec runs this (PROG in lat_proc.c): lmbench's suite copies its hello there.
HELLO = "/tmp/hello"
PAGEFAULT_BYTES = 4 << 20   # lat_pagefault's file = mem.touch's size= (its default)
MMAP_BYTES = 1 << 20        # lat_mmap's size = mem.mmap's pages= x 4 KiB


def write_file(path: Path, size: int) -> None:
    """size bytes of data (every page in the page cache) at path, if not there yet."""
    if path.exists() and path.stat().st_size == size:
        return
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        for _ in range(size // (1 << 16)):
            f.write(b"o" * (1 << 16))
        f.write(b"o" * (size % (1 << 16)))
    os.replace(tmp, path)


def install_hello(built: str) -> None:
    """lmbench's hello at /tmp/hello, as its suite does before lat_proc exec."""
    dst = Path(HELLO)
    src = Path(built)
    if dst.exists() and dst.read_bytes() == src.read_bytes():
        return
    tmp = dst.with_name(f".hello.{os.getpid()}")
    shutil.copyfile(src, tmp)
    tmp.chmod(0o755)
    os.replace(tmp, dst)


def lm(exe: str, *args: str, parse=parse_lmbench, needs: str | None = None, file: tuple[str, int] | None = None,
       hello: bool = False, norandom: bool = False):
    """The finder of `EXE -N reps ARGS...`: needs= a path that must exist;
    file= (name, bytes): a file made in Config.workdir (tmpfs) and appended
    to the arguments; hello: /tmp/hello installed first; norandom: run
    under `setarch -R` (no ASLR: its mappings land in the same place in
    every run)."""
    def find(tools: Tools, cfg: Config):
        path, why = tools.lmbench(exe)
        if not path:
            return None, f"anchor unavailable: {why}"
        if needs and not os.path.exists(needs):
            return None, f"anchor unavailable: {needs} is missing (apt-get install linux-libc-dev)"
        argv = [path, "-N", str(cfg.lm_reps), *args]
        if norandom:
            setarch = tools.which("setarch")
            if not setarch:
                return None, "anchor unavailable: setarch is missing (apt-get install util-linux)"
            argv = [setarch, "-R", *argv]
        prepare = None
        if file:
            if cfg.workdir is None:
                return None, "anchor unavailable: no tmpfs directory for lmbench's file (/dev/shm)"
            target = cfg.workdir / file[0]
            argv.append(str(target))
            prepare = lambda: write_file(target, file[1])  # noqa: E731
        if hello:
            h, why = tools.lmbench("hello")
            if not h:
                return None, f"anchor unavailable: {why}"
            prepare = lambda: install_hello(h)  # noqa: E731
        return Anchor("lmbench", argv, parse, stream="stderr", env=dict(ENV), prepare=prepare), ""
    return find


F = LAT_SYSCALL_FILE
SAME = {"mode": "process", "placement": "same"}
SEND = ("lat_sig catch subtracts the send, kill(self, 0), timed in a separate loop; signal.catch's figure "
        "includes it")
DYNAMIC = ("lat_proc is dynamically linked, the probe static: the probe's parent gets as many mappings holding "
           "anonymous pages as its libraries' written ones (written=, one page each), not their lazy binding")
EXIT = ("lmbench's child calls exit(1) (atexit, stdio), the probe's _exit(0); the probe's parent is sized like "
        "lat_proc's (resident=, mappings=, written=); " + DYNAMIC)
# lat_pagefault's and lat_mmap's files are in Config.workdir, a tmpfs (shmem, as mem.touch's memfd).
ROWS = [
    # name (lmbench's command, and what it is compared as), opcost bench, params, unit, anchor, Row options
    ("lat_syscall null", "syscall.null", {"via": "libc"}, "call", lm("lat_syscall", "null"), {}),
    ("lat_syscall read", "syscall.read", {}, "call", lm("lat_syscall", "read"), {}),
    ("lat_syscall write", "syscall.write", {}, "call", lm("lat_syscall", "write"), {}),
    ("lat_syscall stat", "syscall.stat", {"path": F}, "call", lm("lat_syscall", "stat", F, needs=F), {}),
    ("lat_syscall fstat", "syscall.fstat", {"path": F}, "call", lm("lat_syscall", "fstat", F, needs=F), {}),
    ("lat_syscall open", "syscall.open", {"path": F}, "open+close", lm("lat_syscall", "open", F, needs=F), {}),
    ("lat_sig install", "signal.install", {}, "call", lm("lat_sig", "install"),
     {"differs": "lat_sig install refills its struct sigaction before every call (handler, sigemptyset(), flags); "
                 "signal.install fills it once", "band": (None, RATIO_BAND[1])}),
    ("lat_sig install (refilled)", "signal.install", {"refill": "yes"}, "call", lm("lat_sig", "install"),
     {"differs": "like for like: signal.install:refill=yes refills it as lmbench does"}),
    ("lat_sig catch", "signal.catch", {}, "signal", lm("lat_sig", "catch"), {"differs": SEND, "band": None}),
    ("lat_sig catch (send subtracted)", "signal.catch", {}, "signal", lm("lat_sig", "catch"),
     {"minus": {"sig": "0"}, "differs": "like for like: signal.catch less signal.catch:sig=0 (kill(self, 0)), "
                                        "as lmbench subtracts it"}),
    ("lat_pipe", "ctx.pipe", SAME, "round trip", lm("lat_pipe"), {}),
    ("lat_unix", "ctx.unix", {"type": "stream", **SAME}, "round trip", lm("lat_unix"), {}),
    ("lat_ctx -s 0 2", "ctx.pipe", SAME, "round trip", lm("lat_ctx", "-s", "0", "2", parse=parse_lat_ctx),
     {"differs": "lat_ctx reports one switch: a 2-process ring's round trip / 2 less ovr (a 4-byte pipe "
                 "write+read in one process); compared on the round trip rebuilt from its output, 2 x (switch + "
                 "ovr)"}),
    ("lat_proc fork", "proc.fork", {}, "fork", lm("lat_proc", "fork"),
     {"differs": EXIT, "band": (None, RATIO_BAND[1]), "children": True, "sized_like_anchor": True}),
    ("lat_proc exec", "proc.exec", {}, "fork+exec", lm("lat_proc", "exec", hello=True),
     {"differs": "the probe runs a tiny static program, lat_proc exec its dynamically linked hello (ld.so, "
                 "libc, libtirpc)", "band": None, "children": True, "sized_like_anchor": True}),
    ("lat_proc exec (hello)", "proc.exec", {"prog": HELLO}, "fork+exec", lm("lat_proc", "exec", hello=True),
     {"differs": "like for like but for the parent: proc.exec runs lmbench's hello (prog=/tmp/hello, stdout "
                 "closed, empty environment), its parent sized like lat_proc's; " + DYNAMIC,
      "band": (None, RATIO_BAND[1]), "children": True, "sized_like_anchor": True}),
    ("lat_pagefault", "mem.pagefault", {"size": str(PAGEFAULT_BYTES)}, "page",
     lm("lat_pagefault", file=("pagefault.dat", PAGEFAULT_BYTES)),
     {"differs": "mem.pagefault faults fresh anonymous pages (allocate and zero each); lat_pagefault reads the "
                 "pages of a cached file, most mapped by fault-around (16 per fault)", "band": None}),
    ("lat_pagefault (file)", "mem.touch", {"size": str(PAGEFAULT_BYTES), "backing": "memfd"}, "page",
     lm("lat_pagefault", file=("pagefault.dat", PAGEFAULT_BYTES)),
     {"minus": {"pages": str(PAGEFAULT_BYTES // 4096)}, "minus_bench": "mem.mmap", "minus_div": PAGEFAULT_BYTES // 4096,
      "differs": "like for like: a cached shmem file on both sides, the mmap+munmap subtracted on both (opcost: "
                 "mem.mmap of as many pages, anonymous, per page); lat_pagefault reads the pages in random order, "
                 "mem.touch in order"}),
    ("lat_mmap", "mem.mmap", {"pages": str(MMAP_BYTES // 4096)}, "mapping",
     lm("lat_mmap", str(MMAP_BYTES), file=("mmap.dat", MMAP_BYTES), parse=parse_lat_mmap),
     {"differs": "lat_mmap maps a tmpfs file shared and writes one byte every 16 KiB of its first tenth "
                 f"({-(-MMAP_BYTES // 10 // 16384)} write faults) before munmap; mem.mmap maps anonymous memory "
                 "and touches none", "band": None}),
    ("lat_mmap (file, written)", "mem.mmap", {"pages": str(MMAP_BYTES // 4096), "backing": "memfd", "touch": "tenth"},
     "mapping", lm("lat_mmap", str(MMAP_BYTES), file=("mmap.dat", MMAP_BYTES), parse=parse_lat_mmap, norandom=True),
     {"differs": "like for like: a cached shmem file mapped shared on both sides, one byte written every 16 KiB "
                 "of its first tenth before munmap (mem.mmap:backing=memfd,touch=tenth), and placed alike: "
                 "lat_mmap runs without ASLR (setarch -R) and mem.mmap:pagetable= puts opcost's mapping as "
                 "lat_mmap's lies, alone in its page-table range (own: a page-table page allocated and freed "
                 "per mapping) or beside another mapping (shared)", "pagetable_like_anchor": MMAP_BYTES}),
]


def lmbench_rows(cfg: Config) -> list[Row]:
    return [Row(name, bench, dict(params), unit, find, f"lmbench: `{name.split(' (')[0]}`", tool="lmbench", **opts)
            for name, bench, params, unit, find, opts in ROWS]
