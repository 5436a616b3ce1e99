"""End to end: the `openai` SDK -> the proxy -> a `litellm` upstream for an Anthropic model whose
`api_base` is the fake Anthropic server. Answers and streams arrive in OpenAI's format, tool calls
included; the provider's context-window error reaches the client as `context_length_exceeded`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import anthropic
import openai
import pytest
from fakes import FakeUpstream
from fakes.anthropic import (
    anthropic_stream,
    fake_anthropic,
    prompt_too_long,
    text_block,
    tool_use_block,
)
from proxy_harness import RunningProxy, make_settings, start_proxy

MODEL = "claude-haiku-4-5"
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@asynccontextmanager
async def litellm_proxy() -> AsyncIterator[tuple[FakeUpstream, RunningProxy, openai.AsyncOpenAI]]:
    async with fake_anthropic() as fake:
        upstream = {
            "name": "claude",
            "kind": "litellm",
            "provider": "anthropic",
            "base_url": fake.origin,
            "timeouts": {"first_byte_s": 30, "idle_read_s": 30, "total_s": 60},
        }
        proxy = await start_proxy(make_settings(fake.origin, upstreams=[upstream]))
        client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-ant-client", max_retries=0)
        try:
            yield fake, proxy, client
        finally:
            await client.close()
            await proxy.stop()


async def test_answers_and_streams_arrive_in_openai_format_tool_calls_included() -> None:
    async with litellm_proxy() as (fake, _, client):
        answer = await client.chat.completions.create(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Hello there"}]
        )
        assert answer.choices[0].message.content == "echo: Hello there"
        sent = fake.requests("/v1/messages")[0]
        assert sent.headers["x-api-key"] == "sk-ant-client"
        assert sent.json()["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "Hello there"}]}
        ] or sent.json()["messages"] == [{"role": "user", "content": "Hello there"}]

        fake.enqueue(
            anthropic_stream(
                [
                    text_block("Let me check."),
                    tool_use_block("toolu_1", "get_weather", {"city": "Paris"}),
                ]
            )
        )
        stream = await client.chat.completions.create(
            model=MODEL,
            max_tokens=50,
            stream=True,
            tools=[TOOL],
            messages=[{"role": "user", "content": "Weather in Paris?"}],
        )
        text, arguments, names, finish = "", "", [], None
        async for chunk in stream:
            assert chunk.object == "chat.completion.chunk"
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            text += delta.content or ""
            for call in delta.tool_calls or []:
                names += [call.function.name] if call.function and call.function.name else []
                arguments += (call.function.arguments or "") if call.function else ""
            finish = chunk.choices[0].finish_reason or finish
        assert text == "Let me check."
        assert names == ["get_weather"] and json.loads(arguments) == {"city": "Paris"}
        assert finish == "tool_calls"
        assert fake.requests("/v1/messages")[1].json()["tools"][0]["name"] == "get_weather"


async def test_a_context_window_error_reaches_the_client_as_context_length_exceeded() -> None:
    async with litellm_proxy() as (fake, _, client):
        fake.enqueue(prompt_too_long(250_000, 200_000))
        with pytest.raises(openai.BadRequestError) as raised:
            await client.chat.completions.create(
                model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Hi"}]
            )
        assert raised.value.code == "context_length_exceeded"
        assert "prompt is too long" in raised.value.message


@asynccontextmanager
async def claude_code_on_vllm() -> AsyncIterator[tuple[FakeUpstream, RunningProxy]]:
    """An Anthropic-format client on an OpenAI-compatible server (`hosted_vllm` via litellm)."""
    async with FakeUpstream() as fake:
        upstream = {
            "name": "local",
            "kind": "litellm",
            "provider": "hosted_vllm",
            "base_url": fake.base_url,
            "timeouts": {"first_byte_s": 30, "idle_read_s": 30, "total_s": 60},
        }
        proxy = await start_proxy(make_settings(fake.base_url, upstreams=[upstream]))
        try:
            yield fake, proxy
        finally:
            await proxy.stop()


async def test_an_anthropic_client_reaches_an_openai_compatible_model_through_litellm() -> None:
    async with claude_code_on_vllm() as (fake, proxy):
        client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="sk-local", max_retries=0)
        try:
            answer = await client.messages.create(
                model="qwen3-coder",
                max_tokens=50,
                system="Be brief.",
                messages=[{"role": "user", "content": "Hello there"}],
            )
            assert answer.content[0].type == "text"
            assert answer.content[0].text == "echo: Hello there"
            sent = fake.requests("/v1/chat/completions")[0].json()
            assert sent["model"] == "qwen3-coder"
            assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
            async with client.messages.stream(
                model="qwen3-coder",
                max_tokens=50,
                messages=[{"role": "user", "content": "Stream it"}],
            ) as stream:
                final = await stream.get_final_message()
            assert final.content[0].text == "echo: Stream it"  # type: ignore[union-attr]
            assert fake.requests("/v1/chat/completions")[1].json()["stream"] is True
        finally:
            await client.close()


async def test_an_anthropic_stream_through_litellm_ends_with_message_stop_not_done() -> None:
    """On the raw bytes: Anthropic's event grammar ends with `message_stop`; OpenAI's
    `data: [DONE]` marker never follows it (a client parsing Anthropic events would choke)."""
    async with claude_code_on_vllm() as (_, proxy):
        body = {"model": "qwen3-coder", "max_tokens": 50, "stream": True,
                "messages": [{"role": "user", "content": "Stream it"}]}  # fmt: skip
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{proxy.url}/v1/messages", json=body, headers={"x-api-key": "k"}) as r,
        ):
            assert r.status == 200
            raw = await r.read()
    events = [line for line in raw.split(b"\n") if line.startswith(b"event: ")]
    assert events[0] == b"event: message_start" and events[-1] == b"event: message_stop"
    assert b"[DONE]" not in raw


async def test_an_anthropic_client_through_litellm_to_anthropic_gets_cache_breakpoints() -> None:
    """litellm's Messages interface to the provider `anthropic` passes the breakpoints on: a
    client that placed none gets the proxy's (`cache_marks: auto`), as on the `anthropic` kind."""
    async with litellm_proxy() as (fake, proxy, _):
        client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="sk-ant", max_retries=0)
        async with client:
            await client.messages.create(
                model=MODEL, max_tokens=50, system="Be brief.",
                messages=[{"role": "user", "content": "Hello there"}],
            )  # fmt: skip
        sent = fake.requests("/v1/messages")[0].json()
    mark = {"type": "ephemeral"}
    assert sent["system"] == [{"type": "text", "text": "Be brief.", "cache_control": mark}]
    hello = {"type": "text", "text": "Hello there", "cache_control": mark}
    assert sent["messages"] == [{"role": "user", "content": [hello]}]
