"""The `usage` of OpenAI chat completions, summed over the rounds of one answer."""

from __future__ import annotations

import re
from typing import Any

from proxy.formats.openai_chat.fields import int_value


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


def answer_usage(payload: dict[str, Any]) -> Any:
    """The `usage` of a whole (non-streamed) answer, as it came."""
    return payload.get("usage")


def prompt_tokens(usage: Any) -> int | None:
    """`usage.prompt_tokens`, when it is a non-negative integer."""
    value = int_value(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
    return value if value is not None and value >= 0 else None


def cached_tokens(usage: Any) -> int | None:
    """`usage.prompt_tokens_details.cached_tokens`, when it is a non-negative integer."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    value = int_value(details.get("cached_tokens")) if isinstance(details, dict) else None
    return value if value is not None and value >= 0 else None


_CACHED = re.compile(rb'"cached_tokens"\s*:\s*(\d{1,12})(?![0-9])')


def stream_cached_tokens(data: bytes) -> int | None:
    """The last `"cached_tokens": N` in stream bytes (the usage chunk's prompt details)."""
    found = _CACHED.findall(data)
    return int(found[-1]) if found else None


def with_usage(payload: dict[str, Any], usage: dict[str, Any]) -> None:
    """Put `usage` (summed over the rounds) in the answer, in place."""
    payload["usage"] = usage


def _copy_usage(usage: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy_usage(v) if isinstance(v, dict) else v for k, v in usage.items()}
