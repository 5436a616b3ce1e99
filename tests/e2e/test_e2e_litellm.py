"""The `litellm` upstream kind end to end: the `openai` SDK -> ctxproxy -> litellm -> a provider
(the fake upstream, spoken to by litellm's `openai` provider). Answers, streams and errors reach
the client in the OpenAI format, and the engine prepares what goes through litellm as always."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from fakes import FakeUpstream, completion, error_reply, stream_completion
from pipeline_harness import agent_history
from proxy_harness import RunningProxy, make_settings, start_proxy
from shared_tokens import counter_for

CHAT = "/v1/chat/completions"
OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 20000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


@pytest.fixture
async def proxy(fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    """gpt-4o* goes through litellm (provider `openai`, pointed at the fake); others direct."""
    litellm_route = {
        "name": "via-litellm",
        "kind": "litellm",
        "provider": "openai",
        "base_url": fake_upstream.base_url,
        "timeouts": {"total_s": 20},
    }
    direct = {"name": "direct", "base_url": "http://127.0.0.1:1/v1"}
    settings = make_settings(
        fake_upstream.base_url,
        upstreams=[direct, litellm_route],
        routes=[{"model": "gpt-4o*", "upstream": "via-litellm"}],
    )
    running = await start_proxy(settings)
    yield running
    await running.stop()


def client(proxy: RunningProxy) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0)


def history_with_a_large_result() -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
    return [
        {"role": "user", "content": "find the failing test"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "match line\n" * 3000},
        {"role": "user", "content": "and now?"},
    ]


async def test_an_answer_through_litellm_is_prepared_and_arrives_in_openai_format(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(completion("through litellm"), path=CHAT)
    async with client(proxy) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=history_with_a_large_result(),  # type: ignore[arg-type]
        )
    answer = raw.parse()
    assert answer.choices[0].message.content == "through litellm"
    sent = fake_upstream.last
    assert sent.headers["Authorization"] == "Bearer sk-client"
    tool_message = sent.json()["messages"][2]
    assert tool_message["tool_call_id"] == "call_1"  # the pair stays whole
    assert len(tool_message["content"]) < 4000 and "artifact" in tool_message["content"]
    assert "offload_tool_results:1" in raw.headers["x-ctxproxy-actions"]


async def test_a_stream_through_litellm_arrives_as_openai_chunks(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(stream_completion(["str", "eam", "ed"]), path=CHAT)
    async with client(proxy) as sdk:
        stream = await sdk.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "streamed"
    assert fake_upstream.last.json()["stream"] is True


async def test_tool_calls_through_litellm_reach_the_client(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    call = {"id": "call_9", "name": "lookup", "arguments": '{"q": 1}'}
    fake_upstream.enqueue(completion(None, tool_calls=[call]), path=CHAT)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    async with client(proxy) as sdk:
        answer = await sdk.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "look it up"}],
            tools=tools,  # type: ignore[arg-type]
        )
    [made] = answer.choices[0].message.tool_calls or []
    assert made.id == "call_9" and made.function.name == "lookup"  # type: ignore[union-attr]


async def test_a_providers_context_window_error_reaches_the_client_as_context_length_exceeded(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    # The prompt already fits the stated window: no tighter retry, the provider's error goes back.
    fake_upstream.enqueue(error_reply(400, OVERFLOW), path=CHAT)
    async with client(proxy) as sdk:
        with pytest.raises(openai.BadRequestError) as raised:
            await sdk.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi " * 50}]
            )
    assert raised.value.code == "context_length_exceeded"
    assert "maximum context length is 8192 tokens" in raised.value.message
    assert len(fake_upstream.requests(CHAT)) == 1


async def test_an_overflow_through_litellm_leads_to_one_tighter_retry(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    messages = agent_history(30)
    fake_upstream.enqueue_many(error_reply(400, OVERFLOW), completion("fits now"), path=CHAT)
    async with client(proxy) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=messages,  # type: ignore[arg-type]
        )
    assert raw.parse().choices[0].message.content == "fits now"
    assert raw.headers["x-ctxproxy-notes"] == "window_corrected,retried_after_overflow"
    first, second = (r.json() for r in fake_upstream.requests(CHAT))
    counter = counter_for("gpt-4o")
    assert counter.count_request(second) <= 8192 < counter.count_request(first)
