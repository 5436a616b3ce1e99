"""Prometheus metrics of one app: built in `create_app`, held by `Services`, scraped at /metrics.

Every metric lives in the app's own `CollectorRegistry` (no module-level state, no global default
registry), so several apps in one process (the tests) never share counters. Labels are kept
low-cardinality: route *patterns* (`/v1/{tail}`), tenant and policy *names* (never keys or key
hashes), closed sets of steps, reasons and outcomes, and the upstream (configured) names with
the models they answered with a usage (`ctxproxy_count_ratio`, bounded by
`tokens.calibration.MAX_KEYS`; never a contributor).

Per-request facts are collected in one `proxy.stats.RequestStats` that the edge middleware creates
and reads back when the response is done; it feeds both the request metrics and the access log
line (`proxy.logs`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from proxy.artifacts.budgets import WriteLimit
from proxy.cost_metrics import CostMetrics
from proxy.engine.manifest import Manifest, SummarySource
from proxy.errors import RefusalReason
from proxy.stats import RequestStats
from proxy.synthetic.base import CallStatus
from proxy.tokens.calibration import KeySnapshot
from proxy.tokens.calibration_rule import CalibrationKey, RatioSource

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

_LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120
)  # fmt: skip
_OVERHEAD_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_TOKEN_BUCKETS = (1_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 200_000, 400_000, 1_000_000)


_READ_OUTCOMES = frozenset(
    {
        CallStatus.found,
        CallStatus.artifact_not_found,
        CallStatus.invalid_arguments,
        CallStatus.artifact_store_unavailable,
    }
)
"""The statuses a synthetic read is counted under by name; the budget refusals count as `error`."""


_RATIO_SOURCES = frozenset(source.value for source in RatioSource)


def _read_label(status: CallStatus) -> str:
    return status.value if status in _READ_OUTCOMES else "error"


class _CountRatios(Collector):
    """The agreed count ratio of each calibrated upstream and model, read at scrape time. Only
    upstreams of the config and models one answered with `usage` (at most
    `calibration.MAX_KEYS` pairs) are labels; contributors never are."""

    def __init__(self) -> None:
        self.source: Callable[[], dict[CalibrationKey, KeySnapshot]] = dict

    def collect(self) -> Iterator[Metric]:
        labels = ["upstream", "model"]
        ratios = GaugeMetricFamily(
            "ctxproxy_count_ratio",
            "Upstream prompt tokens per token counted by the proxy, as the calibrated "
            "credentials agree (what a request without its own ratio applies).",
            labels=labels,
        )
        contributors = GaugeMetricFamily(
            "ctxproxy_count_ratio_contributors",
            "Credentials (or keys-mode tenants) with a calibrated count ratio of their own.",
            labels=labels,
        )
        samples = CounterMetricFamily(
            "ctxproxy_count_ratio_samples",
            "Answers whose usage calibrated a count ratio.",
            labels=labels,
        )
        for (upstream, model), state in sorted(self.source().items()):
            ratios.add_metric([upstream, model], state.agreed)
            contributors.add_metric([upstream, model], state.contributors)
            samples.add_metric([upstream, model], state.samples)
        yield ratios
        yield contributors
        yield samples


class _StoreErrors(Collector):
    """Failed store operations, read from the store at scrape time (`failed_operations`)."""

    def __init__(self) -> None:
        self.source: Callable[[], int] = lambda: 0

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "ctxproxy_store_errors", "Artifact store operations that failed.", value=self.source()
        )

    def describe(self) -> Iterator[Metric]:
        return self.collect()


class _WriteBudgetRefusals(Collector):
    """The writes (and their bytes) that tenants' write budgets refused, by budget, read from
    the store at scrape time (`budgets.RefusalRecorder.snapshot`); every budget is listed."""

    def __init__(self) -> None:
        self.source: Callable[[], dict[WriteLimit, tuple[int, int]]] = dict

    def collect(self) -> Iterator[Metric]:
        writes = CounterMetricFamily(
            "ctxproxy_store_writes_refused",
            "Artifact writes a tenant's write budget refused (the content stayed in the prompt).",
            labels=["reason"],
        )
        sizes = CounterMetricFamily(
            "ctxproxy_store_bytes_refused",
            "Bytes of the artifact writes a tenant's write budget refused.",
            labels=["reason"],
        )
        counts = self.source()
        for budget in WriteLimit:
            refused, size = counts.get(budget, (0, 0))
            writes.add_metric([budget.value], refused)
            sizes.add_metric([budget.value], size)
        yield writes
        yield sizes


class _PolicyReload(Collector):
    """1 while the policy files on disk failed to load (the previous set in use), else 0."""

    def __init__(self) -> None:
        self.source: Callable[[], bool] = lambda: False

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "ctxproxy_policy_reload_failed",
            "1 while the last policy reload failed and the previous policies are in use.",
            value=1 if self.source() else 0,
        )

    def describe(self) -> Iterator[Metric]:
        return self.collect()


class Metrics:
    """The metric objects of one app (the list is in docs/operating.md)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._http_metrics(self.registry)
        self._preparation_metrics(self.registry)
        self._upstream_metrics(self.registry)
        self._read_metrics(self.registry)
        self.costs = CostMetrics(self.registry)
        self.records_dropped = Counter(
            "ctxproxy_records_dropped",
            "Request records not kept (the store failed, or too many were waiting to be written).",
            ["reason"],
            registry=self.registry,
        )
        self._store_errors = _StoreErrors()
        self.registry.register(self._store_errors)
        self._write_budgets = _WriteBudgetRefusals()
        self.registry.register(self._write_budgets)
        self._count_ratios = _CountRatios()
        self.registry.register(self._count_ratios)
        self._policy_reload = _PolicyReload()
        self.registry.register(self._policy_reload)
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def _http_metrics(self, r: CollectorRegistry) -> None:
        self.requests = Counter(
            "ctxproxy_requests",
            "HTTP requests answered.",
            ["route", "status", "tenant", "policy"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "ctxproxy_request_duration_seconds",
            "Whole request time, streams included.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.overhead_seconds = Histogram(
            "ctxproxy_proxy_overhead_seconds",
            "From request arrival to the upstream request being sent (reading, auth, preparation).",
            buckets=_OVERHEAD_BUCKETS,
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "ctxproxy_upstream_latency_seconds",
            "From sending to the upstream's response headers.",
            ["upstream"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )

    def _preparation_metrics(self, r: CollectorRegistry) -> None:
        self.tokens_before = Histogram(
            "ctxproxy_tokens_before_preparation",
            "Prompt tokens as the client sent them.",
            ["policy"],
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.tokens_after = Histogram(
            "ctxproxy_tokens_after_preparation",
            "Prompt tokens as sent upstream.",
            ["policy"],
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.outcomes = Counter(
            "ctxproxy_preparations",
            "Chat completions prepared, by manifest outcome.",
            ["policy", "outcome"],
            registry=r,
        )
        self.actions = Counter(
            "ctxproxy_actions",
            "Preparation actions applied, by step.",
            ["step"],
            registry=r,
        )
        self.tokens_freed = Counter(
            "ctxproxy_tokens_freed",
            "Prompt tokens freed by preparation, by step.",
            ["step"],
            registry=r,
        )
        self.refusals = Counter(
            "ctxproxy_refusals",
            "Chat completions refused before any upstream call.",
            ["reason"],
            registry=r,
        )
        self.count_ratios_applied = Counter(
            "ctxproxy_count_ratio_applied",
            "Chat completions prepared, by where their count ratio came from (own, agreed, "
            "none, pinned).",
            ["source"],
            registry=r,
        )

    def _upstream_metrics(self, r: CollectorRegistry) -> None:
        """What upstreams report (cached tokens) and what the summarizer cost."""
        self.cached_tokens = Counter(
            "ctxproxy_cached_input_tokens",
            "Prompt tokens upstreams reported as read from their prompt cache (OpenAI "
            "prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens).",
            ["upstream"],
            registry=r,
        )
        self.summaries = Counter(
            "ctxproxy_summaries", "Summaries standing for dropped turns, by where they came "
            "from (cache, fresh, background, fallback, last_resort) or refused.", ["outcome"],
            registry=r,
        )
        self.background_summaries = Counter(
            "ctxproxy_background_summaries", "Summaries made off the request path (ahead of "
            "time, or not waited for), by outcome (made, failed).", ["outcome"], registry=r,
        )
        self.background_summarizer_tokens = Counter(
            "ctxproxy_background_summarizer_tokens", "Tokens of the summarizer calls made off "
            "the request path, by kind (prompt, completion).", ["kind"], registry=r,
        )
        self.summarizer_seconds = Histogram(
            "ctxproxy_summarizer_seconds", "Time a request spent on a summary it got from the "
            "summarizer (made for it, or waited for).", buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.summarizer_tokens = Counter(
            "ctxproxy_summarizer_tokens", "Tokens of the summarizer calls a request waited for, "
            "by kind (prompt, completion).", ["kind"], registry=r,
        )

    def _read_metrics(self, r: CollectorRegistry) -> None:
        self.synthetic_rounds = Counter(
            "ctxproxy_synthetic_rounds",
            "Rounds of synthetic read-tool calls executed.",
            registry=r,
        )
        self.artifact_reads = Counter(
            "ctxproxy_artifact_reads",
            "Artifact reads (synthetic tool calls and the artifacts endpoint), by outcome.",
            ["source", "outcome"],
            registry=r,
        )

    def _child(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)`, remembered: `labels()` validates and locks on every call.
        Bounded like prometheus' own children: label values come from config, not from clients."""
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def watch_store(self, failed_operations: Callable[[], int]) -> None:
        """Where `ctxproxy_store_errors` reads its value (set once the store is built)."""
        self._store_errors.source = failed_operations

    def watch_write_budgets(self, refused: Callable[[], dict[WriteLimit, tuple[int, int]]]) -> None:
        """Where `ctxproxy_store_writes_refused` and `_bytes_refused` read their values."""
        self._write_budgets.source = refused

    def watch_policies(self, failed: Callable[[], bool]) -> None:
        """Where `ctxproxy_policy_reload_failed` reads whether the last reload failed."""
        self._policy_reload.source = failed

    def watch_calibration(
        self, snapshot: Callable[[], dict[CalibrationKey, KeySnapshot]]
    ) -> None:
        """Where `ctxproxy_count_ratio` reads the calibrated models (`CountCalibration`)."""
        self._count_ratios.source = snapshot

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # -- recording ------------------------------------------------------------------------------

    def record_request(self, route: str, status: int, stats: RequestStats) -> None:
        self._child(self.requests, route, str(status), stats.tenant, stats.policy).inc()
        self._child(self.request_seconds, route).observe(time.perf_counter() - stats.started)
        overhead = stats.overhead_seconds
        if overhead is not None:
            self.overhead_seconds.observe(overhead)
        for call in stats.upstream_calls:
            self._child(self.upstream_seconds, call.upstream).observe(call.seconds)
        if stats.cached_tokens and stats.upstream_calls:
            self._child(self.cached_tokens, stats.upstream_calls[0].upstream).inc(
                stats.cached_tokens
            )
        if stats.answers:
            self.costs.record(stats)

    def record_preparation(self, manifest: Manifest) -> None:
        """A chat completion's manifest (not refused; dry runs are not counted)."""
        self._child(self.outcomes, manifest.policy, manifest.outcome).inc()
        if not manifest.counting_method:
            return  # mode: off counts nothing
        self._child(self.tokens_before, manifest.policy).observe(manifest.tokens_before)
        self._child(self.tokens_after, manifest.policy).observe(manifest.tokens_after)
        if manifest.count_ratio_source in _RATIO_SOURCES:
            self._child(self.count_ratios_applied, manifest.count_ratio_source).inc()
        for action in manifest.actions:
            self._child(self.actions, action.step).inc()
            self._child(self.tokens_freed, action.step).inc(max(0, action.tokens_freed))
        summary = manifest.summary()
        if summary is not None:
            self._record_summary(summary)

    def _record_summary(self, summary: dict[str, Any]) -> None:
        self._child(self.summaries, SummarySource(summary["source"]).value).inc()
        usage = summary.get("summarizer_usage") or {}
        if usage:
            self.summarizer_seconds.observe(summary.get("seconds", 0.0))
        self._count_tokens(self.summarizer_tokens, usage)

    def record_background_summary(self, outcome: str, usage: dict[str, int]) -> None:
        self._child(self.background_summaries, outcome).inc()
        self._count_tokens(self.background_summarizer_tokens, usage)

    def _count_tokens(self, counter: Counter, usage: dict[str, Any]) -> None:
        """A summarizer's `prompt_tokens` and `completion_tokens` into `counter{kind}`."""
        for kind in ("prompt", "completion"):
            tokens = usage.get(f"{kind}_tokens")
            if isinstance(tokens, int) and tokens > 0:
                self._child(counter, kind).inc(tokens)

    def record_refusal(self, reason: RefusalReason) -> None:
        self.refusals.labels(reason).inc()
        if reason is RefusalReason.summarizer_failed:
            self._child(self.summaries, "refused").inc()

    def record_round(self, statuses: list[CallStatus]) -> None:
        """One executed round of synthetic calls and each call's result status."""
        self.synthetic_rounds.inc()
        for status in statuses:
            self.artifact_reads.labels("tool", _read_label(status)).inc()

    def record_endpoint_read(self, outcome: str) -> None:
        self.artifact_reads.labels("endpoint", outcome).inc()

    def record_dropped(self, reason: str) -> None:
        self.records_dropped.labels(reason).inc()
