"""Issue 27's measure: a 40-turn agent session with the real `anthropic` SDK (two breakpoints a
request, as Claude Code places them) through the proxy against the caching fake. Every answer's
cost headers equal the fake's usage at litellm's prices, `/metrics` sums them, and the share of
input read from the cache after turn 3 is at least 70% (`python -m bench.quality.cost_session`
prints the figures beside the same session sent unchanged)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import anthropic
import pytest
from agent_session import MODEL, ScriptedModel, Session, Turn, run_session
from fakes.caching import CachingUpstream
from proxy_harness import make_settings, start_proxy
from shared_tokens import shared_catalog

from proxy.completion.usage_headers import usd
from proxy.tokens.prices import PriceTable, price_of
from proxy.tokens.usage import TokenUsage

TURNS = 40
PRICES = PriceTable([], shared_catalog()).lookup("claude", MODEL)


@asynccontextmanager
async def session_through_proxy(tmp_path: Path, window: str) -> AsyncIterator[tuple[Session, str]]:
    """The session through a proxy on the default policy with this window; and `/metrics`."""
    policy = f"extends: default\nbudget: {{context_window: {window}}}\n"
    if window == "16000":  # the case that checks clearing: condensing alone keeps it under
        policy += "steps: [{kind: offload_tool_results}, {kind: clear_tool_results}, "
        policy += "{kind: drop_turns}]\n"
    (tmp_path / "session.yaml").write_text(policy)
    async with CachingUpstream(script=ScriptedModel()) as fake:
        timeouts = {"first_byte_s": 60, "idle_read_s": 60, "total_s": 120}
        upstream = {"name": "claude", "kind": "anthropic", "base_url": fake.origin,
                    "timeouts": timeouts}  # fmt: skip
        settings = make_settings(
            fake.origin,
            upstreams=[upstream],
            policies_dir=str(tmp_path),
            tenants=[{"name": "default", "policy": "session"}],
        )
        proxy = await start_proxy(settings)
        try:
            async with anthropic.AsyncAnthropic(
                base_url=proxy.url, api_key="sk-agent", max_retries=0
            ) as sdk:
                session = await run_session(sdk, fake, TURNS)
            async with aiohttp.ClientSession() as http, http.get(f"{proxy.url}/metrics") as got:
                yield session, await got.text()
        finally:
            await proxy.stop()


def usage_of(turn: Turn) -> TokenUsage:
    output = int(turn.reported["output_tokens"])
    return TokenUsage(turn.input, output, turn.cache_read, turn.cache_write)


def metric(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {series} in /metrics")


@pytest.mark.parametrize("window", ["auto", "32000", "16000"])
async def test_a_40_turn_session_costs_what_the_upstream_reported(
    tmp_path: Path, window: str
) -> None:
    assert PRICES is not None
    async with session_through_proxy(tmp_path, window) as (session, metrics):
        assert len(session.turns) == TURNS
        for turn in session.turns:
            usage, headers = usage_of(turn), turn.headers
            assert int(headers["x-ctxproxy-input-tokens"]) == usage.input
            assert int(headers["x-ctxproxy-cached-tokens"]) == usage.cache_read
            assert int(headers["x-ctxproxy-cache-write-tokens"]) == usage.cache_write
            assert int(headers["x-ctxproxy-output-tokens"]) == usage.output
            assert headers["x-ctxproxy-cost-usd"] == usd(price_of(usage, PRICES) or -1)
        labels = f'model="{MODEL}",policy="session",tenant="default"'
        spent = sum(price_of(usage_of(t), PRICES) or 0 for t in session.turns)
        assert metric(metrics, f"ctxproxy_cost_usd_total{{{labels}}}") == pytest.approx(spent)
        read = metric(metrics, f'ctxproxy_answer_tokens_total{{kind="cache_read",{labels}}}')
        assert read == sum(t.cache_read for t in session.turns)
    if window == "16000":  # the session crosses this window: the policy cleared old results
        assert any("clear_tool_results" in t.headers["x-ctxproxy-actions"] for t in session.turns)
    share = session.cached_share(after=3)
    print(f"window {window}: cached share after turn 3 {share:.1%}")
    assert share >= 0.70
