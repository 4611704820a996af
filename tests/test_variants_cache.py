"""`opcost variants`: per-variant flags (--cflags-for NAME=FLAGS), repeated
--cflags adding up, and the build cache (${XDG_CACHE_HOME}/opcost/builds):
the second invocation of the same study uses the builds of the first and
does not run the compiler at all (a --cc wrapper logs every call), and says
so; a changed header, flag or --no-build-cache builds again."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from opcost import variantcache  # noqa: E402

FAST = ["-p", "2", "-n", "2", "--fake-clock", "50", "--no-store", "--no-progress"]
OP = '#include <stdint.h>\n#include "k.h"\nuint64_t opcost_op(uint64_t x) { return x * K + 1; }\n'
PROG = ('#include <stdio.h>\nint main(void) {\n#if defined(HW) && !defined(EXTRA)\n return 3;\n#endif\n'
        '#if defined(EXTRA) && !defined(HW)\n return 4;\n#endif\n puts("ok"); return 0; }\n')


@pytest.fixture
def cc_log(tmp_path):
    """A --cc that logs each call (one line of its arguments) and runs cc."""
    log = tmp_path / "cc.log"
    log.write_text("")
    wrapper = tmp_path / "logcc"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\nexec cc "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def calls(log: Path) -> list[str]:
    return [ln for ln in log.read_text().splitlines() if ln.strip()]


def test_op_mode_second_invocation_measures_from_the_cache_without_the_compiler(run_cli, src, tmp_path, cc_log):
    cc, log = cc_log
    src("#define K 3\n", "k.h")
    path = src(OP, "op.c")
    argv = ["variants", path, "-DA", "--cc", cc, "--json", "v.json", *FAST]
    t0 = time.monotonic()
    first = run_cli(*argv, timeout=600)
    built_in = time.monotonic() - t0
    assert first.returncode == 0, first.stderr
    assert calls(log), "the first invocation compiles"
    assert "building the probe with -DA" in first.stderr and "cached" not in first.stderr
    entries = list((tmp_path / "cache" / "opcost" / "builds").iterdir())
    assert len(entries) == 3          # -DA's object facts, its probe, the reference probe
    log.write_text("")
    t0 = time.monotonic()
    again = run_cli(*argv, timeout=600)
    cached_in = time.monotonic() - t0
    assert again.returncode == 0, again.stderr
    assert calls(log) == [], "the second invocation ran the compiler"
    assert "building the probe" not in again.stderr
    assert "variant -DA: using the cached build" in again.stderr
    assert "the reference probe (empty opcost_op): using the cached build" in again.stderr
    doc = json.loads((tmp_path / "v.json").read_text())
    assert [b["name"] for b in doc["variants"]["builds"]] == ["-DA"]
    assert cached_in < built_in, (cached_in, built_in)    # two probe builds skipped (seconds each)
    # a header it includes changed: built again (the variant; the reference does not include it)
    src("#define K 5\n", "k.h")
    third = run_cli(*argv, timeout=600)
    assert third.returncode == 0, third.stderr
    assert "building the probe with -DA" in third.stderr
    assert "the reference probe (empty opcost_op): using the cached build" in third.stderr


def test_program_mode_cache_and_flags_per_variant(run_cli, src, tmp_path, cc_log):
    cc, log = cc_log
    path = src(PROG, "prog.c")
    argv = ["variants", path, "-DHW", "-DPLAIN", "--cc", cc, "--cflags", "-O1", "--cflags", "-DCOMMON",
            "--cflags-for", "HW=-DEXTRA", "--cflags-for", "HW=-DMORE", "--json", "v.json", *FAST]
    cp = run_cli(*argv, timeout=300)
    assert cp.returncode == 0, cp.stderr      # -DHW built without -DEXTRA would exit 3, -DPLAIN with it 4
    lines = calls(log)
    hw = [ln for ln in lines if "-DHW" in ln]
    plain = [ln for ln in lines if "-DPLAIN" in ln]
    assert hw and plain
    # --cflags repeated adds up, --cflags-for after it, for its variant only
    assert all(ln.split()[:3] == ["-O1", "-DCOMMON", "-DEXTRA"] and "-DMORE" in ln for ln in hw), hw
    assert all("-DEXTRA" not in ln and "-DMORE" not in ln and ln.startswith("-O1 -DCOMMON") for ln in plain), plain
    doc = json.loads((tmp_path / "v.json").read_text())
    builds = {b["name"]: b for b in doc["variants"]["builds"]}
    assert builds["-DHW"]["cflags_for"] == "-DEXTRA -DMORE" and "cflags_for" not in builds["-DPLAIN"]
    assert doc["variants"]["cflags"] == "-O1 -DCOMMON"
    assert "-DHW also -DEXTRA -DMORE (--cflags-for)" in cp.stdout
    log.write_text("")
    again = run_cli(*argv, timeout=300)
    assert again.returncode == 0, again.stderr
    assert calls(log) == []
    assert "variant -DHW: using the cached build" in again.stderr
    assert "variant -DPLAIN: using the cached build" in again.stderr
    # other flags for one variant: that one is built again, the other comes from the cache
    third = run_cli(*[a if a != "HW=-DMORE" else "HW=-DMORE2" for a in argv], timeout=300)
    assert third.returncode == 0, third.stderr
    assert calls(log) and not [ln for ln in calls(log) if "PLAIN" in ln], calls(log)   # -DHW's compile and link
    assert "variant -DPLAIN: using the cached build" in third.stderr
    # --no-build-cache: everything built, nothing used
    log.write_text("")
    fresh = run_cli(*argv, "--no-build-cache", timeout=300)
    assert fresh.returncode == 0, fresh.stderr
    assert any("-DPLAIN" in ln for ln in calls(log)) and "cached" not in fresh.stderr


@pytest.mark.parametrize("args,want", [
    (["--cflags-for", "NOPE=-O3"], "NOPE is not one of the -D variants; valid: A, B"),
    (["--cflags-for", "-O3"], "expected NAME=FLAGS"),
    (["--cflags-for", "A="], "gives no flags"),
    (["--cflags-for", "A='-O3"], "No closing quotation"),
])
def test_bad_cflags_for_is_one_line_exit_2_before_compiling(run_cli, src, tmp_path, cc_log, args, want):
    cc, log = cc_log
    cp = run_cli("variants", src(PROG, "prog.c"), "-DA", "-DB=2", "--cc", cc, *args, *FAST)
    err = cp.stderr.strip().splitlines()
    assert cp.returncode == 2 and len(err) == 1 and err[0].startswith("opcost: ") and want in err[0], cp.stderr
    assert cp.stdout == "" and calls(log) == []
    assert not (tmp_path / "cache").exists()


def test_cache_writes_whole_files_and_evicts_the_least_recently_used(tmp_path, monkeypatch):
    c = variantcache.Cache(tmp_path / "builds")
    exe = tmp_path / "exe"
    for i, k in enumerate(("a" * 40, "b" * 40, "c" * 40)):
        exe.write_bytes(bytes([i]) * 100_000)
        c.put_file(k, "probe", exe)
        os.utime(c.entry(k), (1000 + i, 1000 + i))
    assert [p.name for p in c.entry("a" * 40).iterdir()] == ["probe"]     # no temporary name left
    assert c.file("a" * 40, "probe").read_bytes() == bytes([0]) * 100_000   # used: now the most recent
    monkeypatch.setenv("OPCOST_BUILD_CACHE_MB", str(250_000 / 2**20))
    gone = c.evict()
    assert [p.name for p in gone] == ["b" * 40]
    assert sorted(p.name for p in c.dir.iterdir()) == ["a" * 40, "c" * 40]


def test_cache_key_covers_source_includes_compiler_flags_and_probe(tmp_path):
    (tmp_path / "k.h").write_text("#define K 1\n")
    s = tmp_path / "s.c"
    s.write_text('#include "k.h"\nint x;\n')
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    (probe_dir / "main.c").write_text("int main(void){return 0;}\n")

    def k(flags=("-O2",)):
        return variantcache.key(what="probe", sources=variantcache.source_files(s, list(flags)), cc=["cc"],
                              flags=list(flags), probe_dir=probe_dir)
    base = k()
    assert k() == base
    assert k(("-O3",)) != base
    (tmp_path / "k.h").write_text("#define K 2\n")
    assert k() != base
    base = k()
    (probe_dir / "main.c").write_text("int main(void){return 1;}\n")
    assert k() != base
