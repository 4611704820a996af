"""Counter profiles: `--counters` names perf events and profiles.

A profile is a data file `profiles/NAME.json` shipped in the package: a list of
perf events and derived metrics written as arithmetic over them, e.g.
`{"name": "ipc", "expr": "instructions / cycles"}`. In an expression an event
is written with `_` for `-` (`cache_misses` is `cache-misses`), and `ns` is the
elapsed time of one op. A modifier on a profile (`cache:u`, `cache:k`) applies
to every event of it and to its metrics (`ipc:u = instructions:u / cycles:u`),
so `--counters cache:u,cache:k` gives the user-space and the kernel share of
one op side by side. `:helper` counts the benchmark's helper (the second
party of ctx.pipe & co.) instead of the measuring thread: `software:helper`,
`context-switches:u:helper`.

Besides perf's generic names and raw `rNNNN`, an event may be named as the
kernel and perf name it on the measuring machine (pmu.py): a sysfs PMU event
(`msr/tsc/`, `mem-loads`), a model-specific event of `perf list`
(`ls_dispatch.ld_dispatch`), or perf's own `pmu/terms/` spelling
(`cpu/event=0x29,umask=1/`). Such a name reaches the probe with the
perf_event_attr it resolved to (`NAME@TYPE:CONFIG...`).

Python expands profiles into the plain event list the probe takes. The probe
reads the counters, scales multiplexed ones by time enabled/running (only
there: nothing here scales again) and normalises them per op; the summary's
`counters` are per-op medians and `derived` is computed here, per process
from that process's medians, then the median over processes.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from importlib import resources

from .errors import UsageError

MAX_EVENTS = 32                                   # probe/counters.h MAX_COUNTERS
CLOCK_EVENTS = ("task-clock", "cpu-clock")        # the kernel ignores :u/:k for these
_MODS = re.compile(r"[uk]+")
HELPER = "helper"
_RAW = re.compile(r"r[0-9a-fA-F]+")


@dataclass(frozen=True)
class Derived:
    name: str          # displayed name, modifier included: "ipc:u"
    expr: str          # as written in the profile: "instructions / cycles"
    events: dict       # identifier in expr -> event name given to the probe ("cycles:u")
    profile: str       # "cache:u"
    help: str = ""

    def shown_expr(self) -> str:
        """The expression with the actual event names: `instructions:u / cycles:u`."""
        return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: self.events.get(m.group(0), m.group(0)), self.expr)


@dataclass(frozen=True)
class Plan:
    events: list          # what the probe is asked for, in order, no duplicates
    derived: list         # [Derived]
    profiles: list        # ["cache:u", ...] as given
    named: dict = field(default_factory=dict)   # event -> pmu.Resolved (names the probe does not know)

    def probe_list(self) -> str:
        return ",".join(e + (self.named[base_of(e)].encoding() if base_of(e) in self.named else "")
                        for e in self.events)

    def helper_events(self) -> list[str]:
        return [e for e in self.events if is_helper(e)]


def _ident(event: str) -> str:
    return event.replace("-", "_")


def profile_names() -> list[str]:
    d = resources.files("opcost") / "profiles"
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".json"))


def load_profile(name: str) -> dict:
    """The profile as data, checked: events are plain names (no modifiers) and
    every expression is arithmetic over the profile's events and `ns`."""
    path = resources.files("opcost") / "profiles" / f"{name}.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"counter profile {name}: {e}") from None
    events = doc.get("events")
    if not isinstance(events, list) or not events or not all(isinstance(e, str) and ":" not in e for e in events):
        raise UsageError(f"counter profile {name}: 'events' must be a non-empty list of event names without modifiers")
    idents = {_ident(e) for e in events} | {"ns"}
    for d in doc.get("derived", []):
        if not {"name", "expr"} <= set(d):
            raise UsageError(f"counter profile {name}: every derived metric needs a name and an expr")
        used = _names(d["expr"], f"profile {name}, metric {d['name']}")
        missing = used - idents
        if missing:
            raise UsageError(f"counter profile {name}: metric {d['name']} uses {', '.join(sorted(missing))}, "
                             f"not an event of the profile")
    return {"name": name, "summary": doc.get("summary", ""), "events": events, "derived": doc.get("derived", [])}


_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b}


def _parse(expr: str, where: str) -> ast.AST:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise UsageError(f"{where}: {expr!r} is not an arithmetic expression") from None
    for node in ast.walk(tree):
        ok = isinstance(node, (ast.Expression, ast.BinOp, ast.Name, ast.Load, ast.UnaryOp, ast.USub)) \
            or type(node) in _OPS or (isinstance(node, ast.Constant) and isinstance(node.value, (int, float)))
        if not ok:
            raise UsageError(f"{where}: {expr!r}: only + - * / numbers and event names are allowed")
    return tree


def _names(expr: str, where: str) -> set[str]:
    return {n.id for n in ast.walk(_parse(expr, where)) if isinstance(n, ast.Name)}


def evaluate(expr: str, values: dict) -> float | None:
    """expr over values (identifier -> number); None when an input is missing
    or the division is by zero."""
    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            return float(n.value)
        if isinstance(n, ast.Name):
            v = values.get(n.id)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise LookupError(n.id)
            return float(v)
        if isinstance(n, ast.UnaryOp):
            return -ev(n.operand)
        return _OPS[type(n.op)](ev(n.left), ev(n.right))
    try:
        return ev(_parse(expr, "metric"))
    except (LookupError, ZeroDivisionError):
        return None


def _valid_text(known: list[str]) -> str:
    return (f"valid profiles: {', '.join(profile_names())}; events: {', '.join(known)}, rNNNN (raw hex), "
            "this machine's PMU events by name (sysfs, perf list) or as pmu/terms/; "
            "each optionally with :u (user only) or :k (kernel only), and :helper (the benchmark's helper)")


