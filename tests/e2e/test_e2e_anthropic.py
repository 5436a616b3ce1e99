"""End to end with the real `anthropic` SDK (sync, async, streaming) through the proxy to the fake
Anthropic server: reduction with every tool_use paired, thinking blocks intact, the proxy's reads
invisible to the client, Anthropic's refusal, count_tokens and header forwarding."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest
from anthropic_harness import (
    ARTIFACT_ID,
    BIG,
    CLIENT_TOOL,
    MODEL,
    READ,
    anthropic_proxy,
    long_conversation,
    paired,
    reading_then,
)
from fakes import FakeUpstream, replay_file
from fakes.anthropic import fake_anthropic
from fakes.wire import wire_file
from proxy_harness import RunningProxy, make_settings, start_proxy

MESSAGES = "/v1/messages"


@asynccontextmanager
async def sdk(proxy: RunningProxy, **options: Any) -> AsyncIterator[anthropic.AsyncAnthropic]:
    client = anthropic.AsyncAnthropic(base_url=proxy.url, **options)
    try:
        yield client
    finally:
        await client.close()


def anthropic_version(client: anthropic.AsyncAnthropic) -> str:
    """The `anthropic-version` this SDK sends."""
    return str(client.default_headers["anthropic-version"])


async def test_unchanged_request_goes_upstream_byte_for_byte_with_its_headers(
    tmp_path: Path,
) -> None:
    headers = {"anthropic-beta": "prompt-caching-2024-07-31"}
    # A request with a cache breakpoint of its own (one without any gets the proxy's:
    # tests/e2e/test_e2e_cache_marks.py)
    hello = [{"type": "text", "text": "Hello there", "cache_control": {"type": "ephemeral"}}]
    async with (
        anthropic_proxy(tmp_path) as (fake, proxy),
        sdk(proxy, api_key="sk-ant-client", default_headers=headers) as client,
    ):
        answer = await client.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": hello}],  # type: ignore[typeddict-item]
        )
        assert answer.content[0].type == "text"
        assert answer.content[0].text == "echo: Hello there"
        sent = fake.requests(MESSAGES)[0]
        credential = sent.headers.get("x-api-key") or sent.headers.get("Authorization")
        assert credential in ("sk-ant-client", "Bearer sk-ant-client")  # as the SDK sent it
        assert sent.headers["anthropic-version"] == anthropic_version(client)
        assert sent.headers["anthropic-beta"] == "prompt-caching-2024-07-31"
        assert json.loads(sent.body) == {
            "max_tokens": 100,
            "messages": [{"role": "user", "content": hello}],
            "model": MODEL,
        }


def _check_reduced(body: dict[str, object], original: list[dict[str, object]]) -> None:
    messages = body["messages"]
    assert isinstance(messages, list)
    assert paired(messages)
    assert BIG not in json.dumps(messages)  # every large result was reduced
    sent_assistants = [m for m in messages if m["role"] == "assistant"]
    client_assistants = [m for m in original if m["role"] == "assistant"]
    for message in sent_assistants:  # thinking + signature exactly as the client sent them
        assert message in client_assistants
    assert any(m["content"][0]["type"] == "thinking" for m in sent_assistants)


def test_sync_client_long_conversation_is_reduced_with_every_tool_use_paired(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with anthropic_proxy(tmp_path) as (fake, proxy):
            client = anthropic.Anthropic(base_url=proxy.url, api_key="k")
            messages = long_conversation()
            answer = await asyncio.to_thread(
                client.messages.create,
                model=MODEL,
                max_tokens=200,
                messages=messages,
                tools=[CLIENT_TOOL],
                system=[
                    {
                        "type": "text",
                        "text": "You are careful.",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            )
            assert answer.content[0].type == "text"
            body = fake.requests(MESSAGES)[0].json()
            _check_reduced(body, messages)
            assert body["system"] == [
                {"type": "text", "text": "You are careful.", "cache_control": {"type": "ephemeral"}}
            ]
            assert "ctxproxy_part" not in json.dumps(body)

    asyncio.run(scenario())


async def test_async_client_read_is_executed_by_the_proxy_one_message(tmp_path: Path) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy), sdk(proxy, api_key="k") as client:
        fake.enqueue_many(*reading_then("Line 512 says value=42."))
        answer = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=200, messages=long_conversation(2), tools=[CLIENT_TOOL]
        )
        message = await answer.parse()
        assert [b.type for b in message.content] == ["text"]  # the last round's answer
        assert message.content[-1].text == "Line 512 says value=42."  # type: ignore[union-attr]
        assert all(b.type != "tool_use" for b in message.content)
        assert message.stop_reason == "end_turn"
        assert (message.usage.input_tokens, message.usage.output_tokens) == (220, 16)
        assert answer.headers["x-ctxproxy-synthetic-rounds"] == "1"
        second = fake.requests(MESSAGES)[1].json()
        assert paired(second["messages"])
        read_turn = second["messages"][-2]
        assert read_turn["content"][0] == {
            "type": "thinking",
            "thinking": "Let me read it.",
            "signature": "sig-read",
        }
        assert read_turn["content"][-1]["name"] == READ
        result = second["messages"][-1]["content"][0]
        assert result["type"] == "tool_result" and "line 0: value=0" in result["content"]


async def test_streaming_read_is_one_ordinary_event_stream(tmp_path: Path) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy), sdk(proxy, api_key="k") as client:
        fake.enqueue_many(*reading_then("Found it.", stream=True))
        kinds: list[str] = []
        async with client.messages.stream(
            model=MODEL, max_tokens=200, messages=long_conversation(2), tools=[CLIENT_TOOL]
        ) as stream:
            async for event in stream:
                kinds.append(event.type)
            final = await stream.get_final_message()
        assert kinds.count("message_start") == 1 and kinds.count("message_stop") == 1
        assert all(b.type != "tool_use" for b in final.content)
        assert final.content[-1].text == "Found it."  # type: ignore[union-attr]
        assert [b.type for b in final.content] == ["thinking", "text"]
        assert (final.usage.input_tokens, final.usage.output_tokens) == (220, 16)
        assert final.stop_reason == "end_turn"
        assert len(fake.requests(MESSAGES)) == 2


async def test_unfittable_request_raises_the_sdks_bad_request_error(tmp_path: Path) -> None:
    async with (
        anthropic_proxy(tmp_path) as (fake, proxy),
        sdk(proxy, api_key="k", max_retries=0) as client,
    ):
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.messages.create(
                model=MODEL,
                max_tokens=100,
                system="x " * 20_000,
                messages=[{"role": "user", "content": "hi"}],
            )
        assert "prompt is too long" in str(raised.value)
        body = raised.value.body
        assert isinstance(body, dict)
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        assert body["error"]["message"].startswith("prompt is too long: ")
        assert body["error"]["ctxproxy"]["code"] == "context_length_exceeded"
        assert fake.requests(MESSAGES) == []


async def test_count_tokens_answers_from_the_proxys_count(tmp_path: Path) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy), sdk(proxy, api_key="k") as client:
        short = await client.messages.count_tokens(
            model=MODEL, messages=[{"role": "user", "content": "Hello"}]
        )
        long = await client.messages.count_tokens(
            model=MODEL, messages=long_conversation(), tools=[CLIENT_TOOL]
        )
        assert 0 < short.input_tokens < 50
        assert short.input_tokens < long.input_tokens < 6000  # reduced: what would go upstream
        assert fake.requests() == []


async def test_x_api_key_is_forwarded_in_passthrough_and_a_proxy_key_in_keys_mode(
    tmp_path: Path,
) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{proxy.url}/v1/messages",
                json={
                    "model": MODEL,
                    "max_tokens": 10,
                    "messages": [{"role": "user", "content": "a"}],
                },
                headers={"x-api-key": "sk-ant-own", "anthropic-version": "2023-06-01"},
            ) as response,
        ):
            assert response.status == 200
        assert fake.requests(MESSAGES)[0].headers["x-api-key"] == "sk-ant-own"
    keys = {
        "auth": {"mode": "keys"},
        "tenants": [
            {
                "name": "acme",
                "keys": ["proxy-key"],
                "policy": "small",
                "upstream_key": "sk-ant-operator",
            }
        ],
    }
    async with anthropic_proxy(tmp_path, **keys) as (fake, proxy):
        async with aiohttp.ClientSession() as session:
            body = {
                "model": MODEL,
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "a"}],
            }
            async with session.post(
                f"{proxy.url}/v1/messages", json=body, headers={"x-api-key": "proxy-key"}
            ) as response:
                assert response.status == 200
            async with session.post(
                f"{proxy.url}/v1/messages", json=body, headers={"x-api-key": "wrong"}
            ) as response:
                assert response.status == 401
                error = await response.json()
                assert error["type"] == "error"
                assert error["error"]["type"] == "authentication_error"
        sent = fake.requests(MESSAGES)[0]
        assert sent.headers["x-api-key"] == "sk-ant-operator"
        assert "Authorization" not in sent.headers


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("anthropic-messages-stream-text.sse", ["text"]),
        ("anthropic-messages-stream-tool-use.sse", ["text", "tool_use"]),
        # The documentation's thinking example leaves `usage` out, which the SDK needs.
        ("anthropic-messages-stream-thinking.sse", None),
    ],
)
async def test_recorded_streams_reach_the_sdk_byte_for_byte(
    name: str, kinds: list[str] | None
) -> None:
    raw = wire_file(name).read_bytes()
    async with fake_anthropic() as fake:
        fake.enqueue(replay_file(wire_file(name), chunk_size=50))
        upstream = {"name": "claude", "kind": "anthropic", "base_url": fake.origin}
        proxy = await start_proxy(make_settings(fake.origin, upstreams=[upstream]))
        try:
            async with aiohttp.ClientSession() as session:
                body = {
                    "model": MODEL,
                    "max_tokens": 10,
                    "stream": True,
                    "messages": [{"role": "user", "content": "a"}],
                }
                async with session.post(f"{proxy.url}/v1/messages", json=body) as response:
                    assert await response.read() == raw
            if kinds is None:
                return
            fake.enqueue(replay_file(wire_file(name), chunk_size=50))
            async with (
                sdk(proxy, api_key="k") as client,
                client.messages.stream(
                    model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "a"}]
                ) as stream,
            ):
                final = await stream.get_final_message()
            assert [b.type for b in final.content] == kinds
        finally:
            await proxy.stop()


async def test_offloaded_results_are_previews_inside_the_tool_result_and_headers_say_so(
    tmp_path: Path,
) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy), sdk(proxy, api_key="k") as client:
        answer = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=200, messages=long_conversation(2), tools=[CLIENT_TOOL]
        )
        assert int(answer.headers["x-ctxproxy-tokens-after"]) < int(
            answer.headers["x-ctxproxy-tokens-before"]
        )
        sent = fake.requests(MESSAGES)[0].json()
        result = sent["messages"][2]["content"][0]
        assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_0"
        assert ARTIFACT_ID.search(result["content"]) and "[ctxproxy#" in result["content"]
        assert [t["name"] for t in sent["tools"]] == ["dump", READ, "search_context_artifact"]
        assert set(sent["tools"][1]) == {"name", "description", "input_schema"}


async def test_the_next_turn_carries_the_proxys_reads_at_their_place(tmp_path: Path) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy), sdk(proxy, api_key="k") as client:
        fake.enqueue_many(*reading_then("Line 512 says value=42."))
        history = long_conversation(2)
        first = await client.messages.create(
            model=MODEL, max_tokens=200, messages=history, tools=[CLIENT_TOOL]
        )
        history += [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {"role": "user", "content": "Thanks. And line 513?"},
        ]
        await client.messages.create(
            model=MODEL, max_tokens=200, messages=history, tools=[CLIENT_TOOL]
        )
        sent = fake.requests(MESSAGES)[-1].json()["messages"]
        assert paired(sent)
        names = [
            b.get("name") for m in sent for b in m["content"] if isinstance(m["content"], list)
        ]
        assert READ in names  # the read of the previous turn, put back before its answer
        read_at = next(
            i
            for i, m in enumerate(sent)
            if m["role"] == "assistant" and any(b.get("name") == READ for b in m["content"])
        )
        assert sent[read_at + 2]["content"][0]["text"] == "Line 512 says value=42."


async def test_the_reads_come_back_when_the_client_moves_its_cache_marks(tmp_path: Path) -> None:
    """What Claude Code does on every request: its cache mark moves to the newest user message,
    and its mid-conversation system message goes from a marked block to a plain string. The
    proxy's read of the previous turn is still put back in place."""
    mark = {"type": "ephemeral"}
    async with anthropic_proxy(tmp_path) as (fake, proxy), sdk(proxy, api_key="k") as client:
        fake.enqueue_many(*reading_then("Line 512 says value=42."))
        history = long_conversation(2)
        system = {"role": "system", "content": [{"type": "text", "text": "Env: cwd /w"}]}
        history[1:1] = [{**system, "content": [{**system["content"][0], "cache_control": mark}]}]
        history[-1]["content"][-1]["cache_control"] = mark  # type: ignore[index]
        first = await client.messages.create(
            model=MODEL, max_tokens=200, messages=history, tools=[CLIENT_TOOL]
        )
        history = json.loads(json.dumps(history))
        del history[-1]["content"][-1]["cache_control"]
        history[1] = {"role": "system", "content": "Env: cwd /w"}
        question = {"type": "text", "text": "And 513?", "cache_control": mark}
        history += [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {"role": "user", "content": [question]},
        ]
        await client.messages.create(
            model=MODEL, max_tokens=200, messages=history, tools=[CLIENT_TOOL]
        )
        sent = fake.requests(MESSAGES)[-1].json()["messages"]
        assert paired(sent)
        calls = [b for m in sent if isinstance(m["content"], list) for b in m["content"]]
        assert [b["name"] for b in calls if b.get("type") == "tool_use"].count(READ) == 1


