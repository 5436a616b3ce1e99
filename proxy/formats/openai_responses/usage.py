"""The `usage` of Responses answers (`input_tokens` includes
`input_tokens_details.cached_tokens`), read into the neutral `TokenUsage`; a stream states it in
its `response.completed` event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.formats.common import KeyScanner, int_value, usage_keys
from proxy.tokens.usage import TokenUsage, reported


def answer_usage(payload: dict[str, Any]) -> Any:
    return payload.get("usage")


def prompt_tokens(usage: Any) -> int | None:
    """`usage.input_tokens`, when it is a non-negative integer."""
    value = int_value(usage.get("input_tokens")) if isinstance(usage, dict) else None
    return value if value is not None and value >= 0 else None


def cached_tokens(usage: Any) -> int | None:
    """`usage.input_tokens_details.cached_tokens`, when it is a non-negative integer."""
    details = usage.get("input_tokens_details") if isinstance(usage, dict) else None
    value = int_value(details.get("cached_tokens")) if isinstance(details, dict) else None
    return value if value is not None and value >= 0 else None


def token_usage(usage: Any) -> TokenUsage | None:
    """The usage in neutral terms (None without a plausible `input_tokens`)."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return _usage(usage.get("input_tokens"), usage.get("output_tokens"), cached)


def _usage(prompt: object, output: object, cached: object) -> TokenUsage | None:
    input_tokens = reported(prompt)
    if input_tokens is None:
        return None
    return TokenUsage(input_tokens, reported(output) or 0, reported(cached))


_STREAM_KEYS = usage_keys("input_tokens", "output_tokens", "cached_tokens")


def _scanned(values: Mapping[str, int]) -> TokenUsage | None:
    return _usage(
        values.get("input_tokens"), values.get("output_tokens"), values.get("cached_tokens")
    )


def usage_scanner() -> KeyScanner:
    return KeyScanner(_STREAM_KEYS, _scanned)


def with_usage(payload: dict[str, Any], usage: dict[str, Any]) -> None:
    payload["usage"] = usage
