"""Prompt caching made visible: the upstream's cached input tokens in `x-ctxproxy-cached-tokens`,
the access line and `ctxproxy_cached_input_tokens_total{upstream}` (OpenAI
`prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from anthropic_harness import MODEL, anthropic_proxy
from fakes import FakeUpstream, completion
from fakes.anthropic import anthropic_message, anthropic_stream, text_block, usage
from proxy_harness import RunningProxy


def metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name):
            return float(line.rsplit(" ", 1)[1])
    return None


async def test_openai_cached_tokens_are_reported(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    fake_upstream.enqueue(
        completion(
            "hi",
            usage={
                "prompt_tokens": 2000,
                "completion_tokens": 1,
                "total_tokens": 2001,
                "prompt_tokens_details": {"cached_tokens": 1536},
            },
        )
    )
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{proxy.base_url}/chat/completions", json=body) as response:
            assert response.status == 200
            assert response.headers["x-ctxproxy-cached-tokens"] == "1536"
        async with session.get(f"{proxy.url}/metrics") as response:
            text = await response.text()
    assert metric(text, 'ctxproxy_cached_input_tokens_total{upstream="fake"}') == 1536


async def test_anthropic_cache_reads_are_reported(tmp_path: Path) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        fake.enqueue(
            anthropic_message([text_block("hi")], usage_=usage(12, 3, cache_read_input_tokens=4000))
        )
        body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "a"}]}
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{proxy.url}/v1/messages", json=body) as response:
                assert response.status == 200
                assert response.headers["x-ctxproxy-cached-tokens"] == "4000"
            async with session.post(f"{proxy.url}/v1/messages", json=body) as response:
                assert "x-ctxproxy-cached-tokens" not in response.headers  # none reported
            async with session.get(f"{proxy.url}/metrics") as response:
                text = await response.text()
        assert metric(text, 'ctxproxy_cached_input_tokens_total{upstream="claude"}') == 4000


async def test_streamed_cache_reads_are_counted_in_the_metric(tmp_path: Path) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        fake.enqueue(
            anthropic_stream([text_block("hi")], usage_=usage(12, 3, cache_read_input_tokens=700))
        )
        body = {
            "model": MODEL,
            "max_tokens": 5,
            "stream": True,
            "messages": [{"role": "user", "content": "a"}],
        }
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{proxy.url}/v1/messages", json=body) as response:
                assert b"cache_read_input_tokens" in await response.read()
            async with session.get(f"{proxy.url}/metrics") as response:
                text = await response.text()
        assert metric(text, 'ctxproxy_cached_input_tokens_total{upstream="claude"}') == 700
