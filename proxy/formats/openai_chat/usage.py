"""The `usage` of OpenAI chat completions, summed over the rounds of one answer."""

from __future__ import annotations

from typing import Any

from proxy.formats.common import int_value


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


def with_usage(payload: dict[str, Any], usage: dict[str, Any]) -> None:
    """Put `usage` (summed over the rounds) in the answer, in place."""
    payload["usage"] = usage
