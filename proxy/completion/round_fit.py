"""Every follow-up call of the synthetic loop fits the same allowance as the first one.

The grown conversation (the prepared request plus the executed rounds) is prepared again under the
tenant's policy: pages count like any tool result, and older results may be cleared or offloaded.
When even that does not fit (the newest round is part of the protected current turn), the newest
round's results are shortened, halving the text they carry until the call fits, down to none; when
nothing fits, the round is left out and the previous call goes again as the last one, without
the synthetic tools (it fitted with them, so it fits without).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from proxy.engine.manifest import Prepared
from proxy.errors import ErrorCode, ProxyError
from proxy.synthetic.base import ToolResult
from proxy.synthetic.fit import result_chars, shortened

Refit = Callable[[dict[str, Any], bytes, bool], Awaitable[Prepared]]
"""Prepares a follow-up call's body (tools included, none added) under the request's policy;
the flag says whether the policy's relaxing steps may act as a last resort."""

MIN_SHORTENED_CHARS = 64
"""Below this many characters a result carries no text at all rather than a useless sliver."""
MAX_CHARS_PER_TOKEN = 8
"""No text of interest packs more characters into one token: results carrying more than this many
characters per token of the allowance cannot fit, and are not counted to find out (counting a
megabyte of pages costs about a second)."""


@dataclass(frozen=True)
class FittedCall:
    body: bytes
    """What goes upstream."""
    parsed: dict[str, Any]
    """The same, as a dict."""
    results: list[ToolResult]
    """The newest round's results as sent (shortened or not)."""


def shortening_steps(results: list[ToolResult], allowance: int | None = None) -> list[int]:
    """Per-result character limits to try in turn: halves of the longest result, then none;
    limits under which the results would still carry more text than `allowance` tokens can hold
    are skipped."""
    sizes = [result_chars(r) for r in results]
    ceiling = None if allowance is None else allowance * MAX_CHARS_PER_TOKEN
    steps = []
    limit = max(sizes, default=0) // 2
    while limit >= MIN_SHORTENED_CHARS:
        if ceiling is None or sum(min(size, limit) for size in sizes) <= ceiling:
            steps.append(limit)
        limit //= 2
    return [*steps, 0]


async def fitted_call(
    refit: Refit,
    render: Callable[[list[ToolResult]], dict[str, Any]],
    encode: Callable[[dict[str, Any]], bytes],
    results: list[ToolResult],
    allowance: int | None = None,
) -> FittedCall | None:
    """The next call with the newest round's `results`, shortened as far as needed to fit;
    None when it does not fit even with results that carry no text. The policy's last resort
    (clearing recent results) acts only then: what the model just read is shortened first."""
    attempts = []
    if allowance is None or sum(map(result_chars, results)) <= allowance * MAX_CHARS_PER_TOKEN:
        attempts.append((results, False))
    for limit in shortening_steps(results, allowance):
        attempts.append(([shortened(r, limit) for r in results], limit == 0))
    for attempt, last_resort in attempts:
        body = render(attempt)
        try:
            prepared = await refit(body, encode(body), last_resort)
        except ProxyError as exc:
            if not _does_not_fit(exc):
                raise
            continue
        return FittedCall(prepared.body, prepared.parsed, attempt)
    return None


def _does_not_fit(exc: ProxyError) -> bool:
    return exc.code in (ErrorCode.context_length_exceeded, ErrorCode.artifact_store_unavailable)
