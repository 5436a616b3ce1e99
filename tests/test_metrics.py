"""`proxy.metrics`: per-app registries, what each recorder writes, store errors at scrape time."""

from __future__ import annotations

import socket
from typing import Any

import prometheus_client
import pytest
from artifacts_harness import keyed
from prometheus_client.parser import text_string_to_metric_families
from synthetic_harness import call_tool

from proxy.artifacts.budgets import WriteBudget, WriteBudgets
from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import MemoryStore, NewArtifact, StoreUnavailable
from proxy.engine.manifest import Action, Manifest
from proxy.errors import RefusalReason
from proxy.metrics import Metrics
from proxy.stats import RequestStats
from proxy.synthetic.base import CallStatus
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL
from proxy.tokens.calibration import CountCalibration
from proxy.tokens.calibration_rule import CalibrationKey, RatioRule


def samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = metrics.render().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return samples(metrics).get((name, frozenset(labels.items())), 0.0)


def manifest(**overrides: Any) -> Manifest:
    m = Manifest(
        policy="default",
        model="gpt-4o",
        mode="window",
        counting_method="tiktoken",
        tokens_before=50_000,
        tokens_after=20_000,
        outcome="reduced",
    )
    m.actions = [
        Action("offload_tool_results", "big", [3, 5], 25_000, ["art_x"]),
        Action("clear_tool_results", "old", [7], 5_000),
    ]
    for key, val in overrides.items():
        setattr(m, key, val)
    return m


def test_each_app_has_its_own_registry() -> None:
    a, b = Metrics(), Metrics()
    a.record_refusal(RefusalReason.input_exceeds_allowance)
    assert value(a, "ctxproxy_refusals_total", reason="input_exceeds_allowance") == 1
    assert value(b, "ctxproxy_refusals_total", reason="input_exceeds_allowance") == 0
    global_names = {m.name for m in prometheus_client.REGISTRY.collect()}
    assert not any(name.startswith("ctxproxy") for name in global_names)


def test_request_series_and_latencies() -> None:
    metrics = Metrics()
    stats = RequestStats(tenant="acme", policy="coding-agent")
    sent = stats.upstream_started()
    stats.upstream_answered("openai", sent)
    stats.upstream_started()  # a second round: the first send time is kept
    assert stats.upstream_sent == sent and stats.overhead_seconds is not None
    assert stats.upstream_seconds is not None and stats.upstream_seconds >= 0
    metrics.record_request("/v1/chat/completions", 200, stats)
    metrics.record_request("/v1/{tail}", 404, RequestStats())
    assert (
        value(
            metrics,
            "ctxproxy_requests_total",
            route="/v1/chat/completions",
            status="200",
            tenant="acme",
            policy="coding-agent",
        )
        == 1
    )
    assert (
        value(
            metrics,
            "ctxproxy_requests_total",
            route="/v1/{tail}",
            status="404",
            tenant="-",
            policy="-",
        )
        == 1
    )
    assert value(metrics, "ctxproxy_upstream_latency_seconds_count", upstream="openai") == 1
    assert value(metrics, "ctxproxy_proxy_overhead_seconds_count") == 1
    assert value(metrics, "ctxproxy_request_duration_seconds_count", route="/v1/{tail}") == 1


def test_preparation_tokens_and_actions() -> None:
    metrics = Metrics()
    metrics.record_preparation(manifest())
    metrics.record_preparation(
        manifest(actions=[], outcome="within_trigger", tokens_before=1_000, tokens_after=1_000)
    )
    metrics.record_preparation(Manifest(policy="default", model="m", mode="off"))  # not counted
    assert value(metrics, "ctxproxy_tokens_before_preparation_count", policy="default") == 2
    assert value(metrics, "ctxproxy_tokens_before_preparation_sum", policy="default") == 51_000
    assert value(metrics, "ctxproxy_tokens_after_preparation_sum", policy="default") == 21_000
    assert (
        value(metrics, "ctxproxy_tokens_after_preparation_bucket", policy="default", le="32000.0")
        == 2
    )
    assert value(metrics, "ctxproxy_actions_total", step="offload_tool_results") == 1
    assert value(metrics, "ctxproxy_tokens_freed_total", step="clear_tool_results") == 5_000
    assert value(metrics, "ctxproxy_preparations_total", policy="default", outcome="reduced") == 1
    assert value(metrics, "ctxproxy_preparations_total", policy="default", outcome="unchanged") == 1


class _DownStore(MemoryStore):
    async def get(self, scope: str, artifact_id: str) -> None:
        raise StoreUnavailable("down")


async def test_synthetic_round_outcomes() -> None:
    store = MemoryStore(b"s")
    [aid] = [store.artifact_id("t", "hello world")]
    await store.put_many(
        "t", {aid: NewArtifact("hello world", "tool_result")}, ttl_seconds=60, max_per_scope=10
    )
    results = [
        await call_tool(store, "t", READ_TOOL, {"artifact_id": aid}, max_page_chars=100),
        await call_tool(
            store, "t", SEARCH_TOOL, {"artifact_id": aid, "pattern": "world"}, max_page_chars=100
        ),
        await call_tool(store, "other", READ_TOOL, {"artifact_id": aid}, max_page_chars=100),
        await call_tool(store, "t", READ_TOOL, "{not json", max_page_chars=100),
        await call_tool(_DownStore(b"s"), "t", READ_TOOL, {"artifact_id": aid}, max_page_chars=9),
    ]
    assert [r.status for r in results] == [
        "found",
        "found",
        "artifact_not_found",
        "invalid_arguments",
        "artifact_store_unavailable",
    ]
    metrics = Metrics()
    metrics.record_round([r.status for r in results])
    metrics.record_endpoint_read("artifact_not_found")
    assert value(metrics, "ctxproxy_synthetic_rounds_total") == 1
    assert value(metrics, "ctxproxy_artifact_reads_total", source="tool", outcome="found") == 2
    assert (
        value(metrics, "ctxproxy_artifact_reads_total", source="tool", outcome="artifact_not_found")
        == 1
    )
    assert (
        value(
            metrics,
            "ctxproxy_artifact_reads_total",
            source="endpoint",
            outcome="artifact_not_found",
        )
        == 1
    )


