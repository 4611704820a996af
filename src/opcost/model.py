"""The documents opcost produces, as data: what a run measured
(`opcost.result/1`: Run, Result, Process) and what a comparison decided
(`opcost.comparison/1`: Comparison). They are built here and only here: the
runner, the store's loader, the exporters and the reports go through these
classes (`to_json` gives the public document, `from_json` reads one back).

History of the formats (readers ignore unknown fields):

opcost.result/1
  0.1.0: schema, opcost_version, run_id, label, status, argv, env, results[]
    of {bench, key, params (cpu and arch included), op, unit, status
    (ok|unsupported|failed|pending), reason, processes[] of {index, round,
    seq (order of starting in the run), pad_bytes, wall_s, header, samples,
    warmup, trailer}, summary}. From a store also created, finished, kind.
  counters: summary.derived {name: {value, expr, profile, help, reason?}},
    summary.counters_running {event: running share}; samples may carry
    counters_running and start_raw_ns; results[].parallel (and
    summary.parallel) with --parallel N: {copies, cpus, wrapped,
    single_ops_per_s, per_copy_ops_per_s, total_ops_per_s, efficiency,
    efficiency_range, overlap, flags, rounds[]}.
  issue 11: store_missed {reason, processes} when the store was lost during
    the run; summary is null while status is running (computed once at the
    end); run status may read "abandoned" (from a store: its opcost is gone);
    an outliers flag carries processes[] and rounds[].
  issue 14: labels {key: value} after label (always; {} for none): a bare
    `--label TEXT` is {"name": TEXT}, and label is labels.name; uuid after
    run_id: the run's identity across stores (`opcost import` skips a run
    whose uuid it holds; absent in documents before, or of an old store's
    run until its store migrates). The keys of labels are sorted.
  issue 13: processes[].stage in an `ab` run of the sequential design (no
    -p): the look (1, 2, 3) the process belongs to; it marks the run as
    sequential, so `show` replays its looks. issue 13 (seq2): and
    processes[].boundary (pocock | obf), the alpha spending it ran with
    (absent before: obf).
  issue 17: a counter name may carry `:helper` (counted on the benchmark's
    helper thread or process: samples' counters["context-switches:helper"])
    and be a named PMU event (`ls_dispatch.ld_dispatch`, `msr/tsc/`,
    `cpu/event=0x29,umask=1/`); the probe header's counters[] gain `attr`
    {type, config, config1?, config2?} (the perf_event_attr opened) and
    `helper`.
  issue 24: plan after argv: what the run was asked to do, as data (Plan:
    kind, specs, a, b, delta (a fraction, as given), alpha, over {param,
    values} or null, boundary, stages, switches {bench: context switches per
    operation}, ops, target, and recovered: true when it was rebuilt from the
    stored argv of a run made before plans were). `show` and `compare`
    rebuild from it. Absent: a document from before, whose argv tells nothing
    (not a measuring command line of 0.1.0).
  issue 25: summary.figure (cpu | wall-less-waiting | wall | mixed): what
    median_ns and the statistics over process_medians_ns are of (time on
    the CPU for a benchmark that does not block, wall time less the waiting
    for a CPU for one that does, wall time where the batches carry no run
    delay or the header does not say; absent: wall, as before), and
    summary.median_wall_ns beside it; the probe header's blocks (true: the
    measuring thread waits inside the operation); a contended flag's
    in_figure (false: the figure leaves the waiting out).
  issue 27 (vm target, --vm-procs N > 1): a process record is a boot;
    header.vm.processes[] gain median_ns (each pooled process's own median),
    and summary.boots {n_boots, processes_per_boot, within_boot_mad,
    between_boot_mad, between_share (ICC(1), null when nothing varies),
    method}: the spread within a boot against between boots, on log medians
    (stats.boot_spread, docs/statistics.md).

opcost.comparison/1
  0.1.0: schema, opcost_version, kind (ab|compare|variants), interleaved, aa
    (A and B identical), a / b ({label, run_id, params or created}),
    delta_requested, env (ab, variants) or env_a / env_b / env_differences
    and unmatched (compare), variants (variants: source, mode, cc, cflags,
    baseline, builds[], call_overhead), comparisons[] of {bench, key, op, a:
    {params, summary}, b: {params, summary}, ratio (B/A of medians),
    ci95_ratio, change, p_value (min of Mann-Whitney and KS), p_mannwhitney,
    p_ks, p_adjusted (Holm), aa_noise, delta (as requested; until issue 25
    widened to twice the A/A noise), verdict
    (faster|slower|same|negligible|inconclusive, B relative to A; null when
    an arm has no data, with `status`), processes_needed and schedule when
    inconclusive, flags, savings}, summary {geomean_ratio, n, counts}.
  issue 13: design, in an `ab` of the sequential design (without -p; absent:
    the fixed design, -p N, and every document before): {kind:
    "sequential", spending, test, alpha, stages, planned[] and looks[] (done) of
    {look, processes_per_arm, information, alpha_spent, z, p_level,
    ci_level}, looks_done, stopped {look, processes_per_arm, reason:
    settled | last stage | ended early}}; comparisons[].sequential {look,
    processes_per_arm, p_level, ci_at_level, settled (why it stopped there),
    looks[] of {look, n_a, n_b, ratio, p_adjusted, p_level, ci_at_level,
    verdict}}: the entry's statistics are those of the look that settled it,
    and its p_value twice the smaller of p_mannwhitney and p_ks (the test of
    the looks).
  issue 13 (seq2): design.boundary (pocock | obf) and design.spending
    naming it ("Lan-DeMets Pocock" by default now; a document without
    boundary is O'Brien-Fleming's); each process of a sequential run
    records "boundary" with its "stage".
  issue 13 (seq2): p_value is twice the smaller of p_mannwhitney and p_ks,
    capped at 1, in every design (fixed -p N, compare, variants, series'
    change points) as in the sequential looks: the plain smaller p, which
    the fixed design used before, is not a valid p-value (5.8% under 0.05
    on null data). Same field, same meaning (the p tested); larger values.
  issue 17: comparisons[].counters, when counters were asked for: per
    event {side (measuring|helper), status (ok | unsupported | not counted |
    only in A | only in B), a, b (medians per op over processes, or the
    probe's "<not supported>"), n_a, n_b, ratio (B/A; null when A counts 0),
    ci95_ratio (a bound null: unbounded), difference (B-A), ci95_difference,
    differs (the CI excludes no change), note?, partial?, reason?}; the CIs
    are percentile bootstraps over per-process medians, the resampling of
    ci95_ratio's.
  issue 25: comparisons[] add estimate (B/A: Hodges-Lehmann, of per-round
    log ratios with 6 or more complete rounds (`paired`, the test's, from
    10), else of the shift of log times; the figure the
    verdict and the table use), ci95_estimate (its exact interval: signed-rank
    or Moses; null when the sizes cannot reach 95%), estimator, paired,
    n_pairs (paired only), test (the test p_value is now from: the paired
    min-p (signed-rank and rank sum over within-round swaps; until
    2026-11-28 Wilcoxon signed-rank) on paired rounds, min(p_MWU, p_KS)
    calibrated by permutation,
    or twice the smaller with ties), p_floor, resolvable, beyond_delta
    (slower/faster); delta is the requested delta (no longer widened by
    noise); same/negligible need ci95_estimate inside +/- delta,
    slower/faster significance and the CI on one side of 1 (since the
    verdict-rule change below: the whole CI clear of +/- delta, so
    beyond_delta is true whenever the verdict is slower/faster);
    sequential.looks[] add estimate; ci_at_level is the exact interval at
    the look's level. ratio, ci95_ratio keep their meaning.
  issue 25 (sequential CI): in a sequential design, ci95_estimate is the
    repeated confidence interval, the exact interval at the stopping look's
    level (= sequential.ci_at_level; >= 95% coverage after any stop);
    sequential.ci95_at_look keeps the look's fixed-sample 95% interval;
    design.ci names the interval.
  issue 37: plan.seed (opcost.result/1), the seed of the run order (a
    fresh one from the system's entropy unless --seed; 0 with --fake-clock).
    In a sequential design (design.alpha 0.01): verdict slower/faster is
    significance at the look's level with the estimate beyond +/- delta
    (beyond_delta says whether the CI clears it too; it may be false);
    resolvable_by_stage {stage: the difference the rule calls 80% of the
    time}; the test at a look is unpaired where the paired test's floor,
    times the benchmarks, exceeds a quarter of the look's level (look 1).
    A bimodal flag adds dip_p (Hartigan's dip test).
  issue 25 (stored): a `compare` of stored runs takes several runs a side;
    a / b then also hold runs[] of {run_id, label, created} (run_id, label
    and created stay the first run's); replicates {unit: "run", runs_a,
    runs_b, n_runs}. A benchmark compared over 2+ runs a side has unit
    "run", n_a / n_b counting runs, n_processes_a / _b, run_medians_a / _b,
    median_a / _b (geometric means of the runs' medians), ratio (of those),
    ci95_ratio and p_value from Welch's t on the runs' log medians, test, df,
    run_sd, runs_needed (when inconclusive); its a / b summary {median_ns,
    n_processes, n_runs, runs, run_medians_ns, process_medians_ns, flags
    (each with its run)}. With one run a side (or too few): the process-level
    figures as before, unit "process (within the runs)", verdict null and
    `withheld` saying why (the summary's counts leave it out).

opcost.series/1
  issue 14: schema, opcost_version, kind (stored: labelled runs from the
    store; measured: `series --run`), interleaved, bench, spec, by (the
    label key, or the parameter of --over), order (time | order | order-file
    | over), differing (params that differ between labels: {param: [value
    per label]}), labels[] of {value, runs (ids), pooled, params, n_processes,
    median_ns, ci95_ns, vs_previous / vs_first ({change, ci95_change} or
    null), change_point}, noise {sigma, sigma_measured, method}, candidates
    {indices, penalty, points, method}, change_points[] of {index, label,
    previous, change, ci95_change, ratio, ci95_ratio, p_value,
    p_adjusted, delta, verdict, left / right {first, last, n_labels,
    n_processes}, neighbours {ratio, ci95_ratio, p_value, verdict} or null},
    rejected[] of {index, label, change, p_adjusted, verdict, why},
    delta_requested, alpha, notes[], env (measured) or env_differences
    (stored), run_id (measured).
  issue 25 (stored): unit ("run" for stored series: candidates and their
    confirmation over the runs' figures, Welch's t; "process" for measured,
    interleaved ones); labels[].flags (the label's summary flags {flag,
    detail, run?}); change_points[].unconfirmed (a change at the first or
    last label) and, when true, confirm (how to re-measure it); a candidate
    with one run on a side is rejected (why says so); noise.unit "run" and its
    method when from runs.
  issue 26: labels[].process_medians_ns (the per-process medians the
    label's figures rest on; the html page draws them in grey).
  issue 27: labels[].emulated (its figures came from a QEMU TCG guest);
    allow_emulated; with an emulated label and without --allow-emulated,
    change_points is empty (no label's change_point is true), the ones found
    are under withheld_change_points and `withheld` says why; labels[].boots
    (a vm series with --vm-procs N > 1: the result summary's `boots`).
  issue 39: labels[].guests (a label that ran in a vm: what its runs ran
    on, each guest once: kernel, release, cmdline, machine, accel,
    cpu_model, cpu_brand, boot_mitigations, as a comparison entry's
    guests.a), from which the text, markdown and html say `ran on:`.

opcost.fleet/1
  issue 26: `fleet ab` (and `show`/`report` of its stored record): schema,
    opcost_version, kind ("ab"), run_id (the fleet record's, null unstored),
    fleet (the label value fleet=ID its host runs carry), a / b ({params}),
    delta_requested, alpha, hosts[] of {host, status (ok | failed |
    interrupted | usage | missing), reason, run_id, comparison (that host's
    opcost.comparison/1, or null)}, across[] of {bench, key, op, n_hosts,
    hosts (per host: {host, ratio, verdict}), counts (verdicts over the
    hosts), geomean_ratio, ci95, p_value, sd_log, method, delta, alpha,
    verdict, note?}: the host as the unit (abtest.across_hosts).
    `fleet variants`: kind "variants", source, baseline (the first -D)
    instead of a / b; hosts[].comparison is that host's variants
    comparison; across[] per compared build (key: its name, bench:
    user.op or program).

A summary holds statistics (stats.summarize) and the facts of the probe
processes it summarizes (`facts`, below): one table, so a new header field
is one line here, not a branch in the statistics.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from . import __version__
from .errors import UsageError

RESULT_SCHEMA = "opcost.result/1"
COMPARISON_SCHEMA = "opcost.comparison/1"
SERIES_SCHEMA = "opcost.series/1"
FLEET_SCHEMA = "opcost.fleet/1"
T = TypeVar("T")
P = TypeVar("P", bound="Part")
KINDS = {RESULT_SCHEMA: "result", COMPARISON_SCHEMA: "comparison", SERIES_SCHEMA: "series", FLEET_SCHEMA: "fleet"}


def kind_of(doc: dict) -> str:
    """"result", "comparison", "series" or "fleet": what an exporter is handed."""
    return KINDS.get(doc.get("schema", ""), "result")


# --- the plan of a run: what was asked, as data ---------------------------------

# The level of every test opcost makes (abtest.ALPHA, which imports numpy).
ALPHA = 0.05


@dataclass
class Plan:
    """What a run was asked to do, stored with it (`plan` of opcost.result/1),
    so that `show`, `report`, `compare` and `export` rebuild what the command
    printed from the stored data alone, whatever the command line has become.
    verdict_on: --verdict-on (a counter decided the verdicts, not time).
    kind: run | ab | variants | series; specs: the SPECs (run), BENCHes (ab),
    SOURCE (variants) or --run SPEC (series); a, b: ab's arms; delta: the
    practical threshold (a fraction, as given: ab raises it to twice the
    noise); alpha: the level of the tests; over: series' {param, values};
    boundary and stages: ab's sequential design (none: the fixed one);
    switches: context switches per operation by benchmark (the probe's
    table when the run was made); ops: variants' --ops; target: where it
    ran (local, or the ssh host); recovered: rebuilt from the stored argv of
    a run made before plans were stored; allow_emulated: --allow-emulated
    (a verdict on a TCG guest's timings is given, not withheld); hosts: a
    `fleet ab` record's hosts (kind fleet: its host runs carry its label
    fleet=ID); of: a fleet record's host runs' kind when not ab (variants:
    `fleet variants`)."""
    kind: str = "run"
    specs: list[str] = field(default_factory=list)
    a: str | None = None
    b: str | None = None
    delta: float | None = None
    alpha: float = ALPHA
    over: dict | None = None
    boundary: str | None = None
    stages: list[int] = field(default_factory=list)
    switches: dict[str, int] = field(default_factory=dict)
    ops: int | None = None
    target: str | None = None
    recovered: bool = False
    allow_emulated: bool = False   # --allow-emulated: verdicts on a TCG guest's timings were asked for
    hosts: list[str] = field(default_factory=list)   # a fleet record's hosts, in the order given
    of: str | None = None          # a fleet record's: the kind of its hosts' runs (variants; none: ab)
    verdict_on: str | None = None  # --verdict-on COUNTER: the verdicts were decided on this counter, not time
    seed: int | None = None        # the seed of the run order and padding (--seed, else a fresh one; issue 37)

    def to_dict(self) -> dict:
        d: dict = {"kind": self.kind, "specs": list(self.specs), "a": self.a, "b": self.b, "delta": self.delta,
                   "alpha": self.alpha, "over": self.over, "boundary": self.boundary, "stages": list(self.stages),
                   "switches": dict(sorted(self.switches.items())), "ops": self.ops, "target": self.target}
        if self.recovered:
            d["recovered"] = True
        if self.allow_emulated:
            d["allow_emulated"] = True
        if self.hosts:
            d["hosts"] = list(self.hosts)
        if self.of:
            d["of"] = self.of
        if self.verdict_on:
            d["verdict_on"] = self.verdict_on
        if self.seed is not None:
            d["seed"] = self.seed
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Plan":
        over = d.get("over")
        return cls(str(d.get("kind") or "run"), [str(s) for s in d.get("specs") or []], d.get("a"), d.get("b"),
                   d.get("delta"), d.get("alpha", ALPHA),
                   {"param": str(over["param"]), "values": [str(v) for v in over["values"]]}
                   if isinstance(over, dict) else None,
                   d.get("boundary"), [int(n) for n in d.get("stages") or []],
                   {str(k): int(v) for k, v in (d.get("switches") or {}).items()}, d.get("ops"), d.get("target"),
                   bool(d.get("recovered")), bool(d.get("allow_emulated")), [str(h) for h in d.get("hosts") or []],
                   str(d["of"]) if d.get("of") else None,
                   str(d["verdict_on"]) if d.get("verdict_on") else None,
                   int(d["seed"]) if isinstance(d.get("seed"), int) and not isinstance(d.get("seed"), bool) else None)


def switches_of(*plans: Plan | None) -> dict[str, int]:
    """Switches per operation by benchmark from the plans of runs, the first
    plan's first (two stored runs compared: A's, then B's for the rest); a
    run without a plan adds none."""
    out: dict[str, int] = {}
    for p in plans:
        for k, v in (p.switches if p is not None else {}).items():
            out.setdefault(k, v)
    return out


def plan_problem(d: object) -> str | None:
    """What is wrong with a document's `plan` (None: nothing); read by import."""
    if not isinstance(d, dict):
        return "plan must be an object"

    def text(v: object) -> bool:
        return isinstance(v, str)

    def num(v: object) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    over = d.get("over")
    checks = [("kind", text(d.get("kind", "run"))),
              ("specs", isinstance(d.get("specs", []), list) and all(map(text, d.get("specs") or []))),
              ("a", d.get("a") is None or text(d["a"])), ("b", d.get("b") is None or text(d["b"])),
              ("delta", d.get("delta") is None or num(d["delta"])), ("alpha", num(d.get("alpha", ALPHA))),
              ("over", over is None or (isinstance(over, dict) and text(over.get("param"))
                                        and isinstance(over.get("values"), list) and all(map(text, over["values"])))),
              ("boundary", d.get("boundary") is None or text(d["boundary"])),
              ("stages", isinstance(d.get("stages", []), list)
               and all(isinstance(n, int) for n in d.get("stages") or [])),
              ("switches", isinstance(d.get("switches", {}), dict)
               and all(isinstance(n, int) for n in (d.get("switches") or {}).values())),
              ("ops", d.get("ops") is None or isinstance(d["ops"], int)),
              ("target", d.get("target") is None or text(d["target"])),
              ("hosts", isinstance(d.get("hosts", []), list) and all(map(text, d.get("hosts") or []))),
              ("of", d.get("of") is None or text(d["of"])),
              ("seed", d.get("seed") is None or (isinstance(d["seed"], int) and not isinstance(d["seed"], bool)
                                                and 0 <= d["seed"] < 2**32))]
    bad = [k for k, good in checks if not good]
    return f"plan.{bad[0]} is not what a plan holds there (model.Plan)" if bad else None


