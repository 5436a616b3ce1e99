"""Strict JSON in and out: orjson for speed, the stdlib as a lossless fallback for what orjson
refuses.

Parsing is strict JSON (RFC 8259): UTF-8 only, no `NaN`/`Infinity`, no number that overflows a
double, no nesting deeper than `MAX_DEPTH` (a 400: code that walks a body may recurse). The stdlib
parser takes over where orjson would refuse valid input (lone surrogate escapes such as `"\\ud800"`)
or silently lose it (orjson turns integers beyond 64 bits into floats). Serialising never fails on
anything `loads` returned: lone surrogates are written back as `\\udXXX` escapes and nesting deeper
than the stdlib's recursion limit is written iteratively.
"""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

import orjson

from proxy.errors import ErrorCode, ProxyError

_INT64_FLOAT = 9.2e18
"""orjson parses integers beyond 64 bits as floats at least this large: re-parse losslessly."""


MAX_DEPTH = 128
"""The deepest nesting of arrays and objects accepted (a tool schema nests a few dozen levels at
most): deeper JSON is refused with a 400 rather than walked by code that recurses."""


def loads(raw: bytes | str) -> Any:
    """Parse JSON; integers beyond 64 bits and lone surrogate escapes go through the stdlib.
    Nesting deeper than `MAX_DEPTH` is refused (`invalid_json`)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        value = _stdlib_loads(raw, str(exc))
        scanned(value)
        return value
    return _stdlib_loads(raw, None) if scanned(value) else value


def scanned(value: Any) -> bool:
    """Whether `value` holds a float orjson made of a huge integer; raises `invalid_json` when it
    nests deeper than `MAX_DEPTH`. One pass, a level at a time (no recursion)."""
    level, depth, huge = [value], 0, False
    while level:
        depth += 1
        if depth > MAX_DEPTH + 1:  # containers nested MAX_DEPTH deep put scalars one level more
            raise ProxyError(
                ErrorCode.invalid_json, f"JSON is nested too deeply (more than {MAX_DEPTH} levels)"
            )
        below: list[Any] = []
        extend = below.extend  # this walk runs on every request: keep it lean
        for item in level:
            kind = type(item)
            if kind is dict:
                extend(item.values())
            elif kind is list:
                extend(item)
            elif kind is float and not -_INT64_FLOAT < item < _INT64_FLOAT:
                huge = True
        level = below
    return huge


def _stdlib_loads(raw: bytes | str, orjson_error: str | None) -> Any:
    try:
        text = raw if isinstance(raw, str) else raw.decode("utf-8")  # no UTF-16/32 guessing
        return json.loads(text, parse_constant=_not_json, parse_float=_finite_float)
    except RecursionError as exc:
        raise ProxyError(ErrorCode.invalid_json, "Request body is nested too deeply") from exc
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many integer digits
        reason = orjson_error or str(exc)
        raise ProxyError(
            ErrorCode.invalid_json, f"Request body is not valid JSON: {reason}"
        ) from exc


def _not_json(literal: str) -> NoReturn:
    raise ValueError(f"{literal} is not a JSON value")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(f"number {literal[:40]} is out of range")
    return number


def dumps(value: Any) -> bytes:
    """Serialise, keeping key order; the stdlib writes what orjson refuses (integers beyond
    64 bits, lone surrogates, nesting deeper than 255)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    text = _stdlib_dumps(value, ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # lone surrogates: written as the escapes the client sent
        return _stdlib_dumps(value, ensure_ascii=True).encode()


def _stdlib_dumps(value: Any, *, ensure_ascii: bool) -> str:
    try:
        return json.dumps(value, ensure_ascii=ensure_ascii, separators=(",", ":"))
    except RecursionError:
        return _dumps_iteratively(value, ensure_ascii=ensure_ascii)


class _Text(str):
    """Punctuation already written as JSON, on `_dumps_iteratively`'s work stack."""


def _dumps_iteratively(value: Any, *, ensure_ascii: bool) -> str:
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Text:
            out.append(item)
        elif isinstance(item, dict):
            seq: list[Any] = [_Text("{")]
            for n, (key, child) in enumerate(item.items()):
                name = json.dumps(str(key), ensure_ascii=ensure_ascii)
                seq += [_Text(f"{',' if n else ''}{name}:"), child]
            stack.extend(reversed([*seq, _Text("}")]))
        elif isinstance(item, list | tuple):
            seq = [_Text("[")]
            for n, child in enumerate(item):
                seq += [_Text(","), child] if n else [child]
            stack.extend(reversed([*seq, _Text("]")]))
        else:
            out.append(json.dumps(item, ensure_ascii=ensure_ascii))
    return "".join(out)

