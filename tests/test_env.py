"""`opcost env`: every field says where it came from, missing sources become
None with a reason, the probe's cpuid line is carried into the xstate and
hypervisor fields, and the native cpuid command builds and prints JSON."""

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import opcost  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from opcost import env

ROOT = Path(__file__).resolve().parents[1]

# What `opcost-probe cpuid` prints on a KVM guest with AVX-512 (abridged).
X86_CPUID = {
    "arch": "x86_64", "max_leaf": 28, "max_ext_leaf": 2147483681,
    "vendor": "AuthenticAMD", "brand": "AMD EPYC", "signature": "0x00a10f11",
    "family": 25, "model": 17, "stepping": 1,
    "features": {"fxsr": True, "sse2": True, "xsave": True, "osxsave": True, "avx": True,
                 "avx2": True, "avx512f": True, "rdtscp": True, "invariant_tsc": True},
    "hypervisor": True, "hypervisor_vendor": "KVMKVMKVM",
    "xcr0": "0xe7",
    "xcr0_features": ["x87", "sse", "avx", "avx512_opmask", "avx512_zmm_hi256",
                      "avx512_hi16_zmm"],
    "xsave": {"xcr0_supported": "0xe7", "xss_supported": "0x1800", "size_enabled": 2432,
              "size_max": 2432, "xsaveopt": True, "xsavec": True, "xgetbv1": True,
              "xsaves": True, "size_compacted": 2472,
              "components": [{"bit": 2, "name": "avx", "size": 256, "offset": 576,
                              "supervisor": False, "align64": False, "enabled": True}]},
    "tsc_leaf_0x15": None, "tsc_leaf_0x16": None,
}
ARM_CPUID = {"arch": "aarch64", "midr": "0x413fd0c1", "implementer": 65, "variant": 3,
             "architecture": 15, "part": 3340, "revision": 1, "midr_reason": None,
             "cntfrq_hz": 25000000}
PROBE_INFO = {"compiler": "gcc 12.2.0", "probe_version": "0.1.0"}
CPUID_FIELDS = ("cpuid_cpu", "cpuid_features", "cpu_counter", "xstate")


def check_fields(e):
    assert e
    for name, field in e.items():
        assert set(field) >= {"value", "source"}, name
        assert isinstance(field["source"], str) and field["source"], name
        if field["value"] is None:
            assert isinstance(field.get("reason"), str) and field["reason"], name
            assert not field["reason"].startswith("internal error"), (name, field)


def test_every_field_has_value_and_source():
    e = env.collect(X86_CPUID, PROBE_INFO)
    check_fields(e)
    for name in ("kernel_release", "kernel_cmdline", "preempt_model", "cpu_vendor",
                 "per_cpu", "cpus_online", "smt_siblings", "clocksource", "hypervisor",
                 "xstate", "vulnerabilities", "perf_event_paranoid", "pmu",
                 "glibc_version", "probe_compiler", "python_version", "hostname",
                 "memory_total_bytes", "numa_nodes", "cpu_caches"):
        assert name in e
    assert e["kernel_release"]["value"] == os.uname().release
    assert e["python_version"]["value"].endswith(platform.python_version())
    assert e["probe_compiler"]["value"] == "gcc 12.2.0"
    assert e["probe_version"]["value"] == "0.1.0"


def test_env_survives_a_json_round_trip_unchanged():
    # Stored envs are compared with fresh ones: values must be JSON-native.
    e = env.collect(X86_CPUID, PROBE_INFO)
    assert env.differences(e, json.loads(json.dumps(e))) == []


def test_collect_without_cpuid():
    e = env.collect(None)
    check_fields(e)
    for name in CPUID_FIELDS:
        assert e[name]["value"] is None
        assert e[name]["reason"] == "probe cpuid output not given"
    assert e["hypervisor"]["value"]["cpuid_bit"] is None
    assert e["probe_version"]["value"] is None


def test_missing_sysfs_gives_none_with_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(env, "SYS_CPU", tmp_path / "absent")
    e = env.collect(None)
    check_fields(e)
    for name in ("cpus_online", "smt_siblings", "smt_control", "cpufreq_governor",
                 "cpufreq_boost", "vulnerabilities", "cpu_caches"):
        assert e[name]["value"] is None, name
    assert e["cpus_online"]["reason"] == "not present"


