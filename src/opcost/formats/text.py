"""`text`: what the terminal shows (opcost.tables's tables), as plain text
for an email or a mailing-list post: no colour, every column at full width.
A run (result document) as `opcost show` prints it, its first line saying
which run; a comparison as `opcost compare` prints it; a `fleet ab` as it
printed it."""

from __future__ import annotations

from ..model import FLEET_SCHEMA, SERIES_SCHEMA
from ..safetext import printable
from ..tables import format_comparison, format_fleet, format_results, format_series, format_variants

NAME = "text"
KINDS = ("result", "comparison", "fleet")
MANY = b"\n"   # several documents: one after the other, a blank line between
TABLE_ONLY = True   # a plain run: its results table, from the summaries and headers (no sample read)


def run_line(doc: dict) -> str:
    if doc.get("run_id") is None:
        return "run (not stored)" + (f" ({printable(doc['label'])})" if doc.get("label") else "")
    return (f"run {doc['run_id']}" + (f" ({printable(doc['label'])})" if doc.get("label") else "")
            + f", {doc.get('created', '')}, {doc.get('status', '')}"
            + (f", {doc['kind']}" if doc.get("kind") not in (None, "run") else ""))


def serialize(doc: dict) -> bytes:
    # The renderers are opcost.tables's, as the terminal's.
    if doc.get("schema") == FLEET_SCHEMA:
        text = format_fleet(doc, color=False)
    elif "comparisons" in doc:
        text = format_comparison(doc, color=False)
    else:
        text = run_line(doc) + "\n" + format_results(doc["results"])
    return (text + "\n").encode()


def serialize_stored(doc: dict, cdoc: dict) -> bytes:
    """A stored `ab`, `variants` or `series --run` run (`doc`) as the command
    printed it: the line saying which run, then its comparison or series
    `cdoc` (rebuilt from the plan)."""
    if cdoc.get("schema") == SERIES_SCHEMA:
        text = format_series(cdoc, color=False)
    elif cdoc.get("kind") == "variants":
        res = doc["results"]
        text = format_variants(cdoc, [r for r in res if not r["params"].get("reference")]
                               + [r for r in res if r["params"].get("reference")])
    else:
        text = format_comparison(cdoc, color=False)
    return (run_line(doc) + "\n" + text + "\n").encode()
