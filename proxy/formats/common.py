"""What several formats share: lenient reads of wire values, summed usage, the refusal of broken
input. A format module imports these from here, never from another format."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from proxy.engine.conversation import Problem
from proxy.errors import ErrorCode, ProxyError


def int_value(value: object) -> int | None:
    """`value` when it is an integer (a JSON `true` is not one), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def str_field(obj: object, key: str) -> str | None:
    """`obj[key]` when `obj` is an object and the value a string, else None."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def add_usage(total: dict[str, Any] | None, more: Any) -> dict[str, Any] | None:
    """`total` + `more`: integers summed (nested details too); other values from the latest."""
    if not isinstance(more, dict):
        return total
    if total is None:
        return _copy_usage(more)
    out = dict(total)
    for key, value in more.items():
        mine = out.get(key)
        if int_value(value) is not None and (mine is None or int_value(mine) is not None):
            out[key] = (mine or 0) + value
        elif isinstance(value, dict) and (mine is None or isinstance(mine, dict)):
            out[key] = add_usage(mine, value)
        elif value is not None or key not in out:
            out[key] = value
    return out


def _copy_usage(usage: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy_usage(v) if isinstance(v, dict) else v for k, v in usage.items()}


_CACHED = re.compile(rb'"cached_tokens"\s*:\s*(\d{1,12})(?![0-9])')


def stream_cached_tokens(data: bytes) -> int | None:
    """The last `"cached_tokens": N` in stream bytes (OpenAI's usage details, chat or
    Responses)."""
    found = _CACHED.findall(data)
    return int(found[-1]) if found else None


def invalid_error(problems: Sequence[Problem], id_key: str = "tool_call_id") -> ProxyError:
    """The refusal of structurally broken input (`on_invalid: reject`): the first problem's
    reason and `param`, every problem in the details (`id_key`: the format's name for a call
    id)."""
    first = problems[0]
    listed = [{"index": p.index, id_key: p.tool_call_id, "reason": p.reason} for p in problems]
    return ProxyError(
        ErrorCode.invalid_messages, first.reason, param=first.param, details={"problems": listed}
    )
