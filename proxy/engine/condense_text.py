"""Lossless condensing of machine-made text: the transforms and their exact inverses.

Each transform is a pure function of the text (the same input gives the same bytes) and each has
a decoder here (`expand`), so that what the model reads states every value of the original:

- `json`: a text that parses as JSON, minified. Refused (None) when parsing would lose something
  the minified form cannot say again: a duplicate key, a number that would not print back as
  written (`1E5`, `1.50`, `-0`), NaN or Infinity.
- `table`: a JSON array of objects, as a header line of keys and one line per object with its
  values as minified JSON separated by `|` (an empty cell: the object has no such key). Refused
  when an object's keys are not in the header's order (the decoder rebuilds each object in that
  order) or when the array is not all objects.
- `lines`: runs of 3+ consecutive lines that differ only in their numbers become one line
  `[xN] template`, where each number that changes is `{first..last}` (step 1), `{first..last
  /step}` or `{v1,v2,...}` and `{{`/`}}` stand for literal braces. Refused when a line of the
  text already starts with `[x`.

`expand(condense(text))` is the minified JSON of the text's value (`json`, `table`) or the text
itself (`lines`); the original bytes stay in the artifact store.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

Kind = Literal["json", "table", "lines"]
TRANSFORMS: tuple[Kind, ...] = ("json", "table", "lines")

HOW_TO_READ: dict[Kind, str] = {
    "json": "the JSON minified",
    "table": "a JSON array of objects as a table: the first line lists the keys (JSON-quoted "
    "when not plain), each next line is one object, its values as JSON in the header's order "
    "separated by |; an empty cell means the object has no such key",
    "lines": "runs of lines differing only in numbers as one `[xN] line`: {a..b} counts up by 1, "
    "{a..b/s} by s, {x,y,...} lists each line's value; {{ and }} are literal braces",
}

RUN_MARK = "[x"
_MIN_RUN = 3
_NUMBER = re.compile(r"\d+")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_CELL = json.JSONDecoder()
_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone one (from a JSON escape) has no UTF-8


@dataclass(frozen=True)
class Condensed:
    kind: Kind
    body: str


class _Lossy(ValueError):
    """Parsing the JSON would lose something its minified form cannot say again."""


def condense(text: str, transforms: Iterable[str] = TRANSFORMS) -> Condensed | None:
    """The shortest enabled transform of `text` that is shorter than it, or None."""
    enabled = set(transforms)
    candidates: list[Condensed] = []
    value = _parse_json(text) if enabled & {"json", "table"} else _NOT_JSON
    if value is not _NOT_JSON:
        if "table" in enabled and (table := _table(value)) is not None:
            candidates.append(Condensed("table", table))
        if "json" in enabled:
            candidates.append(Condensed("json", minify(value)))
    elif "lines" in enabled and (lines := _collapse_lines(text)) is not None:
        candidates.append(Condensed("lines", lines))
    shorter = [c for c in candidates if len(c.body) < len(text) and not _SURROGATE.search(c.body)]
    return min(shorter, key=lambda c: len(c.body)) if shorter else None


Condenser = Callable[[str, Iterable[str]], "Condensed | None"]
"""`condense`, or a `CondenseMemo` of it."""


class CondenseMemo:
    """`condense`, remembered: an agent re-sends the same results every turn, and condensing
    costs ~50 ms per MB each time. Bounded by the characters it keeps (texts are keyed by a
    digest, never kept); thread-safe (preparations run in worker threads)."""

    def __init__(self, max_chars: int = 32_000_000) -> None:
        self.max_chars = max_chars
        self._items: OrderedDict[tuple[bytes, tuple[str, ...]], Condensed | None] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __call__(self, text: str, transforms: Iterable[str] = TRANSFORMS) -> Condensed | None:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16)
        key = (digest.digest(), tuple(transforms))
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        out = condense(text, key[1])
        with self._lock:
            if key not in self._items:
                self._items[key] = out
                self._chars += _size(out)
            while self._chars > self.max_chars and self._items:
                self._chars -= _size(self._items.popitem(last=False)[1])
        return out


def _size(out: Condensed | None) -> int:
    return 64 + (len(out.body) if out is not None else 0)


def expand(condensed: Condensed) -> str:
    """The inverse: the minified JSON (`json`, `table`) or the exact text (`lines`)."""
    if condensed.kind == "json":
        return minify(json.loads(condensed.body))
    if condensed.kind == "table":
        return minify(_untable(condensed.body))
    return _expand_lines(condensed.body)


def minify(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# --- json -------------------------------------------------------------------------------------

_NOT_JSON: Any = object()


def _parse_json(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return _NOT_JSON  # only documents; a bare number or string gains nothing
    try:
        return json.loads(
            text,
            object_pairs_hook=_unique,
            parse_float=_exact_float,
            parse_int=_exact_int,
            parse_constant=_refuse,
        )
    except (ValueError, RecursionError):
        return _NOT_JSON


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Lossy("duplicate key")
    return out


def _exact_float(literal: str) -> float:
    value = float(literal)
    if repr(value) != literal:
        raise _Lossy(f"{literal} would print back as {value!r}")
    return value


def _exact_int(literal: str) -> int:
    value = int(literal)
    if str(value) != literal:
        raise _Lossy(f"{literal} would print back as {value}")
    return value


def _refuse(literal: str) -> Any:
    raise _Lossy(literal)


# --- table ------------------------------------------------------------------------------------


def _table(value: Any) -> str | None:
    if not isinstance(value, list) or len(value) < 2:
        return None
    if not all(isinstance(row, dict) and row for row in value):
        return None
    keys: dict[str, int] = {}
    for row in value:
        for key in row:
            keys.setdefault(key, len(keys))
    for row in value:
        positions = [keys[k] for k in row]
        if positions != sorted(positions):
            return None  # the decoder rebuilds keys in the header's order
    header = "|".join(k if _PLAIN_KEY.fullmatch(k) else minify(k) for k in keys)
    rows = ("|".join(minify(row[k]) if k in row else "" for k in keys) for row in value)
    return "\n".join([header, *rows])


def _untable(body: str) -> list[dict[str, Any]]:
    header, *rows = body.split("\n")
    keys = [k if _PLAIN_KEY.fullmatch(k) else json.loads(k) for k in _header_cells(header)]
    out = []
    for line in rows:
        cells = list(_cells(line, len(keys)))
        out.append({k: v for k, (present, v) in zip(keys, cells, strict=True) if present})
    return out


def _header_cells(header: str) -> Iterator[str]:
    pos = 0
    while pos <= len(header):
        if header.startswith('"', pos):
            _, end = _CELL.raw_decode(header, pos)
        else:
            end = header.find("|", pos)
            end = len(header) if end < 0 else end
        yield header[pos:end]
        pos = end + 1


def _cells(line: str, count: int) -> Iterator[tuple[bool, Any]]:
    pos = 0
    for i in range(count):
        if pos == len(line) or line[pos] == "|":
            yield False, None
            end = pos
        else:
            value, end = _CELL.raw_decode(line, pos)
            yield True, value
        if i < count - 1 and line[end : end + 1] != "|":
            raise ValueError(f"expected | at {end} in a table row")
        pos = end + 1


# --- lines ------------------------------------------------------------------------------------


def _collapse_lines(text: str) -> str | None:
    lines = text.split("\n")
    if any(line.startswith(RUN_MARK) for line in lines):
        return None
    out: list[str] = []
    changed = False
    i = 0
    while i < len(lines):
        shape = _shape(lines[i])
        j = i + 1
        while j < len(lines) and _shape(lines[j]) == shape:
            j += 1
        if j - i >= _MIN_RUN:
            out.append(_run_line(lines[i:j]))
            changed = True
        else:
            out.extend(lines[i:j])
        i = j
    return "\n".join(out) if changed else None


def _shape(line: str) -> str:
    return _NUMBER.sub("0", line)


def _run_line(run: list[str]) -> str:
    texts = _NUMBER.split(run[0])
    columns = list(zip(*(_NUMBER.findall(line) for line in run), strict=True))
    parts = [_escape(texts[0])]
    for column, text in zip(columns, texts[1:], strict=True):
        parts.append(_field(column))
        parts.append(_escape(text))
    return f"{RUN_MARK}{len(run)}] {''.join(parts)}"


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _field(values: tuple[str, ...]) -> str:
    if len(set(values)) == 1:
        return values[0]
    if all(v == str(int(v)) for v in values):
        numbers = [int(v) for v in values]
        step = numbers[1] - numbers[0]
        if step and all(b - a == step for a, b in pairwise(numbers)):
            return f"{{{values[0]}..{values[-1]}{'' if step == 1 else f'/{step}'}}}"
    return "{" + ",".join(values) + "}"


_RUN = re.compile(r"\[x(\d+)\] (.*)")
_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def _expand_lines(body: str) -> str:
    out: list[str] = []
    for line in body.split("\n"):
        match = _RUN.fullmatch(line) if line.startswith(RUN_MARK) else None
        out.extend(_unrun(int(match[1]), match[2]) if match else [line])
    return "\n".join(out)


def _unrun(count: int, template: str) -> list[str]:
    pieces: list[str | list[str]] = []
    pos = 0
    for match in _FIELD.finditer(template):
        pieces.append(template[pos : match.start()])
        token = match[0]
        pieces.append(token[0] if match[1] is None else _values(match[1], count))
        pos = match.end()
    pieces.append(template[pos:])
    return ["".join(p if isinstance(p, str) else p[i] for p in pieces) for i in range(count)]


def _values(spec: str, count: int) -> list[str]:
    if ".." in spec:
        first, rest = spec.split("..")
        last, _, step = rest.partition("/")
        values = [str(int(first) + i * int(step or 1)) for i in range(count)]
        if values[-1] != last:
            raise ValueError(f"the range {{{spec}}} does not have {count} values")
        return values
    values = spec.split(",")
    if len(values) != count:
        raise ValueError(f"{{{spec}}} does not have {count} values")
    return values