def parallel_conversation(exchanges: int) -> list[dict[str, object]]:
    """Turns of two parallel calls each (one user message answers both), results large."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "Audit the data."}]
    for k in range(exchanges):
        calls = [
            {"type": "tool_use", "id": f"toolu_{k}_{j}", "name": "dump", "input": {"j": j}}
            for j in range(2)
        ]
        results = [
            {"type": "tool_result", "tool_use_id": f"toolu_{k}_{j}", "content": BIG[: 3000 + j]}
            for j in range(2)
        ]
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": f"Part {k}."}, *calls]},
            {"role": "user", "content": [*results, {"type": "text", "text": f"next {k}"}]},
            {"role": "assistant", "content": f"Noted {k}."},
            {"role": "user", "content": f"Continue after {k}."},
        ]
    return messages


async def test_parallel_results_are_reduced_and_turns_dropped_with_every_call_paired(
    tmp_path: Path,
) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy), sdk(proxy, api_key="k") as client:
        messages = parallel_conversation(12)
        await client.messages.create(
            model=MODEL, max_tokens=200, messages=messages, tools=[CLIENT_TOOL]
        )
        sent = fake.requests(MESSAGES)[0].json()["messages"]
        assert paired(sent)
        # the task stays (a string content goes as its one text block: cache_marks auto)
        assert sent[0] == {"role": "user", "content": [{"type": "text", "text": "Audit the data."}]}
        assert len(sent) < len(messages)  # old turns went
        notice = sent[1]  # where the dropped turns were: one user message saying so
        text = notice["content"][0]["text"]
        assert notice["role"] == "user" and text.startswith("[ctxproxy#")
        assert "were removed from this conversation" in text
        assert notice["content"][0]["cache_control"] == {"type": "ephemeral"}
        for message in sent:  # a user message keeps its text after its results
            blocks = message["content"] if isinstance(message["content"], list) else []
            kinds = [b["type"] for b in blocks]
            if "tool_result" in kinds:
                assert kinds == ["tool_result", "tool_result", "text"]


async def test_a_streaming_request_that_cannot_fit_is_refused_before_the_stream(
    tmp_path: Path,
) -> None:
    async with (
        anthropic_proxy(tmp_path) as (fake, proxy),
        sdk(proxy, api_key="k", max_retries=0) as client,
    ):
        with pytest.raises(anthropic.BadRequestError) as raised:
            async with client.messages.stream(
                model=MODEL,
                max_tokens=100,
                system="x " * 20_000,
                messages=[{"role": "user", "content": "hi"}],
            ) as stream:
                await stream.get_final_message()
        assert "prompt is too long" in str(raised.value)
        assert fake.requests(MESSAGES) == []


async def test_the_dry_run_prepares_a_messages_body(tmp_path: Path) -> None:
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        body = {"model": MODEL, "max_tokens": 100, "messages": long_conversation(2)}
        async with aiohttp.ClientSession() as session:
            url = f"{proxy.url}/v1/context/prepare?format=anthropic_messages"
            async with session.post(url, json=body, headers={"x-api-key": "k"}) as response:
                assert response.status == 200
                prepared = await response.json()
            url = f"{proxy.url}/v1/context/prepare?format=nope"
            async with session.post(url, json=body) as response:
                assert response.status == 400
        assert prepared["changed"] is True
        assert paired(prepared["body"]["messages"])
        assert BIG not in json.dumps(prepared["body"])
        assert prepared["manifest"]["tokens_after"] < prepared["manifest"]["tokens_before"]
        assert fake.requests() == []


async def test_messages_on_an_openai_compatible_upstream_go_to_its_messages_route(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    """vLLM and llama.cpp serve `/v1/messages` too: the prepared body goes there."""
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "a"}]}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.url}/v1/messages", json=body) as response,
    ):
        assert response.status == 200
        assert "x-ctxproxy-tokens-before" in response.headers
    assert [r.path for r in fake_upstream.received] == ["/v1/messages"]
    assert fake_upstream.last.json() == body


async def test_a_mid_conversation_system_message_is_kept_where_it_stands_and_the_rest_reduced(
    tmp_path: Path,
) -> None:
    """What Claude Code sends today: a `system` message inside `messages` (beta
    `mid-conversation-system-…`). The request is prepared, not forwarded as invalid."""
    reminder = {
        "role": "system",
        "content": [{"type": "text", "text": "Environment: cwd is /w", "cache_control": {}}],
    }
    messages = long_conversation(4)
    messages[1:1] = [reminder]
    messages[6:6] = [{"role": "system", "content": "The user switched to plan mode."}]
    async with anthropic_proxy(tmp_path) as (fake, proxy), sdk(proxy, api_key="k") as client:
        answer = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=200, messages=messages, tools=[CLIENT_TOOL],
            extra_headers={"anthropic-beta": "mid-conversation-system-2026-04-07"},
        )
        assert answer.headers["x-ctxproxy-outcome"].startswith("reduced")
        assert "invalid_forwarded" not in answer.headers.get("x-ctxproxy-notes", "")
        sent = fake.requests(MESSAGES)[0]
        assert sent.headers["anthropic-beta"] == "mid-conversation-system-2026-04-07"
        out = sent.json()["messages"]
        assert [m for m in out if m["role"] == "system"] == [reminder, messages[6]]
        assert out[1] == reminder and paired(out)
        assert ARTIFACT_ID.search(json.dumps(out))
