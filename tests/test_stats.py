"""`proxy.stats`: what one request did, its usage summed and its cost."""

from __future__ import annotations

import pytest

from proxy.engine.manifest import Manifest
from proxy.stats import Pricing, RequestStats
from proxy.tokens.prices import ModelPrices, request_cost
from proxy.tokens.usage import TokenUsage

PRICES = ModelPrices(1e-6, 2e-6, 1e-7, None, "model_map")


def counted(before: int, after: int, ratio: float = 1.0, method: str = "tiktoken") -> Manifest:
    return Manifest(
        policy="p", model="m", mode="window", counting_method=method,
        tokens_before=before, tokens_after=after, count_ratio=ratio,
    )  # fmt: skip


def test_removed_tokens_are_in_the_upstreams_tokens() -> None:
    stats = RequestStats()
    assert stats.removed_tokens() == 0
    stats.manifest = counted(10_000, 4_000, ratio=1.2)
    assert stats.removed_tokens() == 7_200
    stats.manifest = counted(4_000, 4_300)
    assert stats.removed_tokens() == -300  # preparation added the read tools
    stats.manifest = counted(0, 0, method="")  # mode: off counts nothing
    assert stats.removed_tokens() == 0


def test_usage_cached_tokens_and_cost() -> None:
    stats = RequestStats()
    assert stats.usage is None and stats.cached_tokens is None and stats.cost() is None
    stats.answers = [TokenUsage(1_000, 5), TokenUsage(1_200, 7, 1_024)]
    assert stats.usage == TokenUsage(2_200, 12, 1_024)
    assert stats.cached_tokens == 1_024
    assert stats.cost() is None  # no pricing: the driver never set one
    stats.manifest = counted(3_000, 1_000)
    stats.pricing = Pricing("u", "m", PRICES)
    cost = stats.cost()
    assert cost == request_cost(stats.answers, PRICES, 2_000)
    assert cost is not None and cost.usd == pytest.approx(1_176 * 1e-6 + 1_024 * 1e-7 + 12 * 2e-6)


def test_the_cost_follows_the_answers_pricing_and_manifest_it_is_asked_after() -> None:
    stats = RequestStats(manifest=counted(3_000, 1_000), pricing=Pricing("u", "m", PRICES))
    stats.answers.append(TokenUsage(1_000, 5))
    first = stats.cost()
    assert first == request_cost(stats.answers, PRICES, 2_000) and stats.cost() == first
    stats.answers.append(TokenUsage(1_200, 7, 1_024))  # a read round answered
    assert stats.cost() == request_cost(stats.answers, PRICES, 2_000) != first
    stats.manifest = counted(3_000, 2_000)  # the retry's preparation
    assert stats.cost() == request_cost(stats.answers, PRICES, 1_000)
    dearer = ModelPrices(2e-6, 4e-6, 2e-7, None, "config")
    stats.pricing = Pricing("u", "m", dearer)
    assert stats.cost() == request_cost(stats.answers, dearer, 1_000)
