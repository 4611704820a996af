"""SPEC parsing and validation: `bench.name[:key=value,key=value]`.

A value list `key=a|b|c` expands into one variant per value (cartesian
product across keys). `cpu=A,B` keeps its comma: a token without `=` continues
the previous value. `cpu` and `arch` are parameters of every benchmark; the
rest are checked against the probe's own table (`opcost-probe list --json`)
so an error names the valid choices before anything is measured.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field

from .errors import UsageError

GENERIC_PARAMS = ("cpu", "arch", "spin")


@dataclass(frozen=True)
class Variant:
    bench: str
    params: dict = field(hash=False)       # benchmark params, resolved with defaults
    cpu: str                                # "A" or "A,B", always resolved
    arch: str
    given: tuple = ()                       # keys the user wrote
    op: str = ""                            # what one operation is (from the probe table)
    spin: int = 0                           # injected cost: dependent adds per operation

    def all_params(self) -> dict:
        extra = {"spin": str(self.spin)} if self.spin else {}
        return {**self.params, "cpu": self.cpu, "arch": self.arch, **extra}

    def key(self) -> str:
        """Stable display name, e.g. `ctx.pipe:fp=parent,mode=thread`."""
        shown = {k: v for k, v in self.all_params().items() if k in self.given and k != "arch"}
        if "arch" in self.given:
            shown["arch"] = self.arch
        if not shown:
            return self.bench
        return self.bench + ":" + ",".join(f"{k}={v}" for k, v in shown.items())


def split_spec(spec: str) -> tuple[str, list[tuple[str, str]]]:
    name, _, rest = spec.partition(":")
    name = name.strip()
    if not name:
        raise UsageError(f"SPEC {spec!r} has no benchmark name; write bench.name or bench.name:key=value")
    pairs: list[tuple[str, str]] = []
    if rest:
        for tok in rest.split(","):
            if "=" in tok:
                k, _, v = tok.partition("=")
                if not k.strip():
                    raise UsageError(f"SPEC {spec!r}: parameter {tok!r} has no name; write key=value")
                pairs.append((k.strip(), v.strip()))
            elif pairs and tok.strip():
                k, v = pairs[-1]
                pairs[-1] = (k, f"{v},{tok.strip()}")
            else:
                raise UsageError(f"SPEC {spec!r}: {tok!r} is not key=value")
    seen = set()
    for k, _ in pairs:
        if k in seen:
            raise UsageError(f"SPEC {spec!r}: parameter {k} given twice; use {k}=a|b for a list of values")
        seen.add(k)
    return name, pairs


def allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def default_cpu() -> int:
    # The last CPU: CPU 0 usually takes more interrupts and housekeeping.
    return allowed_cpus()[-1]


def check_cpu_list(value: str, what: str = "cpu") -> str:
    cpus = allowed_cpus()
    valid = ",".join(map(str, cpus))
    parts = [p.strip() for p in value.split(",")]
    if not value.strip() or len(parts) > 2:
        raise UsageError(f"{what}={value} must be one CPU or two (measuring side, helper); valid CPUs: {valid}")
    for p in parts:
        if not p.isdigit() or int(p) not in cpus:
            raise UsageError(f"{what}={value}: CPU {p} is not available here; valid CPUs: {valid}")
    return ",".join(parts)


def _check_value(bench: str, p: dict, v: str) -> None:
    name = p["name"]
    if p["type"] == "enum" and v not in p["choices"]:
        raise UsageError(f"{bench}: {name}={v} is not allowed; valid: {'|'.join(p['choices'])}")
    if p["type"] == "int":
        try:
            n = int(v, 0)
        except ValueError:
            n = None
        if n is None or not p["min"] <= n <= p["max"]:
            raise UsageError(f"{bench}: {name}={v} must be an integer in [{p['min']}, {p['max']}]")
    if p["type"] == "str" and not v:
        raise UsageError(f"{bench}: {name} must not be empty")


def expand(spec: str, table_for_arch, host_arch: str, arches: list[str], default_cpus: str | None,
           placement_of=None) -> list[Variant]:
    """All variants a SPEC denotes, validated. `table_for_arch(arch)` returns
    the probe's benchmark table for that architecture; `placement_of(a, b,
    arch)` the placement class of a CPU pair (None: same or core)."""
    name, pairs = split_spec(spec)
    lists = {k: v.split("|") for k, v in pairs}
    for k, vals in lists.items():
        if any(x == "" for x in vals):
            raise UsageError(f"SPEC {spec!r}: {k} has an empty value")
    for arch in lists.get("arch", [host_arch]):
        if arch not in arches:
            raise UsageError(f"arch={arch} has no probe in this installation; available: {', '.join(arches)}")
    keys = list(lists)
    variants = []
    for combo in itertools.product(*(lists[k] for k in keys)):
        chosen = dict(zip(keys, combo))
        arch = chosen.pop("arch", host_arch)
        table = table_for_arch(arch)
        benches = {b["name"]: b for b in table["benchmarks"]}
        if name not in benches:
            raise UsageError(f"unknown benchmark {name!r}; valid: {', '.join(benches)}")
        b = benches[name]
        declared = {p["name"]: p for p in b["params"]}
        cpu = chosen.pop("cpu", None)
        spin = chosen.pop("spin", "0")
        _check_value(name, {"name": "spin", "type": "int", "min": 0, "max": table.get("spin_max", 0)}, spin)
        for k, v in chosen.items():
            if k not in declared:
                valid = ", ".join([*declared, *GENERIC_PARAMS])
                raise UsageError(f"{name} has no parameter {k!r}; valid: {valid}")
            _check_value(name, declared[k], v)
        params = {p: declared[p]["default"] for p in declared}
        params.update(chosen)
        if cpu is not None:
            cpu = check_cpu_list(cpu)
            if "," in cpu and not b.get("helper"):
                raise UsageError(f"{name} runs on one CPU; give cpu=A, not cpu={cpu}")
        else:
            cpu = default_cpus or str(default_cpu())
            if not b.get("helper"):
                cpu = cpu.split(",")[0]  # --cpu A,B: the helper CPU applies to two-party benchmarks only
        _reconcile_placement(name, params, cpu, b, "placement" in chosen, placement_of, arch)
        variants.append(Variant(name, params, cpu, arch, tuple(keys), b["op"], int(spin, 0)))
    return variants


def _reconcile_placement(name: str, params: dict, cpu: str, b: dict, placement_given: bool,
                         placement_of=None, arch: str | None = None) -> None:
    """Two explicit CPUs decide the placement; say so if the user also asked
    for a placement that contradicts them (never silently change either)."""
    if "placement" not in params or "," not in cpu:
        return
    a, h = cpu.split(",")
    if a == h:
        implied = "same"
    elif placement_of is not None:
        implied = placement_of(int(a), int(h), arch)
    else:
        implied = "core"
    if placement_given and params["placement"] != implied:
        raise UsageError(f"{name}: cpu={cpu} means placement={implied}, but placement={params['placement']} was asked")
    params["placement"] = implied
