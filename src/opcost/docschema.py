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
import re
from itertools import chain, compress, repeat
from pathlib import Path
from typing import IO, Any

import orjson

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


def _decoded(decoder: Any, chunk: bytes, lines: int) -> str:
    """The next chunk of a file as text (the last one when empty). `lines`:
    the line the chunk starts on, for the error. DocumentProblem: not UTF-8,
    or a NUL byte (no JSON text holds one)."""
    nul = chunk.find(b"\0")
    try:
        text = decoder.decode(chunk[:nul] if nul >= 0 else chunk, final=not chunk or nul >= 0)
    except UnicodeDecodeError as e:
        raise DocumentProblem("not UTF-8 text, so not opcost JSON; give files written by `opcost export` "
                              "or `run --json`", lines + chunk[:e.start].count(b"\n")) from None
    if nul >= 0:
        raise DocumentProblem("binary data (a NUL byte), not UTF-8 text of JSON, so not opcost JSON; give "
                              "files written by `opcost export` or `run --json`", lines + chunk[:nul].count(b"\n"))
    return text


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
        text = _decoded(decoder, chunk, lines)
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


# --- a large file, read as a stream -----------------------------------------------
#
# A file of more than STREAM_FROM bytes is never held whole: `Stream` reads it
# in chunks (read_text's rules: UTF-8, no NUL) and hands over its documents'
# run-level fields, then each process as it is read, then the rest; the
# processes go into the store one at a time. Each process is decoded by the
# json module's C scanner without per-number callbacks and checked at C speed
# (`plain_samples`); anything that check does not vouch for is decoded again
# and validated exactly as a whole document is (`loads`, `problem`), so a bad
# value gets the same words and a JSON path into the whole document.

STREAM_FROM = 64 * 2**20     # a larger file is streamed; a smaller one read whole (as before)
MAX_VALUE = 64 * 2**20       # a streamed file: the most text one process (or any value but a run's results) spans
_STREAM_CHUNK = 4 * 2**20
_PLAIN_NUMBERS = frozenset(("ns_per_op", "ns", "ticks", "raw_ticks", "wall_ns", "run_ns", "run_delay_ns",
                            "start_raw_ns", "user_ns", "sys_ns", "steal_ticks", "nvcsw", "nivcsw"))
_PLAIN_NULLABLE = frozenset(("tsc_per_op", "user_ns_per_op", "sys_ns_per_op"))
_PLAIN_COUNTS = frozenset(("iters", "ops_per_iter"))
_PLAIN_INT_OR_NULL = frozenset(("cpu_before", "cpu_after"))
_PLAIN_KEYS = _PLAIN_NUMBERS | _PLAIN_NULLABLE | _PLAIN_COUNTS | _PLAIN_INT_OR_NULL | {"type", "i", "warmup",
                                                                                       "executed"}
_PLAIN_OTHER = ("type", "i", "warmup", "executed")   # the probe's own fields the schema leaves free
_COUNT_MAX = 2**63 - 1


_BOUND = float(2**63)         # a plain number is below this: orjson reads a larger integer as a float


def plain_samples(samples: Any) -> bool:
    """True: every sample is an object of the probe's numeric fields only,
    each of the type the schema gives it, finite and of magnitude below
    2^63 (so valid, without text that could hold NUL or a surrogate, and
    with no integer that orjson would have read as a float). False says
    nothing: `problem` decides. Whole-column passes at C speed (map, zip,
    min, max, sum) rather than a Python loop per field: a run of 10^6
    samples has 2x10^7 values (issue 38). Samples that all have the same
    keys in the same order (the probe writes them so) are checked column by
    column; others value by value (`_plain_mixed`)."""
    if type(samples) is not list:
        return False
    if not samples:
        return True
    if set(map(type, samples)) != {dict}:
        return False
    keys, n = tuple(samples[0]), len(samples)
    m = len(keys)
    names = list(chain.from_iterable(samples))
    # One shape: position j of every sample's keys is keys[j] (a dict's keys
    # are distinct, so no sample can be shorter or longer and still match).
    if names != list(keys) * n:
        return _plain_mixed(samples)
    if not _PLAIN_KEYS.issuperset(keys) or "ns_per_op" not in keys:
        return False
    vals = list(chain.from_iterable(map(dict.values, samples)))
    return all(_plain_column(k, vals[j::m]) for j, k in enumerate(keys))


