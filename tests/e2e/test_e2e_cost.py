"""What each answer cost, through the real server with the real SDKs against the fake with a
prompt cache (`fakes.caching`): the `x-ctxproxy-*` usage and cost headers of whole answers equal
what the upstream reported, at litellm's bundled prices (or config's); streams report theirs in
the access line and `/metrics` only; the proxy's read rounds are summed; the dry run's manifest
estimates the prompt's price."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from anthropic_harness import MODEL, anthropic_proxy, long_conversation, reading_then
from fakes.caching import CachingUpstream
from proxy_harness import RunningProxy, make_settings, start_proxy
from shared_tokens import shared_catalog

from proxy.completion.usage_headers import usd
from proxy.logs import ACCESS_LOGGER
from proxy.tokens.prices import ModelPrices, PriceTable, price_of
from proxy.tokens.usage import TokenUsage

SYSTEM = "You are a careful coding agent. Follow the repository's conventions. " * 120
PRICES = PriceTable([], shared_catalog())


def priced(model: str) -> ModelPrices:
    prices = PRICES.lookup("any", model)
    assert prices is not None
    return prices


@asynccontextmanager
async def caching_proxy(**settings: Any) -> AsyncIterator[tuple[CachingUpstream, RunningProxy]]:
    """The caching fake and a proxy in front of it (its OpenAI routes, and Messages as an
    `anthropic` upstream for Claude models)."""
    async with CachingUpstream() as fake:
        timeouts = {"first_byte_s": 60, "idle_read_s": 60, "total_s": 120}
        upstreams = [
            {"name": "openai", "base_url": fake.base_url, "timeouts": timeouts},
            {"name": "claude", "kind": "anthropic", "base_url": fake.origin, "timeouts": timeouts},
        ]
        routes = [{"model": "claude-*", "upstream": "claude"}]
        proxy = await start_proxy(
            make_settings(fake.base_url, upstreams=upstreams, routes=routes, **settings)
        )
        try:
            yield fake, proxy
        finally:
            await proxy.stop()


def chat_usage(reported: dict[str, Any]) -> TokenUsage:
    cached = reported["prompt_tokens_details"]["cached_tokens"]
    return TokenUsage(reported["prompt_tokens"], reported["completion_tokens"], cached)


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [vars(r) for r in caplog.records if r.name == ACCESS_LOGGER]


async def test_chat_cost_headers_equal_the_upstreams_usage() -> None:
    messages: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "one"}]
    async with (
        caching_proxy() as (fake, proxy),
        openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-c", max_retries=0) as client,
    ):
        for turn in range(2):
            raw = await client.chat.completions.with_raw_response.create(
                model="gpt-4o", messages=[*messages, {"role": "user", "content": f"q{turn}"}]
            )
            usage = chat_usage(fake.reported[-1])
            headers = raw.headers
            assert int(headers["x-ctxproxy-input-tokens"]) == usage.input
            assert int(headers["x-ctxproxy-cached-tokens"]) == usage.cache_read
            assert int(headers["x-ctxproxy-output-tokens"]) == usage.output
            assert headers["x-ctxproxy-cost-usd"] == usd(price_of(usage, priced("gpt-4o")) or -1)
            # nothing was prepared away: the request unchanged costs the same
            assert headers["x-ctxproxy-cost-unchanged-usd"] == headers["x-ctxproxy-cost-usd"]
        assert usage.cache_read and usage.cache_read >= 1024  # the second turn read the cache


async def test_responses_cost_headers_equal_the_upstreams_usage() -> None:
    async with (
        caching_proxy() as (fake, proxy),
        openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-c", max_retries=0) as client,
    ):
        for question in ("a", "b"):
            raw = await client.responses.with_raw_response.create(
                model="gpt-4o", instructions=SYSTEM, input=question
            )
        reported = fake.reported[-1]
        usage = TokenUsage(
            reported["input_tokens"],
            reported["output_tokens"],
            reported["input_tokens_details"]["cached_tokens"],
        )
        assert usage.cache_read
        assert int(raw.headers["x-ctxproxy-cached-tokens"]) == usage.cache_read
        assert raw.headers["x-ctxproxy-cost-usd"] == usd(price_of(usage, priced("gpt-4o")) or -1)


def anthropic_usage(reported: dict[str, Any]) -> TokenUsage:
    read, write = reported["cache_read_input_tokens"], reported["cache_creation_input_tokens"]
    whole = reported["input_tokens"] + read + write
    return TokenUsage(whole, reported["output_tokens"], read, write)


async def test_anthropic_json_in_headers_and_streams_in_the_access_line_and_metrics(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    system: Any = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    messages: Any = [{"role": "user", "content": "hello"}]
    prices = priced("claude-haiku-4-5")
    async with (
        caching_proxy() as (fake, proxy),
        anthropic.AsyncAnthropic(base_url=proxy.url, api_key="sk-c", max_retries=0) as client,
    ):
        raw = await client.messages.with_raw_response.create(
            model="claude-haiku-4-5", max_tokens=20, system=system, messages=messages
        )
        written = anthropic_usage(fake.reported[-1])
        assert written.cache_write and not written.cache_read
        assert int(raw.headers["x-ctxproxy-cache-write-tokens"]) == written.cache_write
        assert raw.headers["x-ctxproxy-cost-usd"] == usd(price_of(written, prices) or -1)
        async with client.messages.with_streaming_response.create(
            model="claude-haiku-4-5", max_tokens=20, system=system, messages=messages, stream=True
        ) as response:
            assert "x-ctxproxy-cost-usd" not in response.headers  # sent before the usage came
            await response.read()
        read = anthropic_usage(fake.reported[-1])
        assert read.cache_read == written.cache_write
        async with aiohttp.ClientSession() as session, session.get(f"{proxy.url}/metrics") as got:
            text = await got.text()
    streamed = access_lines(caplog)[-1]
    assert (streamed["input_tokens"], streamed["cached_tokens"]) == (read.input, read.cache_read)
    assert (streamed["cache_write_tokens"], streamed["output_tokens"]) == (0, read.output)
    assert streamed["price"] == "model_map"
    assert streamed["cost_usd"] == pytest.approx(price_of(read, prices))
    labels = 'model="claude-haiku-4-5",policy="default",tenant="default"'
    spent = (price_of(written, prices) or 0) + (price_of(read, prices) or 0)
    assert metric(text, f"ctxproxy_cost_usd_total{{{labels}}}") == pytest.approx(spent)
    cached = metric(text, f'ctxproxy_answer_tokens_total{{kind="cache_read",{labels}}}')
    assert cached == read.cache_read


def metric(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {series} in /metrics")


@pytest.mark.parametrize("stream", [False, True])
async def test_the_read_rounds_are_summed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    """Two upstream answers (a read of the offloaded result, then the answer): both paid."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        fake.enqueue_many(*reading_then("It is 42.", stream=stream))
        body = {"model": MODEL, "max_tokens": 50, "messages": long_conversation(), "stream": stream}
        async with aiohttp.ClientSession() as session, session.post(
            f"{proxy.url}/v1/messages", json=body, headers={"x-api-key": "sk-c"}
        ) as response:
            assert response.status == 200
            await response.read()
            headers = response.headers
    line = access_lines(caplog)[-1]
    assert line["synthetic_rounds"] == 1
    assert (line["input_tokens"], line["output_tokens"]) == (100 + 120, 7 + 9)  # the fake's usage
    prices = priced(MODEL)
    total = price_of(TokenUsage(220, 16), prices)
    assert line["cost_usd"] == pytest.approx(total)
    assert line["cost_unchanged_usd"] > line["cost_usd"]  # the offloaded results, sent once
    if not stream:
        assert headers["x-ctxproxy-input-tokens"] == "220"
        assert headers["x-ctxproxy-cost-usd"] == usd(total or -1)


