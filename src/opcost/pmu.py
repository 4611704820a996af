"""Named PMU events: the kernel's own event lists turned into the
perf_event_attr the probe opens (`--counters ls_dispatch.ld_dispatch`).

Two sources, both on the machine that measures:

- sysfs, /sys/bus/event_source/devices/PMU/: `type` is the PMU's attr.type;
  `format/TERM` says which bits of which config word a term fills
  ("config:0-7,32-35"); `events/NAME` are the kernel's named events as terms
  ("event=0x29,umask=0x07"); a `cpus` file (or the name `cpu`) marks a core
  PMU, one that counts a thread (perf's is_pmu_core).
- `perf list --json pmu` when perf is installed: the model-specific events
  perf knows from its tables (EventName, Unit, Encoding "cpu/event=0x29,umask=1/"),
  whose terms are encoded with the same sysfs formats.

A term's value is spread over its format's bits from the lowest up, as perf
does (pmu_format_value): AMD's event=0x1c1 over config:0-7,32-35 is
config 0x1000000c1. Terms that only steer perf (period, freq, name, ...) are
dropped: the probe counts, it does not sample.

Test hooks (like OPCOST_TEST_GROUP_MAX in the probe): OPCOST_PMU_SYSFS names
another sysfs devices directory, OPCOST_PERF_LIST a file holding a `perf list
--json` output (empty: as if perf were not installed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UsageError

SYSFS = "/sys/bus/event_source/devices"
WORDS = ("config", "config1", "config2")          # what the probe passes on (attr.config3 is not)
PERF_ONLY_TERMS = ("period", "freq", "name", "metric-id", "percore")
_FORMAT = re.compile(r"(config\d?):(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)")
PERF_SPELLING = re.compile(r"([A-Za-z0-9_.\-]+)/(.*)/")   # pmu/terms/ or pmu/name/
_EVENT_FILE_SUFFIXES = (".scale", ".unit", ".per-pkg", ".snapshot")


@dataclass(frozen=True)
class Format:
    word: str          # config, config1, config2, config3
    bits: tuple        # bit positions, ascending: value bit i goes to bits[i]


def parse_format(text: str) -> Format:
    """`config:0-7,32-35` -> Format("config", (0..7, 32..35))."""
    m = _FORMAT.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a PMU format: {text.strip()!r}")
    bits: list[int] = []
    for part in m.group(2).split(","):
        lo, _, hi = part.partition("-")
        bits += range(int(lo), int(hi or lo) + 1)
    if not bits or max(bits) > 63:
        raise ValueError(f"not a PMU format: {text.strip()!r}")
    return Format(m.group(1), tuple(sorted(set(bits))))


@dataclass
class Pmu:
    name: str
    type: int
    core: bool
    formats: dict = field(default_factory=dict)    # term -> Format
    events: dict = field(default_factory=dict)     # sysfs events/: name -> terms


@dataclass(frozen=True)
class Event:
    name: str
    pmu: str
    terms: str
    source: str        # "sysfs" | "perf list"


@dataclass(frozen=True)
class Resolved:
    """One named event as the probe opens it."""
    name: str
    pmu: str
    type: int
    config: int
    config1: int = 0
    config2: int = 0
    terms: str = ""
    source: str = ""

    def encoding(self) -> str:
        """The probe's `@TYPE:CONFIG[:CONFIG1[:CONFIG2]]`."""
        words = [self.config, self.config1, self.config2]
        while len(words) > 1 and words[-1] == 0:
            words.pop()
        return f"@{self.type}:" + ":".join(f"{w:#x}" for w in words)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def read_sysfs(root: str | Path = SYSFS) -> dict[str, Pmu]:
    """Every PMU under root with its type, formats and named events;
    unreadable or malformed entries are skipped (they cannot be encoded)."""
    out: dict[str, Pmu] = {}
    try:
        dirs = sorted(Path(root).iterdir())
    except OSError:
        return out
    for d in dirs:
        t = _read(d / "type")
        if t is None or not t.strip().isdigit():
            continue
        p = Pmu(d.name, int(t), core=d.name == "cpu" or (d / "cpus").exists())
        for f in sorted((d / "format").glob("*")) if (d / "format").is_dir() else []:
            text = _read(f)
            try:
                if text is not None:
                    p.formats[f.name] = parse_format(text)
            except ValueError:
                continue
        for f in sorted((d / "events").glob("*")) if (d / "events").is_dir() else []:
            text = _read(f)
            if text is not None and not f.name.endswith(_EVENT_FILE_SUFFIXES) and text.strip():
                p.events[f.name] = text.strip()
        out[p.name] = p
    return out


