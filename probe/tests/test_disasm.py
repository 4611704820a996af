"""The instruction benchmarks measure what they say: objdump the probe and
check each measured loop (the spin=0 loop of every noinline loop function)
contains the instruction and nothing the compiler added besides the loop's
own counter/compare/branch and the pieces the benchmark documents (clflush
for cache=cold, the dirtying register write for dirty=yes, the chain's adds).

A loop is the instructions from a backward branch's target to the branch.
A function's OP_LOOP has two loops: the one that calls spin_chain is the
spin=N path; the largest loop without that call is the spin=0 path (for
cache=cold it contains the inner clflush loop)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

PROBE_DIR = Path(__file__).resolve().parents[1]
PROBE = PROBE_DIR / "opcost-probe"

pytestmark = pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) not installed")

LINE = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")
FUNC = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
X86_BRANCH = re.compile(r"^j[a-z]+$")
A64_BRANCH = re.compile(r"^(b|b\.[a-z]+|cbn?z|tbn?z)$")
A32_BRANCH = re.compile(r"^b(eq|ne|cs|cc|hs|lo|mi|pl|hi|ls|ge|lt|gt|le)?$")


@pytest.fixture(scope="module")
def funcs() -> dict[str, list[tuple[int, str, str]]]:
    subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)
    return disassemble(PROBE, "objdump")


def disassemble(binary: Path, objdump: str) -> dict[str, list[tuple[int, str, str]]]:
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    funcs: dict[str, list[tuple[int, str, str]]] = {}
    cur = None
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            # gcc may rename a static function (foo.isra.0, foo.constprop.0)
            cur = funcs.setdefault(m.group(1).split(".")[0], [])
            continue
        m = LINE.match(line)
        if m and cur is not None:
            text = m.group(2).split("#")[0].strip()
            if not text or text.startswith("(bad)"):
                continue
            parts = text.split(None, 1)
            cur.append((int(m.group(1), 16), parts[0], parts[1].strip() if len(parts) > 1 else ""))
    return funcs


def loops(insns: list[tuple[int, str, str]], branch: re.Pattern) -> list[list[tuple[int, str, str]]]:
    addrs = [a for a, _, _ in insns]
    found = []
    for i, (addr, mnem, ops) in enumerate(insns):
        if not branch.match(mnem):
            continue
        m = re.search(r"([0-9a-f]+)\s*<", ops)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target <= addr and target in addrs:
            body = insns[addrs.index(target):i + 1]
            # a backward jump to a shared epilogue is not a loop
            if not any(m in ("ret", "retq") for _, m, _ in body):
                found.append(body)
    return found


def measured_loop(funcs, name: str, branch: re.Pattern = X86_BRANCH) -> list[tuple[int, str, str]]:
    assert name in funcs, f"loop function {name} not found in the probe (inlined or renamed?)"
    ls = [lp for lp in loops(funcs[name], branch) if not any("spin_chain" in ops for _, _, ops in lp)]
    assert ls, f"{name}: no spin=0 loop found"
    return max(ls, key=len)


def reg_only(ops: str) -> bool:
    return "(" not in ops and "[" not in ops


# The loop's own bookkeeping: counter, compare, branch, register moves.
def x86_bookkeeping(mnem: str, ops: str) -> bool:
    if X86_BRANCH.match(mnem) or mnem in ("nop", "nopw", "nopl", "xchg", "lea"):  # lea: arithmetic, no access
        return True
    return mnem.rstrip("qlwb") in ("add", "sub", "inc", "dec", "cmp", "test", "mov", "lea") and reg_only(ops)


def show(lp) -> str:
    return "\n".join(f"  {a:x}: {m} {o}" for a, m, o in lp)


XSTATE = ["xsave", "xsaveopt", "xsavec", "xrstor", "fxsave", "fxrstor", "vzeroupper", "vzeroall"]
DIRTY = {"x87": ("fld1", "fstp"), "sse": ("movaps",), "avx": ("vmovaps",), "avx512": ("vmovaps",)}


@pytest.mark.parametrize("insn", XSTATE)
@pytest.mark.parametrize("cache", ["hot", "cold"])
@pytest.mark.parametrize("dirty", [None, "x87", "sse", "avx", "avx512"])
def test_xstate_loop_holds_the_instruction_and_nothing_else(funcs, insn, cache, dirty):
    name = f"xstate_{insn}_loop_{cache}" + (f"_dirty_{dirty}" if dirty else "")
    lp = measured_loop(funcs, name)
    want = insn + "64" if insn not in ("vzeroupper", "vzeroall") else insn
    assert [m for _, m, _ in lp].count(want) == 1, f"{name}: expected one {want}\n{show(lp)}"
    allowed = {want}
    if cache == "cold":
        allowed.add("clflush")
    if dirty:
        allowed.update(DIRTY[dirty])
    extra = [(a, m, o) for a, m, o in lp if m not in allowed and not x86_bookkeeping(m, o)]
    assert not extra, f"{name}: unexpected instructions in the measured loop:\n{show(extra)}\nloop:\n{show(lp)}"
    if cache == "cold":
        assert any(m == "clflush" for _, m, _ in lp), f"{name}: no clflush\n{show(lp)}"
    if dirty:
        assert any(m in DIRTY[dirty] for _, m, _ in lp), f"{name}: no dirtying write\n{show(lp)}"


DIV_VARIANTS = [(v, s, w, f) for v in ("inline", "outofline", "soft") for s in "us" for w in (32, 64)
                for f in ("lat", "tput")]


@pytest.mark.parametrize("variant,sign,width,form", DIV_VARIANTS)
def test_div_loop(funcs, variant, sign, width, form):
    name = f"insn_div_{variant}_{sign}{width}_{form}_loop"
    lp = measured_loop(funcs, name)
    mn = [m for _, m, _ in lp]
    divs = [(m.rstrip("lq") + ("q" if o.startswith("%r") else "l")) for _, m, o in lp if m.rstrip("lq") in ("div", "idiv")]
    calls = [o for _, m, o in lp if m == "call"]
    if variant == "inline":
        want = ("idiv" if sign == "s" else "div") + ("q" if width == 64 else "l")
        assert divs == [want], f"{name}: expected one {want}\n{show(lp)}"
        assert not calls, f"{name}: a call in the inline loop\n{show(lp)}"
    else:
        callee = f"insn_div_{'call' if variant == 'outofline' else 'soft'}_{sign}{width}"
        assert not divs, f"{name}: a divide instruction in the loop\n{show(lp)}"
        assert len(calls) == 1 and f"<{callee}" in calls[0], f"{name}: expected one call to {callee}\n{show(lp)}"
        body = [m for _, m, _ in funcs[callee]]
        if variant == "outofline":
            assert any(m.rstrip("lq") in ("div", "idiv") for m in body), f"{callee} has no divide instruction"
        else:
            assert not any(m.rstrip("lq") in ("div", "idiv") for m in body), f"{callee} uses the divide instruction"
    # x = x / d + K: sign/zero extension for the dividend, the add, moves
    extra = [(a, m, o) for a, m, o in lp
             if not x86_bookkeeping(m, o) and m not in ("div" + m[3:], "idiv" + m[4:], "call", "cqto", "cltd", "xor")]
    assert not extra, f"{name}: unexpected instructions\n{show(extra)}\nloop:\n{show(lp)}"


def test_chain_loop_is_adds_and_one_indirect_jump(funcs):
    lp = measured_loop(funcs, "insn_chain_loop")
    mn = [m for _, m, _ in lp]
    adds = [o for _, m, o in lp if m == "add" and o == "%rax,%rax"]
    assert len(adds) == 1024, f"expected the 1024-add block, found {len(adds)}"
    jumps = [o for _, m, o in lp if m == "jmp" and o.startswith("*")]
    assert len(jumps) == 1, "expected one indirect jump into the block"
    extra = [(a, m, o) for a, m, o in lp if not x86_bookkeeping(m, o) and m != "jmp"]
    assert not extra, f"insn_chain_loop: unexpected instructions\n{show(extra)}"
    assert mn.count("add") >= 1024


def test_div_aarch64_inline_is_udiv_sdiv():
    binary = PROBE_DIR / "build" / "opcost-probe-aarch64"
    objdump = shutil.which("aarch64-linux-gnu-objdump")
    if not binary.exists() or objdump is None:
        pytest.skip("no aarch64 build (make CC=aarch64-linux-gnu-gcc OUT=build/opcost-probe-aarch64) or objdump")
    funcs = disassemble(binary, objdump)
    for sign, want in (("u", "udiv"), ("s", "sdiv")):
        for width in (32, 64):
            lp = measured_loop(funcs, f"insn_div_inline_{sign}{width}_lat_loop", A64_BRANCH)
            assert [m for _, m, _ in lp].count(want) == 1, show(lp)
            assert not any(m == "bl" for _, m, _ in lp), show(lp)


def test_div_arm_inline_is_udiv_sdiv_and_libgcc_is_a_call():
    """arm: the seed's INLINE_DIV is one udiv/sdiv in the loop (no call);
    LIBGCC_DIV calls libgcc's routine (__aeabi_uidiv is an alias of
    __udivsi3, which objdump names); 64 bits call __aeabi_uldivmod."""
    binary = PROBE_DIR / "build" / "opcost-probe-arm"
    objdump = shutil.which("arm-linux-gnueabihf-objdump")
    if not binary.exists() or objdump is None:
        pytest.skip("no arm build (make CC=arm-linux-gnueabihf-gcc OUT=build/opcost-probe-arm) or objdump")
    funcs = disassemble(binary, objdump)
    for sign, want, lib in (("u", "udiv", ("__udivsi3", "__aeabi_uidiv")), ("s", "sdiv", ("__divsi3", "__aeabi_idiv"))):
        for form in ("lat", "tput"):
            lp = measured_loop(funcs, f"insn_div_inline_{sign}32_{form}_loop", A32_BRANCH)
            assert [m for _, m, _ in lp].count(want) == 1, show(lp)
            assert not any(m.startswith("bl") for _, m, _ in lp), show(lp)
            lp = measured_loop(funcs, f"insn_div_libgcc_{sign}32_{form}_loop", A32_BRANCH)
            calls = [o for _, m, o in lp if m in ("bl", "blx")]
            assert len(calls) == 1 and any(n in calls[0] for n in lib), show(lp)
            assert want not in [m for _, m, _ in lp], show(lp)
        lp = measured_loop(funcs, f"insn_div_libgcc_{sign}64_lat_loop", A32_BRANCH)
        assert any("ldivmod" in o for _, m, o in lp if m in ("bl", "blx")), show(lp)
    lp = measured_loop(funcs, "insn_chain_loop", A32_BRANCH)
    assert len([o for _, m, o in lp if m == "add" and len(set(o.replace(" ", "").split(","))) == 1]) == 1024
    assert [m for _, m, _ in lp].count("bx") == 1


# syscall.null:via=inline's loop, per architecture: (probe binary, objdump, branch pattern, the
# instruction, what else the loop may hold besides the count down and its branch).
SYSCALL_LOOPS = {
    "x86_64": (PROBE, "objdump", X86_BRANCH, "syscall", {"mov"}),
    "i386": (PROBE_DIR / "build" / "opcost-probe-i386", "objdump", X86_BRANCH, "int", {"mov"}),
    "aarch64": (PROBE_DIR / "build" / "opcost-probe-aarch64", "aarch64-linux-gnu-objdump", A64_BRANCH, "svc",
                set()),
    "arm": (PROBE_DIR / "build" / "opcost-probe-arm", "arm-linux-gnueabihf-objdump", A32_BRANCH, "svc", set()),
}


@pytest.mark.parametrize("arch", sorted(SYSCALL_LOOPS))
def test_syscall_null_inline_loop_is_aligned_and_bare(funcs, arch):
    """The loop a kernel developer writes by hand, and no slower: it starts on
    a 64-byte boundary (so its place never depends on the code around it) and
    holds the system call instruction, the number's load (x86: eax is the
    return value), the count down and the branch: no memory operand, no call."""
    binary, objdump, branch, insn, extra_ok = SYSCALL_LOOPS[arch]
    if arch == "x86_64":
        fs = funcs
    else:
        if not binary.exists() or shutil.which(objdump) is None:
            pytest.skip(f"no {arch} build ({binary.name}) or {objdump}")
        fs = disassemble(binary, objdump)
    assert "syscall_null_inline_loop" in fs, f"{arch}: syscall_null_inline_loop not found (inlined or renamed?)"
    # the innermost loop around the instruction (32-bit: an outer loop takes a batch in 2^30 chunks)
    lp = min((lp for lp in loops(fs["syscall_null_inline_loop"], branch) if insn in [m for _, m, _ in lp]),
             key=len, default=None)
    assert lp, f"{arch}: no loop around {insn}"
    start = lp[0][0]
    assert start % 64 == 0, f"{arch}: the loop starts at {start:#x}, not on a 64-byte boundary\n{show(lp)}"
    mn = [m for _, m, _ in lp]
    assert mn.count(insn) == 1, f"{arch}: expected one {insn}\n{show(lp)}"
    assert branch.match(mn[-1]) and len(mn) == 3 + len(extra_ok), f"{arch}: unexpected loop shape\n{show(lp)}"
    body = [(m, o) for _, m, o in lp[:-1] if m != insn]
    counting = [(m, o) for m, o in body if m.rstrip("ql") in ("sub", "subs", "dec")]
    assert len(counting) == 1, f"{arch}: expected one count down\n{show(lp)}"
    others = [(m, o) for m, o in body if (m, o) not in counting]
    assert {m.rstrip("ql") for m, _ in others} == extra_ok, f"{arch}: unexpected instructions\n{show(lp)}"
    assert all(reg_only(o) for _, o in body), f"{arch}: a memory operand in the loop\n{show(lp)}"
    if arch in ("x86_64", "i386"):
        nr = {"x86_64": 0x6e, "i386": 0x40}[arch]   # __NR_getppid
        assert others[0][1].startswith(f"${nr:#x},"), f"{arch}: not getppid's number\n{show(lp)}"