async def test_the_dry_run_estimates_the_prompts_price() -> None:
    async with caching_proxy() as (_, proxy):
        body = {"model": "claude-haiku-4-5", "max_tokens": 10,
                "messages": [{"role": "user", "content": "hello " * 50}]}  # fmt: skip
        async with aiohttp.ClientSession() as session, session.post(
            f"{proxy.base_url}/context/prepare?format=anthropic_messages",
            json=body,
            headers={"x-api-key": "sk-c"},
        ) as response:
            answer = await response.json()
    manifest = answer["manifest"]
    found = manifest["cost_estimate"]
    prices = priced("claude-haiku-4-5")
    ratio = manifest["count_ratio"]
    assert found["input_tokens"] == round(manifest["tokens_after"] * ratio)
    # no breakpoint in the request: the proxy's (cache_marks auto) make the provider write the
    # prompt through the last one, which the request as it came would not have
    marks = manifest["cache_marks"]
    assert marks["placed"] == ["messages[0].content[0]"] and marks["client_marks"] == 0
    assert found["cache_write_tokens"] == round(marks["written_tokens"] * ratio) > 0
    written = found["cache_write_tokens"]
    uncached = found["input_tokens"] - written
    assert prices.cache_write is not None
    expected = uncached * prices.input + written * prices.cache_write
    assert found["input_usd"] == pytest.approx(expected)
    assert found["cache_write_tokens_unchanged"] == 0
    assert found["input_usd_unchanged"] == pytest.approx(found["input_tokens"] * prices.input)
    assert found["prices"]["source"] == "model_map"
    assert found["prices"]["cache_write_per_mtok"] == pytest.approx(prices.cache_write / 1e-6)


