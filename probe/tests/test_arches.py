"""The probe on every architecture: the i386 probe natively (the kernel's IA32
emulation), the aarch64 probe under qemu-aarch64 and the arm (armv7
hard-float) probe under qemu-arm (correctness only). Each runs
the whole probe suite (test_probe.py and the instruction tests) against that
binary. Builds the probes with the cross compilers; skips when they are not
installed, unless OPCOST_REQUIRE_ARCHES names the architecture (test.sh sets
it, so CI never skips silently)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROBE_DIR = Path(__file__).resolve().parents[1]
ROOT = PROBE_DIR.parent
REQUIRED = set(filter(None, os.environ.get("OPCOST_REQUIRE_ARCHES", "").split(",")))
CC = {"i386": "i686-linux-gnu-gcc", "aarch64": "aarch64-linux-gnu-gcc", "arm": "arm-linux-gnueabihf-gcc"}
WRAPPER = {"i386": None, "aarch64": "qemu-aarch64", "arm": "qemu-arm"}


def _missing(arch: str) -> str | None:
    if os.uname().machine != "x86_64":
        return "cross-architecture tests are written for an x86_64 host"
    for tool in filter(None, (CC[arch], WRAPPER[arch])):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    return None


@pytest.fixture(scope="module", params=["i386", "aarch64", "arm"])
def arch_probe(request):
    arch = request.param
    why = _missing(arch)
    if why:
        if arch in REQUIRED:
            pytest.fail(f"{arch}: {why} (OPCOST_REQUIRE_ARCHES requires it; test.sh installs it)")
        pytest.skip(why)
    out = f"build/opcost-probe-{arch}"
    cp = subprocess.run(["make", "-C", str(PROBE_DIR), "-s", f"CC={CC[arch]}", f"OUT={out}"],
                        capture_output=True, text=True)
    assert cp.returncode == 0, f"{arch} build failed:\n{cp.stderr[-2000:]}"
    return arch, PROBE_DIR / out, WRAPPER[arch]


def _run(arch_probe, *args):
    _, exe, wrap = arch_probe
    return subprocess.run([*([wrap] if wrap else []), str(exe), *args], capture_output=True, text=True, timeout=120)


def test_binary_is_static_and_for_its_arch(arch_probe):
    arch, exe, _ = arch_probe
    sys.path.insert(0, str(ROOT / "src"))
    from opcost.crossprobe import elf_arch
    assert elf_arch(exe) == arch
    cp = subprocess.run(["file", str(exe)], capture_output=True, text=True)
    if cp.returncode == 0 and cp.stdout:
        assert "statically linked" in cp.stdout or "static-pie" in cp.stdout
    assert _run(arch_probe, "version").stdout.split()[2] == arch


def test_probe_suite_passes_on(arch_probe):
    """test_probe.py (and the instruction tests, when present) against this
    architecture's binary."""
    arch, exe, wrap = arch_probe
    files = [str(PROBE_DIR / "tests" / "test_probe.py")]
    for extra in ("test_insn.py",):
        if (PROBE_DIR / "tests" / extra).is_file():
            files.append(str(PROBE_DIR / "tests" / extra))
    env = {**os.environ, "OPCOST_TEST_PROBE": str(exe), "OPCOST_TEST_WRAPPER": wrap or ""}
    cp = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    tail = "\n".join(cp.stdout.strip().splitlines()[-25:])
    assert cp.returncode == 0, f"probe suite on {arch} failed:\n{tail}"
    assert " passed" in tail


def test_list_has_the_same_benchmarks_as_the_host(arch_probe):
    subprocess.run(["make", "-C", str(PROBE_DIR), "-s"], check=True)
    host = json.loads(subprocess.run([str(PROBE_DIR / "opcost-probe"), "list", "--json"], capture_output=True,
                                     text=True, check=True).stdout)
    other = json.loads(_run(arch_probe, "list", "--json").stdout)
    assert [b["name"] for b in other["benchmarks"]] == [b["name"] for b in host["benchmarks"]]
