"""Documents for the HTML report's tests (tests/test_html.py,
tests/test_html_browser.py) and its scale script: opcost.result/1 runs built
through the model (model.Run, Result, Process) from synthetic probe output,
summarised by the runner's own code, an opcost.comparison/1 built by
comparison.ab_document, and an opcost.series/1 document in the shape the
HTML reader takes (the series command owns the real schema; html.py's
reader is tolerant). Deterministic: every number comes from a seeded RNG.

PAYLOADS: 30 script-injection strings, each meant to create an element or
run a script if a page put it into HTML (or SVG) unescaped. Each carries a
marker (`pwn` + its number) in the element it would create, so a test can
look for what it meant to make."""

from __future__ import annotations

import random

from opcost.comparison import ab_document
from opcost.model import Process, Result, Run
from opcost.summaries import fill_summaries

PAYLOADS = [
    "<script>alert('pwn0')</script>",
    "<img src=x onerror=alert('pwn1') id=pwn1>",
    "<svg onload=alert('pwn2') id=pwn2>",
    "\"><script id=pwn3>alert(3)</script>",
    "'><img src=x onerror=alert(4) id=pwn4>",
    "<iframe id=pwn5 src=\"javascript:alert(5)\"></iframe>",
    "<a id=pwn6 href=\"javascript:alert(6)\">click</a>",
    "<body onload=alert('pwn7')>",
    "<details id=pwn8 open ontoggle=alert(8)>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(9) id=pwn9>",
    "</title><script id=pwn10>alert(10)</script>",
    "</style><script id=pwn11>alert(11)</script>",
    "</textarea><svg><script id=pwn12>alert(12)</script></svg>",
    "]]><script id=pwn13>alert(13)</script><![CDATA[",
    "--><script id=pwn14>alert(14)</script><!--",
    "<object id=pwn15 data=\"javascript:alert(15)\"></object>",
    "<embed id=pwn16 src=\"javascript:alert(16)\">",
    "<form id=pwn17 action=\"javascript:alert(17)\"><button>x</button></form>",
    "<input id=pwn18 autofocus onfocus=alert(18)>",
    "<video id=pwn19><source onerror=alert(19)></video>",
    "<meta http-equiv=\"refresh\" content=\"0;url=javascript:alert(20)\" id=pwn20>",
    "<base id=pwn21 href=\"javascript:alert(21)//\">",
    "<link id=pwn22 rel=stylesheet href=\"javascript:alert(22)\">",
    "<svg><a id=pwn23 xlink:href=\"javascript:alert(23)\"><text>x</text></a></svg>",
    "<svg><animate id=pwn24 onbegin=alert(24) attributeName=x dur=1s>",
    "<marquee id=pwn25 onstart=alert(25)>x</marquee>",
    "$\\alpha$ <b id=pwn26 onmouseover=alert(26)>bold</b>",
    "&lt;script id=pwn27&gt;alert(27)&lt;/script&gt; &amp; <i id=pwn27b>",
    "<style>*{display:none}</style><div id=pwn28>",
    "<noscript><p title=\"</noscript><img src=x onerror=alert(29) id=pwn29>\">",
]
assert len(PAYLOADS) == 30


def _header(bench: str, params: dict, cpu: int, seed: int) -> dict:
    return {"type": "header", "schema": "opcost.probe/1", "bench": bench, "params": params, "op": "operation",
            "tsc_hz": 2_000_000_000, "iters": 10_000, "cpus": [cpu], "counters": [],
            "overhead": {"clock_ns": 20, "loop_ns_per_iter": 0.25}, "pid": 1000 + seed}


def _sample(rng: random.Random, i: int, ns: float, cpu: int, counters: dict | None) -> dict:
    s = {"type": "sample", "i": i, "iters": 10_000, "ns_per_op": ns, "tsc_per_op": 2 * ns,
         "user_ns": int(ns * 2_500), "sys_ns": int(ns * 7_500), "user_ns_per_op": ns / 4,
         "sys_ns_per_op": ns * 3 / 4, "cpu_before": cpu, "cpu_after": cpu, "steal_ticks": 0, "warmup": False}
    if counters is not None:
        s["counters"] = {k: v * rng.uniform(0.98, 1.02) for k, v in counters.items()}
    return s


