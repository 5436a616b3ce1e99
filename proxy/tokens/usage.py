"""What an upstream answer says it billed, in neutral terms: `TokenUsage`.

Each client format reads its own `usage` object (and its stream's bytes) into this shape
(`formats.base.AnswerFormat.token_usage`, `usage_scanner`); completion, the stats, the access
line, the metrics and the prices see only this. `input` is the whole prompt as the provider
counts it: the uncached part, plus what it read from its cache, plus what it wrote to it
(OpenAI's `prompt_tokens` already includes its cached tokens; Anthropic's `input_tokens` is the
uncached part only, the format adds the cache reads and writes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_REPORTED_TOKENS = 10**15
"""An upstream's token count beyond this is implausible and ignored (a metric is a float)."""


def reported(value: object) -> int | None:
    """`value` when it is a plausible token count (an integer, not a boolean, 0..10^15)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_REPORTED_TOKENS:
        return value
    return None


def _add(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """One answer's usage (or several answers' summed)."""

    input: int
    """The whole prompt: uncached, cache-read and cache-written tokens together."""
    output: int = 0
    cache_read: int | None = None
    """Prompt tokens the provider read from its prompt cache (None: it did not say)."""
    cache_write: int | None = None
    """Prompt tokens the provider wrote to its prompt cache (Anthropic's cache creation)."""

    @property
    def uncached(self) -> int:
        """The prompt tokens billed at the full input price."""
        return max(0, self.input - (self.cache_read or 0) - (self.cache_write or 0))

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input + other.input,
            self.output + other.output,
            _add(self.cache_read, other.cache_read),
            _add(self.cache_write, other.cache_write),
        )


def total_usage(answers: Iterable[TokenUsage]) -> TokenUsage | None:
    """The answers' usages summed (None when there is none)."""
    total: TokenUsage | None = None
    for usage in answers:
        total = usage if total is None else total + usage
    return total
