"""What each arm of a comparison ran on when it ran in virtual machines
(the vm target), said once in the comparison's header: each arm's kernel
(release and path), its parameters, machine type, accelerator and guest CPU
model; what mitigations each arm's kernel logged at boot (the init reads the
kernel log: sysfs's vulnerabilities say what the CPU model claims, the boot
log what the kernel did, e.g. page table isolation forced on by `pti=on` on
a CPU that claims not to need it); and whether the timings are emulated and
a verdict was given only because of --allow-emulated.

Read from the results' header.vm records (targets/vm: `_record`) into each
comparison entry's `guests` (comparison.entry) and the document's `emulated`
(targets/vm/withhold.py); rendered as plain lines by the text table,
markdown and html alike (`header_lines`). A series carries each label's
guests (`labels[].guests`, series.py) and says them the same way
(`series_lines`: the text table, markdown and html of a series, measured or
rebuilt from the store)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ACCEL_NAMES = {"tcg": "TCG (emulated)", "kvm": "KVM"}


def guest_of(res: dict) -> dict | None:
    """What the first process of a result ran on, from its header.vm, or
    None: not a guest. boot_mitigations is None for a guest whose init did
    not read the kernel log (a run from before)."""
    gs = guests_in(res)
    return gs[0] if gs else None


def guests_in(res: dict) -> list[dict]:
    """Each guest a result's processes ran on (as `describe` tells them
    apart), in the order of its processes: one, unless the guest changed
    during the run (microvm given up for pc after hanging twice)."""
    out: dict[str, dict] = {}
    for p in res.get("processes") or []:
        vm = (p.get("header") or {}).get("vm")
        if not isinstance(vm, dict):
            continue
        g: dict = vm["guest"] if isinstance(vm.get("guest"), dict) else {}
        argv = [str(a) for a in vm.get("qemu_argv") or []]
        cpu = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-cpu"), None)
        smp = next((argv[i + 1].split(",")[0] for i, a in enumerate(argv[:-1]) if a == "-smp"), "")
        boot = g.get("boot_mitigations")
        cpuid: dict = vm["cpuid"] if isinstance(vm.get("cpuid"), dict) else {}
        one = {"kernel": vm.get("kernel"), "release": g.get("release"), "cmdline": vm.get("cmdline") or "",
               "machine": vm.get("machine"), "accel": vm.get("accel"), "cpu_model": cpu,
               "cpu_brand": cpuid.get("brand"), "vcpus": int(smp) if smp.isdigit() else None,
               "boot_mitigations": [str(x) for x in boot] if isinstance(boot, list) else None}
        out.setdefault(describe(one), one)
    return list(out.values())


def guests_entry(res_a: dict, res_b: dict) -> dict | None:
    """A comparison entry's `guests`: {a, b} (guest_of) and, when both
    kernels' boot logs were read, the mitigation lines only one of them
    logged (only_a, only_b). None unless both arms ran in guests."""
    return guests_of_sides([res_a], [res_b])


def guests_of_sides(side_a: list[dict], side_b: list[dict]) -> dict | None:
    """guests_entry over sides of several results (`compare` of several
    stored runs a side): a and b the first result's guest, a_runs and b_runs
    the others' (only when there are others: the other results' guests, and
    any guest a result changed to during its run, guests_in), and the
    boot-log mitigation lines only one side's kernels logged (over every
    result of a side, when every one was read). None unless every result
    ran in a guest."""
    per = [[guests_in(r) for r in side] for side in (side_a, side_b)]
    if not all(per) or not all(gs for side in per for gs in side):
        return None
    ga, gb = ([gs[0] for gs in side] + [g for gs in side for g in gs[1:]] for side in per)
    out: dict[str, Any] = {"a": ga[0], "b": gb[0]}
    for side, gs in (("a", ga), ("b", gb)):
        if len(gs) > 1:
            out[f"{side}_runs"] = gs[1:]
    logs = [[g["boot_mitigations"] for g in gs if g is not None] for gs in (ga, gb)]
    if all(x is not None for side in logs for x in side):
        la, lb = ([line for x in side for line in x] for side in logs)
        out["boot_mitigations_differ"] = {"only_a": list(dict.fromkeys(x for x in la if x not in lb)),
                                          "only_b": list(dict.fromkeys(x for x in lb if x not in la))}
    return out


def describe(g: dict) -> str:
    """One guest in a line: `kernel 6.1.0-50-cloud-amd64 (/k/vmlinuz), cmdline "pti=on", machine pc,
    TCG (emulated), CPU max (AMD EPYC ...), 1 vCPU` (the vCPUs from QEMU's -smp)."""
    kernel = f"kernel {g.get('release') or '?'} ({g.get('kernel') or '?'})"
    cpu = g.get("cpu_model") or "QEMU's default"
    if g.get("cpu_brand"):
        cpu += f" ({g['cpu_brand']})"
    n = g.get("vcpus")
    vcpus = f", {n} vCPU{'s' if n != 1 else ''}" if isinstance(n, int) else ""
    return (f"{kernel}, cmdline {g.get('cmdline') or ''!r}, machine {g.get('machine') or '?'}, "
            f"{ACCEL_NAMES.get(str(g.get('accel')), str(g.get('accel')))}, CPU {cpu}{vcpus}")


def header_lines(entries: list, emulated: dict | None, arms: tuple[str, str] = ("A", "B")) -> list[str]:
    """The lines a comparison's header says about its guests (none when it
    did not run in any): each arm's guests (each distinct one once), the
    boot-log mitigations that differ between the arms (or that none do),
    and whether the timings are emulated and the verdicts given anyway.
    `entries`: the comparison's typed entries (model.Entry: `guests`);
    `emulated`: the document's `emulated` (targets/vm/withhold.py)."""
    seen: dict[str, list[str]] = {"a": [], "b": []}
    only: dict[str, list[str]] = {"a": [], "b": []}
    read = False
    for e in entries:
        g = getattr(e, "guests", None)
        if not isinstance(g, dict):
            continue
        for side in ("a", "b"):   # a side of several stored runs: each run's guest (`a_runs`, `b_runs`)
            for one in [g.get(side) or {}, *(g.get(f"{side}_runs") or [])]:
                d = describe(one)
                if d not in seen[side]:
                    seen[side].append(d)
        differ = g.get("boot_mitigations_differ")
        if isinstance(differ, dict):
            read = True
            for side in ("a", "b"):
                only[side] += [x for x in differ.get(f"only_{side}") or [] if x not in only[side]]
    lines = []
    for side, name in zip(("a", "b"), arms):
        lines += [f"{name} ran on: {d}" for d in seen[side]]
    if read:
        if only["a"] or only["b"]:
            lines.append("kernel boot logs differ in mitigations: " + "; ".join(
                f"only {name}: " + ", ".join(repr(x) for x in only[side])
                for side, name in zip(("a", "b"), arms) if only[side]))
        else:
            lines.append("kernel boot logs: the same mitigations in A and B")
    elif any(seen.values()):
        lines.append("kernel boot logs: not read (a run from before opcost read them)")
    emu = emulated_line(emulated, len(entries), entries)
    if emu:
        lines.append(emu)
    return lines


def emulated_line(emu: dict | None, n: int, entries: Sequence = ()) -> str | None:
    """Whether the timings are an emulator's and what that did to the
    verdicts (the document's `emulated`, targets/vm/withhold.py, over its
    `n` entries), or None. A comparison that gives no verdict for another
    reason (`compare` of one run a side: `entries` have none) says only
    that the timings are emulated, not that --allow-emulated would give one."""
    if not isinstance(emu, dict):
        return None
    which = emu.get("benchmarks") or []
    some = "" if len(which) == n else f" ({', '.join(map(str, which))})"
    head = f"emulated (QEMU TCG){some}: the timings are the emulator's, not this CPU's; "
    given = any(getattr(e, "verdict", None) is not None for e in entries)
    withheld = emu.get("withheld")   # verdicts withheld for emulation (absent: a document from before)
    if emu.get("allow_emulated"):
        if entries and not given:
            return head + "--allow-emulated allows verdicts on them, but none is given here (each row says why)"
        return head + "verdicts are given only because --allow-emulated asked for them"
    if withheld == 0 and not given:
        return head + "no verdict is given on them"
    return head + "no verdict on cost (--allow-emulated gives one)"


def result_lines(results: list[dict]) -> list[str]:
    """What a plain run's results ran on (`run --kernel K`, its `show`,
    markdown and html), said in its header as a comparison says each arm's:
    `ran on: ...` (guest_of, describe) when every variant ran on one guest,
    else one line per guest with the variants that ran there; then that
    the timings are emulated when a guest ran under TCG. Nothing when no
    variant ran in a guest."""
    where: dict[str, list[str]] = {}
    emulated: list[str] = []
    for r in results:
        key = str(r.get("key") or r.get("bench") or "?")
        for g in guests_in(r):   # (several: the guest changed during the run)
            where.setdefault(describe(g), []).append(key)
            if g.get("accel") == "tcg" and key not in emulated:
                emulated.append(key)
    lines = _ran_on(where)
    if emulated:
        measured = len({k for keys in where.values() for k in keys})
        some = "" if len(emulated) == measured else f" ({', '.join(emulated)})"
        lines.append(f"emulated (QEMU TCG){some}: the timings are the emulator's, not this CPU's")
    return lines if where else []


def _ran_on(where: dict[str, list[str]]) -> list[str]:
    """`ran on: GUEST` when every part (variant, label) ran on one guest,
    else one line per guest naming its parts."""
    if len(where) == 1:
        return [f"ran on: {next(iter(where))}"]
    return [f"{', '.join(dict.fromkeys(parts))} ran on: {d}" for d, parts in where.items()]


def series_lines(doc: dict, labels: Sequence[Any]) -> list[str]:
    """What a series (opcost.series/1) ran on, said above its table as a
    plain run says it (result_lines): `ran on: ...` from its labels' guests
    (one line per guest, with the labels BY=VALUE that ran there, when they
    ran on several), then, when a label ran under TCG, that the timings are
    emulated and what that did to the change points (given only because of
    --allow-emulated, or none given on cost without it). Nothing when no
    label ran in a guest (or a document from before labels carried them).
    `labels`: the document's labels as the model reads them
    (model.Series.from_json(doc).labels: value, guests, emulated)."""
    by = str(doc.get("by") or "label")
    where: dict[str, list[str]] = {}
    emulated: list[str] = []
    for lb in labels:
        name = f"{by}={lb.value}"
        gs = [g for g in lb.guests or [] if isinstance(g, dict)]
        for g in gs:
            where.setdefault(describe(g), []).append(name)
        if lb.emulated or any(g.get("accel") == "tcg" for g in gs):
            emulated.append(name)
    if not where:
        return []
    lines = _ran_on(where)
    if emulated:
        some = "" if len(emulated) == len(labels) else f" ({', '.join(dict.fromkeys(emulated))})"
        head = f"emulated (QEMU TCG){some}: the timings are the emulator's, not this CPU's; "
        on: dict = doc["decided_on"] if isinstance(doc.get("decided_on"), dict) else {}
        if on.get("source") == "emulator":
            lines.append(head + f"the change points are on the emulator's count of {on.get('counter')} "
                         "(--verdict-on), not on the timings")
        elif doc.get("allow_emulated"):
            lines.append(head + "change points are sought on them only because --allow-emulated asked for it")
        else:
            lines.append(head + "no change point on cost (--allow-emulated gives them)")
    return lines