def test_sample_cpuid_is_carried_into_xstate_and_hypervisor():
    e = env.collect(X86_CPUID)
    xstate = e["xstate"]["value"]
    assert xstate["xcr0"] == "0xe7"
    assert xstate["features"] == X86_CPUID["xcr0_features"]
    assert xstate["size_enabled"] == 2432 and xstate["size_compacted"] == 2472
    assert xstate["components"][0]["name"] == "avx"
    assert "0xD" in e["xstate"]["source"]
    hv = e["hypervisor"]["value"]
    assert hv["cpuid_bit"] is True and hv["cpuid_vendor"] == "KVMKVMKVM"
    assert e["cpuid_cpu"]["value"]["family"] == 25
    assert e["cpuid_features"]["value"]["avx512f"] is True
    assert e["cpu_counter"]["value"]["invariant_tsc"] is True


def test_aarch64_and_unsupported_cpuid_lines():
    e = env.collect(ARM_CPUID)
    check_fields(e)
    assert e["cpuid_cpu"]["value"]["part"] == 3340
    assert e["cpu_counter"]["value"] == {"cntfrq_hz": 25000000}
    assert e["xstate"]["reason"] == "no XSAVE on aarch64"

    e = env.collect({"arch": "riscv64", "cpuid": None, "reason": "no support here"})
    assert e["cpuid_cpu"]["value"] is None
    assert e["cpuid_cpu"]["reason"] == "no support here"


@pytest.mark.parametrize("files, config, model, source_has", [
    ({"/sys/kernel/debug/sched/preempt": "none voluntary (full) lazy"}, None,
     "full", "debug/sched/preempt"),
    ({"/proc/cmdline": "quiet preempt=voluntary"}, "none", "voluntary", "preempt="),
    ({"/proc/cmdline": "quiet"}, "none", "none", "config"),
    ({"/proc/cmdline": "quiet"}, None, "dynamic", "not visible"),
])
def test_preempt_model_on_a_dynamic_kernel(monkeypatch, files, config, model, source_has):
    def fake_read(path):
        path = str(path)
        return (files[path], None) if path in files else (None, "not present")
    monkeypatch.setattr(env, "_read", fake_read)
    monkeypatch.setattr(env, "_kernel_config_preempt",
                        lambda release: (config, "/proc/config.gz" if config else None))
    field = env._preempt_model("#1 SMP PREEMPT_DYNAMIC", "6.8.0")
    assert field["value"] == model
    assert source_has in field["source"]


@pytest.mark.parametrize("version, model", [
    ("#1 SMP PREEMPT_RT Tue", "rt"),
    ("#1 SMP PREEMPT Tue", "full"),
    ("#1 SMP Tue", "none_or_voluntary"),
])
def test_preempt_model_from_uname(monkeypatch, version, model):
    monkeypatch.setattr(env, "_read", lambda path: (None, "not present"))
    monkeypatch.setattr(env, "_kernel_config_preempt", lambda release: (None, None))
    assert env._preempt_model(version, "6.8.0")["value"] == model


def test_format_env_one_line_per_field():
    e = env.collect(X86_CPUID, PROBE_INFO)
    e["kernel_cmdline"] = {"value": "a=1\nb=2", "source": "/proc/cmdline"}
    lines = env.format_env(e).splitlines()
    assert len(lines) == len(e)
    columns = set()
    for line, (name, field) in zip(lines, e.items()):
        assert line.startswith(name + ":")
        assert line.endswith(f"   [{field['source']}]")
        if field["value"] is None:
            assert field["reason"] in line
        after = line[len(name) + 1:]
        columns.add(len(name) + 1 + len(after) - len(after.lstrip(" ")))
    assert len(columns) == 1  # values aligned in one column


def test_differences_sees_values_not_sources():
    a = env.collect(X86_CPUID)
    b = json.loads(json.dumps(a))
    for field in b.values():
        field["source"] = "somewhere else"
    assert env.differences(a, b) == []

    b["kernel_release"]["value"] = "9.9.9-other"
    b["vulnerabilities"] = {"value": {"mds": "Vulnerable"}, "source": "x"}
    a["vulnerabilities"] = {"value": {"mds": "Not affected"}, "source": "x"}
    del b["hostname"]
    diffs = env.differences(a, b)
    assert ("kernel_release", a["kernel_release"]["value"], "9.9.9-other") in diffs
    assert ("vulnerabilities.mds", "Not affected", "Vulnerable") in diffs
    assert ("hostname", a["hostname"]["value"], None) in diffs
    assert len(diffs) == 3


