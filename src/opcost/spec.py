"""SPEC parsing and validation: `bench.name[:key=value,key=value]`.

A value list `key=a|b|c` expands into one variant per value (cartesian
product across keys). `cpu=A,B` keeps its comma: a token without `=` continues
the previous value. Spaces around names and values are ignored; an integer
parameter is stored and compared as its canonical decimal (`n=0x10` is
`n=16`), so two spellings of one value are one variant. `cpu` and `arch` are
parameters of every benchmark; the rest are checked against the probe's own
table (`opcost-probe list --json`) so an error names the valid choices before
anything is measured. The table, the CPUs and the placements come from the
target the variants will run on (targets/), never from this process's machine.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .errors import UsageError
from .safetext import printable

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
    switches: int = 0                       # context switches per operation (from the probe table)
    # A build of the user's source (opcost variants) travels on its variant:
    exe: str = ""                           # a probe with the user's opcost_op linked in (user.op)
    program: tuple = ()                     # or a whole program, run by `opcost-probe time`
    name: str = ""                          # its display name (-DFAST), instead of bench:params
    emulator: str = ""                      # a build for another architecture runs under this (qemu-arm)
    ops: int = 0                            # a program run performs this many operations (--ops; 0: one run)
    machine: tuple = ()                     # the vm target's kernel=/cmdline= of this variant ((key, value)...)

    def all_params(self) -> dict:
        extra = {"spin": str(self.spin)} if self.spin else {}
        return {**self.params, "cpu": self.cpu, "arch": self.arch, **extra, **dict(self.machine)}

    def probe_params(self) -> dict:
        """The parameters the probe takes: none for a build (its params
        describe the build: define, mode, source...)."""
        return {} if (self.exe or self.program) else self.params

    def key(self) -> str:
        """Stable display name, e.g. `ctx.pipe:fp=parent,mode=thread`."""
        if self.name:
            return self.name
        shown = {k: v for k, v in self.all_params().items() if k in self.given and k != "arch"}
        if "arch" in self.given:
            shown["arch"] = self.arch
        if not shown:
            return self.bench
        return self.bench + ":" + ",".join(f"{k}={v}" for k, v in shown.items())


def split_spec(spec: str) -> tuple[str, list[tuple[str, str]]]:
    name, colon, rest = spec.partition(":")
    name = name.strip()
    if not name:
        raise UsageError(f"SPEC {spec!r} has no benchmark name; write bench.name or bench.name:key=value")
    if colon and not rest.strip():
        raise UsageError(f"SPEC {spec!r} ends in ':' with no parameters; write {name} for the defaults "
                         f"or {name}:key=value")
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


def check_cpu_list(value: str, target, what: str = "cpu") -> str:
    """One placement: "A" (measuring side) or "A,B" (measuring side, helper),
    on CPUs the target allows."""
    cpus = target.allowed_cpus()
    valid = _cpu_ranges(cpus)
    parts = [p.strip() for p in value.split(",")]
    if not value.strip() or len(parts) > 2:
        raise UsageError(f"{what}={value} must be one CPU or two (measuring side, helper); valid CPUs: {valid}")
    for p in parts:
        if not p.isdigit() or int(p) not in cpus:
            raise UsageError(f"{what}={value}: CPU {p} is not available here; valid CPUs: {valid}")
    return ",".join(str(int(p)) for p in parts)


def cpu_alternatives(value: str, target, what: str = "cpu") -> list[str]:
    """Every CPU placement a value names, one variant each: `A`, `A,B`,
    alternatives `A|B`, and ranges `A-B` (one variant per CPU in the range,
    e.g. all the little cores of a big.LITTLE machine; `opcost env` lists
    each CPU's model)."""
    out: list[str] = []
    for alt in value.split("|"):
        alt = alt.strip()
        if "-" in alt:
            if "," in alt:
                raise UsageError(f"{what}={value}: a range cannot be mixed with a helper CPU; "
                                 f"write {what}=A-B (one variant per CPU) or {what}=A,B")
            lo, _, hi = alt.partition("-")
            if not (lo.strip().isdigit() and hi.strip().isdigit()) or int(lo) > int(hi):
                raise UsageError(f"{what}={value}: {alt!r} is not a CPU range; write A-B with A <= B, "
                                 f"valid CPUs: {_cpu_ranges(target.allowed_cpus())}")
            out += [check_cpu_list(str(c), target, what) for c in range(int(lo), int(hi) + 1)]
        else:
            out.append(check_cpu_list(alt, target, what))
    return list(dict.fromkeys(out))


def _cpu_ranges(cpus: list[int]) -> str:
    """[0,1,2,5] -> "0-2,5" (the kernel's cpulist form)."""
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


def _check_value(bench: str, p: dict, v: str) -> str:
    """The value checked against its declaration, in canonical form: an int
    parameter as its decimal (0x10, 16 and 1_6 are one value, one variant)."""
    name = p["name"]
    if p["type"] == "enum" and v not in p["choices"]:
        raise UsageError(f"{bench}: {name}={v} is not allowed; valid: {'|'.join(p['choices'])}")
    if p["type"] == "int":
        try:
            n = int(v, 0) if v.isascii() else None
        except ValueError:
            n = None
        if n is None or not p["min"] <= n <= p["max"]:
            raise UsageError(f"{bench}: {name}={v} must be an integer in [{p['min']}, {p['max']}] "
                             "(decimal, or 0x hexadecimal)")
        return str(n)
    if p["type"] == "str" and not v:
        raise UsageError(f"{bench}: {name} must not be empty")
    return v


def expand(spec: str, target, default_cpus: str | list[str] | None = None) -> list[Variant]:
    """All variants a SPEC denotes, validated against the target: its
    benchmark table per architecture, its architectures, CPUs and the
    placement class of a CPU pair. `default_cpus` is the --cpu option (one
    placement, or a list of them from cpu_alternatives)."""
    host_arch = target.host_arch()
    arches = target.arches()
    name, pairs = split_spec(spec)
    lists = {k: [x.strip() for x in v.split("|")] for k, v in pairs}
    for k, vals in lists.items():
        if any(x == "" for x in vals) and k != "cmdline":   # cmdline= : the kernel's defaults
            raise UsageError(f"SPEC {spec!r}: {k} has an empty value")
    if "cpu" in lists:
        lists["cpu"] = cpu_alternatives("|".join(lists["cpu"]), target)
    elif isinstance(default_cpus, list) and len(default_cpus) > 1:
        lists["cpu"] = default_cpus  # --cpu 0-3: one variant per CPU, named by it
    if isinstance(default_cpus, list):
        default_cpus = default_cpus[0] if default_cpus else None
    for arch in lists.get("arch", [host_arch]):
        if arch not in arches:
            raise UsageError(f"arch={arch} has no probe that runs here; available: {', '.join(arches)} "
                             f"(`opcost probe build --arch {arch}` builds one)")
    keys = list(lists)
    variants = []
    for combo in itertools.product(*(lists[k] for k in keys)):
        chosen = dict(zip(keys, combo))
        machine = _machine_params(chosen, target)   # first: a kernel= tells the vm target its guests' architecture
        arch = chosen.pop("arch", target.host_arch())
        table = target.benchmark_table(arch)
        benches = {b["name"]: b for b in table["benchmarks"]}
        if name not in benches:
            raise UsageError(f"unknown benchmark {name!r}; valid: {', '.join(benches)}")
        b = benches[name]
        declared = {p["name"]: p for p in b["params"]}
        cpu = chosen.pop("cpu", None)
        spin = _check_value(name, {"name": "spin", "type": "int", "min": 0, "max": table.get("spin_max", 0)},
                            chosen.pop("spin", "0"))
        for k, v in chosen.items():
            if k not in declared:
                valid = ", ".join([*declared, *GENERIC_PARAMS])
                raise UsageError(f"{name} has no parameter {k!r}; valid: {valid}")
            chosen[k] = _check_value(name, declared[k], v)
        params = {p: declared[p]["default"] for p in declared}
        params.update(chosen)
        if cpu is not None:
            if "," in cpu and not b.get("helper"):
                raise UsageError(f"{name} runs on one CPU; give cpu=A, not cpu={cpu}")
        else:
            cpu = default_cpus or str(target.default_cpu())
            if not b.get("helper"):
                cpu = cpu.split(",")[0]  # --cpu A,B: the helper CPU applies to two-party benchmarks only
        _reconcile_placement(name, params, cpu, b, "placement" in chosen, target.placement_of, arch)
        variants.append(Variant(name, params, cpu, arch, tuple(keys), b["op"], int(spin),
                                b.get("switches_per_op", 0), machine=machine))
    return variants


def _machine_params(chosen: dict, target) -> tuple:
    """kernel= and cmdline= (the vm target's variant dimensions, targets/vm/),
    taken out of the benchmark's parameters and checked."""
    taken = getattr(target, "machine_params", ())
    out = []
    for k in ("kernel", "cmdline"):
        if k not in chosen:
            continue
        if k not in taken:
            raise UsageError(f"{k}= boots a virtual machine: give --kernel PATH, or kernel= in the SPEC")
        v = chosen.pop(k)
        target.check_machine_param(k, v)
        out.append((k, v))
    return tuple(out)


def _reconcile_placement(name: str, params: dict, cpu: str, b: dict, placement_given: bool,
                         placement_of, arch: str) -> None:
    """Two explicit CPUs decide the placement; say so if the user also asked
    for a placement that contradicts them (never silently change either)."""
    if "placement" not in params or "," not in cpu:
        return
    a, h = cpu.split(",")
    implied = "same" if a == h else placement_of(int(a), int(h), arch)
    if placement_given and params["placement"] != implied:
        raise UsageError(f"{name}: cpu={cpu} means placement={implied}, but placement={params['placement']} was asked")
    params["placement"] = implied


# a series (series.py, `series --over`): changepoint.MIN_LABELS, without importing numpy to check input
MIN_LABELS = 3


def parse_over(text: str) -> tuple[str, list[str]]:
    """`PARAM=V1|V2|...` -> (PARAM, values); values may repeat (a label is
    a position in the series, its value what it runs)."""
    name, eq, values = text.partition("=")
    vals = [v.strip() for v in values.split("|")]
    if not eq or not name.strip() or any(not v for v in vals):
        raise UsageError(f"--over {printable(text)}: give PARAM=V1|V2|... (e.g. --over spin=1|1|1|4|4), "
                         "one value per label, in series order")
    if len(vals) < MIN_LABELS:
        raise UsageError(f"--over {printable(text)}: a series needs at least {MIN_LABELS} labels, "
                         f"not {len(vals)}")
    return name.strip(), vals
