"""The first line of a vm run: whether its guests run under KVM and, if
not, why and what to do. Said from what the preflight boots used (each
machine's accelerator and why: choice.Choice.accel_for, whose answers are
remembered per kernel and host), so it costs no QEMU start of its own."""

from __future__ import annotations

from .choice import cache_dir


def accel_line(machines: dict, allow_emulated: bool) -> str | None:
    """`vm: KVM is used (...)` or `vm: KVM is not used: WHY[; what to do];
    the guests are emulated (TCG)...`, one clause per distinct answer of
    the machines booted (their preflight records); None before any boot."""
    said: list[str] = []
    emulated = False
    for rec in machines.values():
        accel, why = rec.get("accel"), str(rec.get("accel_why") or "")
        if accel == "kvm":
            text = f"KVM is used ({'--accel kvm' if why.startswith('asked') else why})"
        else:
            emulated = True
            if why.startswith("asked"):
                text = ("KVM is not used: --accel tcg asked for emulation "
                        "(--accel auto, the default, uses KVM where it works)")
            elif why.startswith("a trial boot"):
                old = why.endswith(" (remembered)")
                text = (f"KVM is not used: {why.removesuffix(' (remembered)')}; "
                        + ("remembered from an earlier run" if old else "remembered for the next runs")
                        + f" of this kernel on this host: delete {cache_dir() / 'vm-accel.json'} to try KVM again, "
                        "or give --accel kvm to insist")
            else:   # host.kvm_usable(): why not and what to do
                text = f"KVM is not used: {why}"
        if len(machines) > 1 and len({(r.get('accel'), r.get('accel_why')) for r in machines.values()}) > 1:
            text = f"{rec.get('kernel')}: {text}"
        if text not in said:
            said.append(text)
    if not said:
        return None
    tail = ""
    if emulated:
        tail = ("; the guests are emulated (TCG): the timings are QEMU's, not this CPU's"
                + (", and verdicts are given on them only because of --allow-emulated" if allow_emulated
                   else ", so no verdict on cost (--allow-emulated gives one)"))
    return "vm: " + "; ".join(said) + tail
