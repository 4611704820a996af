"""The catalogue of anchors: for each row, which opcost benchmark and
parameters are compared with which established tool's command ("the
anchor"), whether that tool is here (and if not, why), and which rows --ops
selects. The perf bench and hackbench rows are here, lmbench's in
lmbench.py. make_rows lists the rows; resolve says what can run of one."""

from __future__ import annotations

from validation.anchors.lmbench import lmbench_rows
from validation.anchors.model import RATIO_BAND, Anchor, Config, Row, Tools, anchors_cache  # noqa: F401
from validation.anchors.parsers import parse_hackbench, parse_perf_bench

NO_PERF = "anchor unavailable: no perf (apt-get install linux-perf)"


def anchor_perf_syscall(bench: str, loops: int, why_not: str):
    """`perf bench syscall BENCH -l LOOPS` when this perf has it."""
    def find(tools: Tools, cfg: Config):
        perf = tools.which("perf")
        if not perf:
            return None, NO_PERF
        if bench not in tools.perf_syscall():
            return None, f"anchor unavailable: {why_not}"
        return Anchor("perf bench", [perf, "bench", "syscall", bench, "-l", str(cfg.loops(loops))],
                      parse_perf_bench), ""
    return find


def anchor_sched_pipe(threads: bool):
    def find(tools: Tools, cfg: Config):
        perf = tools.which("perf")
        if not perf:
            return None, NO_PERF
        return Anchor("perf bench", [perf, "bench", "sched", "pipe", *(["-T"] if threads else []),
                                     "-l", str(cfg.loops(200_000))], parse_perf_bench), ""
    return find


def anchor_hackbench(ipc: str, mode: str):
    def find(tools: Tools, cfg: Config):
        hb = tools.which("hackbench")
        if not hb:
            return None, "anchor unavailable: no hackbench (apt-get install rt-tests)"
        h = cfg.hackbench
        argv = [hb, "-g", str(h["groups"]), "-f", str(h["fds"]), "-l", str(cfg.loops(h["loops"])),
                "-s", str(h["size"])]
        if ipc == "pipe":
            argv.append("-p")
        argv.append("-T" if mode == "thread" else "-P")
        return Anchor("hackbench (rt-tests)", argv, parse_hackbench), ""
    return find


def make_rows(cfg: Config) -> list[Row]:
    h = cfg.hackbench
    rows = [
        Row("syscall.null", "syscall.null", {"via": "libc"}, "call",
            anchor_perf_syscall("basic", 5_000_000, "this perf has no `perf bench syscall basic`"),
            "perf bench syscall basic"),
        Row("ctx.pipe process", "ctx.pipe", {"mode": "process", "placement": "same"}, "round trip",
            anchor_sched_pipe(False), "perf bench sched pipe"),
        Row("ctx.pipe thread", "ctx.pipe", {"mode": "thread", "placement": "same"}, "round trip",
            anchor_sched_pipe(True), "perf bench sched pipe -T"),
        Row("proc.fork", "proc.fork", {}, "fork",
            anchor_perf_syscall("fork", 1_000, "this perf has no `perf bench syscall fork` (perf >= 6.2)"),
            "perf bench syscall fork", children=True, sized_like_anchor=True,
            differs="perf's child calls exit(0) in a process of many shared libraries (Debian's perf 6.12: 54): "
                    "it runs their destructors and lazy symbol lookups, about 270 page faults a fork, where the "
                    "probe's child _exit(0)s; the probe's parent is sized like perf's process: its anonymous "
                    "bytes, its mappings, and those holding anonymous pages, which fork copies (resident=, "
                    "mappings=, written=; validation/anchors/fork_parts.py measures each part)",
            band=(None, RATIO_BAND[1])),
    ]
    for ipc, mode in (("socket", "process"), ("pipe", "thread")):
        rows.append(Row(f"msg.hackbench {ipc} {mode}", "msg.hackbench",
                        {"groups": str(h["groups"]), "fds": str(h["fds"]), "loops": str(cfg.loops(h["loops"])),
                         "size": str(h["size"]), "ipc": ipc, "mode": mode, "workers_on": "pinned"}, "message",
                        anchor_hackbench(ipc, mode), "hackbench (rt-tests)", long=True, tool="hackbench"))
    return rows + lmbench_rows(cfg)


def resolve(row: Row, benches: dict[str, set[str]], tools: Tools, cfg: Config) -> dict:
    """What can run for this row: {'status': 'ok'|'not in opcost'|'anchor unavailable', ...}.
    benches: opcost benchmark name -> its declared parameter names."""
    anchor, why = row.find_anchor(tools, cfg)
    out = {"anchor": anchor, "why": why, "spec": row.spec(), "dropped_params": [], "minus_spec": None,
           "minus_div": row.minus_div}
    if row.bench not in benches:
        out["status"] = "not in opcost"
        out["why"] = f"not in this opcost (no benchmark {row.bench})"
        return out
    declared = benches[row.bench]
    out["dropped_params"] = [k for k in row.params if k not in declared]
    out["spec"] = row.spec(declared)
    if row.minus:
        mb = row.minus_bench or row.bench
        lacks = [k for k in row.minus if k not in benches.get(mb, set())]
        if mb not in benches or lacks:
            out["status"] = "not in opcost"
            out["why"] = f"not in this opcost ({mb} has no {', '.join(lacks or row.minus)}=, needed to subtract)"
            return out
        params = row.minus if row.minus_bench else {**row.params, **row.minus}
        out["minus_spec"] = Row(row.name, mb, params, row.unit, row.find_anchor, "").spec(benches[mb])
    out["status"] = "ok" if anchor else "anchor unavailable"
    return out


def select_rows(rows: list[Row], ops: str) -> tuple[list[Row], list[str]]:
    """The rows --ops names (a row's name; its first word, e.g. 'ctx.pipe'
    or 'lat_syscall', for all such rows; an opcost benchmark; or a tool:
    perf, hackbench, lmbench), and the names that match none."""
    want = [w.strip() for w in ops.split(",") if w.strip()]
    if not want:
        return [], ["(empty)"]

    def keys(r: Row) -> set[str]:
        return {r.name, r.name.split()[0], r.bench, r.tool}

    bad = [w for w in want if not any(w in keys(r) for r in rows)]
    return [r for r in rows if keys(r) & set(want)], bad