def test_budget_refusals_count_as_error_reads() -> None:
    metrics = Metrics()
    metrics.record_round([CallStatus.too_many_calls, CallStatus.search_budget_exhausted])
    assert value(metrics, "ctxproxy_artifact_reads_total", source="tool", outcome="error") == 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_store_errors_are_read_at_scrape_time() -> None:
    metrics = Metrics()
    assert value(metrics, "ctxproxy_store_errors_total") == 0
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", b"secret", socket_timeout=0.5)
    try:
        metrics.watch_store(lambda: store.failed_operations)
        assert await store.ping() is False
        assert (
            await store.put_many(
                "t", keyed(store, "t", NewArtifact("x", "k")), ttl_seconds=5, max_per_scope=5
            )
            == set()
        )
        assert store.failed_operations == 2
        assert value(metrics, "ctxproxy_store_errors_total") == 2
    finally:
        await store.close()


async def test_write_budget_refusals_are_read_at_scrape_time() -> None:
    metrics = Metrics()
    budgets = WriteBudgets(WriteBudget(bytes_per_minute=None, live_bytes=4))
    store = MemoryStore(b"secret", budgets=budgets)
    metrics.watch_write_budgets(store.refused_writes.snapshot)
    listed = samples(metrics)
    for name in ("ctxproxy_store_writes_refused_total", "ctxproxy_store_bytes_refused_total"):
        for budget in ("live_bytes", "bytes_per_minute"):  # every budget, from the start
            assert listed[(name, frozenset({("reason", budget)}))] == 0
    items = keyed(store, "t", NewArtifact("four", "k"), NewArtifact("fifth", "k"))
    assert len(await store.put_many("t", items, ttl_seconds=5, max_per_scope=5)) == 1
    assert value(metrics, "ctxproxy_store_writes_refused_total", reason="live_bytes") == 1
    assert value(metrics, "ctxproxy_store_bytes_refused_total", reason="live_bytes") == 5


def _summarized(source: str, usage: dict[str, int] | None = None) -> Manifest:
    detail = {"span": [2, 9], "kind": "llm", "by": "m", "tokens": 300, "source": source,
              "failure": None, "seconds": 0.25, "summarizer_usage": usage or {}}
    action = Action("summarize", "r", [2], 100, ["a"], 1, "turns", detail)
    return manifest(actions=[action])


def test_summaries_by_outcome_with_the_summarizers_time_and_tokens() -> None:
    metrics = Metrics()
    metrics.record_preparation(_summarized("fresh", {"prompt_tokens": 900,
                                                     "completion_tokens": 60,
                                                     "total_tokens": 960}))
    metrics.record_preparation(_summarized("cache"))
    metrics.record_preparation(_summarized("cache"))
    metrics.record_refusal(RefusalReason.summarizer_failed)
    assert value(metrics, "ctxproxy_summaries_total", outcome="fresh") == 1
    assert value(metrics, "ctxproxy_summaries_total", outcome="cache") == 2
    assert value(metrics, "ctxproxy_summaries_total", outcome="refused") == 1
    assert value(metrics, "ctxproxy_summarizer_seconds_count") == 1  # only a summary waited for
    assert value(metrics, "ctxproxy_summarizer_seconds_sum") == 0.25
    assert value(metrics, "ctxproxy_summarizer_tokens_total", kind="prompt") == 900
    assert value(metrics, "ctxproxy_summarizer_tokens_total", kind="completion") == 60


def test_count_ratios_are_labelled_by_upstream_and_model_and_applied_ones_by_source() -> None:
    metrics = Metrics()
    calibration = CountCalibration(RatioRule(min_samples=1))
    metrics.watch_calibration(calibration.snapshot)
    for who in ("contributor-1", "contributor-2", "contributor-3"):
        calibration.observe(CalibrationKey("local", "qwen"), who, 1000, 1100)
    calibration.observe(CalibrationKey("local", "other"), "contributor-1", 100, 110)  # too small
    found = {k: v for k, v in samples(metrics).items() if k[0].startswith("ctxproxy_count_ratio")}
    labels = frozenset({("upstream", "local"), ("model", "qwen")})
    assert found == {
        ("ctxproxy_count_ratio", labels): pytest.approx(1.1),  # agreed by three
        ("ctxproxy_count_ratio_contributors", labels): 3,
        ("ctxproxy_count_ratio_samples_total", labels): 3,
    }
    for source in ("own", "own", "pinned", "made-up"):
        metrics.record_preparation(manifest(count_ratio_source=source))
    assert value(metrics, "ctxproxy_count_ratio_applied_total", source="own") == 2
    assert value(metrics, "ctxproxy_count_ratio_applied_total", source="pinned") == 1
    assert value(metrics, "ctxproxy_count_ratio_applied_total", source="made-up") == 0