_COLUMN_TYPES = dict.fromkeys(_PLAIN_NUMBERS, frozenset((int, float))) | dict.fromkeys(
    _PLAIN_NULLABLE, frozenset((int, float, type(None)))) | dict.fromkeys(_PLAIN_COUNTS, frozenset((int,))) | dict.fromkeys(
    (*_PLAIN_INT_OR_NULL, "i"), frozenset((int, type(None)))) | {"executed": frozenset((int,))}


def _plain_column(key: str, col: list) -> bool:
    """One field of every sample: of its type (None only where the schema
    allows it), finite, below 2^63 in magnitude, a count not negative."""
    kinds = set(map(type, col))
    if key == "type":
        return kinds == {str} and col.count("sample") == len(col)
    if key == "warmup":
        return kinds == {bool}
    if not kinds <= _COLUMN_TYPES[key]:
        return False
    nums = col if type(None) not in kinds else [v for v in col if v is not None]
    if not nums:
        return True
    least = min(nums)
    return (least >= 0 if key in _PLAIN_COUNTS else -_BOUND < least) and max(nums) < _BOUND \
        and (float not in kinds or math.isfinite(sum(nums)))     # an int is finite; sum finds inf and nan


def _plain_mixed(samples: list) -> bool:
    """plain_samples of samples whose keys differ: value by value."""
    if not all(map(_PLAIN_KEYS.issuperset, samples)) or not all(map(dict.__contains__, samples, repeat("ns_per_op"))):
        return False
    n = len(samples)
    vals = list(chain.from_iterable(map(dict.values, samples)))
    types = list(map(type, vals))
    kinds = set(types)
    if not kinds <= {int, float, bool, str, type(None)}:
        return False

    def col(k: str) -> list:
        return list(map(dict.get, samples, repeat(k)))

    if str in kinds and col("type").count("sample") != types.count(str):     # text: only "type": "sample"
        return False
    if bool in kinds and list(map(type, col("warmup"))).count(bool) != types.count(bool):   # only "warmup"
        return False
    if type(None) in kinds:      # null only where the schema allows it (or the key is absent)
        for k in _PLAIN_NUMBERS | _PLAIN_COUNTS:
            if col(k).count(None) != n - sum(map(dict.__contains__, samples, repeat(k))):
                return False
    for k in _PLAIN_COUNTS | _PLAIN_INT_OR_NULL | {"i", "executed"}:
        ints = [v for v in col(k) if v is not None]
        if ints and (set(map(type, ints)) != {int} or min(ints) < 0 and k in _PLAIN_COUNTS
                     or max(ints) > _COUNT_MAX or min(ints) < -_COUNT_MAX):
            return False
    nums = vals if kinds <= {int, float} else list(compress(vals, map({int, float}.__contains__, types)))
    try:    # fsum: inf, nan (and an integer beyond a double) make it not finite; then the bounds
        return not nums or (math.isfinite(math.fsum(nums)) and -_BOUND < min(nums) and max(nums) < _BOUND)
    except OverflowError:
        return False


class SchemaProblem(DocumentProblem):
    """A value the schema does not allow ("JSON path: what")."""


class NeedsWhole(Exception):
    """This file cannot be streamed (its documents lack what storing as it is
    read needs first); read it whole if it is small enough."""


_FAST = json.JSONDecoder(parse_constant=_constant)       # processes: C speed; numbers checked after
_EXACT = json.JSONDecoder(parse_float=_float, parse_int=_int, parse_constant=_constant)
_SPACE = " \t\n\r"
_NEXT_PROCESS = re.compile(r'\}[ \t\n\r]*,[ \t\n\r]*\{[ \t\n\r]*"index"[ \t\n\r]*:')   # compact or indented
_OVERLAP = 256               # how far back a search for _NEXT_PROCESS starts again after more text is read


