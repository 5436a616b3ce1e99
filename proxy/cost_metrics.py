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

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from proxy.stats import RequestStats

MAX_MODEL_LABELS = 32
MAX_MODEL_CHARS = 100
OTHER_MODEL = "other"
_LABELS = ("tenant", "policy", "model")
_SERIES = {
    "ctxproxy_unchanged_input_tokens": "Prompt tokens the same completions would have had "
    "unchanged (estimated).",
    "ctxproxy_cost_usd": "Price of the priced completions, USD.",
    "ctxproxy_cost_unchanged_usd": "Price the same completions would have had unchanged "
    "(estimated), USD.",
    "ctxproxy_unpriced_answers": "Completions answered with a usage whose model has no known "
    "price.",
}
_TOKENS_HELP = (
    "Tokens upstreams reported for completions, by kind (input: the whole prompt, cache_read, "
    "cache_write, output), the proxy's read rounds included."
)

Labels = tuple[str, str, str]


class CostMetrics(Collector):
    """Sums kept in plain dicts and turned into counters when scraped: a completion adds a few
    numbers, not seven locked prometheus counters (this runs on every answered request)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._models: set[str] = set()
        self._tokens: dict[tuple[str, str, str, str], float] = {}
        self._sums: dict[str, dict[Labels, float]] = {name: {} for name in _SERIES}
        registry.register(self)

    def collect(self) -> Iterator[CounterMetricFamily]:
        tokens = CounterMetricFamily(
            "ctxproxy_answer_tokens", _TOKENS_HELP, labels=[*_LABELS, "kind"]
        )
        for key, value in list(self._tokens.items()):
            tokens.add_metric(key, value)
        yield tokens
        for name, help_text in _SERIES.items():
            family = CounterMetricFamily(name, help_text, labels=_LABELS)
            for labels, value in list(self._sums[name].items()):
                family.add_metric(labels, value)
            yield family

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
        labels: Labels = (stats.tenant, stats.policy, self.model_label(pricing.model))
        kinds = (
            ("input", usage.input),
            ("cache_read", usage.cache_read or 0),
            ("cache_write", usage.cache_write or 0),
            ("output", usage.output),
        )
        tokens = self._tokens
        for kind, count in kinds:
            key = (*labels, kind)
            tokens[key] = tokens.get(key, 0) + count
        self._add("ctxproxy_unchanged_input_tokens", labels, cost.unchanged_input)
        if cost.usd is None or cost.unchanged_usd is None:
            self._add("ctxproxy_unpriced_answers", labels, 1)
            return
        self._add("ctxproxy_cost_usd", labels, cost.usd)
        self._add("ctxproxy_cost_unchanged_usd", labels, cost.unchanged_usd)

    def _add(self, name: str, labels: Labels, amount: float) -> None:
        sums = self._sums[name]
        sums[labels] = sums.get(labels, 0) + amount
