"""Architectures from the front end: `opcost probe build` and `probe list`,
arch= as a parameter of every benchmark (the i386 probe runs natively on
x86_64, the aarch64 one under qemu with an 'emulated' flag), and bad input."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = set(filter(None, os.environ.get("OPCOST_REQUIRE_ARCHES", "").split(",")))
sys.path.insert(0, str(ROOT / "src"))


def need(*tools, arch=None):
    for t in tools:
        if not shutil.which(t):
            if arch in REQUIRED:
                pytest.fail(f"{t} missing but OPCOST_REQUIRE_ARCHES={','.join(sorted(REQUIRED))}")
            pytest.skip(f"{t} not installed")
    if os.uname().machine != "x86_64":
        pytest.skip("written for an x86_64 host")


def test_build_aarch64_into_the_user_dir_and_run_it_emulated(run_cli, tmp_path):
    need("aarch64-linux-gnu-gcc", "qemu-aarch64", arch="aarch64")
    # a private source tree copy, so the test does not depend on probe/build/
    cp = run_cli("probe", "build", "--arch", "aarch64", timeout=300)
    assert cp.returncode == 0, cp.stderr
    built = tmp_path / "opcost" / "probes" / "opcost-probe-aarch64"
    assert built.is_file() and f"built {built}" in cp.stdout and "qemu-aarch64" in cp.stdout
    from opcost.crossprobe import elf_arch
    assert elf_arch(built) == "aarch64"
    rows = json.loads(run_cli("probe", "list", "--json").stdout)["probes"]
    row = next(r for r in rows if r["arch"] == "aarch64")
    assert row["path"] == str(built) and row["source"] == "opcost probe build" and "emulated" in row["runs"]
    cp = run_cli("run", "syscall.null:arch=aarch64", "-p", "2", "-n", "2", "-w", "0", "--target-ms", "1",
                 "--json", "out.json", "--no-store", timeout=300)
    assert cp.returncode == 0, cp.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    (res,) = doc["results"]
    assert res["params"]["arch"] == "aarch64"
    assert res["processes"][0]["samples"][0]["ns_per_op"] > 0
    flags = {f["flag"]: f["detail"] for f in res["summary"]["flags"]}
    assert "qemu-aarch64" in flags["emulated"]
    assert "emulated" in cp.stdout


def test_build_arm_and_run_seed_004s_division_under_qemu(run_cli, tmp_path):
    """Seed 004 on 32-bit Arm: `opcost probe build --arch arm`, then insn.div
    inline against libgcc's __aeabi_uidiv under qemu-arm, flagged emulated
    (correctness only: the timings are qemu's)."""
    need("arm-linux-gnueabihf-gcc", "qemu-arm", arch="arm")
    cp = run_cli("probe", "build", "--arch", "arm", timeout=300)
    assert cp.returncode == 0, cp.stderr
    built = tmp_path / "opcost" / "probes" / "opcost-probe-arm"
    from opcost.crossprobe import elf_arch
    assert elf_arch(built) == "arm" and "qemu-arm" in cp.stdout
    cp = run_cli("run", "insn.div:arch=arm,variant=inline|libgcc", "-p", "2", "-n", "2", "-w", "0",
                 "--target-ms", "1", "--json", "div.json", "--no-store", timeout=300)
    assert cp.returncode == 0, cp.stderr
    res = json.loads((tmp_path / "div.json").read_text())["results"]
    assert [r["params"]["variant"] for r in res] == ["inline", "libgcc"]
    for r in res:
        assert r["params"]["arch"] == "arm" and r["params"]["width"] == "32"
        assert "qemu-arm" in {f["flag"]: f["detail"] for f in r["summary"]["flags"]}["emulated"]


def test_ab_across_arches_compares_the_compat_entry_path(run_cli, tmp_path):
    need("i686-linux-gnu-gcc", arch="i386")
    import subprocess
    subprocess.run(["make", "-C", str(ROOT / "probe"), "-s", "CC=i686-linux-gnu-gcc",
                    "OUT=build/opcost-probe-i386"], check=True)
    cp = run_cli("ab", "signal.catch", "--a", "arch=x86_64", "--b", "arch=i386", "-p", "3", "-n", "3",
                 "-w", "1", "--target-ms", "2", "--json", "ab.json", "--no-store", timeout=300)
    assert cp.returncode == 0, cp.stderr
    (c,) = json.loads((tmp_path / "ab.json").read_text())["comparisons"]
    assert c["a"]["params"]["arch"] == "x86_64" and c["b"]["params"]["arch"] == "i386"
    assert c["ratio"] > 0 and c["verdict"] in ("faster", "slower", "same", "negligible", "inconclusive")
    # both arms really ran their own binary: the probe header says which
    assert "emulated" not in cp.stdout


@pytest.mark.parametrize("args,needle", [
    (["probe", "build", "--arch", "sparc"], "--arch sparc is not an architecture opcost knows; valid: x86_64, i386, aarch64"),
    (["probe", "build", "--arch", "aarch64", "--cc", "nosuchcc"], "compiler 'nosuchcc' not found"),
    (["probe", "build"], "the following arguments are required: --arch"),
    (["run", "syscall.null:arch=sparc"], "arch=sparc has no probe that runs here"),
])
def test_bad_input_is_one_line_exit_2(run_cli, args, needle):
    cp = run_cli(*args)
    assert cp.returncode == 2
    err = cp.stderr.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_wrong_compiler_for_the_arch_is_refused(run_cli):
    need("cc")
    cp = run_cli("probe", "build", "--arch", "aarch64", "--cc", "cc", timeout=300)
    assert cp.returncode == 2
    assert "cc builds x86_64 binaries, not aarch64" in cp.stderr


def test_elf_arch_reads_the_header(tmp_path):
    from opcost.crossprobe import elf_arch
    assert elf_arch(Path(sys.executable).resolve()) == "x86_64" or os.uname().machine != "x86_64"
    f = tmp_path / "x"
    f.write_bytes(b"not an elf file at all")
    assert elf_arch(f) is None


@pytest.mark.parametrize("out, words", [
    ("{tmp}/afile/p", ["afile is a file, not a directory"]),
    ("{tmp}/afile/sub/dir/p", ["afile is a file, not a directory"]),
    ("{tmp}", ["is a directory", "opcost-probe-x86_64"]),
])
def test_out_path_is_checked_before_building(tmp_path, monkeypatch, out, words):
    """A file where a directory should be is one line, before the build's
    seconds are spent (the compiler is never started)."""
    from opcost import crossprobe
    from opcost.errors import UsageError

    (tmp_path / "afile").write_text("x")
    monkeypatch.setattr(crossprobe.subprocess, "run", lambda *a, **k: pytest.fail(f"started {a[0]}"))
    monkeypatch.setattr(crossprobe, "default_cc", lambda arch: ["cc"])
    monkeypatch.setattr(crossprobe.shutil, "which", lambda name: f"/usr/bin/{name}")
    with pytest.raises(UsageError) as e:
        crossprobe.build("x86_64", None, True, Path(out.replace("{tmp}", str(tmp_path))))
    assert all(w in str(e.value) for w in words), str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_unbalanced_cc_quote_is_a_usage_error():
    from opcost import crossprobe
    from opcost.errors import UsageError

    with pytest.raises(UsageError, match="No closing quotation"):
        crossprobe.build("x86_64", "'gcc -m32", True, None)