class Stream:
    """A file's JSON text read in chunks, decoded value by value. `line`:
    the line of buf[0]; errors are DocumentProblem with their line."""

    def __init__(self, f: IO[bytes]):
        self.f = f
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._last = 0           # the text length of the last process read: how far to look for the next's end
        self.base = 0            # how many characters before buf[0] were dropped: buf[i] is the text's [base + i]
        self.keep: int | None = None     # text from here on (absolute, as base) is kept when more is read
        self._line_from = 0      # where the line of buf[0] begins (absolute, as base): for a column
        self._error: DocumentProblem | None = None    # the file cannot be read on from here

    def _more(self) -> bool:
        if self.eof:
            return False
        if self._error is not None:     # read past once (a reader ahead of the parsing): the same words again
            raise self._error
        chunk = self.f.read(_STREAM_CHUNK)
        self.total += len(chunk)
        try:
            text = _decoded(self._decoder, chunk, self.line_at(len(self.buf)))
        except DocumentProblem as e:
            self._error = e
            raise
        cut = self.pos if self.keep is None else max(0, min(self.pos, self.keep - self.base))
        self.line += self.buf.count("\n", 0, cut)
        nl = self.buf.rfind("\n", 0, cut)
        if nl >= 0:
            self._line_from = self.base + nl + 1
        self.buf = self.buf[cut:] + text
        self.pos -= cut
        self.base += cut
        self.eof = not chunk
        return not self.eof

    def line_at(self, i: int) -> int:
        return self.line + self.buf.count("\n", 0, i)

    def peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < n or not self._more():
                return self.buf[self.pos:self.pos + 1]

    def take(self, ch: str) -> None:
        got = self.peek()
        if got != ch:
            self._bad(f"Expecting '{ch}' delimiter" if ch in ",:" else "Expecting value", self.pos)
        self.pos += 1

    def value(self, fast: bool = False) -> tuple[Any, str]:
        """The next value and its text; fast: numbers not checked here."""
        self.peek()
        while True:
            try:
                v, end = (_FAST if fast else _EXACT).raw_decode(self.buf, self.pos)
            except RecursionError:
                raise DocumentProblem(f"nested deeper than {MAX_DEPTH} levels; opcost's documents nest about "
                                      "10 deep", self.line_at(self.pos)) from None
            except json.JSONDecodeError as e:
                if len(self.buf) - self.pos > MAX_VALUE:
                    raise DocumentProblem(f"one value of more than {MAX_VALUE // 2**20} MiB (a process?); "
                                          "export it in smaller runs", self.line_at(self.pos)) from None
                before = self.pos
                if self._more():
                    continue
                self._bad(e.msg, e.pos - before + self.pos)    # _more may have moved the text to buf[0]
            text = self.buf[self.pos:end]
            self.pos = end
            return v, text

    def process(self) -> tuple[Any, str]:
        """The next value (a process: an object) and its text, numbers not
        checked here. Read by orjson (twice json's speed) when its end is
        found cheaply: at the `}` of the next `},{"index":` (a process's
        first key, as opcost writes them), if the slice up to there parses
        (a prefix of a JSON value that ends inside a string or an unclosed
        object never does, so a slice that parses is exactly this value).
        Otherwise (the last process of a list, anything orjson refuses, a
        value over MAX_VALUE) `value(fast=True)` reads it, with its words
        for errors."""
        text = self.split()
        if text is not None:
            try:
                return orjson.loads(text), text
            except orjson.JSONDecodeError:
                self.pos -= len(text)      # back to its start: read by json below
        return self.whole_process()

    def whole_process(self) -> tuple[Any, str]:
        """The next value (a process) read by json's scanner, numbers not
        checked here, with its words for errors; its length is how far the
        next process's end is looked for."""
        v, text = self.value(fast=True)
        self._last = len(text)
        return v, text

    def split(self) -> str | None:
        """The text of the next value (a process) when its end is found
        cheaply (process's rule), read past; else None, nothing read past.
        Whether it is one JSON value is for its parser to say (process, or
        a worker: transfer.ProcessParser)."""
        if self.peek() != "{":
            return None
        start, scanned = self.pos, self.pos + 1
        while True:
            found = _NEXT_PROCESS.search(self.buf, scanned)
            if found is not None:
                end = found.start() + 1
                if end - start > MAX_VALUE:
                    return None
                self.pos = end
                self._last = end - start
                return self.buf[start:end]
            if self.eof or len(self.buf) - start > 2 * self._last + _STREAM_CHUNK:
                return None
            scanned = max(len(self.buf) - _OVERLAP, start + 1) - start
            self._more()       # buf now starts at this value (or at what is kept)
            start = self.pos
            scanned += start

    def _bad(self, msg: str, at: int) -> None:
        rest = self.buf[at:].strip()
        if self.eof and (not rest or not self.buf.rstrip().endswith(("}", "]"))):    # as a whole reading says it
            raise DocumentProblem("truncated JSON (it ends in the middle of a document); export it again",
                                  self.line_at(at))
        nl = self.buf.rfind("\n", 0, at)       # the line's start may be in text dropped already
        col = at - nl if nl >= 0 else self.base + at - self._line_from + 1
        raise DocumentProblem(f"not JSON ({msg}: column {col}); give a file of `opcost export` (one document, "
                              "or one per line)", self.line_at(at))

    def members(self) -> Any:
        """An object's keys, one at a time (the caller reads each value)."""
        self.take("{")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            if self.peek() != '"':
                self._bad("Expecting property name enclosed in double quotes", self.pos)
            key, _ = self.value()
            self.take(":")
            yield key
            nxt = self.peek()
            self.pos += 1
            if nxt == "}":
                return
            if nxt != ",":
                self._bad("Expecting ',' delimiter", self.pos - 1)

    def items(self) -> Any:
        """An array's positions, one at a time (the caller reads each item)."""
        self.take("[")
        if self.peek() == "]":
            self.pos += 1
            return
        i = 0
        while True:
            yield i
            i += 1
            nxt = self.peek()
            self.pos += 1
            if nxt == "]":
                return
            if nxt != ",":
                self._bad("Expecting ',' delimiter", self.pos - 1)


