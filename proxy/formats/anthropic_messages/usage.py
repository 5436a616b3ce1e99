"""The `usage` of Anthropic answers, summed over the rounds of one answer.

`input_tokens` is only the uncached part of the prompt: the whole prompt is that plus
`cache_read_input_tokens` and `cache_creation_input_tokens`."""

from __future__ import annotations

import re
from typing import Any

from proxy.formats.common import add_usage, int_value

__all__ = [
    "add_usage",
    "answer_usage",
    "cached_tokens",
    "prompt_tokens",
    "stream_cached_tokens",
    "with_usage",
]

_PROMPT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def answer_usage(payload: dict[str, Any]) -> Any:
    return payload.get("usage")


def prompt_tokens(usage: Any) -> int | None:
    """The whole prompt: input plus cache-read and cache-creation tokens (None when the usage
    reports no input tokens)."""
    if not isinstance(usage, dict) or int_value(usage.get("input_tokens")) is None:
        return None
    total = sum(int_value(usage.get(key)) or 0 for key in _PROMPT_KEYS)
    return total if total >= 0 else None


def cached_tokens(usage: Any) -> int | None:
    """`cache_read_input_tokens`, when reported."""
    value = int_value(usage.get("cache_read_input_tokens")) if isinstance(usage, dict) else None
    return value if value is not None and value >= 0 else None


_CACHE_READ = re.compile(rb'"cache_read_input_tokens"\s*:\s*(\d{1,12})(?![0-9])')


def stream_cached_tokens(data: bytes) -> int | None:
    """The last `"cache_read_input_tokens": N` in stream bytes (`message_start`'s usage, and
    `message_delta`'s when it repeats it)."""
    found = _CACHE_READ.findall(data)
    return int(found[-1]) if found else None


def with_usage(payload: dict[str, Any], usage: dict[str, Any]) -> None:
    payload["usage"] = usage