def result(bench: str, params: dict, ns: float, *, processes: int = 5, samples: int = 12, seed: int = 0,
           counters: dict | None = None, spread: float = 0.01, key: str | None = None) -> Result:
    """One variant: `processes` probe processes of `samples` batches around `ns`."""
    rng = random.Random(seed)
    procs = []
    for p in range(processes):
        level = ns * (1 + rng.gauss(0, spread))
        smp = [_sample(rng, i, level * (1 + abs(rng.gauss(0, spread))), 0, counters) for i in range(samples)]
        procs.append(Process(p, _header(bench, params, 0, seed * 100 + p), smp, [],
                             {"type": "trailer", "status": "ok"}, {"round": p, "seq": p}))
    return Result(bench, key, {"arch": "x86_64", "cpu": "0", **params}, "operation", "ns", "ok", None, procs)


def env(host: str = "testhost", extra: dict | None = None) -> dict:
    e = {"arch": {"value": "x86_64", "source": "uname(2) machine"},
         "hostname": {"value": host, "source": "uname(2) nodename"},
         "kernel_release": {"value": "6.18.0-test", "source": "uname(2) release"},
         "cpu_model_name": {"value": "Test CPU @ 2.00GHz", "source": "/proc/cpuinfo 'model name' (cpu 0)"},
         "cpuid_features": {"value": {"avx2": True, "rdtscp": True}, "source": "probe cpuid"}}
    e.update(extra or {})
    return e


def run_doc(*, label: str | None = "base", params: list[dict] | None = None, host: str = "testhost",
            run_id: int | None = 1, env_extra: dict | None = None, counters: bool = True,
            seed: int = 0, processes: int = 5, samples: int = 12, argv: list[str] | None = None) -> dict:
    """A run of syscall.null, and of ctx.pipe once per entry of `params`."""
    cnt = {"instructions:u": 210.0, "instructions:k": 1650.0, "cycles": 400.0, "page-faults": 0.0} if counters \
        else None
    results = [result("syscall.null", {"via": "libc"}, 100.0, seed=seed, counters=cnt, processes=processes,
                      samples=samples)]
    for i, p in enumerate(params if params is not None else [{"mode": "process"}, {"mode": "thread"}]):
        results.append(result("ctx.pipe", p, 2400.0 + 300 * i, seed=seed + i + 1, processes=processes,
                              samples=samples))
    doc = Run(results, env(host, env_extra), argv or ["opcost", "run", "syscall.null", "ctx.pipe"], "complete",
              run_id, label).to_json()
    fill_summaries(doc)
    return doc


def ab_doc(*, a: str = "spin=1", b: str = "spin=21", host: str = "testhost", benches=("syscall.null", "signal.install"),
           step: float = 0.1, env_extra: dict | None = None) -> dict:
    """An `ab` comparison: per benchmark an A and a B result, B `step` slower."""
    results = []
    for i, bench in enumerate(benches):
        ra = result(bench, {"spin": a}, 100.0, seed=10 + i, processes=8)
        rb = result(bench, {"spin": b}, 100.0 * (1 + step), seed=20 + i, processes=8)
        results += [ra, rb]
    doc = Run(results, env(host, env_extra), ["opcost", "ab"], "complete", 3, "ab").to_json()
    fill_summaries(doc)
    return ab_document(doc["results"], a=a, b=b, delta=0.02, run_id=3, env=doc["env"])


def series_doc(labels: list[str] | None = None, step_at: int = 6, step: float = 0.05, bench: str = "signal.catch",
               by: str = "commit") -> dict:
    """An opcost.series/1 document as html.py reads it: labels in order, per
    label the median and CI over its processes, change points by index
    (the first label after the step)."""
    labels = labels or [f"c{i:02d}{'abcdef'[i % 6]}" for i in range(12)]
    rng = random.Random(7)
    points = []
    for i, lab in enumerate(labels):
        level = 700.0 * (1 + (step if i >= step_at else 0))
        meds = [level * (1 + rng.gauss(0, 0.005)) for _ in range(6)]
        meds.sort()
        m = (meds[2] + meds[3]) / 2
        points.append({"label": lab, "n_processes": 6, "median_ns": m, "ci95_ns": [meds[1], meds[4]],
                       "process_medians_ns": meds})
    for p in points:
        p["change_first"] = p["median_ns"] / points[0]["median_ns"] - 1
    for prev, p in zip(points, points[1:]):
        p["change_prev"] = p["median_ns"] / prev["median_ns"] - 1
    cps = [{"index": step_at, "from": labels[step_at - 1], "to": labels[step_at], "change": step,
            "ci95_ratio": [1 + step - 0.01, 1 + step + 0.01], "verdict": "slower"}] if step else []
    return {"schema": "opcost.series/1", "bench": bench, "key": bench, "op": "signal delivered and caught",
            "by": by, "interleaved": False, "points": points, "change_points": cps}
