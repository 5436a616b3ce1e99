"""What an answer cost, and what the same request would have cost unchanged.

Prices per token come from config (`prices:`, `settings.PriceSettings`, first match) or else from
litellm's bundled price map (`input_cost_per_token`, `output_cost_per_token`,
`cache_read_input_token_cost`, `cache_creation_input_token_cost` of the model's entry, found by
`ModelCatalog.find` like its window: the file, never litellm's import). A model neither knows has
no price: its cost is None, never a guess. Nor does an answer that read from (or wrote to) the
provider's cache when the map gives no price for that.

`request_cost` prices every answer of a request (the proxy's read rounds included) as reported,
and estimates the request unchanged: the client's request sent once as it came, i.e. the first
answer's prompt plus the tokens preparation removed (`tokens_before - tokens_after`, scaled by the
count ratio into the upstream's tokens; negative when preparation added some), the same cache
writes, and the last answer's output. The removed tokens are the conversation's old part, which
the provider would have read from its cache had it read any of the prepared prompt (a warm
cache), else billed in full. How much more of the unchanged prompt the provider would have
served from its cache (what a cut made it miss) is unknown: the estimate assumes no more, so
it overstates the unchanged price when preparation broke a cached prefix. A request that came
without cache breakpoints and got the proxy's (`cache_marks: auto`) would have had nothing
cached: unchanged, all of it is billed in full.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from proxy.settings import PriceSettings
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.usage import TokenUsage, total_usage

PER_MTOK = 1e-6
MEMO_ENTRIES = 1024

PriceSource = Literal["config", "model_map"]


@dataclass(frozen=True, slots=True)
class ModelPrices:
    """USD per token; a cache price None: not known (a cache read priced so has no cost)."""

    input: float
    output: float
    cache_read: float | None
    cache_write: float | None
    source: PriceSource

    def as_dict(self) -> dict[str, Any]:
        """Per million tokens, as config states them (the dry run's manifest)."""
        def per_mtok(value: float | None) -> float | None:
            return None if value is None else round(value / PER_MTOK, 6)

        return {
            "input_per_mtok": per_mtok(self.input),
            "output_per_mtok": per_mtok(self.output),
            "cache_read_per_mtok": per_mtok(self.cache_read),
            "cache_write_per_mtok": per_mtok(self.cache_write),
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class Cost:
    """A request's price as sent and unchanged (USD; None: a price is unknown)."""

    usd: float | None
    unchanged_usd: float | None
    unchanged_input: int
    """The estimated prompt tokens of the request unchanged (one call)."""


def price_of(usage: TokenUsage, prices: ModelPrices | None) -> float | None:
    """The usage at these prices; None when a price it needs is unknown."""
    if prices is None:
        return None
    read, write = usage.cache_read or 0, usage.cache_write or 0
    if (read and prices.cache_read is None) or (write and prices.cache_write is None):
        return None
    return (
        usage.uncached * prices.input
        + read * (prices.cache_read or 0.0)
        + write * (prices.cache_write or 0.0)
        + usage.output * prices.output
    )


def unchanged_usage(
    answers: Sequence[TokenUsage], removed: int, uncacheable: bool = False
) -> TokenUsage:
    """The request sent once as it came: the first answer's prompt with the `removed` tokens
    back, the same cache writes, the last answer's output. The removed tokens are old history:
    read from the cache when the first answer read from it (the conversation's cache is warm),
    else uncached. `uncacheable`: as it came, the request would have had nothing cached (it
    carried no cache breakpoint, the proxy placed them): all of it uncached."""
    first = answers[0]
    if uncacheable:
        read = None if first.cache_read is None else 0
        write = None if first.cache_write is None else 0
        return TokenUsage(max(0, first.input + removed), answers[-1].output, read, write)
    read, write, uncached = first.cache_read, first.cache_write, first.uncached
    if read:
        read = max(0, read + removed)
    else:
        uncached = max(0, uncached + removed)
    whole = uncached + (read or 0) + (write or 0)
    return TokenUsage(whole, answers[-1].output, read, write)


def request_cost(
    answers: Sequence[TokenUsage],
    prices: ModelPrices | None,
    removed: int,
    uncacheable: bool = False,
) -> Cost | None:
    """The cost of a request's answers (None without any), and of the request unchanged;
    `removed`: the upstream tokens preparation took out of the prompt; `uncacheable`: the
    request as it came would have had nothing cached (`unchanged_usage`)."""
    total = total_usage(answers)
    if total is None:
        return None
    unchanged = unchanged_usage(answers, removed, uncacheable)
    return Cost(price_of(total, prices), price_of(unchanged, prices), unchanged.input)


def estimate(
    prices: ModelPrices | None,
    tokens_before: int,
    tokens_after: int,
    count_ratio: float,
    marks: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A prepared prompt's price before any answer (the dry run's manifest): its tokens and the
    client's unchanged, in the upstream's tokens (counts times the count ratio), as the first
    request of a cold cache: what its cache breakpoints make the provider write (`marks`: the
    manifest's `cache_marks`, `written_tokens` and `written_tokens_unchanged`) at the
    cache-write price, the rest at the input price; the output and cache reads are not known."""
    prepared, unchanged = round(tokens_after * count_ratio), round(tokens_before * count_ratio)
    marks = marks or {}
    written = min(prepared, round(int(marks.get("written_tokens", 0)) * count_ratio))
    written_before = round(int(marks.get("written_tokens_unchanged", 0)) * count_ratio)
    written_before = min(unchanged, written_before)
    return {
        "input_tokens": prepared,
        "input_tokens_unchanged": unchanged,
        "cache_write_tokens": written,
        "cache_write_tokens_unchanged": written_before,
        "input_usd": _cold_price(prices, prepared, written),
        "input_usd_unchanged": _cold_price(prices, unchanged, written_before),
        "prices": None if prices is None else prices.as_dict(),
        "basis": "input tokens as the first request of a cold cache: what its cache breakpoints "
        "write at the cache-write price, the rest at the input price; output and cache reads "
        "not included",
    }


def _cold_price(prices: ModelPrices | None, tokens: int, written: int) -> float | None:
    if prices is None or (written and prices.cache_write is None):
        return None
    return (tokens - written) * prices.input + written * (prices.cache_write or 0.0)


def _map_prices(entry: Any) -> ModelPrices | None:
    """A map entry's prices, when it has an input and an output price."""
    if not isinstance(entry, dict):
        return None
    found = [_price(entry.get(key)) for key in _MAP_KEYS]
    if found[0] is None or found[1] is None:
        return None
    return ModelPrices(found[0], found[1], found[2], found[3], "model_map")


_MAP_KEYS = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost",
)


def _price(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1:
        return float(value)
    return None


def _configured(setting: PriceSettings) -> ModelPrices:
    def per_token(value: float | None) -> float:
        return (setting.input_per_mtok if value is None else value) * PER_MTOK

    return ModelPrices(
        setting.input_per_mtok * PER_MTOK,
        setting.output_per_mtok * PER_MTOK,
        per_token(setting.cache_read_per_mtok),
        per_token(setting.cache_write_per_mtok),
        "config",
    )


class PriceTable:
    """Prices by upstream and model: config overrides, then the model map (read on first use,
    with the windows); the most recent answers remembered, bounded."""

    def __init__(self, overrides: Sequence[PriceSettings], catalog: ModelCatalog) -> None:
        self._overrides = tuple(overrides)
        self._catalog = catalog
        self._found: dict[tuple[str, str], ModelPrices | None] = {}
        self._lock = threading.Lock()

    def lookup(self, upstream: str, model: str) -> ModelPrices | None:
        key = (upstream, model)
        try:
            return self._found[key]
        except KeyError:
            pass
        prices = self._search(upstream, model)
        with self._lock:
            if len(self._found) >= MEMO_ENTRIES:
                self._found.clear()
            self._found[key] = prices
        return prices

    def _search(self, upstream: str, model: str) -> ModelPrices | None:
        lowered = model.lower()
        for setting in self._overrides:
            wanted = setting.upstream is None or setting.upstream == upstream
            if wanted and fnmatchcase(lowered, setting.model.lower()):
                return _configured(setting)
        if not model:
            return None
        return self._catalog.find(model, _map_prices)