def split_list(text: str) -> list[str]:
    """`--counters` text -> its items: split at commas that are not between
    the slashes of perf's pmu/terms/ spelling (`cpu/event=0x29,umask=1/`)."""
    out, cur, inside = [], "", False
    for ch in text:
        if ch == "/":
            inside = not inside
        if ch == "," and not inside:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [t.strip() for t in out]


def _mods_at(name: str) -> int:
    """Where the modifiers start: the first ':' after the name's last '/'
    (perf's pmu/terms/ has none inside); -1 without modifiers."""
    return name.find(":", name.rfind("/") + 1)


def parse_item(item: str, known: list[str]) -> tuple[str, str, bool]:
    """`cycles:u:helper` -> ("cycles", "u", True): base, u/k modifier, helper."""
    at = _mods_at(item)
    if at < 0:
        return item, "", False
    base, segs = item[:at], item[at + 1:].split(":")
    uk, helper = "", False
    for seg in segs:
        if seg == HELPER and not helper:
            helper = True
        elif _MODS.fullmatch(seg) and not uk:
            uk = seg
        else:
            raise UsageError(f"--counters {item!r}: unknown modifier {seg!r} (or one given twice); " + _valid_text(known))
    return base, uk, helper


def base_of(event: str) -> str:
    at = _mods_at(event)
    return event if at < 0 else event[:at]


def is_helper(event: str) -> bool:
    at = _mods_at(event)
    return at >= 0 and HELPER in event[at + 1:].split(":")


def _suffix(uk: str, helper: bool) -> str:
    return (f":{uk}" if uk else "") + (f":{HELPER}" if helper else "")


def expand(text: str | None, known: list[str], catalog=None) -> Plan | None:
    """`--counters` text -> the probe's event list and the derived metrics.
    `catalog`: a callable giving this machine's pmu.Catalog, asked only for
    a name that is neither a profile, a generic event nor raw hex.
    Unknown names are usage errors naming every valid profile and event and
    the closest names; known events this machine cannot count are not (the
    probe reports them as <not supported> with the reason)."""
    if text is None:
        return None
    names = split_list(text)
    if not any(names):
        raise UsageError("--counters is empty; give perf event or profile names, e.g. software or "
                         "context-switches,task-clock (" + _valid_text(known) + ")")
    if not all(names):
        raise UsageError(f"--counters {text!r} has an empty item (two commas in a row, or one at an end); "
                         "give names separated by single commas, e.g. context-switches,task-clock")
    profiles = set(profile_names())
    events: list[str] = []
    derived: list[Derived] = []
    given_profiles: list[str] = []
    named: dict = {}
    cat = None

    def add(ev: str) -> None:
        if ev not in events:
            events.append(ev)

    for n in names:
        base, uk, helper = parse_item(n, known)
        if not base:
            raise UsageError(f"--counters {n!r}: no event name before the modifier; " + _valid_text(known))
        suffix = _suffix(uk, helper)
        if base in profiles:
            prof = load_profile(base)
            given_profiles.append(base + suffix)
            for e in prof["events"]:
                add(e + suffix)
            for d in prof["derived"]:
                mapping = {_ident(e): e + suffix for e in prof["events"]}
                derived.append(Derived(name=d["name"] + suffix, expr=d["expr"], events=mapping,
                                       profile=base + suffix, help=d.get("help", "")))
        elif base in known or _RAW.fullmatch(base):
            add(base + suffix)
        else:
            if cat is None:
                cat = catalog() if catalog is not None else None
            resolved = cat.resolve(base) if cat is not None else None
            if resolved is None:
                raise UsageError(_unknown(n, base, known, profiles, cat))
            named[base] = resolved
            add(base + suffix)
    if len(events) > MAX_EVENTS:
        raise UsageError(f"--counters {text}: {len(events)} events after expanding profiles; at most {MAX_EVENTS}")
    return Plan(events=events, derived=derived, profiles=given_profiles, named=named)


def _unknown(item: str, base: str, known: list[str], profiles: set, cat) -> str:
    import difflib   # --help must not load it (counters is read for the parsers)

    pool = list(known) + sorted(profiles) + (cat.names() if cat is not None else [])
    close = difflib.get_close_matches(base, pool, n=3, cutoff=0.75)
    if not close:  # a prefix or part of a long model-specific name (ls_dispatch. -> ls_dispatch.ld_dispatch)
        close = [p for p in pool if base and base.lower() in p.lower()][:3]
    return (f"unknown counter or profile {item!r}" + (f"; did you mean {', '.join(close)}?" if close else "")
            + "; " + _valid_text(known) + (f"; {cat.summary()}" if cat is not None else ""))


def split_name(event: str) -> tuple[str, str]:
    """`cycles:u` -> (`cycles`, `u`); `cycles` -> (`cycles`, ``); `:uk` is
    both; a helper's event is its own row: `cycles:u:helper` -> (`cycles
    (helper)`, `u`)."""
    base = base_of(event)
    at = _mods_at(event)
    segs = event[at + 1:].split(":") if at >= 0 else []
    mods = next((s for s in segs if s != HELPER), "")
    if set(mods) == {"u", "k"}:
        mods = ""
    return (f"{base} (helper)" if HELPER in segs else base), mods


def display_name(event: str) -> str:
    """`context-switches:helper` -> `context-switches (helper)`; `cycles:u:helper` -> `cycles:u (helper)`."""
    if not is_helper(event):
        return event
    base, uk = base_of(event), next((s for s in event[_mods_at(event) + 1:].split(":") if s != HELPER), "")
    return base + (f":{uk}" if uk else "") + " (helper)"
