"""`completion.usage_headers`: a whole answer's usage and cost as `x-ctxproxy-*` headers."""

from __future__ import annotations

from proxy.completion.usage_headers import usage_headers, usd
from proxy.engine.manifest import Manifest
from proxy.stats import Pricing, RequestStats
from proxy.tokens.prices import ModelPrices
from proxy.tokens.usage import TokenUsage

PRICES = ModelPrices(2.5e-6, 1e-5, 1.25e-6, None, "model_map")


def test_dollars_are_fixed_point() -> None:
    assert usd(0.0) == "0.0" and usd(1.5) == "1.5" and usd(0.000421) == "0.000421"
    assert usd(1e-9) == "0.0" and usd(12.345678912) == "12.34567891"


def test_usage_and_cost() -> None:
    stats = RequestStats()
    assert usage_headers(stats) == {}
    stats.answers.append(TokenUsage(2_000, 10, 1_024))
    assert usage_headers(stats) == {  # not priced (no pricing in the stats): no cost headers
        "x-ctxproxy-input-tokens": "2000",
        "x-ctxproxy-output-tokens": "10",
        "x-ctxproxy-cached-tokens": "1024",
    }
    stats.pricing = Pricing("openai", "gpt-4o", PRICES)
    stats.manifest = Manifest(
        policy="p", model="gpt-4o", mode="window", counting_method="x",
        tokens_before=3_000, tokens_after=2_000,
    )  # fmt: skip
    headers = usage_headers(stats)
    assert headers["x-ctxproxy-cost-usd"] == usd(976 * 2.5e-6 + 1_024 * 1.25e-6 + 10 * 1e-5)
    assert headers["x-ctxproxy-cost-unchanged-usd"] == usd(  # the removed 1,000 read too
        976 * 2.5e-6 + 2_024 * 1.25e-6 + 10 * 1e-5
    )
    stats.answers.append(TokenUsage(100, 1, None, 50))
    headers = usage_headers(stats)
    assert headers["x-ctxproxy-cache-write-tokens"] == "50"
    assert headers["x-ctxproxy-cost-usd"] == "unknown"  # a cache write, and no price for it
    stats.pricing = Pricing("openai", "mystery", None)
    assert usage_headers(stats)["x-ctxproxy-cost-unchanged-usd"] == "unknown"
