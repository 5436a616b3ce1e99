"""`tokens.prices`: prices from config or litellm's bundled map, and what a request cost."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from shared_tokens import shared_catalog

from proxy.settings import PriceSettings
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.prices import (
    ModelPrices,
    PriceTable,
    estimate,
    price_of,
    request_cost,
    unchanged_usage,
)
from proxy.tokens.usage import TokenUsage

PRICES = ModelPrices(2e-6, 8e-6, 5e-7, 2.5e-6, "model_map")


def test_the_bundled_map_prices_known_models() -> None:
    table = PriceTable([], shared_catalog())
    gpt = table.lookup("openai", "gpt-4o")
    assert gpt is not None and gpt.source == "model_map"
    assert (gpt.input, gpt.output, gpt.cache_read) == (2.5e-6, 1e-5, 1.25e-6)
    assert gpt.cache_write is None  # OpenAI bills no cache writes
    claude = table.lookup("claude", "claude-haiku-4-5")
    assert claude is not None and claude.cache_write == pytest.approx(1.25e-6)
    assert table.lookup("x", "openai/gpt-4o-2099-01-01") == gpt  # found like its window
    assert table.lookup("x", "no-such-model-anywhere") is None
    assert table.lookup("x", "") is None


def test_config_overrides_come_first_by_glob_and_upstream() -> None:
    overrides = [
        PriceSettings(model="gpt-4o*", upstream="local", input_per_mtok=0, output_per_mtok=0),
        PriceSettings(
            model="GPT-4O*", input_per_mtok=2, output_per_mtok=8, cache_read_per_mtok=0.5
        ),
    ]
    table = PriceTable(overrides, shared_catalog())
    local = table.lookup("local", "gpt-4o")
    assert local == ModelPrices(0.0, 0.0, 0.0, 0.0, "config")
    other = table.lookup("openai", "gpt-4o-mini")
    assert other is not None and other.source == "config"
    assert (other.input, other.output, other.cache_read) == pytest.approx((2e-6, 8e-6, 5e-7))
    assert other.cache_write == pytest.approx(2e-6)  # omitted: the input price
    assert table.lookup("openai", "claude-haiku-4-5").source == "model_map"  # type: ignore[union-attr]
    assert other.as_dict()["input_per_mtok"] == 2.0


def test_a_map_entry_without_an_input_or_output_price_is_no_price(tmp_path: Path) -> None:
    entries = {
        "free-ish": {"max_input_tokens": 10, "input_cost_per_token": 1e-6},
        "odd": {"input_cost_per_token": "1", "output_cost_per_token": 1e-6},
        "ok": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
               "cache_read_input_token_cost": True},
    }  # fmt: skip
    path = tmp_path / "map.json"
    path.write_text(json.dumps(entries))
    table = PriceTable([], ModelCatalog(path))
    assert table.lookup("u", "free-ish") is None and table.lookup("u", "odd") is None
    assert table.lookup("u", "ok") == ModelPrices(1e-6, 2e-6, None, None, "model_map")


def test_a_usage_at_its_prices() -> None:
    usage = TokenUsage(10_000, 500, cache_read=6_000, cache_write=1_000)
    expected = 3_000 * 2e-6 + 6_000 * 5e-7 + 1_000 * 2.5e-6 + 500 * 8e-6
    assert price_of(usage, PRICES) == pytest.approx(expected)
    assert price_of(usage, None) is None
    no_cache = ModelPrices(2e-6, 8e-6, None, None, "model_map")
    assert price_of(usage, no_cache) is None  # cache reads without a cache price: unknown
    assert price_of(TokenUsage(100, 1, 0, 0), no_cache) == pytest.approx(100 * 2e-6 + 8e-6)


def test_the_request_unchanged_is_the_first_call_with_the_removed_tokens_back() -> None:
    first = TokenUsage(5_000, 40, 4_096)
    second = TokenUsage(5_600, 30, 5_000)
    # a warm cache (the first call read from it): the removed old history would have been read
    unchanged = unchanged_usage([first, second], removed=20_000)
    assert unchanged == TokenUsage(25_000, 30, 24_096)
    assert unchanged_usage([first], removed=-500) == TokenUsage(4_500, 40, 3_596)
    assert unchanged_usage([first], removed=-9_000) == TokenUsage(904, 40, 0)  # clamped
    # a cold one: billed in full
    cold = TokenUsage(5_000, 40, 0, 5_000)
    assert unchanged_usage([cold], removed=2_000) == TokenUsage(7_000, 40, 0, 5_000)
    assert unchanged_usage([TokenUsage(300)], removed=-400) == TokenUsage(0)
    cost = request_cost([first, second], PRICES, 20_000)
    assert cost is not None
    assert cost.usd == pytest.approx(price_of(first + second, PRICES))
    assert cost.unchanged_usd == pytest.approx(price_of(unchanged, PRICES))
    assert cost.unchanged_input == 25_000
    assert request_cost([], PRICES, 0) is None
    unknown = request_cost([first], None, 0)
    assert unknown is not None and unknown.usd is None and unknown.unchanged_usd is None


def test_the_dry_runs_estimate() -> None:
    found = estimate(PRICES, 10_000, 4_000, 1.5)
    assert found["input_tokens"] == 6_000 and found["input_tokens_unchanged"] == 15_000
    assert found["input_usd"] == pytest.approx(6_000 * 2e-6)
    assert found["input_usd_unchanged"] == pytest.approx(15_000 * 2e-6)
    assert found["prices"]["source"] == "model_map"
    unknown = estimate(None, 10, 4, 1.0)
    assert unknown["input_usd"] is None and unknown["prices"] is None


def test_the_dry_runs_estimate_prices_what_the_breakpoints_write() -> None:
    marks = {"written_tokens": 3_000, "written_tokens_unchanged": 20_000}
    found = estimate(PRICES, 10_000, 4_000, 1.5, marks)
    assert found["cache_write_tokens"] == 4_500  # in the upstream's tokens
    assert found["cache_write_tokens_unchanged"] == 15_000  # never more than the prompt
    assert PRICES.cache_write is not None
    assert found["input_usd"] == pytest.approx(1_500 * 2e-6 + 4_500 * PRICES.cache_write)
    assert found["input_usd_unchanged"] == pytest.approx(15_000 * PRICES.cache_write)
    no_write_price = dataclasses.replace(PRICES, cache_write=None)
    assert estimate(no_write_price, 10_000, 4_000, 1.0, marks)["input_usd"] is None
    assert estimate(no_write_price, 10_000, 4_000, 1.0)["input_usd"] == pytest.approx(8e-3)


def test_a_request_that_came_without_breakpoints_would_have_had_nothing_cached() -> None:
    first = TokenUsage(10_000, 50, cache_read=8_000, cache_write=1_500)
    unchanged = unchanged_usage([first], 2_000, uncacheable=True)
    assert unchanged == TokenUsage(12_000, 50, 0, 0)
    cost = request_cost([first], PRICES, 2_000, uncacheable=True)
    assert cost is not None and cost.unchanged_usd == pytest.approx(12_000 * 2e-6 + 50 * 8e-6)
    assert unchanged_usage([TokenUsage(100)], 0, uncacheable=True) == TokenUsage(100)
