"""The `usage` of Anthropic answers, summed over the rounds of one answer.

`input_tokens` is only the uncached part of the prompt: the whole prompt is that plus
`cache_read_input_tokens` and `cache_creation_input_tokens`. A stream states the usage in its
`message_start` (input, cache reads and writes) and its `message_delta` (the output, and in
newer versions the input figures again)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.formats.common import KeyScanner, add_usage, int_value, usage_keys
from proxy.tokens.usage import TokenUsage, reported

__all__ = [
    "add_usage",
    "answer_usage",
    "cached_tokens",
    "prompt_tokens",
    "token_usage",
    "usage_scanner",
    "with_usage",
]

_READ = "cache_read_input_tokens"
_WRITE = "cache_creation_input_tokens"
_PROMPT_KEYS = ("input_tokens", _READ, _WRITE)


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
    value = int_value(usage.get(_READ)) if isinstance(usage, dict) else None
    return value if value is not None and value >= 0 else None


def token_usage(usage: Any) -> TokenUsage | None:
    """The usage in neutral terms (None without a plausible `input_tokens`)."""
    return _usage(usage) if isinstance(usage, dict) else None


def _usage(values: Mapping[str, Any]) -> TokenUsage | None:
    uncached = reported(values.get("input_tokens"))
    if uncached is None:
        return None
    read, write = reported(values.get(_READ)), reported(values.get(_WRITE))
    whole = uncached + (read or 0) + (write or 0)
    return TokenUsage(whole, reported(values.get("output_tokens")) or 0, read, write)


_STREAM_KEYS = usage_keys("input_tokens", "output_tokens", _READ, _WRITE)


def usage_scanner() -> KeyScanner:
    return KeyScanner(_STREAM_KEYS, _usage)


def with_usage(payload: dict[str, Any], usage: dict[str, Any]) -> None:
    payload["usage"] = usage
