"""Builds `opcost.series/1` documents: an ordered series of labels (commits,
kernels, parameter values), each with the per-process medians of one variant
of one benchmark, walked for the label where the cost changed. The labels
come from stored runs labelled KEY=VALUE (`opcost series BENCH --by KEY`) or
from one interleaved run that measured them all (`opcost series --run SPEC
--over PARAM=V1|V2|...`). The statistics are changepoint.py's (and
abtest.py's through it); this module only gathers, orders, checks and
tabulates, like comparison.py for two arms.

numpy, scipy and ruptures are imported only when a series is analysed, so
the input is checked first.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

from .comparison import _source, counter_median, decided_counter, deciding_on
from .errors import UsageError
from .guests import guests_in
from .model import ChangePoint, Series, SeriesLabel, Summary, plan_of, process_median, process_medians, result_key, same_machine
from .safetext import printable
from .spec import MIN_LABELS, expand, split_spec
from .targets.vm.withhold import withhold_emulated_series



@dataclass
class Label:
    """One label of a series: its value, the runs it came from, and the
    per-process medians (ns per op) of the variant the series follows."""
    value: str
    medians: list[float] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    created: str = ""
    flags: list[dict] = field(default_factory=list)   # its results' summary flags (with "run" when stored)
    run_medians: list[list[float]] = field(default_factory=list)   # per run, its process medians (stored)
    rounds: list[int] = field(default_factory=list)   # per process, its round (measured, interleaved)
    boots: dict | None = None   # vm --vm-procs N > 1: within- against between-boot spread (stats.boot_spread)
    guests: list[dict] = field(default_factory=list)   # what its runs ran on in a vm (guests.guest_of), each once

    def add_guest(self, res: dict) -> None:
        self.guests += [g for g in guests_in(res) if g not in self.guests]


def differing(labels: list[Label]) -> dict:
    """Parameters whose value differs between labels: {param: [value per label]}."""
    keys = sorted({k for lb in labels for k in lb.params})
    return {k: [lb.params.get(k) for lb in labels] for k in keys
            if len({str(lb.params.get(k)) for lb in labels}) > 1}


def document(labels: list[Label], *, kind: str, interleaved: bool, bench: str, spec: str, by: str, order: str,
             delta: float, notes: list[str], allow_emulated: bool = False, **context) -> dict:
    """The analysis of the labels (changepoint.analyse) as an opcost.series/1
    document; change points withheld when a label ran in a TCG guest, unless
    allow_emulated (--allow-emulated, targets.vm.withhold_emulated_series)."""
    if len(labels) < MIN_LABELS:
        raise UsageError(f"a series needs at least {MIN_LABELS} labels with measurements, this one has "
                         f"{len(labels)} ({', '.join(printable(lb.value) for lb in labels) or 'none'})")
    from . import changepoint   # numpy, scipy, ruptures: when a series is analysed, not when one is read

    with warnings.catch_warnings():
        # scipy says when KS falls back from its exact distribution; the p is fine.
        warnings.simplefilter("ignore", RuntimeWarning)
        rounds = [lb.rounds for lb in labels] if interleaved and all(lb.rounds for lb in labels) else None
        a = changepoint.analyse([lb.medians for lb in labels], delta=delta, runs=None if interleaved else
                                [lb.run_medians or [lb.medians] for lb in labels], rounds=rounds)
    cps = {c["index"] for c in a["change_points"]}
    rows = []
    for i, (lb, row) in enumerate(zip(labels, a["labels"])):
        rows.append(SeriesLabel({"value": lb.value, "runs": lb.runs, "pooled": len(lb.runs) > 1, "params": lb.params,
                                 **row, "change_point": i in cps, "flags": lb.flags,
                                 "process_medians_ns": list(lb.medians), **({"boots": lb.boots} if lb.boots else {}),
                                 **({"guests": lb.guests} if lb.guests else {})}))

    def side(lo_hi: list[int]) -> dict:
        lo, hi = lo_hi
        return {"first": labels[lo].value, "last": labels[hi - 1].value, "n_labels": hi - lo,
                "n_processes": sum(len(lb.medians) for lb in labels[lo:hi])}

    def point(c: dict) -> ChangePoint:
        ci = c.get("ci95_ratio")
        nb = c.get("neighbours")
        return ChangePoint({
            "index": c["index"], "label": labels[c["index"]].value, "previous": labels[c["index"] - 1].value,
            "change": c["ratio"] - 1, "ci95_change": None if ci is None else [ci[0] - 1, ci[1] - 1],
            "ratio": c["ratio"], "ci95_ratio": ci, "p_value": c["p_value"],
            "p_adjusted": c.get("p_adjusted"), "delta": c["delta"], "verdict": c.get("verdict"),
            "left": side(c["left"]), "right": side(c["right"]),
            "neighbours": None if not nb else {k: nb[k] for k in ("ratio", "ci95_ratio", "p_value", "verdict")},
            **unconfirmed(c["index"], labels, interleaved), **({"why": c["why"]} if "why" in c else {})})

    series = Series(kind, interleaved, bench, spec, by, order, differing(labels), rows, a["noise"], a["candidates"],
                    "process" if interleaved else "run", [point(c) for c in a["change_points"]],
                    [point(c) for c in a["rejected"]], delta, a["alpha"], notes, context)
    return withhold_emulated_series(series, allow_emulated).to_json()


def unconfirmed(index: int, labels: list[Label], interleaved: bool) -> dict:
    """A change point at the first or last label rests on that one label
    alone (a disturbance of one label at an end of a series is read as a
    change far more often than inside it): "unconfirmed" until it is
    measured again interleaved with its neighbours, and "confirm" says how."""
    end = index == 1 or index == len(labels) - 1
    if not end:
        return {"unconfirmed": False}
    one = labels[0] if index == 1 else labels[-1]
    near = labels[max(index - 2, 0):index + 2]
    names = ", ".join(printable(lb.value) for lb in near)
    how = (f"{printable(one.value)} is the only label on its side: measure more labels past it, or this series "
           "again, to confirm it" if interleaved else
           f"{printable(one.value)} is the only label on its side and ran at another time: measure {names} again "
           "interleaved (a build of each, then opcost series --run ... --over, or opcost ab for two) to confirm it")
    return {"unconfirmed": True, "confirm": how}


def label_flags(res: dict, run=None) -> list[dict]:
    """A result's summary flags (contended, bimodal, unstable, ...), as the
    series carries them per label; `run`: the stored run they came from."""
    out = []
    for f in Summary.of(res).flags:
        if isinstance(f, dict) and f.get("flag"):
            d = {"flag": str(f["flag"]), "detail": str(f.get("detail", ""))}
            if run is not None:
                d["run"] = run
            out.append(d)
    return out


# --- measured: `series --run SPEC --over PARAM=V1|V2|...` ---------------------------

def over_variants(spec: str, param: str, values: list[str], target, cpus) -> list:
    """One variant per label: SPEC with PARAM=value; a value repeated gets
    its position in its name, so each label stays its own variant."""


    bench, given = split_spec(spec)
    if any(k == param for k, _ in given):
        raise UsageError(f"--run {printable(spec)} already sets {param}; --over {param}=... gives its values")
    if any("|" in v for _, v in given):
        raise UsageError(f"--run {printable(spec)}: one variant per label; the labels' values go in --over")
    out = []
    for i, v in enumerate(values):
        vs = expand(f"{spec}{',' if ':' in spec else ':'}{param}={v}", target, cpus)
        if len(vs) != 1:
            raise UsageError(f"--run {printable(spec)} names {len(vs)} variants; a series follows one")
        var = vs[0]
        if values.count(v) > 1:
            var = replace(var, name=f"{var.key()} #{i + 1}")
        out.append(var)
    return out


def measured_document(results: list[dict], values: list[str], *, param: str, spec: str, delta: float,
                      run_id, env, allow_emulated: bool = False) -> dict:
    """The series of one `series --run` (results in label order)."""
    labels, notes = [], []

    on = decided_counter()   # --verdict-on: the labels' figures are that counter's, per process
    for v, r in zip(values, results):
        meds = process_medians(r)
        procs = [p for p in r.get("processes") or [] if p.get("samples")]
        if on is not None:
            procs = [p for p in procs if counter_median(p, on) is not None]
            meds = [float(counter_median(p, on) or 0.0) for p in procs]
        rounds = [p["round"] for p in procs] if all(isinstance(p.get("round"), int) for p in procs) else []
        if rounds and on is None and [process_median(p["samples"]) for p in procs] != meds:
            rounds = []   # the summary's medians are not the processes' one to one: no rounds to permute
        if not meds:
            notes.append(f"{param}={v}: {r.get('status')}" + (f" ({r['reason']})" if r.get("reason") else "")
                         + ": left out of the series")
            continue
        labels.append(Label(v, meds, [run_id] if run_id is not None else [], {param: v}, flags=label_flags(r),
                            rounds=rounds, boots=Summary.of(r).get("boots")))
        labels[-1].add_guest(r)
    exact = on is not None and any(_source(r, on) == "emulator" for r in results)
    doc = document(labels, kind="measured", interleaved=True, bench=results[0]["bench"], spec=spec, by=param,
                   order="over", delta=delta, notes=notes, run_id=run_id, env=env,
                   allow_emulated=allow_emulated or exact)   # the emulator's counts are not its timings
    if on is not None:
        doc["decided_on"] = {"counter": on, "source": "emulator" if exact else "perf"}
    return doc


def stored_series(doc: dict) -> dict | None:
    """The series a stored `series --run` printed, rebuilt from its results
    and its stored plan (--over, delta) as `show` does: the opcost.series/1
    document every `report` format that takes a series renders. None: any
    other run, one whose plan is not known or does not match its results,
    or one with fewer than 3 labels measured."""
    plan = plan_of(doc)
    if plan is None or plan.kind != doc.get("kind") or plan.kind != "series":
        return None
    if plan.over is None or plan.delta is None:
        return None
    res = doc["results"]
    values = plan.over["values"]
    if len(res) != len(values) or sum(1 for r in res if r.get("processes")) < MIN_LABELS:
        return None

    with deciding_on(plan.verdict_on):
        return measured_document(res, values, param=plan.over["param"], spec=plan.specs[0], delta=plan.delta,
                                 run_id=doc["run_id"], env=doc.get("env"), allow_emulated=plan.allow_emulated)


# --- stored: `series BENCH[:PARAMS] --by KEY` ---------------------------------------

def _matches(params: dict, given: list[tuple[str, str]]) -> bool:
    def canon(x) -> str:
        s = str(x).strip()
        try:
            return str(int(s, 0))
        except ValueError:
            return s
    return all(canon(params.get(k)) == canon(v) for k, v in given)


def check_by(by: str | None, what: str) -> str:
    """--by KEY of a series of stored runs (`what` names the series in the
    message): the label key, stripped; one line, exit 2, when missing or
    given as KEY=VALUE."""
    if by is None:
        raise UsageError(f"{what}: give --by KEY, the label key of the series "
                         "(e.g. --by commit for runs labelled commit=...)")
    if not by.strip() or "=" in by:
        raise UsageError(f"--by {printable(by)}: give --by KEY with a label key (commit), not KEY=VALUE")
    return by.strip()


def read_order(text: str | None, path: str | None) -> tuple[list[str] | None, str]:
    """--order V1,V2,... or --order-file F (one value a line, blank lines and
    #-comments skipped): the label values in order, and where the order came from."""
    if text is not None and path is not None:
        raise UsageError("--order and --order-file both give the order; give one")
    if text is not None:
        vals = [v.strip() for v in text.split(",")]
        if any(not v for v in vals):
            raise UsageError(f"--order {printable(text)}: an empty value; give V1,V2,... (label values in order)")
        how = "order"
    elif path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                vals = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--order-file {printable(path)}: cannot read it ({e.__class__.__name__}: "
                             f"{getattr(e, 'strerror', None) or e}); give a text file with one label value a line")
        if not vals:
            raise UsageError(f"--order-file {printable(path)} holds no label values; give one value a line "
                             "(e.g. from git rev-list --reverse A..B)")
        how = "order-file"
    else:
        return None, "time"
    dup = sorted({v for v in vals if vals.count(v) > 1})
    if dup:
        raise UsageError(f"--{how} names {printable(dup[0])} twice; give each label value once")
    return vals, how


def _check_order(key: str, bench: str, order: list[str] | None, values: set, values_all: set,
                 notes: list[str]) -> None:
    """--order against the stored values of KEY (those that measured BENCH:
    `values`); what is left out, said in `notes`."""
    if order is not None:
        missing = [v for v in order if v not in values_all]
        if missing:
            raise UsageError(f"--order names {printable(key)}={printable(missing[0])}, which no stored run has; "
                             f"values of {printable(key)}: {', '.join(printable(v) for v in sorted(values_all))}")
        other = [v for v in order if v not in values]
        if other:
            raise UsageError(f"runs labelled {printable(key)}={printable(other[0])} did not measure "
                             f"{printable(bench)}; a series follows one benchmark (leave the value out of --order)")
        left_out = sorted(values - set(order))
        if left_out:
            notes.append(f"not in --order, left out: {', '.join(printable(v) for v in left_out)}")
    else:
        without = sorted(values_all - values)
        if without:
            notes.append(f"runs of {', '.join(printable(v) for v in without)} did not measure {printable(bench)}: left out")


def _pool(picked: list, key: str, spec: str, notes: list[str]) -> dict[str, Label]:
    """The picked runs' processes pooled by their value of KEY, in order."""
    by_value: dict[str, Label] = {}
    for e, run, r in picked:
        v = e["labels"][key]
        meds = process_medians(r) if r is not None else []
        if r is None or not meds:
            notes.append(f"run {e['id']} ({printable(key)}={printable(v)}): "
                         + ("no variant matching " + printable(spec) if r is None else "no measured process")
                         + ": left out")
            continue
        lb = by_value.setdefault(v, Label(v, created=e.get("created") or ""))
        lb.medians += meds
        lb.runs.append(e["id"])
        lb.run_medians.append(list(meds))
        lb.flags += label_flags(r, e["id"])
        lb.add_guest(r)
        params = dict(r.get("params") or {})
        if lb.params and lb.params != params:
            notes.append(f"{printable(key)}={printable(v)}: its runs measured different parameters; "
                         "the first run's are shown")
        lb.params = lb.params or params
    return by_value


def stored_labels(store, spec: str, key: str, order: list[str] | None, *, force: bool) -> tuple[list[Label], list[str], list]:
    """The labels of a stored series: every run labelled KEY=VALUE holding
    BENCH, its one variant matching the parameters named in SPEC, runs of
    one value pooled; in --order's order or by the time of their first run.
    Returns (labels, notes, env differences that were forced through)."""
    bench, given = split_spec(spec)
    everything = store.find_runs(key=key)
    if not everything:
        keys = sorted({k for e in store.find_runs() for k in (e.get("labels") or {})})
        raise UsageError(f"--by {printable(key)}: no stored run has a label {printable(key)}=...; "
                         + (f"label keys in the store: {', '.join(printable(k) for k in keys)}" if keys
                            else "no run in the store has key=value labels (opcost run --label KEY=VALUE)"))
    entries = [e for e in everything if bench in (e.get("benches") or [])]
    values_all = {e["labels"][key] for e in everything}
    values = {e["labels"][key] for e in entries}
    if not entries:
        raise UsageError(f"no run labelled {printable(key)}=... measured {printable(bench)} (they measured: "
                         f"{', '.join(sorted({b for e in everything for b in e.get('benches') or []})) or 'nothing'})")
    notes: list[str] = []
    _check_order(key, bench, order, values, values_all, notes)
    picked: list[tuple[dict, dict, dict | None]] = []     # (entry, run, its matching result)
    for e in sorted(entries, key=lambda e: (e.get("created") or "", e["id"])):
        v = e["labels"][key]
        if order is not None and v not in order:
            continue
        run = store.load_run(f"id:{e['id']}")
        found = [r for r in run["results"] if r["bench"] == bench and _matches(r.get("params") or {}, given)]
        if len(found) > 1:
            raise UsageError(f"run {e['id']} ({printable(key)}={printable(v)}) holds {len(found)} variants of "
                             f"{printable(spec)} ({', '.join(result_key(r) for r in found)}); name the parameter "
                             f"that tells them apart, e.g. {bench}:" + _tell_apart(found))
        picked.append((e, run, found[0] if found else None))
    forced = same_machine([(e["id"], run.get("env") or {}) for e, run, r in picked if r is not None], force=force,
                          anyway="--force to walk the series anyway")
    by_value = _pool(picked, key, spec, notes)
    if not by_value and given and not any(r is not None for _, _, r in picked):
        seen = sorted({result_key(r) for _, run, _ in picked for r in run["results"] if r["bench"] == bench})
        raise UsageError(f"no run labelled {printable(key)}=... holds a variant matching {printable(spec)}; "
                         f"they hold: {', '.join(printable(k) for k in seen) or 'none'}")
    labels = [by_value[v] for v in order if v in by_value] if order is not None else list(by_value.values())
    for lb in labels:
        if len(lb.runs) > 1:
            notes.append(f"{printable(key)}={printable(lb.value)}: {len(lb.runs)} runs pooled "
                         f"(runs {', '.join(map(str, lb.runs))}: their processes as one label)")
    if forced:
        notes.append("--force: runs from different machines: " + "; ".join(
            f"run {rid} {f}: {a!r} vs {b!r}" for rid, f, a, b in forced))
    return labels, notes, forced


def _tell_apart(found: list[dict]) -> str:
    keys = sorted({k for r in found for k in r.get("params") or {}})
    for k in keys:
        vals = [str((r.get("params") or {}).get(k)) for r in found]
        if len(set(vals)) > 1:
            return f"{k}={vals[0]}"
    return "..."


def stored_document(store, spec: str, key: str, *, order: list[str] | None, order_how: str, delta: float,
                    force: bool, allow_emulated: bool = False) -> dict:

    labels, notes, forced = stored_labels(store, spec, key, order, force=force)
    return document(labels, kind="stored", interleaved=False, bench=split_spec(spec)[0], spec=spec, by=key,
                    order=order_how, delta=delta, notes=notes, allow_emulated=allow_emulated,
                    env_differences=[{"run": rid, "field": f, "a": a, "b": b} for rid, f, a, b in forced])
