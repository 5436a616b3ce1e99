"""The `usage` of OpenAI chat completions, summed over the rounds of one answer, and read into
the neutral `TokenUsage` (`prompt_tokens` includes `prompt_tokens_details.cached_tokens`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.formats.common import KeyScanner, int_value, usage_keys
from proxy.tokens.usage import TokenUsage, reported


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


def token_usage(usage: Any) -> TokenUsage | None:
    """The usage in neutral terms (None without a plausible `prompt_tokens`)."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return _usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), cached)


def _usage(prompt: object, completion: object, cached: object) -> TokenUsage | None:
    prompt_tokens = reported(prompt)
    if prompt_tokens is None:
        return None
    return TokenUsage(prompt_tokens, reported(completion) or 0, reported(cached))


_STREAM_KEYS = usage_keys("prompt_tokens", "completion_tokens", "cached_tokens")


def _scanned(values: Mapping[str, int]) -> TokenUsage | None:
    return _usage(
        values.get("prompt_tokens"), values.get("completion_tokens"), values.get("cached_tokens")
    )


def usage_scanner() -> KeyScanner:
    """A stream's usage chunk (`stream_options.include_usage`), scanned as it passes."""
    return KeyScanner(_STREAM_KEYS, _scanned)


def with_usage(payload: dict[str, Any], usage: dict[str, Any]) -> None:
    """Put `usage` (summed over the rounds) in the answer, in place."""
    payload["usage"] = usage
