"""What answers cost, per tenant, policy and model: the cost series of `/metrics`.

Counters only, so that a saving is a difference of two of them (it can be negative: a request
whose preparation or read rounds added tokens):

- `ctxproxy_answer_tokens_total{tenant,policy,model,kind}`: what the upstreams reported, kind
  `input` (the whole prompt, cached included), `cache_read`, `cache_write`, `output`; the
  cached share is `cache_read / input`;
- `ctxproxy_unchanged_input_tokens_total{tenant,policy,model}`: the prompt tokens the requests
  would have had unchanged (`tokens.prices.unchanged_usage`); tokens saved = this - `input`;
- `ctxproxy_cost_usd_total` and `ctxproxy_cost_unchanged_usd_total{tenant,policy,model}`: the
  priced answers' cost and the same requests' unchanged; money saved = the difference;
- `ctxproxy_unpriced_answers_total{tenant,policy,model}`: requests whose model has no known
  price (their tokens are counted, their cost is not).

The model is the request's, which the client chooses: the first `MAX_MODEL_LABELS` models that
were answered with a usage are labels of their own, any later one is `other`.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter

from proxy.stats import RequestStats

MAX_MODEL_LABELS = 32
MAX_MODEL_CHARS = 100
OTHER_MODEL = "other"


class CostMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["tenant", "policy", "model"]
        self.tokens = Counter(
            "ctxproxy_answer_tokens",
            "Tokens upstreams reported for completions, by kind (input: the whole prompt, "
            "cache_read, cache_write, output), the proxy's read rounds included.",
            [*labels, "kind"],
            registry=registry,
        )
        self.unchanged_tokens = Counter(
            "ctxproxy_unchanged_input_tokens",
            "Prompt tokens the same completions would have had unchanged (estimated).",
            labels,
            registry=registry,
        )
        self.cost = Counter(
            "ctxproxy_cost_usd", "Price of the priced completions, USD.", labels, registry=registry
        )
        self.unchanged_cost = Counter(
            "ctxproxy_cost_unchanged_usd",
            "Price the same completions would have had unchanged (estimated), USD.",
            labels,
            registry=registry,
        )
        self.unpriced = Counter(
            "ctxproxy_unpriced_answers",
            "Completions answered with a usage whose model has no known price.",
            labels,
            registry=registry,
        )
        self._models: set[str] = set()
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def _child(self, metric: Any, *values: str) -> Any:
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def model_label(self, model: str) -> str:
        """The model itself while there is room for it, else `other`."""
        if model in self._models:
            return model
        if len(self._models) < MAX_MODEL_LABELS and 0 < len(model) <= MAX_MODEL_CHARS:
            self._models.add(model)
            return model
        return OTHER_MODEL

    def record(self, stats: RequestStats) -> None:
        """A request's answers (nothing without a usage or a pricing)."""
        usage, cost, pricing = stats.usage, stats.cost(), stats.pricing
        if usage is None or cost is None or pricing is None:
            return
        labels = (stats.tenant, stats.policy, self.model_label(pricing.model))
        kinds = {
            "input": usage.input,
            "cache_read": usage.cache_read or 0,
            "cache_write": usage.cache_write or 0,
            "output": usage.output,
        }
        for kind, tokens in kinds.items():
            self._child(self.tokens, *labels, kind).inc(tokens)
        self._child(self.unchanged_tokens, *labels).inc(cost.unchanged_input)
        if cost.usd is None or cost.unchanged_usd is None:
            self._child(self.unpriced, *labels).inc()
            return
        self._child(self.cost, *labels).inc(cost.usd)
        self._child(self.unchanged_cost, *labels).inc(cost.unchanged_usd)
