"""The JSON Schemas of opcost's documents, shipped in the package
(`schemas/result-1.json`, `comparison-1.json`, `series-1.json`), and the
strict reading that `opcost import` gives a file before it trusts it.

Reading is bounded: at most MAX_BYTES of UTF-8 text (read in chunks, so an
endless device is refused at its bound, a binary one at its first chunk), at
most MAX_DEPTH levels of nesting, integers of at most MAX_DIGITS digits, no
NaN, Infinity or number too large for a double (1e400): opcost writes every
number finite, so such a document cannot have come from it, and once stored
it could not be exported again. A string with a lone surrogate ("\\ud800")
cannot be stored as UTF-8 and is refused too. The schema then says what each
field of a document holds; its first error is named by its JSON path
(`$.results[0].processes[0].samples[0].ns_per_op`).

`jsonschema` loads only when a document is validated, never for `opcost
--help`."""

from __future__ import annotations

import codecs
import functools
import json
import math
from pathlib import Path
from typing import IO, Any

SCHEMA_DIR = Path(__file__).with_name("schemas")
FILES = {"opcost.result/1": "result-1.json", "opcost.comparison/1": "comparison-1.json",
         "opcost.series/1": "series-1.json"}
MAX_BYTES = 256 * 2**20      # a file import reads; an export of 10 processes x 20 samples is ~100 KiB
MAX_DEPTH = 64               # opcost's own documents nest about 10 deep
MAX_DIGITS = 40              # an integer opcost writes fits 64 bits (19 digits)
_CHUNK = 2**20


class DocumentProblem(ValueError):
    """What is wrong with a file or a document, in words; `line` (1-based)
    where the reading knows it."""

    def __init__(self, what: str, line: int | None = None):
        super().__init__(what)
        self.line = line


class _Refused:
    """Stands for a value the parser refused (NaN, 1e400, a 5000-digit
    integer) until `_walk` names where it is."""

    def __init__(self, what: str):
        self.what = what


def read_text(f: IO[bytes], size: int | None = None) -> str:
    """The whole of f as text, if it is at most MAX_BYTES of UTF-8 without
    a NUL byte (no JSON text holds one). `size`: what fstat says of a
    regular file (refused before reading anything when too large)."""
    limit = f"{MAX_BYTES // 2**20} MiB"
    if size is not None and size > MAX_BYTES:
        raise DocumentProblem(f"{size / 2**20:.0f} MiB, more than import reads ({limit}); export fewer runs "
                              "per file (`opcost export RUN... -o FILE`)")
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []
    total = 0
    lines = 1
    while True:
        chunk = f.read(_CHUNK)
        total += len(chunk)
        if total > MAX_BYTES:
            raise DocumentProblem(f"more than import reads ({limit}; an endless device or pipe?); give files "
                                  "written by `opcost export` or `run --json`")
        nul = chunk.find(b"\0")
        try:
            text = decoder.decode(chunk[:nul] if nul >= 0 else chunk, final=not chunk or nul >= 0)
        except UnicodeDecodeError as e:
            raise DocumentProblem("not UTF-8 text, so not opcost JSON; give files written by `opcost export` "
                                  "or `run --json`", lines + chunk[:e.start].count(b"\n")) from None
        if nul >= 0:
            raise DocumentProblem("binary data (a NUL byte), not UTF-8 text of JSON, so not opcost JSON; give "
                                  "files written by `opcost export` or `run --json`",
                                  lines + chunk[:nul].count(b"\n"))
        if not chunk:
            return "".join(parts)
        lines += chunk.count(b"\n")
        parts.append(text)


def _float(s: str) -> Any:
    v = float(s)
    return v if math.isfinite(v) else _Refused(f"{s} is beyond a double; opcost writes every number finite")


def _int(s: str) -> Any:
    digits = len(s.lstrip("-"))
    return int(s) if digits <= MAX_DIGITS else _Refused(f"an integer of {digits} digits; opcost's fit 64 bits")


def _constant(s: str) -> Any:
    return _Refused(f"{s} is not a JSON number; opcost writes every number finite")


def loads(text: str) -> Any:
    """json.loads with the bounds above; json.JSONDecodeError as json gives it,
    DocumentProblem for what is beyond the bounds (nesting, refused numbers,
    lone surrogates: `_walk` finds them, with their JSON path)."""
    try:
        doc = json.loads(text, parse_float=_float, parse_int=_int, parse_constant=_constant)
    except RecursionError:
        raise DocumentProblem(f"nested deeper than {MAX_DEPTH} levels; opcost's documents nest about 10 "
                              "deep") from None
    where = _walk(doc)
    if where is not None:
        raise DocumentProblem(f"{where[0]}: {where[1]}")
    return doc


def path_text(parts: Any) -> str:
    """$.a.b[0]["odd key"]: a JSON path, as jsonschema writes them."""
    out = "$"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p.isidentifier():
            out += f".{p}"
        else:
            out += "[" + json.dumps(p) + "]"
    return out


def _surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _walk(doc: Any) -> tuple[str, str] | None:
    """The first refused value, lone surrogate or level beyond MAX_DEPTH, as
    (JSON path, what); None: none. Iterative, so any depth is walked."""
    stack: list[tuple[Any, tuple]] = [(doc, ())]
    while stack:
        v, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return path_text(path[:4]) + "...", f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(v, _Refused):
            return path_text(path), v.what
        if isinstance(v, str):
            if _surrogate(v):
                return path_text(path), "text with a lone surrogate (\\ud800-\\udfff), which UTF-8 cannot hold"
            if "\x00" in v:
                return path_text(path), "text with NUL (\\u0000), which a PostgreSQL store cannot hold"
        elif isinstance(v, dict):
            for k in v:
                if _surrogate(k):
                    return (path_text(path),
                            "a key with a lone surrogate (\\ud800-\\udfff), which UTF-8 cannot hold")
                if "\x00" in k:
                    return path_text(path), "a key with NUL (\\u0000), which a PostgreSQL store cannot hold"
            stack.extend((x, (*path, k)) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((x, (*path, i)) for i, x in reversed(list(enumerate(v))))
    return None


@functools.lru_cache(maxsize=None)
def schema(name: str) -> dict:
    """The JSON Schema of one document kind (its `schema` field's value)."""
    return json.loads((SCHEMA_DIR / FILES[name]).read_text(encoding="utf-8"))


def _inlined(node: Any, home: dict) -> Any:
    """node with every $ref replaced by what it names (#/$defs/NAME in its
    own schema `home`, or urn:opcost:schema:...#/$defs/NAME in another):
    the schemas are not recursive, and a validator that follows no $ref is
    twice as fast over the samples of a run."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if ref is not None and len(node) == 1:
            uri, _, pointer = ref.partition("#/$defs/")
            target = home if not uri else next(schema(n) for n in FILES if schema(n)["$id"] == uri)
            return _inlined(target["$defs"][pointer], target)
        return {k: _inlined(v, home) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inlined(v, home) for v in node]
    return node


@functools.lru_cache(maxsize=None)
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator   # jsonschema (~0.2 s): only when a document is validated

    return Draft202012Validator(_inlined(schema(name), schema(name)))


def problem(doc: Any, name: str) -> str | None:
    """The first thing `doc` does against the schema `name`, as "JSON path:
    what" (None: it validates)."""
    from jsonschema.exceptions import best_match   # jsonschema (~0.2 s): only when a document is validated

    error = best_match(_validator(name).iter_errors(doc))
    if error is None:
        return None
    what = error.message
    if len(what) > 160:
        what = what[:120] + " ... " + what[-30:]
    return f"{error.json_path}: {what}"
