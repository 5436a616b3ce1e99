"""`proxy.cost_metrics`: tokens, cost and the unchanged estimate per tenant, policy and model."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.cost_metrics import MAX_MODEL_LABELS, OTHER_MODEL
from proxy.engine.manifest import Manifest
from proxy.metrics import Metrics
from proxy.stats import Pricing, RequestStats
from proxy.tokens.prices import ModelPrices
from proxy.tokens.usage import TokenUsage

PRICES = ModelPrices(1e-6, 4e-6, 1e-7, 1.25e-6, "model_map")


def value(metrics: Metrics, name: str, **labels: str) -> float:
    text = metrics.render().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def answered(model: str = "claude-haiku-4-5", prices: ModelPrices | None = PRICES) -> RequestStats:
    stats = RequestStats(tenant="acme", policy="default")
    stats.manifest = Manifest(
        policy="default", model=model, mode="window", counting_method="x",
        tokens_before=9_000, tokens_after=4_000,
    )  # fmt: skip
    stats.pricing = Pricing("claude", model, prices)
    stats.answers = [TokenUsage(4_400, 50, 3_000, 400), TokenUsage(4_600, 20, 4_400, 0)]
    return stats


def test_a_priced_request() -> None:
    metrics = Metrics()
    stats = answered()
    metrics.record_request("/v1/messages", 200, stats)
    labels = {"tenant": "acme", "policy": "default", "model": "claude-haiku-4-5"}
    tokens = "ctxproxy_answer_tokens_total"
    assert value(metrics, tokens, **labels, kind="input") == 9_000
    assert value(metrics, tokens, **labels, kind="cache_read") == 7_400
    assert value(metrics, tokens, **labels, kind="cache_write") == 400
    assert value(metrics, tokens, **labels, kind="output") == 70
    assert value(metrics, "ctxproxy_unchanged_input_tokens_total", **labels) == 4_400 + 5_000
    cost = stats.cost()
    assert cost is not None and cost.usd is not None and cost.unchanged_usd is not None
    assert value(metrics, "ctxproxy_cost_usd_total", **labels) == pytest.approx(cost.usd)
    assert value(metrics, "ctxproxy_cost_unchanged_usd_total", **labels) == pytest.approx(
        cost.unchanged_usd
    )
    assert value(metrics, "ctxproxy_unpriced_answers_total", **labels) == 0


def test_an_unpriced_request_counts_its_tokens_not_a_cost() -> None:
    metrics = Metrics()
    metrics.record_request("/v1/messages", 200, answered("mystery", None))
    labels = {"tenant": "acme", "policy": "default", "model": "mystery"}
    assert value(metrics, "ctxproxy_answer_tokens_total", **labels, kind="input") == 9_000
    assert value(metrics, "ctxproxy_unpriced_answers_total", **labels) == 1
    assert value(metrics, "ctxproxy_cost_usd_total", **labels) == 0


def test_nothing_without_answers_or_pricing() -> None:
    metrics = Metrics()
    metrics.record_request("/v1/messages", 502, RequestStats(tenant="acme", policy="p"))
    stats = answered()
    stats.pricing = None
    metrics.record_request("/v1/messages", 200, stats)
    assert "ctxproxy_answer_tokens_total{" not in metrics.render().decode()


def test_the_model_label_is_bounded() -> None:
    metrics = Metrics()
    for n in range(MAX_MODEL_LABELS + 3):
        metrics.record_request("/v1/messages", 200, answered(f"model-{n}"))
    metrics.record_request("/v1/messages", 200, answered("x" * 500))
    text = metrics.render().decode()
    models = {
        s.labels["model"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "ctxproxy_answer_tokens_total"
    }
    assert len(models) == MAX_MODEL_LABELS + 1 and OTHER_MODEL in models
    assert metrics.costs.model_label("model-0") == "model-0"  # admitted ones stay
    labels = {"tenant": "acme", "policy": "default", "model": OTHER_MODEL}
    assert value(metrics, "ctxproxy_unpriced_answers_total", **labels) == 0
    assert value(metrics, "ctxproxy_answer_tokens_total", **labels, kind="input") == 4 * 9_000
