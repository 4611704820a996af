"""Exporters: one module per format, each `serialize(doc) -> bytes`, in one table."""

from . import json_result

EXPORTERS = {"json": json_result.serialize}
