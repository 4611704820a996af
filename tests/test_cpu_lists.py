"""cpu= and --cpu take any CPU list: one CPU, a pair (measuring side,
helper), alternatives A|B and ranges A-B, one variant per CPU."""

from __future__ import annotations

import pytest

from opcost.errors import UsageError
from opcost.spec import _cpu_ranges, cpu_alternatives, expand
from opcost.targets.replay import ReplayTarget

TABLE = {"spin_max": 1024, "benchmarks": [
    {"name": "syscall.null", "op": "system call", "helper": False, "params": []},
    {"name": "ctx.pipe", "op": "round trip", "helper": True,
     "params": [{"name": "mode", "type": "enum", "choices": ["process", "thread"], "default": "process"}]},
]}


FOUR_CPUS = ReplayTarget(TABLE, arch="x86_64", cpus=[0, 1, 2, 3])


def ex(spec, default=None):
    return expand(spec, FOUR_CPUS, default)


def test_ranges_and_alternatives_expand_one_variant_per_cpu():
    assert cpu_alternatives("0-2", FOUR_CPUS) == ["0", "1", "2"]
    assert cpu_alternatives("3|1-2|1", FOUR_CPUS) == ["3", "1", "2"]
    assert cpu_alternatives("0,3", FOUR_CPUS) == ["0,3"]
    assert [v.cpu for v in ex("syscall.null:cpu=1-3")] == ["1", "2", "3"]
    assert [v.key() for v in ex("syscall.null:cpu=0|2")] == ["syscall.null:cpu=0", "syscall.null:cpu=2"]


def test_option_list_expands_and_names_each_variant():
    vs = ex("syscall.null", cpu_alternatives("2-3", FOUR_CPUS, "--cpu"))
    assert [v.cpu for v in vs] == ["2", "3"] and len({v.key() for v in vs}) == 2
    (v,) = ex("ctx.pipe", cpu_alternatives("1,2", FOUR_CPUS, "--cpu"))
    assert v.cpu == "1,2"


@pytest.mark.parametrize("value,needle", [
    ("5", "CPU 5 is not available here; valid CPUs: 0-3"),
    ("2-1", "'2-1' is not a CPU range"),
    ("0-1,3", "a range cannot be mixed with a helper CPU"),
    ("0,1,2", "must be one CPU or two"),
])
def test_bad_lists_name_the_valid_cpus(value, needle):
    with pytest.raises(UsageError, match=needle.replace("(", r"\(").replace("'", "'")):
        cpu_alternatives(value, FOUR_CPUS)


def test_cpulist_form():
    assert _cpu_ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