def parse_perf_list(text: str) -> list[Event]:
    """The PMU events of a `perf list --json` output (entries with an
    Encoding `pmu/terms/`; descriptors like `cpu/config=0..0xff.../` and
    events without an encoding are not events to open)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return []
    out = []
    for e in doc if isinstance(doc, list) else []:
        if not isinstance(e, dict) or not isinstance(e.get("EventName"), str) or not isinstance(e.get("Encoding"), str):
            continue
        if e.get("EventType") == "Raw event descriptor" or "=0.." in e["Encoding"]:
            continue
        m = PERF_SPELLING.fullmatch(e["Encoding"])
        if not m:
            continue
        pmu, terms = m.group(1), m.group(2)
        name = e["EventName"]
        inner = PERF_SPELLING.fullmatch(name)
        if inner and inner.group(1) == pmu:      # non-core events are listed as pmu/name/
            name = inner.group(2)
        out.append(Event(name, pmu, terms, "perf list"))
    return out


def _number(text: str) -> int:
    t = text.strip().lower()
    if re.fullmatch(r"0[0-7]+", t):              # strtoull's base 0: a leading 0 is octal
        return int(t, 8)
    return int(t, 0)


def encode(pmu: Pmu, terms: str, what: str) -> dict[str, int]:
    """The config words of `terms` on `pmu` ({"config": ..., "config1": ...}).
    UsageError, naming `what`, when a term is not one of the PMU's formats,
    a value is not a number or does not fit its bits."""
    words = {w: 0 for w in WORDS}
    for term in (t.strip() for t in terms.split(",")):
        if not term:
            continue
        key, eq, val = term.partition("=")
        key = key.strip()
        if key in PERF_ONLY_TERMS:
            continue
        try:
            value = _number(val) if eq else 1     # a bare term (edge, inv) sets its bit
        except ValueError:
            hint = " (a parameter this event needs: write it as pmu/terms/)" if val.strip() == "?" else ""
            raise UsageError(f"--counters {what}: {key}={val} is not a number{hint}") from None
        if key in WORDS:
            words[key] |= value
            continue
        fmt = pmu.formats.get(key)
        if fmt is None:
            known = ", ".join(sorted(pmu.formats)) or "none"
            raise UsageError(f"--counters {what}: {key!r} is not a term of PMU {pmu.name} "
                             f"(its terms: {known}, config, config1, config2)")
        if fmt.word not in words:
            raise UsageError(f"--counters {what}: term {key} fills {fmt.word}, which opcost does not pass on "
                             f"(only {', '.join(WORDS)})")
        if value >> len(fmt.bits):
            raise UsageError(f"--counters {what}: {key}={val.strip()} does not fit the {len(fmt.bits)} bits "
                             f"of {pmu.name}'s {key}")
        for i, bit in enumerate(fmt.bits):
            if value >> i & 1:
                words[fmt.word] |= 1 << bit
    return words


@dataclass
class Catalog:
    """The named events of one machine: its PMUs (sysfs) and perf's list."""
    pmus: dict = field(default_factory=dict)         # name -> Pmu
    perf_events: list = field(default_factory=list)  # [Event] from perf list
    notes: list = field(default_factory=list)        # what was missing (no perf, ...)

    def events(self) -> list[Event]:
        sysfs = [Event(n, p.name, t, "sysfs") for p in self.pmus.values() for n, t in p.events.items()]
        return sysfs + list(self.perf_events)

    def names(self) -> list[str]:
        """Every name a user can give: bare for core PMUs, pmu/name/ for all."""
        out = []
        for e in self.events():
            p = self.pmus.get(e.pmu)
            if p is None or p.core:
                out.append(e.name)
            out.append(f"{e.pmu}/{e.name}/")
        return sorted(set(out))

    def summary(self) -> str:
        n = len({(e.pmu, e.name.lower()) for e in self.events()})
        pmus = ", ".join(sorted(p for p in self.pmus if self.pmus[p].events or self.pmus[p].formats)) or "none"
        nocore = "" if any(p.core for p in self.pmus.values()) else \
            "; no core PMU (cpu) in sysfs here, as in a VM without a virtual PMU: model-specific events cannot be named or counted"
        return f"{n} named PMU events here (PMUs with events or formats: {pmus}){nocore}" + \
            ("; " + "; ".join(self.notes) if self.notes else "")

    def _resolved(self, name: str, e: Event) -> Resolved:
        p = self.pmus.get(e.pmu)
        if p is None:
            raise UsageError(f"--counters {name}: perf lists it on PMU {e.pmu}, which this kernel does not "
                             f"expose in {SYSFS} (a per-socket or per-device PMU): opcost counts a thread")
        w = encode(p, e.terms, name)
        return Resolved(name, p.name, p.type, w["config"], w["config1"], w["config2"], e.terms, e.source)

    def resolve(self, name: str) -> Resolved | None:
        """`name` (no modifiers) as the probe opens it; None when this
        machine has no event by that name. UsageError when the name is
        ambiguous, names a PMU that is not here, or its terms do not encode."""
        m = PERF_SPELLING.fullmatch(name)
        if m:
            pmu_name, inner = m.group(1), m.group(2)
            p = self.pmus.get(pmu_name)
            if p is None:
                nocore = "" if any(q.core for q in self.pmus.values()) else \
                    "; no core PMU in sysfs here, as in a VM without a virtual PMU"
                raise UsageError(f"--counters {name}: no PMU named {pmu_name} here (PMUs: "
                                 f"{', '.join(sorted(self.pmus)) or 'none'}{nocore})")
            named = [e for e in self.events() if e.pmu == pmu_name and e.name.lower() == inner.lower()]
            if named:
                return self._resolved(name, named[0])
            if "=" not in inner and inner and "," not in inner:
                return None        # pmu/unknown-name/: unknown, with close matches
            w = encode(p, inner, name)
            return Resolved(name, p.name, p.type, w["config"], w["config1"], w["config2"], inner, "terms")
        found: dict[str, Event] = {}
        for e in self.events():
            if e.name.lower() == name.lower():
                found.setdefault(e.pmu, e)
        if not found:
            return None
        core = {k: e for k, e in found.items() if k in self.pmus and self.pmus[k].core}
        pick = core or found
        if len(pick) > 1:
            raise UsageError(f"--counters {name}: several PMUs have it ({', '.join(sorted(pick))}); "
                             f"name one: {', '.join(f'{k}/{name}/' for k in sorted(pick))}")
        return self._resolved(name, next(iter(pick.values())))


def load_local(sysfs: str | None = None, perf_list: str | None = None) -> Catalog:
    """This machine's catalog: its sysfs PMUs and `perf list --json pmu`
    (if perf is installed; said in notes when it is not)."""
    root = sysfs if sysfs is not None else os.environ.get("OPCOST_PMU_SYSFS", SYSFS)
    cat = Catalog(pmus=read_sysfs(root))
    path = perf_list if perf_list is not None else os.environ.get("OPCOST_PERF_LIST")
    if path is not None:
        text = _read(Path(path)) if path else ""
        cat.perf_events = parse_perf_list(text or "[]")
        if not path:
            cat.notes.append("perf is not installed: model-specific names (perf list) are not known here")
        return cat
    try:
        cp = subprocess.run(["perf", "list", "--json", "pmu"], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        cat.notes.append("perf is not installed: model-specific names (perf list) are not known here; "
                         "install perf (linux-perf / linux-tools) or give sysfs names or rNNNN")
        return cat
    if cp.returncode != 0:
        cat.notes.append("`perf list --json` failed (perf before 6.3 has no --json): model-specific names "
                         "are not known here")
        return cat
    cat.perf_events = parse_perf_list(cp.stdout)
    return cat
