"""`go`: the Go benchmark text format (golang.org/design/14313-benchmark-format),
so that `benchstat old.txt new.txt` compares two opcost runs.

One line per measured probe process (benchstat wants at least 6 per
benchmark for a confidence interval):

    BenchmarkSyscallNull/via=libc-2  30000  99.85 ns/op  199.7 cycles/op

- the name: `Benchmark`, the bench name in CamelCase (syscall.null ->
  SyscallNull: benchstat prints it without the prefix), then one `/key=value`
  part per parameter (arch and cpu only when they differ within the run, as
  with `--cpu 0-3`: otherwise they are where it ran, not what, and left out
  so that runs pinned differently still pair up; a parameter that does not
  apply to the variant, as the probe's header says in params_unused, is
  left out too: fpkind with fp=none),
  then `-N` with N the number of CPUs of the machine that ran it (what Go's
  GOMAXPROCS defaults to; the same for every run on one machine);
- the iteration count: the operations the process measured (batches x
  iterations x operations per iteration);
- `ns/op`: the process's median batch, per operation (what opcost's median,
  CI and verdicts are computed over); `cycles/op`: its median at the TSC rate;
  each perf counter the run counted as `value event/op` (the `cycles` counter
  as `cycles:all/op`, so it is not mistaken for the TSC figure).

Header lines (`key: value`, lower-case keys) name the machine only (goos,
goarch, cpu, pkg): a label, a run id or a date differs between the two runs
being compared, and benchstat would then split them into separate tables.
"""

from __future__ import annotations

import re

NAME = "go"
KINDS = ("result",)
MANY = b""   # several runs: one after the other (benchstat reads them as one file)

GOARCH = {"x86_64": "amd64", "amd64": "amd64", "i386": "386", "i686": "386", "aarch64": "arm64", "arm64": "arm64",
          "armv7l": "arm", "riscv64": "riscv64", "ppc64le": "ppc64le", "s390x": "s390x"}
_BAD = re.compile(r"[\s/]")   # a name part holds no blank (it ends the name) and no '/' (it splits parts)


def _value(env: dict, key: str):
    v = env.get(key)
    return v.get("value") if isinstance(v, dict) else v


def _clean(text) -> str:
    return _BAD.sub("_", str(text)) or "_"


def bench_name(bench: str) -> str:
    """syscall.null -> SyscallNull, ctx.pipe -> CtxPipe."""
    parts = [p for p in re.split(r"[^0-9A-Za-z]+", bench) if p]
    return "".join(p[:1].upper() + p[1:] for p in parts) or "Op"


def cpu_count(env: dict) -> int:
    per_cpu = _value(env, "per_cpu")
    if isinstance(per_cpu, list) and per_cpu:
        return len(per_cpu)
    online = _value(env, "cpus_online")
    n = 0
    for part in str(online or "").split(","):
        lo, _, hi = part.partition("-")
        if lo.strip().isdigit():
            n += (int(hi) - int(lo) + 1) if hi.strip().isdigit() else 1
    return n or 1


def _unit(event: str) -> str:
    return ("cycles:all" if event == "cycles" else _clean(event)) + "/op"


def _num(x: float) -> str:
    return f"{x:.6g}" if abs(x) < 1e15 else repr(float(x))


def header(doc: dict) -> list[str]:
    env = doc.get("env") or {}
    arches = {(r.get("params") or {}).get("arch") for r in doc["results"]} - {None}
    arch = arches.pop() if len(arches) == 1 else _value(env, "arch")
    lines = ["goos: linux"]
    if arch:
        lines.append(f"goarch: {GOARCH.get(str(arch), _clean(arch))}")
    model = _value(env, "cpu_model_name")
    if model:
        lines.append(f"cpu: {' '.join(str(model).split())}")
    lines.append("pkg: opcost")
    return lines


WHERE = ("arch", "cpu")   # where a variant ran: in its name only when the run's variants differ in it


def uniform(doc: dict) -> set[str]:
    """The WHERE keys with one value over the whole run (left out of names)."""
    return {k for k in WHERE if len({str((r.get("params") or {}).get(k)) for r in doc["results"]}) <= 1}


def unused(r: dict) -> set[str]:
    """The parameters that do not apply to this variant (the probe's header
    names them, params_unused: fpkind with fp=none), left out of its name so
    that the arms of an ab pair up in benchstat without -ignore."""
    return {str(k) for p in r.get("processes") or [] for k in (p.get("header") or {}).get("params_unused") or []}


def result_lines(r: dict, procs: int, same: set[str] = set(WHERE)) -> list[str]:
    from ..stats import process_stats   # numpy (stats): formats load with `opcost --help`, numpy must not

    skip = same | unused(r)
    params = {k: v for k, v in (r.get("params") or {}).items() if k not in skip}
    name = "Benchmark" + bench_name(r["bench"]) + "".join(f"/{_clean(k)}={_clean(v)}" for k, v in params.items())
    name += f"-{procs}"
    lines = []
    for p in r.get("processes") or []:
        samples = p.get("samples") or []
        if not samples:
            continue
        st = process_stats(samples, p.get("header"))
        ops = sum(int(s["iters"]) * int(s.get("ops_per_iter", 1)) for s in samples)
        pairs = [f"{_num(st['median_ns'])} ns/op"]
        if st.get("median_tsc") is not None:
            pairs.append(f"{_num(st['median_tsc'])} cycles/op")
        for event, v in (st.get("counters") or {}).items():
            if isinstance(v, (int, float)):
                pairs.append(f"{_num(v)} {_unit(event)}")
        lines.append(f"{name}\t{ops}\t" + "\t".join(pairs))
    return lines


def serialize(doc: dict) -> bytes:
    procs = cpu_count(doc.get("env") or {})
    lines = header(doc)
    same = uniform(doc)
    for r in doc["results"]:
        lines += result_lines(r, procs, same)
    return ("\n".join(lines) + "\n").encode()
