"""What the validation scripts print and write: an aligned text table, and
the --json document (the script's fields, the machine it ran on, then the
operations)."""

from __future__ import annotations

import json
import platform
from pathlib import Path


def text_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """The first column left-aligned, the others right-aligned, a dashed line under the head."""
    table = [head, *rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    lines = []
    for k, t in enumerate(table):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(t, widths))).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_document(path: str, fields: dict, operations: list[dict]) -> None:
    doc = {**fields,
           "machine": {"node": platform.node(), "kernel": platform.release(), "arch": platform.machine()},
           "operations": operations}
    Path(path).write_text(json.dumps(doc, indent=2) + "\n")
