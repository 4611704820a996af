"""No verdict on cost from timings a TCG guest gave, unless the user asks
for one (--allow-emulated): comparisons and series keep their figures and
say why the verdict or the change point is withheld."""

from __future__ import annotations

from ...model import Comparison, Series

WITHHELD = "emulated (QEMU TCG): the timings are the emulator's, so no verdict on cost; --allow-emulated gives one"


def tcg_emulated(flags) -> bool:
    """Summary flags that say the figures came from a guest emulated by QEMU's TCG."""
    return any(isinstance(f, dict) and f.get("flag") == "emulated" and "(TCG)" in str(f.get("detail", ""))
               for f in flags or [])


def withhold_emulated(doc: dict, allow: bool) -> dict:
    """No verdict on cost from a guest emulated by QEMU's TCG unless
    --allow-emulated (a verdict decided on the emulator's own counts,
    --verdict-on, stands: counts are not timings): each such comparison keeps its figures, its verdict
    becomes None with the reason under `withheld`, and the summary's counts
    leave it out (its geometric mean still covers every ratio)."""
    cmp = Comparison.from_json(doc)   # its entries are the document's: a change through them changes it
    emulated = [e.raw.get("key") or e.raw.get("bench") for e in cmp.comparisons if tcg_emulated(e.flags)]
    if emulated:   # said once in the header (guests.emulated_line), not only per row
        doc["emulated"] = {"benchmarks": emulated, "allow_emulated": bool(allow)}
    if allow:
        return doc
    changed = 0
    for e in cmp.comparisons:
        if (e.decided_on or {}).get("source") == "emulator":
            continue   # decided on the emulator's exact counts (--verdict-on), not on its timings
        if e.verdict is not None and tcg_emulated(e.flags):
            e.withheld = WITHHELD
            e.verdict = None
            changed += 1
    if emulated:   # how many: the header says --allow-emulated gives one only when one was (guests.emulated_line)
        doc["emulated"]["withheld"] = changed
    counts = cmp.summary.get("counts")   # the comparison's counts of each verdict
    if changed and isinstance(counts, dict):
        for k in counts:
            counts[k] = sum(1 for e in cmp.comparisons if e.verdict == k)
    return doc


def withhold_emulated_series(series: Series, allow: bool) -> Series:
    """A series, as withhold_emulated does a comparison: every label whose
    figures a TCG guest gave is `emulated: true` (always); unless
    --allow-emulated, a series with such a label gives no change point: they
    move, figures kept, to `withheld_change_points`, no label is marked, and
    `withheld` says why and what to do."""
    for lb in series.labels:
        lb.emulated = tcg_emulated(lb.flags)
    emulated = [lb for lb in series.labels if lb.emulated]
    series.context["allow_emulated"] = bool(allow)
    if allow or not emulated:
        return series
    series.withhold(f"{len(emulated)} of {len(series.labels)} labels emulated (QEMU TCG): the timings are the "
                    "emulator's, so no change point is given on cost; --allow-emulated gives them")
    return series
