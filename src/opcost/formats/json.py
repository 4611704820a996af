"""`json`: the documents as they are (opcost.result/1, opcost.comparison/1,
opcost.series/1 and opcost.fleet/1; their format history is at the top of
model.py)."""

from __future__ import annotations

import json

NAME = "json"
KINDS = ("result", "comparison", "series", "fleet")


def serialize(doc: dict) -> bytes:
    return (json.dumps(doc, indent=1, allow_nan=False) + "\n").encode()