async def test_config_prices_win_and_an_unknown_price_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    overrides = [{"model": "gpt-4o*", "input_per_mtok": 1, "output_per_mtok": 1000}]
    async with (
        caching_proxy(prices=overrides) as (fake, proxy),
        openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-c", max_retries=0) as client,
    ):
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
        usage = chat_usage(fake.reported[-1])
        assert float(raw.headers["x-ctxproxy-cost-usd"]) == pytest.approx(
            usage.input * 1e-6 + usage.output * 1e-3, abs=1e-8
        )
        raw = await client.chat.completions.with_raw_response.create(
            model="made-up-model", messages=[{"role": "user", "content": "hi"}]
        )
        assert raw.headers["x-ctxproxy-cost-usd"] == "unknown"
        assert raw.headers["x-ctxproxy-input-tokens"] == str(fake.reported[-1]["prompt_tokens"])
    first, second = access_lines(caplog)[-2:]
    assert first["price"] == "config" and second["price"] == "unknown"
    assert "cost_usd" not in second
    assert json.dumps(second)  # the line stays JSON


async def test_openai_streams_are_priced_in_the_access_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    messages: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "one"}]
    prices = priced("gpt-4o")
    async with (
        caching_proxy() as (fake, proxy),
        openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-c", max_retries=0) as client,
    ):
        for _ in range(2):
            chat = await client.chat.completions.create(
                model="gpt-4o",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            _ = [chunk async for chunk in chat]
        chat_line = access_lines(caplog)[-1]
        chat_reported = chat_usage(fake.reported[-1])
        responses = await client.responses.create(
            model="gpt-4o", instructions=SYSTEM, input="two", stream=True
        )
        _ = [event async for event in responses]
        reported = fake.reported[-1]
    assert chat_reported.cache_read  # the second chat stream read the first one's prefix
    assert (chat_line["input_tokens"], chat_line["cached_tokens"]) == (
        chat_reported.input,
        chat_reported.cache_read,
    )
    assert chat_line["cost_usd"] == pytest.approx(price_of(chat_reported, prices))
    line = access_lines(caplog)[-1]
    assert (line["input_tokens"], line["output_tokens"]) == (
        reported["input_tokens"],
        reported["output_tokens"],
    )
    assert line["price"] == "model_map" and line["cost_usd"] > 0
