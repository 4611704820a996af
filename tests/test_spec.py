"""SPEC parsing: value lists, cpu=A,B commas, validation against the probe table."""

import pytest

from opcost.errors import UsageError
from opcost.spec import expand, split_spec
from opcost.targets.replay import ReplayTarget

TABLE = {"benchmarks": [
    {"name": "ctx.pipe", "op": "round trip", "helper": True, "params": [
        {"name": "mode", "type": "enum", "default": "process", "choices": ["process", "thread"]},
        {"name": "placement", "type": "enum", "default": "same", "choices": ["same", "core"]}]},
    {"name": "syscall.null", "op": "system call", "helper": False, "params": [
        {"name": "via", "type": "enum", "default": "libc", "choices": ["libc", "inline"]}]},
    {"name": "spin", "op": "op", "helper": False, "params": [
        {"name": "n", "type": "int", "default": "1", "min": 1, "max": 100}]},
], "counters": [], "spin_max": 1024}


def ex(spec, cpus=None):
    return expand(spec, ReplayTarget(TABLE, arch="x86_64", arches=["x86_64", "i386"], cpus=[0, 1]), cpus)


def test_split_keeps_cpu_commas():
    assert split_spec("ctx.pipe:cpu=0,1,mode=thread") == ("ctx.pipe", [("cpu", "0,1"), ("mode", "thread")])
    assert split_spec("syscall.null") == ("syscall.null", [])


def test_value_lists_expand_to_cartesian_product():
    vs = ex("ctx.pipe:mode=process|thread,placement=same|core,cpu=0")
    assert [(v.params["mode"], v.params["placement"]) for v in vs] == [
        ("process", "same"), ("process", "core"), ("thread", "same"), ("thread", "core")]
    assert all(v.cpu == "0" for v in vs)
    assert vs[0].key() == "ctx.pipe:mode=process,placement=same,cpu=0"


def test_defaults_filled_and_recorded():
    (v,) = ex("syscall.null:cpu=1")
    assert v.all_params() == {"via": "libc", "cpu": "1", "arch": "x86_64"}
    assert v.op == "system call"


def test_two_cpus_decide_placement():
    (v,) = ex("ctx.pipe:cpu=0,1")
    assert v.params["placement"] == "core"
    with pytest.raises(UsageError, match="means placement=core"):
        ex("ctx.pipe:cpu=0,1,placement=same")


def test_global_cpu_pair_applies_helper_cpu_only_to_two_party_benchmarks():
    (v,) = ex("syscall.null", cpus="0,1")
    assert v.cpu == "0"
    (p,) = ex("ctx.pipe", cpus="0,1")
    assert p.cpu == "0,1" and p.params["placement"] == "core"


@pytest.mark.parametrize("spec,msg", [
    ("nope", "unknown benchmark 'nope'; valid: ctx.pipe, syscall.null, spin"),
    ("syscall.null:foo=1", "has no parameter 'foo'; valid: via, cpu, arch"),
    ("syscall.null:via=asm", "via=asm is not allowed; valid: libc|inline"),
    ("spin:n=0", "n=0 must be an integer in [1, 100]"),
    ("spin:n=x", "n=x must be an integer in [1, 100]"),
    ("syscall.null:cpu=99", "CPU 99 is not available here"),
    ("syscall.null:cpu=0,0", "runs on one CPU"),
    ("syscall.null:arch=sparc", "arch=sparc has no probe that runs here; available: x86_64, i386"),
    ("syscall.null:via=", "via has an empty value"),
    (":via=libc", "has no benchmark name"),
    ("syscall.null:via", "'via' is not key=value"),
])
def test_bad_specs(spec, msg):
    with pytest.raises(UsageError) as e:
        ex(spec)
    assert msg in str(e.value)


@pytest.mark.parametrize("written", ["16", "0x10", "0X10", "0o20", "0b10000", "+16", "1_6", " 16 "])
def test_int_parameters_are_canonical_decimal(written):
    (v,) = ex(f"spin:n={written},cpu=0")
    assert v.params["n"] == "16" and v.key() == "spin:n=16,cpu=0"


def test_int_spellings_of_one_value_are_one_variant():
    vs = ex("spin:n=16|32,cpu=0")
    assert [v.params["n"] for v in vs] == ["16", "32"]
    assert ex("spin:n=0x10,spin=0x20,cpu=0")[0].spin == 32
    assert ex("spin:n=0x10|16,cpu=0")[0].params == ex("spin:n=16|0x10,cpu=0")[1].params


@pytest.mark.parametrize("spec, words", [
    ("syscall.null:", ["ends in ':'", "write syscall.null for the defaults"]),
    ("syscall.null: ", ["ends in ':'"]),
    ("spin:n=016", ["n=016", "decimal, or 0x"]),
    ("spin:n=١٦", ["must be an integer"]),
])
def test_empty_parameter_list_and_odd_integers_are_refused(spec, words):
    with pytest.raises(UsageError) as e:
        ex(spec)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_spaces_around_value_list_entries_are_ignored():
    assert [v.params["via"] for v in ex("syscall.null:via=libc | inline")] == ["libc", "inline"]
