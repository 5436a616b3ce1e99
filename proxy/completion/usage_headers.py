"""What the answers of a request cost, as `x-ctxproxy-*` headers of a whole (JSON) answer.

A stream's headers go out before its usage comes: its figures are only in the access line and
the metrics (`RequestStats.answers`, filled by `usage_tap`), never in the bytes of the stream.
"""

from __future__ import annotations

from proxy.stats import RequestStats

CACHED_TOKENS_HEADER = "x-ctxproxy-cached-tokens"
CACHE_WRITE_TOKENS_HEADER = "x-ctxproxy-cache-write-tokens"
INPUT_TOKENS_HEADER = "x-ctxproxy-input-tokens"
OUTPUT_TOKENS_HEADER = "x-ctxproxy-output-tokens"
COST_HEADER = "x-ctxproxy-cost-usd"
UNCHANGED_COST_HEADER = "x-ctxproxy-cost-unchanged-usd"
UNKNOWN = "unknown"
"""The value of a cost header when the model's price is not known."""


def usd(value: float) -> str:
    """A price in dollars, fixed-point to a millionth of a cent, without trailing zeros."""
    text = f"{value:.8f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def usage_headers(stats: RequestStats) -> dict[str, str]:
    """The usage summed over the answers (the proxy's read rounds included) and its cost."""
    usage = stats.usage
    if usage is None:
        return {}
    headers = {INPUT_TOKENS_HEADER: str(usage.input), OUTPUT_TOKENS_HEADER: str(usage.output)}
    if usage.cache_read is not None:
        headers[CACHED_TOKENS_HEADER] = str(usage.cache_read)
    if usage.cache_write is not None:
        headers[CACHE_WRITE_TOKENS_HEADER] = str(usage.cache_write)
    cost = stats.cost()
    if cost is not None:
        headers[COST_HEADER] = UNKNOWN if cost.usd is None else usd(cost.usd)
        unchanged = cost.unchanged_usd
        headers[UNCHANGED_COST_HEADER] = UNKNOWN if unchanged is None else usd(unchanged)
    return headers
