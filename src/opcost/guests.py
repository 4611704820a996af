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
markdown and html alike (`header_lines`)."""

from __future__ import annotations

from typing import Any

ACCEL_NAMES = {"tcg": "TCG (emulated)", "kvm": "KVM"}


def guest_of(res: dict) -> dict | None:
    """What the first process of a result ran on, from its header.vm, or
    None: not a guest. boot_mitigations is None for a guest whose init did
    not read the kernel log (a run from before)."""
    for p in res.get("processes") or []:
        vm = (p.get("header") or {}).get("vm")
        if not isinstance(vm, dict):
            continue
        g: dict = vm["guest"] if isinstance(vm.get("guest"), dict) else {}
        argv = [str(a) for a in vm.get("qemu_argv") or []]
        cpu = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-cpu"), None)
        boot = g.get("boot_mitigations")
        cpuid: dict = vm["cpuid"] if isinstance(vm.get("cpuid"), dict) else {}
        return {"kernel": vm.get("kernel"), "release": g.get("release"), "cmdline": vm.get("cmdline") or "",
                "machine": vm.get("machine"), "accel": vm.get("accel"), "cpu_model": cpu,
                "cpu_brand": cpuid.get("brand"),
                "boot_mitigations": [str(x) for x in boot] if isinstance(boot, list) else None}
    return None


def guests_entry(res_a: dict, res_b: dict) -> dict | None:
    """A comparison entry's `guests`: {a, b} (guest_of) and, when both
    kernels' boot logs were read, the mitigation lines only one of them
    logged (only_a, only_b). None unless both arms ran in guests."""
    ga, gb = guest_of(res_a), guest_of(res_b)
    if ga is None or gb is None:
        return None
    out: dict[str, Any] = {"a": ga, "b": gb}
    la, lb = ga["boot_mitigations"], gb["boot_mitigations"]
    if la is not None and lb is not None:
        out["boot_mitigations_differ"] = {"only_a": [x for x in la if x not in lb],
                                          "only_b": [x for x in lb if x not in la]}
    return out


def describe(g: dict) -> str:
    """One guest in a line: `kernel 6.1.0-50-cloud-amd64 (/k/vmlinuz), cmdline "pti=on", machine pc,
    TCG (emulated), CPU max (AMD EPYC ...)`."""
    kernel = f"kernel {g.get('release') or '?'} ({g.get('kernel') or '?'})"
    cpu = g.get("cpu_model") or "QEMU's default"
    if g.get("cpu_brand"):
        cpu += f" ({g['cpu_brand']})"
    return (f"{kernel}, cmdline {g.get('cmdline') or ''!r}, machine {g.get('machine') or '?'}, "
            f"{ACCEL_NAMES.get(str(g.get('accel')), str(g.get('accel')))}, CPU {cpu}")


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
        for side in ("a", "b"):
            d = describe(g.get(side) or {})
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
    emu = emulated_line(emulated, len(entries))
    if emu:
        lines.append(emu)
    return lines


def emulated_line(emu: dict | None, n: int) -> str | None:
    """Whether the timings are an emulator's and what that did to the
    verdicts (the document's `emulated`, targets/vm/withhold.py, over its
    `n` entries), or None."""
    if not isinstance(emu, dict):
        return None
    which = emu.get("benchmarks") or []
    some = "" if len(which) == n else f" ({', '.join(map(str, which))})"
    if emu.get("allow_emulated"):
        return (f"emulated (QEMU TCG){some}: the timings are the emulator's, not this CPU's; verdicts are given "
                "only because --allow-emulated asked for them")
    return (f"emulated (QEMU TCG){some}: the timings are the emulator's, not this CPU's; no verdict on cost "
            "(--allow-emulated gives one)")