def test_cpuid_command_builds_and_prints_json(tmp_path):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc")
    main = tmp_path / "tmpmain.c"
    main.write_text("int cmd_cpuid(int fd);\nint main(void) { return cmd_cpuid(1); }\n")
    exe = tmp_path / "cpuid"
    subprocess.run([gcc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                    str(ROOT / "probe/cpuid.c"), str(ROOT / "probe/json.c"), str(main),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    assert out.count("\n") == 1
    data = json.loads(out)
    assert "arch" in data
    if platform.machine() == "x86_64":
        assert data["arch"] == "x86_64"
        for key in ("vendor", "brand", "family", "model", "stepping", "features",
                    "hypervisor", "hypervisor_vendor", "xcr0", "xcr0_features", "xsave"):
            assert key in data
        assert data["vendor"] == env.collect()["cpu_vendor"]["value"]
        if data["features"]["osxsave"]:
            assert int(data["xcr0"], 16) & 0x3 == 0x3  # x87 and SSE are always on
            assert data["xcr0_features"][:2] == ["x87", "sse"]
        e = env.collect(data)
        check_fields(e)
        assert e["xstate"]["value"]["xcr0"] == data["xcr0"]


# ---- one list of sources: the local collection and the remote script ---------

def test_local_collection_reads_only_the_listed_sources():
    """collect() here may read only what env.FILES/DIRS list (what a remote
    host is sent to read): an unlisted path is refused, a listed one is not."""
    with pytest.raises(env.UndeclaredSource, match=r"/proc/version is not in env.FILES"):
        env._declared("/proc/version")
    with pytest.raises(env.UndeclaredSource, match=r"not in env.DIRS"):
        env._declared("/sys/devices/system/cpu/cpu0", dir=True)
    assert env._declared("/sys/devices/system/cpu/cpu12/topology/thread_siblings_list")
    assert env._declared("/sys/devices/system/cpu/vulnerabilities/mds")
    # `*` stays within one directory, as the shell's glob does
    with pytest.raises(env.UndeclaredSource):
        env._declared("/sys/devices/system/cpu/vulnerabilities/a/b")
    read: list[str] = []
    real = env._declared

    def spy(path, dir=False):
        read.append(path)
        return real(path, dir)

    import unittest.mock

    with unittest.mock.patch.object(env, "_declared", spy):
        got = env.collect()
    assert read   # the guard sees every read
    for name, field in got.items():
        assert "internal error" not in str(field.get("reason")), (name, field)


def test_the_remote_script_is_made_from_the_same_list():
    script = env.shell_script()
    assert f"for f in {' '.join(env.FILES)}; do" in script
    assert f"for d in {' '.join(env.DIRS)}; do" in script


def test_the_remote_script_and_the_local_collection_agree():
    """The shell script a remote host runs, run here by sh, gives the same
    environment as collect() reading this machine itself: both read the one
    list of sources (a file added to one path only would differ here)."""
    import shutil
    import subprocess

    if shutil.which("sh") is None:
        pytest.skip("no sh")
    mark = "@@opcost-test@@"
    out = subprocess.run(["sh", "-c", env.shell_script(), "sh", mark], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    marked = env.Marked(out, mark)
    assert marked.files and marked.dirs
    for path in marked.files:
        env._declared(path)          # the script read nothing the list does not name
    for path in marked.dirs:
        env._declared(path, dir=True)
    assert "Z" in marked.sections    # it ran to its end
    local = env.collect()
    remote = env.collect(snapshot=marked.snapshot("sh here"))
    assert set(local) == set(remote)
    diffs = [d for d in env.differences(local, remote) if not d[0].startswith("python_version")]
    assert diffs == []
    # the snapshot's reads went through the same fields: every listed file this
    # machine has was read by the script
    import glob
    import os

    present = {p for pat in env.FILES for p in glob.glob(pat) if os.path.isfile(p) and os.access(p, os.R_OK)}
    assert present <= set(marked.files)


def test_differences_of_an_imported_env_with_bare_values():
    """An imported file's env may hold a field as a bare value (the schema
    allows it) or be no object at all: compared as values, never a traceback."""
    a = {"kernel_release": {"value": "6.1", "source": "uname"}, "hostname": "h1"}
    b = {"kernel_release": "6.2", "hostname": {"value": "h1", "source": "x"}}
    assert env.differences(a, b) == [("kernel_release", "6.1", "6.2")]
    assert env.differences("not an object", b) == [("kernel_release", None, "6.2"), ("hostname", None, "h1")]