def checked_process(proc: Any, text: str, where: str) -> tuple[Any, bool]:
    """A process read fast (json's scanner or orjson: Stream.process):
    raises DocumentProblem (path from `where`, e.g. $.results[0].processes[3])
    as the whole document's reading would. Returns the process to store and
    whether its samples are plain (rows may encode them in bulk): `proc`
    when the fast checks vouch for all of it, else `text` read again
    exactly (orjson reads an integer beyond 64 bits as a float: the exact
    reading keeps it whole)."""
    if isinstance(proc, dict) and plain_samples(proc.get("samples", [])) and plain_samples(proc.get("warmup", [])):
        rest = {k: v for k, v in proc.items() if k not in ("samples", "warmup")}
        if _walk(rest) is None and not _odd_number(rest) and _process_problem(rest) is None:
            return proc, True
    try:
        exact = loads(text)
    except DocumentProblem as e:
        said = str(e)
        raise DocumentProblem(where + said[1:] if said.startswith("$") else said) from None
    found = _process_problem(exact)
    if found is not None:
        raise SchemaProblem(where + found[1:])
    return exact, False


def _odd_number(v: Any) -> bool:
    """A number the fast readings may have read otherwise than the exact one:
    beyond a double or of too many digits (refused), a float of magnitude
    2^63 or more (orjson's reading of a larger integer)."""
    stack = [v]
    while stack:
        x = stack.pop()
        if type(x) is float and not abs(x) < _BOUND or type(x) is int and len(str(abs(x))) > MAX_DIGITS:
            return True
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return False


@functools.lru_cache(maxsize=None)
def _process_validator() -> Any:
    from jsonschema import Draft202012Validator    # only when a process needs the schema's words (not for --help)

    whole = _inlined(schema("opcost.result/1"), schema("opcost.result/1"))
    return Draft202012Validator(whole["properties"]["results"]["items"]["properties"]["processes"]["items"])


def _process_problem(proc: Any) -> str | None:
    from jsonschema.exceptions import best_match    # as _process_validator

    error = best_match(_process_validator().iter_errors(proc))
    if error is None:
        return None
    what = error.message
    if len(what) > 160:
        what = what[:120] + " ... " + what[-30:]
    return f"{error.json_path}: {what}"