def plan_of(doc: dict) -> Plan | None:
    """The plan of a result document (None: a document written before plans
    were, and not recovered: its store or file is older)."""
    p = doc.get("plan")
    return Plan.from_dict(p) if isinstance(p, dict) else None


# --- figures derived from a result, defined once ---------------------------------

def result_key(r: dict) -> str:
    """`bench:k=v,...`, the name of a result (opcost.result/1 `results[]`
    entry); the stored form of 0.1.0 has no key, and gets it from bench and params."""
    if r.get("key"):
        return str(r["key"])
    params = {k: v for k, v in (r.get("params") or {}).items() if k != "arch"}
    return str(r.get("bench", "?")) + (":" + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")


# The figure a process is reduced to (docs/statistics.md, "The figure: time
# on the CPU"), recorded as summary.figure:
FIGURE_CPU = "cpu"                   # a benchmark that does not block: time on its CPU
FIGURE_LESS_WAITING = "wall-less-waiting"   # one that blocks: wall time less the time lost waiting for a CPU
FIGURE_WALL = "wall"                 # wall time, waiting included (old documents, no run delay)
FIGURE_MIXED = "mixed"               # a summary over processes of several figures


def batch_lost_ns(sample: dict, helper_same_cpu: bool) -> float | None:
    """Time one batch lost waiting for a CPU, ns; None where the probe could
    not read run delay. The measuring thread's run delay (runnable, not
    running), plus the helper's where it has a CPU of its own (while the
    helper waits, the operation waits). With the helper on the measuring
    CPU the two wait for each other by design, so the loss is what neither
    ran: wall time less both threads' CPU time."""
    if "run_delay_ns" not in sample:
        return None
    h = sample.get("helper") or {}
    if h and helper_same_cpu:
        if "run_ns" not in h or "run_ns" not in sample:
            return None
        return max(0.0, float(sample["wall_ns"] - sample["run_ns"] - h["run_ns"]))
    # the helper's figure spans from one sync to the next (its wake-up for the
    # sync after the batch included): never more than the batch itself
    return float(min(sample["run_delay_ns"] + h.get("run_delay_ns", 0), sample.get("wall_ns") or float("inf")))


_NUMBER = (int, float)


def batch_off_cpu_ns(sample: dict) -> float | None:
    """Of a batch of a benchmark that does not block, the wall time its
    measuring thread was off its CPU, ns (None: the probe could not tell).
    The thread is always running or runnable, so the share of the batch it
    ran is run_ns over run_ns + run_delay_ns (both read around the batch,
    just outside its timed region); the thread's CPU time leaves out what
    the guest kernel accounts as hypervisor steal (and interrupt time, with
    IRQ time accounting), which wall time less run_ns catches. The larger
    off-CPU share of the two, of the batch's wall time."""
    run, delay, wall = sample.get("run_ns"), sample.get("run_delay_ns"), sample.get("wall_ns")
    if not (isinstance(run, _NUMBER) and isinstance(delay, _NUMBER) and isinstance(wall, _NUMBER)) \
            or isinstance(run, bool) or isinstance(delay, bool) or isinstance(wall, bool):
        return None
    run, delay, wall = float(run), float(delay), float(wall)
    if wall <= 0 or run <= 0:
        return None
    on = min(1.0, run / (run + max(delay, 0)), run / wall)
    return float(wall) * (1.0 - on)


def figure_of(samples: list[dict], header: dict | None = None) -> str:
    """Which figure a process is reduced to: FIGURE_CPU for a benchmark that
    does not block (the probe's header says `blocks: false`),
    FIGURE_LESS_WAITING for one that does (a helper, a child, a timer), when
    every batch carries what it needs (run_ns, run_delay_ns, wall_ns, and
    the helper's run_ns when it shares the CPU); else FIGURE_WALL (a probe
    or a kernel that did not report it, a document from before)."""
    return _figure(samples, header)[0]


def _figure(samples: list[dict], header: dict | None) -> tuple[str, list[float] | None]:
    """figure_of, and the time each batch lost by it (batch_off_cpu_ns or
    batch_lost_ns; None for FIGURE_WALL): each batch's loss taken once."""
    if not samples:
        return FIGURE_WALL, None
    header = header or {}
    helper = any(isinstance(s.get("helper"), dict) for s in samples)
    blocks = header.get("blocks")
    lost: list[float] = []
    if not helper and blocks is not True:
        if blocks is not False:
            return FIGURE_WALL, None
        for s in samples:
            x = batch_off_cpu_ns(s)
            if x is None:
                return FIGURE_WALL, None
            lost.append(x)
        return FIGURE_CPU, lost
    same = _helper_same_cpu(header, samples)
    for s in samples:
        x = batch_lost_ns(s, same) if isinstance(s.get("wall_ns"), (int, float)) else None
        if x is None:
            return FIGURE_WALL, None
        lost.append(x)
    return FIGURE_LESS_WAITING, lost


def _helper_same_cpu(header: dict, samples: list[dict]) -> bool:
    """The helper of a two-party benchmark shares the measuring CPU: by the
    header's cpus (the pinning asked for; as stats.Digest reads it), or,
    without them, by where the first batch saw it."""
    cpus = header.get("cpus") or []
    if len(cpus) > 1:
        return cpus[0] == cpus[1]
    h = (samples[0].get("helper") or {}) if samples else {}
    return bool(h) and h.get("cpu") == samples[0].get("cpu_before")


def batch_figures(samples: list[dict], header: dict | None = None) -> tuple[str, list[float]]:
    """The figure of each batch (ns per operation) and its name (figure_of):
    the batch's net time (ns_per_op: overheads subtracted, as always) less
    the time it lost, per operation: off its CPU (FIGURE_CPU), waiting for a
    CPU (FIGURE_LESS_WAITING), nothing (FIGURE_WALL)."""
    fig, losses = _figure(samples, header)
    if losses is None:
        return fig, [float(s["ns_per_op"]) for s in samples]
    return fig, [float(s["ns_per_op"]) - (lost or 0.0) / (float(s["iters"]) * float(s.get("ops_per_iter", 1)))
                 for s, lost in zip(samples, losses)]


def process_median(samples: list[dict], header: dict | None = None) -> float:
    """The figure of one probe process: its median measured batch (ns per
    op), by the figure its benchmark gets (batch_figures: time on the CPU
    for an operation that does not block, wall time less the waiting for
    one that does, wall time where the probe could not tell). Pass the
    process's header: without it only a two-party benchmark (its samples
    show the helper) is told apart, and any other gets wall time. Pure
    Python, so input is checked before numpy loads."""
    return process_figure(samples, header)[1]


def process_figure(samples: list[dict], header: dict | None = None) -> tuple[str, float]:
    """process_median, and the name of its figure (figure_of), from one pass."""
    import statistics   # --help must not load it

    fig, figures = batch_figures(samples, header)
    return fig, float(statistics.median(figures))


def process_median_wall(samples: list[dict]) -> float:
    """A process's median batch by wall time (waiting included): reported
    beside the figure (summary.median_wall_ns)."""
    import statistics   # --help must not load it

    return float(statistics.median([s["ns_per_op"] for s in samples]))


def process_medians(r: dict) -> list[float]:
    """The per-process medians of a result (or of an arm of a comparison,
    {params, summary}): its summary's, when it covers every process with
    samples; else each such process's median batch (a run that never got its
    summary)."""
    meds = Summary.of(r).process_medians
    procs = [p for p in r.get("processes") or [] if p.get("samples")]
    if meds and (not procs or len(meds) == len(procs)):
        return meds
    numbers = (([s for s in p["samples"] if isinstance(s, dict) and isinstance(s.get("ns_per_op"), (int, float))],
                p.get("header")) for p in procs)
    return [process_median(xs, h) for xs, h in numbers if xs]


class Summary(Mapping):
    """The `summary` of a result, read-only and typed: what a reader of one
    needs (median, CI, processes, their medians, flags, CPUs) as properties;
    anything else by key, as in the document. An absent summary (null while a
    run goes on, or a result never measured) reads as empty."""

    __slots__ = ("raw",)

    def __init__(self, raw: Mapping | None = None):
        self.raw: dict = raw if isinstance(raw, dict) else dict(raw) if isinstance(raw, Mapping) else {}

    @classmethod
    def of(cls, holder: Mapping | None) -> "Summary":
        """The summary of a result, an arm of a comparison entry, or a series point."""
        return cls((holder or {}).get("summary") if isinstance(holder, Mapping) else None)

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    @property
    def n_processes(self) -> int:
        return int(self.raw.get("n_processes") or 0)

    @property
    def median_ns(self) -> float | None:
        return self.raw.get("median_ns")

    @property
    def ci95_ns(self) -> list | None:
        return self.raw.get("ci95_ns")

    @property
    def process_medians(self) -> list[float]:
        meds = self.raw.get("process_medians_ns")
        return [float(m) for m in meds if isinstance(m, (int, float))] if isinstance(meds, list) else []

    @property
    def flags(self) -> list[dict]:
        return list(self.raw.get("flags") or [])

    @property
    def cpus(self) -> list[str]:
        return list(self.raw.get("cpus") or [])


# --- runs measured on one machine -------------------------------------------------

# Runs that differ in these measured different machines: not comparable without --force.
# guest_*: the vm target's (docs/kernels.md)
IDENTITY_FIELDS = ("arch", "cpu_model_name", "guest_cpu_model", "guest_cpus")


def same_machine(envs: list[tuple[Any, dict]], *, force: bool, anyway: str) -> list[tuple]:
    """Every run (id, env) against the first: a different CPU model or
    architecture is refused (UsageError, its message ending "(`anyway`)")
    unless `force`; then the differences, (run id, field, first's, its), are
    returned, to be said."""

    forced: list[tuple] = []
    if not envs:
        return forced
    base_id, base = envs[0]
    for rid, env in envs[1:]:
        clash = machine_differences(base, env)
        if clash and not force:
            what = "; ".join(f"{f}: {a!r} vs {b!r}" for f, a, b in clash)
            raise UsageError(f"runs {base_id} and {rid} ran on different machines ({what}); their costs are "
                             f"not comparable ({anyway})")
        forced += [(rid, *d) for d in clash]
    return forced


def machine_differences(env_a: dict, env_b: dict) -> list[tuple[str, Any, Any]]:
    """(field, a, b) of the identity fields that differ, in the environments' order."""
    names = [n for n in list(env_a) + [n for n in env_b if n not in env_a] if n in IDENTITY_FIELDS]
    out = []
    for n in names:
        a, b = (_identity(e, n) for e in (env_a, env_b))
        if a != b:
            out.append((n, a, b))
    return out


def _identity(env: dict, name: str) -> Any:
    """An identity field's value; a guest's CPUs from `vm.cpus` in a run from
    before `guest_cpus` was recorded (every vm run has it)."""
    if name == "guest_cpus" and name not in env:
        return ((env.get("vm") or {}).get("value") or {}).get("cpus")
    return (env.get(name) or {}).get("value")


# --- opcost.result/1 ------------------------------------------------------------

# The runner's facts about a process; "stage" and "boundary" only in a sequential ab run,
# "front_end" where the front end was while the probe measured.
META = ("round", "seq", "pad_bytes", "wall_s", "front_end", "stage", "boundary", "budget")


@dataclass
class Process:
    """One probe process: its header, measured and warm-up batches, trailer,
    and the runner's facts about it (round, start order, padding, wall time)."""
    index: int
    header: dict | None = None
    samples: list[dict] = field(default_factory=list)
    warmup: list[dict] = field(default_factory=list)
    trailer: dict | None = None
    meta: dict = field(default_factory=dict)      # round, seq, pad_bytes, wall_s (, stage, boundary)

    def to_json(self) -> dict:
        return {"index": self.index, **self.meta, "header": self.header, "samples": self.samples,
                "warmup": self.warmup, "trailer": self.trailer}

    @classmethod
    def from_json(cls, d: dict) -> "Process":
        return cls(d["index"], d.get("header"), list(d.get("samples") or []), list(d.get("warmup") or []),
                   d.get("trailer"), {k: d[k] for k in META if k in d})


@dataclass
class Result:
    """One variant of a run."""
    bench: str
    key: str | None                # the display key (ctx.pipe:mode=thread); None in a store from 0.1.0
    params: dict
    op: str = ""
    unit: str = "ns"
    status: str = "pending"        # pending | ok | unsupported | failed
    reason: str | None = None
    processes: list[Process] = field(default_factory=list)
    summary: dict | None = None    # null while the run goes on (statistics come at its end)
    parallel: dict | None = None   # --parallel: also in summary.parallel

    def to_json(self) -> dict:
        summary = self.summary if self.summary is not None else (None if self.processes else {"n_processes": 0})
        d: dict = {"bench": self.bench, **({"key": self.key} if self.key is not None else {}),
                   "params": self.params, "op": self.op, "unit": self.unit, "status": self.status,
                   "reason": self.reason, "processes": [p.to_json() for p in self.processes], "summary": summary}
        if self.parallel is not None:
            d["parallel"] = self.parallel
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Result":
        return cls(d["bench"], d.get("key"), d.get("params") or {}, d.get("op", ""),
                   d.get("unit", "ns"), d.get("status", "pending"), d.get("reason"),
                   [Process.from_json(p) for p in d.get("processes") or []], d.get("summary"), d.get("parallel"))


@dataclass
class Run:
    """A run: what was asked (argv), where (env), what came of each variant."""
    results: list[Result]
    env: dict
    argv: list[str]
    status: str = "running"        # running | complete | interrupted | failed | abandoned
    run_id: int | None = None
    label: str | None = None
    opcost_version: str = __version__
    stored: dict | None = None     # from a store: created, finished, kind
    store_missed: dict | None = None
    labels: dict[str, str] = field(default_factory=dict)   # key -> value; "name" is `label`
    uuid: str | None = None        # identity across stores (export/import)
    plan: Plan | None = None       # what was asked, as data (None: a document from before plans)

    def __post_init__(self) -> None:
        # label and labels["name"] are one thing, given either way
        if self.label is not None and "name" not in self.labels:
            self.labels = {"name": self.label, **self.labels}
        elif self.label is None and "name" in self.labels:
            self.label = self.labels["name"]

    def to_json(self) -> dict:
        d: dict = {"schema": RESULT_SCHEMA, "opcost_version": self.opcost_version, "run_id": self.run_id}
        if self.uuid is not None:
            d["uuid"] = self.uuid
        if self.stored is not None:
            d.update(created=self.stored.get("created"), finished=self.stored.get("finished"))
        d["label"] = self.label
        d["labels"] = dict(sorted(self.labels.items()))
        if self.stored is not None:
            d["kind"] = self.stored.get("kind")
        d.update(status=self.status, argv=self.argv)
        if self.plan is not None:
            d["plan"] = self.plan.to_dict()
        d.update(env=self.env, results=[r.to_json() for r in self.results])
        if self.store_missed is not None:
            d["store_missed"] = self.store_missed
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Run":
        stored = {k: d.get(k) for k in ("created", "finished", "kind")} if "created" in d else None
        return cls([Result.from_json(r) for r in d.get("results") or []], d.get("env") or {}, d.get("argv") or [],
                   d.get("status", "running"), d.get("run_id"), d.get("label"),
                   d.get("opcost_version", __version__), stored, d.get("store_missed"),
                   dict(d.get("labels") or {}), d.get("uuid"), plan_of(d))


# --- opcost.comparison/1 --------------------------------------------------------

# The reference build of `opcost variants` (op mode): its name in the builds
# of the document and in the table (variantbuild.py builds it, tables.py prints it).
REFERENCE_NAME = "(empty opcost_op)"


class Field(Generic[T]):
    """A field of a document part that holds its JSON object (`raw`): read
    from it (absent: the default), written to it. `ratio = Field[float | None]()`."""

    def __init__(self, default: Any = None):
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> "Field[T]": ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        v = obj.raw.get(self.name)
        if v is None:   # a fresh empty list or dict each time, never one shared
            return type(self.default)() if isinstance(self.default, (list, dict)) else self.default
        return v

    def __set__(self, obj: Any, value: T) -> None:
        obj.raw[self.name] = value


@dataclass
class Part:
    """A part of a document that holds its JSON object (`raw`, in the
    document's order) and reads its fields from it (Field): `to_json` gives
    the object back unchanged, `from_json` takes it (not a copy)."""
    raw: dict

    def to_json(self) -> dict:
        return self.raw

    @classmethod
    def from_json(cls: type[P], d: dict) -> P:
        return cls(d)


@dataclass
class Entry(Part):
    """One benchmark of a comparison (`comparisons[]`), typed: its identity,
    its arms' summaries, the statistics and the verdict as attributes, the
    derived figures (the B/A the verdict rests on, whether the run is the
    unit, whether it was compared) as properties defined here only.

    Its fields vary with the kind and the design (fixed or sequential ab,
    stored runs, counters, savings: 40 and growing, see the history above),
    and abtest.py, replicates.py and sequential.py add them in the order the
    documents have always had: so the entry holds its JSON object (`raw`,
    in that order) and reads every field from it; an absent field reads as
    None (or empty). `to_json` gives the object back unchanged."""

    # identity
    @property
    def bench(self) -> str:
        return str(self.raw["bench"])

    @property
    def key(self) -> str:
        return str(self.raw.get("key") or self.raw["bench"])

    @property
    def op(self) -> str:
        return str(self.raw.get("op") or "")

    status = Field[str | None]()   # why an arm has no data (not compared)

    @property
    def summary_a(self) -> Summary:
        return Summary.of(self.raw.get("a"))

    @property
    def summary_b(self) -> Summary:
        return Summary.of(self.raw.get("b"))

    @property
    def params_a(self) -> dict:
        return dict((self.raw.get("a") or {}).get("params") or {})

    @property
    def params_b(self) -> dict:
        return dict((self.raw.get("b") or {}).get("params") or {})

    # the statistics (abtest.compare_arms, replicates.compare_runs)
    @property
    def compared(self) -> bool:
        """Both arms had data: the entry has its statistics (else only `status`)."""
        return "ratio" in self.raw

    @property
    def run_level(self) -> bool:
        """The run is the unit (a stored compare of 2+ runs a side: replicates.py)."""
        return self.raw.get("unit") == "run"

    @property
    def verdict_ratio(self) -> tuple[Any, Any]:
        """The B/A the verdict rests on and its 95% CI: the `estimate`
        (issue 25: Hodges-Lehmann, paired or not) when the entry has one, else
        (a document from before) the ratio of medians."""
        if "estimate" in self.raw:
            return self.raw.get("estimate"), self.raw.get("ci95_estimate")
        return self.raw.get("ratio"), self.raw.get("ci95_ratio")

    @property
    def verdict(self) -> str | None:
        return self.raw.get("verdict")

    @verdict.setter
    def verdict(self, v: str | None) -> None:
        self.raw["verdict"] = v

    @property
    def withheld(self) -> str | None:
        """Why the entry has no verdict although it was compared (emulated, one run a side)."""
        return self.raw.get("withheld")

    @withheld.setter
    def withheld(self, why: str) -> None:
        self.raw["withheld"] = why

    @property
    def flags(self) -> list[dict]:
        return [f for f in self.raw.get("flags") or [] if isinstance(f, dict)]

    ratio = Field[float | None]()
    ci95_ratio = Field[list | None]()
    median_a = Field[float | None]()
    median_b = Field[float | None]()
    p_value = Field[float | None]()
    p_adjusted = Field[float | None]()
    p_floor = Field[float](0.0)   # the smallest p these sizes can give
    delta = Field[float | None]()
    n_a = Field[int | None]()
    n_b = Field[int | None]()
    unit = Field[str | None]()
    estimator = Field[str | None]()
    test = Field[str | None]()
    ci_scope = Field[str | None]()       # its CI and p are within the runs (issue 37)
    processes_needed = Field[int | None]()
    schedule = Field[int | None]()
    schedule_note = Field[str | None]()
    runs_needed = Field[int | None]()
    # what the entry carries beside (each a dict, or None)
    decided_on = Field[dict | None]()  # --verdict-on: the counter decided on
    mitigations = Field[dict | None]()  # the vm guests' mitigations, A and B
    guests = Field[dict | None]()       # what each arm's guest ran: kernel, machine, CPU, boot log (guests.py)
    counters = Field[dict | None]()      # per counter, B against A (issue 17)
    savings = Field[dict | None]()        # seed 000's savings
    sequential = Field[dict | None]()  # the looks of a sequential design

    @property
    def inconclusive_for_now(self) -> bool:
        """Inconclusive with an estimate of the processes that would decide it."""
        return self.raw.get("verdict") == "inconclusive" and "processes_needed" in self.raw


@dataclass
class Comparison:
    """What `ab`, `compare` and `variants` decided: one entry per benchmark
    (statistics from abtest.py), the summary over them, and what was
    compared with what. `context` holds the kind's own fields (env, or
    env_a/env_b/env_differences/unmatched, variants, design, system_wide), in
    their order."""
    kind: str
    interleaved: bool
    aa: bool
    a: dict
    b: dict
    delta_requested: float
    comparisons: list[Entry]
    summary: dict
    context: dict = field(default_factory=dict)
    opcost_version: str = __version__

    _OWN = ("schema", "opcost_version", "kind", "interleaved", "aa", "a", "b", "delta_requested", "comparisons",
            "summary")

    def to_json(self) -> dict:
        return {"schema": COMPARISON_SCHEMA, "opcost_version": self.opcost_version, "kind": self.kind,
                "interleaved": self.interleaved, "aa": self.aa, "a": self.a, "b": self.b,
                "delta_requested": self.delta_requested, **self.context,
                "comparisons": [e.to_json() for e in self.comparisons], "summary": self.summary}

    @classmethod
    def from_json(cls, d: dict) -> "Comparison":
        """A comparison document read back; its entries share the document's
        objects (a change through an Entry is a change of the document)."""
        return cls(str(d.get("kind") or ""), bool(d.get("interleaved")), bool(d.get("aa")), d.get("a") or {},
                   d.get("b") or {}, d.get("delta_requested") or 0.0,
                   [Entry(e) for e in d.get("comparisons") or [] if isinstance(e, dict)],
                   d["summary"] if isinstance(d.get("summary"), dict) else {}, {k: v for k, v in d.items() if k not in cls._OWN},
                   d.get("opcost_version", __version__))

    @property
    def run_level(self) -> bool:
        """Some entry has the run as its unit (a stored compare of 2+ runs a side)."""
        return any(e.run_level for e in self.comparisons)

    @property
    def methods(self) -> str:
        """What the B/A and p of the comparison's table are: each estimator and
        test its entries used, once ("" for a document from before)."""
        est = list(dict.fromkeys(e.estimator for e in self.comparisons if isinstance(e.estimator, str)))
        tests = list(dict.fromkeys(e.test for e in self.comparisons if isinstance(e.test, str)))
        if not est and not tests:
            return ""
        return f"B/A: {'; '.join(est)}; p: {'; '.join(tests)}"

    @property
    def counts(self) -> dict[str, int]:
        """The summary's count of each verdict."""
        c = self.summary.get("counts")
        return dict(c) if isinstance(c, dict) else {}

    @property
    def geomean_ratio(self) -> float | None:
        return self.summary.get("geomean_ratio")

    @property
    def sequential(self) -> bool:
        """An `ab` of the sequential design (its looks in context["design"])."""
        return (self.context.get("design") or {}).get("kind") == "sequential"


# --- opcost.series/1 ------------------------------------------------------------

@dataclass
class SeriesLabel(Part):
    """One label of a series document (`labels[]`): its value and runs, the
    statistics of changepoint.labels_table (processes, median, CI, change
    against the previous and the first label), whether the new level begins
    there, its flags. Holds its JSON object (`raw`, in the document's order),
    as Entry does."""

    @property
    def value(self) -> str:
        return str(self.raw.get("value"))

    @property
    def flags(self) -> list[dict]:
        return [f for f in self.raw.get("flags") or [] if isinstance(f, dict)]

    @property
    def flag_names(self) -> list[str]:
        """Its flags' names, once each, in order."""
        return list(dict.fromkeys(str(f["flag"]) for f in self.flags if f.get("flag")))

    @property
    def process_medians(self) -> list[float]:
        return Summary({"process_medians_ns": self.raw.get("process_medians_ns")}).process_medians

    runs = Field[list]([])
    params = Field[dict]({})
    n_processes = Field[int](0)
    median_ns = Field[float | None]()
    ci95_ns = Field[list | None]()
    vs_previous = Field[dict | None]()   # {change, ci95_change}, None for the first label
    vs_first = Field[dict | None]()
    change_point = Field[bool](False)    # the new level begins here
    emulated = Field[bool](False)        # its figures came from a QEMU TCG guest (issue 27)
    boots = Field[dict | None]()         # --vm-procs N > 1: within- against between-boot spread
    guests = Field[list]([])             # what its runs ran on in a vm (issue 39; guests.describe's dicts)


@dataclass
class ChangePoint(Part):
    """A change point of a series (`change_points[]`, `withheld_change_points[]`,
    or with `why`, `rejected[]`): where, how large, its test and verdict,
    the segments either side, the two neighbouring labels alone."""

    @property
    def index(self) -> int:
        return int(self.raw["index"])

    @property
    def label(self) -> str:
        return str(self.raw.get("label"))

    @property
    def previous(self) -> str:
        return str(self.raw.get("previous"))

    change = Field[float]()
    ci95_change = Field[list | None]()
    ratio = Field[float]()
    ci95_ratio = Field[list | None]()
    p_value = Field[float | None]()
    p_adjusted = Field[float | None]()
    delta = Field[float | None]()
    verdict = Field[str | None]()
    left = Field[dict]({})          # {first, last, n_labels, n_processes}
    right = Field[dict]({})
    neighbours = Field[dict | None]()   # {ratio, ci95_ratio, p_value, verdict} of the two labels alone
    unconfirmed = Field[bool](False)    # at an end of the series: rests on one label
    confirm = Field[str | None]()       # how to confirm it, when unconfirmed
    why = Field[str | None]()           # a rejected candidate's reason


@dataclass
class Series:
    """An `opcost.series/1` document (series.py builds it): the labels in
    order, the noise and the candidates of the change-point search, the
    change points confirmed and the candidates rejected. `context` holds
    what follows `notes`, in its order: run_id and env (measured) or
    env_differences (stored), allow_emulated, withheld and
    withheld_change_points (targets.vm.withhold), decided_on (--verdict-on)."""
    kind: str
    interleaved: bool
    bench: str
    spec: str
    by: str
    order: str
    differing: dict
    labels: list[SeriesLabel]
    noise: dict
    candidates: dict
    unit: str
    change_points: list[ChangePoint]
    rejected: list[ChangePoint]
    delta_requested: float
    alpha: float
    notes: list[str]
    context: dict = field(default_factory=dict)
    opcost_version: str = __version__

    _OWN = ("schema", "opcost_version", "kind", "interleaved", "bench", "spec", "by", "order", "differing", "labels",
            "noise", "candidates", "unit", "change_points", "rejected", "delta_requested", "alpha", "notes")

    def to_json(self) -> dict:
        return {"schema": SERIES_SCHEMA, "opcost_version": self.opcost_version, "kind": self.kind,
                "interleaved": self.interleaved, "bench": self.bench, "spec": self.spec, "by": self.by,
                "order": self.order, "differing": self.differing, "labels": [lb.to_json() for lb in self.labels],
                "noise": self.noise, "candidates": self.candidates, "unit": self.unit,
                "change_points": [c.to_json() for c in self.change_points],
                "rejected": [c.to_json() for c in self.rejected], "delta_requested": self.delta_requested,
                "alpha": self.alpha, "notes": self.notes, **self.context}

    @classmethod
    def from_json(cls, d: dict) -> "Series":
        """A series document read back (its labels and points share the document's objects)."""
        def points(k: str) -> list[ChangePoint]:
            return [ChangePoint(c) for c in d.get(k) or [] if isinstance(c, dict)]

        return cls(str(d.get("kind") or ""), bool(d.get("interleaved")), str(d.get("bench") or ""),
                   str(d.get("spec") or d.get("bench") or ""), str(d.get("by") or ""), str(d.get("order") or ""),
                   d.get("differing") or {}, [SeriesLabel(lb) for lb in d.get("labels") or [] if isinstance(lb, dict)],
                   d.get("noise") or {}, d.get("candidates") or {}, str(d.get("unit") or "process"),
                   points("change_points"), points("rejected"), d.get("delta_requested") or 0.0,
                   d.get("alpha") or 0.0, list(d.get("notes") or []),
                   {k: v for k, v in d.items() if k not in cls._OWN}, d.get("opcost_version", __version__))

    @property
    def withheld(self) -> str | None:
        """Why no change point is given (labels emulated, without --allow-emulated)."""
        return self.context.get("withheld")

    @property
    def withheld_change_points(self) -> list[ChangePoint]:
        return [ChangePoint(c) for c in self.context.get("withheld_change_points") or [] if isinstance(c, dict)]

    @property
    def run_level(self) -> bool:
        """The run is the unit (a stored series: Welch's t over the runs' figures)."""
        return self.unit == "run"

    @property
    def flagged(self) -> bool:
        """Some label carries flags."""
        return any(lb.flags for lb in self.labels)

    def withhold(self, why: str) -> None:
        """No change point given (figures kept): they move to
        withheld_change_points, no label is marked, `withheld` says why."""
        self.context["withheld"] = why
        self.context["withheld_change_points"] = [c.to_json() for c in self.change_points]
        self.change_points = []
        for lb in self.labels:
            lb.change_point = False


# --- the facts of the processes a summary covers --------------------------------

def _median(xs: list) -> float:
    import statistics   # --help must not load it

    return float(statistics.median(xs))


def aux_median(samples: list[dict]) -> float | None:
    """One process's auxiliary cost per op (samples' aux_ns_per_op): its
    median batch; None when its batches have none."""
    v = [s["aux_ns_per_op"] for s in samples if "aux_ns_per_op" in s]
    return _median(v) if v else None


def facts(procs: list[dict], aux_medians: list[float] | None = None) -> dict:
    """What the probe processes of one variant were (not statistics): the
    TSC rate, the overheads subtracted, an auxiliary cost timed alone, the
    iterations, CPUs and placement, operations per iteration, a nominal cost,
    the parent's size, why counters are missing. Medians over processes.
    aux_medians: each process's aux_median, already taken (stats.Digest,
    whose processes come without their batches); else from their samples."""
    headers = [p["header"] for p in procs if p.get("header")]
    if not headers:
        return {}
    out: dict = {"tsc_hz": _median([h["tsc_hz"] for h in headers]),
                 "overhead_ns": {"clock": _median([h["overhead"]["clock_ns"] for h in headers]),
                                 "loop_per_iter": _median([h["overhead"]["loop_ns_per_iter"] for h in headers])}}
    aux = [h["aux"] for h in headers if h.get("aux")]
    if aux:  # a benchmark's auxiliary cost (e.g. cold flushes), timed alone and subtracted
        # Per batch (samples' aux_ns_per_op: the median per process, then
        # across processes); probes before that reported one figure per
        # process in the header (ns_per_op).
        if aux_medians is None:
            aux_medians = [m for m in (aux_median(p["samples"]) for p in procs) if m is not None]
        per_proc = list(aux_medians)
        per_proc += [a["ns_per_op"] for a in aux if "ns_per_op" in a]
        if per_proc:
            out["aux_ns"] = {"what": aux[0]["what"], "per_op": _median(per_proc)}
    out["iters"] = sorted({h["iters"] for h in headers})
    out["cpus"] = sorted({",".join(map(str, h["cpus"])) for h in headers})
    opi = [h["ops_per_iter"] for h in headers if h.get("ops_per_iter")]
    if opi:
        # One iteration holds several operations (a whole hackbench run,
        # one page per fault...): its time is what such tools print.
        out["ops_per_iter"] = _median(opi)
        out["iteration"] = headers[0].get("iteration", "")
    nominal = [h["nominal_ns_per_op"] for h in headers if "nominal_ns_per_op" in h]
    if nominal:
        out["nominal_ns"] = _median(nominal)
    parents = [h["parent"] for h in headers if isinstance(h.get("parent"), dict)]
    if parents:
        # What the measuring process really was after setup (the parent
        # of proc.fork & co.: resident=, mappings=), median per field.
        out["parent"] = {k: round(_median([p[k] for p in parents if isinstance(p.get(k), (int, float))]))
                         for k in parents[0] if any(isinstance(p.get(k), (int, float)) for p in parents)}
    places = sorted({h["placement"]["name"] for h in headers if h.get("placement")})
    if places:
        out["placement"] = places
    reasons = {c["name"]: c["reason"] for h in headers for c in h.get("counters", []) if c.get("reason")}
    if reasons:
        out["counter_reasons"] = reasons
    # where a counter's values came from, when not perf: {"instructions:u": "emulator: ..."} (emucount.py)
    sources = {c["name"]: f"{c['source']}: {c.get('how', '')}".rstrip(": ")
               for h in headers for c in h.get("counters", []) if c.get("source")}
    if sources:
        out["counter_sources"] = sources
    return out


def with_facts(stats_summary: dict, procs: list[dict], aux_medians: list[float] | None = None) -> dict:
    """A summary: the statistics with the facts of the processes (facts:
    aux_medians as it takes them), and what follows from both (the time of
    one iteration, the overshoot over a nominal cost), in the order the
    documents have always had."""
    if not stats_summary.get("n_processes"):
        return stats_summary
    f = facts(procs, aux_medians)
    flags = stats_summary.get("flags")
    out = {k: v for k, v in stats_summary.items() if k != "flags"}
    for k, v in f.items():
        if k == "iteration":
            out["iteration"] = v
            out["median_ns_per_iter"] = out["median_ns"] * f["ops_per_iter"]
        elif k == "nominal_ns":
            out["nominal_ns"] = v
            out["overshoot_ns"] = out["median_ns"] - v
        else:
            out[k] = v
    out["flags"] = flags
    return out


def geomean_text(s: Mapping, entries) -> str:
    """A comparison's summary line: how many benchmarks got each verdict
    and, over several, the geometric mean of their ratios, named for what
    it is (of medians, where the table's B/A is each one's Hodges-Lehmann
    estimate: two figures for one ratio must not stand unlabelled side by
    side); over one benchmark no second figure beside the table's."""
    counts = ", ".join(f"{k} {v}" for k, v in (s.get("counts") or {}).items() if v) or "no verdict"
    if s.get("n") == 1:
        return f"1 benchmark ({counts}); its B/A is the table's"
    raws = [getattr(e, "raw", e) for e in entries]   # JSON objects, also of typed entries (`raw`)
    estimated = any(isinstance(e, Mapping) and "estimate" in e for e in raws)
    what = "geometric mean of the ratios of medians B/A" if estimated else "geometric mean of B/A"
    return f"{what}: {s['geomean_ratio']:.4f} over {s.get('n')} benchmarks ({counts})"
