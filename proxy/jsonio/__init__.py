"""JSON in and out: strict and lossless (`strict`), and for large bodies in slices (`slices`).

`loads`, `loads_object`, `dumps` and `MAX_DEPTH` are `strict`'s. `loads_object(raw,
sliced=True)` parses a large body with no orjson call given more than `slices.SLICE_BYTES`, and
inside `long_strings()` (a large preparation, a large dry run's answer) `dumps` and
`dumps_sorted` write strings of `slices.LONG_CHARS` or more slice by slice: the same values and
bytes either way, only the GIL is held for less time at once (`slices` says why that matters).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import orjson

from proxy.errors import ErrorCode, ProxyError
from proxy.jsonio import slices, strict
from proxy.jsonio.strict import MAX_DEPTH, loads

__all__ = ["MAX_DEPTH", "dumps", "dumps_sorted", "loads", "loads_object", "long_strings"]

_LONG_STRINGS: ContextVar[bool] = ContextVar("ctxproxy_long_strings", default=False)
_long_strings = _LONG_STRINGS.get


@contextmanager
def long_strings() -> Iterator[None]:
    """Values written in this context may hold long strings: `dumps` and `dumps_sorted` look
    for them (a walk of the value) and write them in slices."""
    token = _LONG_STRINGS.set(True)
    try:
        yield
    finally:
        _LONG_STRINGS.reset(token)


def dumps(value: Any) -> bytes:
    """Serialise, keeping key order (`strict.dumps`)."""
    if _long_strings():
        try:
            return slices.dumps_sliced(value)
        except (TypeError, RecursionError):
            return strict.dumps(value)  # what orjson refuses: strict's lossless fallbacks
    try:
        return orjson.dumps(value)  # strict.dumps' first try, without a call more per write
    except TypeError:
        return strict.dumps(value)


def dumps_sorted(value: Any) -> bytes:
    """orjson's serialisation with sorted keys; raises `TypeError` for what orjson refuses."""
    if _long_strings():
        try:
            return slices.dumps_sliced(value, orjson.OPT_SORT_KEYS)
        except RecursionError:
            pass
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def loads_object(raw: bytes, *, sliced: bool = False) -> dict[str, Any]:
    """Parse a request body that must be a JSON object (`sliced`: `slices.loads_sliced`, for a
    large body)."""
    value = slices.loads_sliced(raw) if sliced else loads(raw)
    if not isinstance(value, dict):
        raise ProxyError(ErrorCode.invalid_request, "Request body must be a JSON object")
    return value
