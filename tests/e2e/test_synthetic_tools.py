"""The synthetic read tools: executed by the proxy, invisible to the client, streaming included."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
import openai
import pytest
from fakes import (
    FakeUpstream,
    completion,
    error_reply,
    invalid_json_reply,
    json_reply,
    make_usage,
    never_reply,
    stream_completion,
)
from fakes.bodies import default_error_body
from multidict import CIMultiDict
from synthetic_harness import (
    BIG,
    CHAT,
    CLIENT_KEY,
    CLIENT_TOOL,
    READ,
    SEARCH,
    UNKNOWN_ID,
    SyntheticProxies,
    call_spec,
    calling,
    conversation,
    read_call,
    sse_chunks,
    sse_data,
    streamed_text,
    tool_names,
    tool_results,
)

from proxy.artifacts.store import is_artifact_id


def sdk(base_url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)


async def post_raw(url: str, body: dict[str, Any]) -> tuple[int, CIMultiDict[str], bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/chat/completions", json=body, headers=CLIENT_KEY) as response,
    ):
        return response.status, CIMultiDict(response.headers), await response.read()


async def test_read_round_is_invisible_and_usage_summed(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue_many(
        calling(read_call(100, 300), usage=make_usage(1000, 10)),
        completion("Line 512 holds the value 5003.", usage=make_usage(1300, 20)),
    )
    async with sdk(proxy.base_url) as client:
        raw = await client.chat.completions.with_raw_response.create(**conversation())
    reply = raw.parse()
    assert reply.choices[0].message.content == "Line 512 holds the value 5003."
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (
        2300,
        30,
        2330,
    )
    assert raw.headers["x-ctxproxy-synthetic-rounds"] == "1"
    assert raw.headers["x-ctxproxy-artifact-reads"] == "1"
    first, second = fake_upstream.requests(CHAT)
    assert tool_names(first) == ["dump", READ, SEARCH]
    assert tool_names(second) == ["dump", READ, SEARCH]
    messages = second.json()["messages"]
    assert messages[:3] == first.json()["messages"]
    call = messages[3]["tool_calls"][0]
    assert messages[3]["role"] == "assistant" and call["function"]["name"] == READ
    assert messages[4]["role"] == "tool" and messages[4]["tool_call_id"] == call["id"]
    result = json.loads(messages[4]["content"])
    assert result["content"] == BIG[100:400]
    assert (result["offset"], result["next_offset"], result["total_chars"]) == (100, 400, len(BIG))
    assert result["untrusted_content"] is True and is_artifact_id(result["artifact_id"])


async def test_stream_continues_across_rounds_with_one_done(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy.synthetic")
    proxy = await proxies.start()
    fake_upstream.enqueue_many(
        calling(read_call(0, 50), stream=True, text="Let me check. ", usage=make_usage(1000, 10)),
        stream_completion(
            ["It is", " 5003."],
            usage=make_usage(1100, 5),
            id="chatcmpl-second",
            model="other-model",
        ),
    )
    body = conversation(stream=True, stream_options={"include_usage": True})
    status, headers, raw = await post_raw(proxy.base_url, body)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert READ.encode() not in raw and SEARCH.encode() not in raw
    data = sse_data(raw)
    assert data.count(b"[DONE]") == 1 and data[-1] == b"[DONE]"
    chunks = sse_chunks(raw)
    assert {(c["id"], c["model"]) for c in chunks} == {(chunks[0]["id"], chunks[0]["model"])}
    assert chunks[0]["id"] != "chatcmpl-second" and chunks[0]["model"] != "other-model"
    assert sum("role" in c["choices"][0]["delta"] for c in chunks if c["choices"]) == 1
    assert streamed_text(chunks) == "Let me check. It is 5003."
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert [f for f in finishes if f] == ["stop"]
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert len(usage) == 1 and chunks[-1]["usage"] == usage[0]
    assert (usage[0]["prompt_tokens"], usage[0]["total_tokens"]) == (2100, 2115)
    second = fake_upstream.requests(CHAT)[1].json()
    assert second["stream"] is True
    assert second["messages"][3]["content"] == "Let me check. "
    assert tool_results(fake_upstream.requests(CHAT)[1])[0]["content"] == BIG[:50]
    # A stream's headers left before the rounds were known: the counts are logged instead.
    assert "x-ctxproxy-synthetic-rounds" not in headers
    [line] = [r.getMessage() for r in caplog.records if r.name == "ctxproxy.synthetic"]
    request_id = headers["x-ctxproxy-request-id"]
    assert line == f"request {request_id}: synthetic rounds=1 artifact reads=1"


async def test_search_through_the_sdk_stream(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    search = lambda aid: call_spec(SEARCH, {"artifact_id": aid, "pattern": "LINE 512:"})  # noqa: E731
    fake_upstream.enqueue_many(
        calling(search, stream=True),
        stream_completion(["Found", " it."]),
    )
    text, calls, finish = "", [], []
    async with sdk(proxy.base_url) as client:
        stream = await client.chat.completions.create(**conversation(stream=True))
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                calls += choice.delta.tool_calls or []
                finish += [choice.finish_reason] if choice.finish_reason else []
    assert (text, calls, finish) == ("Found it.", [], ["stop"])
    result = tool_results(fake_upstream.requests(CHAT)[1])[0]
    assert result["total_matches"] == 1
    match = result["matches"][0]
    assert match["offset"] == BIG.index("line 512:") and match["line"] == 513
    assert "line 512:" in match["context"]


@pytest.mark.parametrize("stream", [False, True])
async def test_mixed_response_returns_client_calls_only(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, stream: bool
) -> None:
    proxy = await proxies.start()
    dump = lambda aid: call_spec("dump", {"page": 2}, "call_client")  # noqa: E731
    fake_upstream.enqueue(calling(read_call(0, 10), dump, stream=stream))
    async with sdk(proxy.base_url) as client:
        if stream:
            events = await client.chat.completions.create(**conversation(stream=True))
            deltas, finish = [], []
            async for chunk in events:
                deltas += chunk.choices[0].delta.tool_calls or []
                finish += [chunk.choices[0].finish_reason] if chunk.choices[0].finish_reason else []
            assert {d.index for d in deltas} == {0}
            assert deltas[0].id == "call_client" and deltas[0].function is not None
            assert deltas[0].function.name == "dump"
            assert "".join(d.function.arguments or "" for d in deltas if d.function) == (
                '{"page": 2}'
            )
        else:
            reply = await client.chat.completions.create(**conversation())
            calls = reply.choices[0].message.tool_calls or []
            assert [(c.id, c.function.name) for c in calls] == [("call_client", "dump")]
            finish = [reply.choices[0].finish_reason]
    assert finish == ["tool_calls"]
    assert len(fake_upstream.requests(CHAT)) == 1


async def test_unknown_artifact_is_an_error_result_for_the_model(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue_many(calling(read_call(0, 10, UNKNOWN_ID)), completion("Sorry."))
    status, _, raw = await post_raw(proxy.base_url, conversation())
    assert status == 200
    assert json.loads(raw)["choices"][0]["message"]["content"] == "Sorry."
    result = tool_results(fake_upstream.requests(CHAT)[1])[0]
    assert result["error"]["code"] == "artifact_not_found"


@pytest.mark.parametrize("stream", [False, True])
async def test_round_cap_last_round_has_no_synthetic_tools(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, stream: bool
) -> None:
    proxy = await proxies.start(max_rounds=2)
    fake_upstream.enqueue_many(
        *[calling(read_call(i * 10, 10), stream=stream, usage=make_usage(100, 1)) for i in range(3)]
    )
    body = conversation(stream=stream, tool_choice={"type": "function", "function": {"name": READ}})
    status, headers, raw = await post_raw(proxy.base_url, body)
    assert status == 200
    requests = fake_upstream.requests(CHAT)
    assert [tool_names(r) for r in requests] == [
        ["dump", READ, SEARCH],
        ["dump", READ, SEARCH],
        ["dump"],
    ]
    assert "tool_choice" in requests[1].json() and "tool_choice" not in requests[2].json()
    assert [r["content"] for r in tool_results(requests[2])] == [BIG[0:10], BIG[10:20]]
    assert READ.encode() not in raw
    if stream:
        chunks = sse_chunks(raw)
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        assert [f for f in finishes if f] == ["stop"]
        assert sse_data(raw).count(b"[DONE]") == 1
    else:
        choice = json.loads(raw)["choices"][0]
        assert choice["finish_reason"] == "stop" and "tool_calls" not in choice["message"]
        assert json.loads(raw)["usage"]["prompt_tokens"] == 300
        assert (headers["x-ctxproxy-synthetic-rounds"], headers["x-ctxproxy-artifact-reads"]) == (
            "2",
            "2",
        )


async def test_several_choices_do_not_loop(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    read = {
        "id": "call_r",
        "type": "function",
        "function": {"name": READ, "arguments": '{"artifact_id": "x"}'},
    }
    choices = [
        {
            "index": i,
            "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": f"c{i}", "tool_calls": [read]},
        }
        for i in range(2)
    ]
    fake_upstream.enqueue(
        json_reply(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o",
                "choices": choices,
            }
        )
    )
    status, _, raw = await post_raw(proxy.base_url, conversation(n=2))
    assert status == 200
    got = json.loads(raw)["choices"]
    assert [(c["message"]["content"], c["finish_reason"]) for c in got] == [
        ("c0", "stop"),
        ("c1", "stop"),
    ]
    assert all("tool_calls" not in c["message"] for c in got)
    assert len(fake_upstream.requests(CHAT)) == 1


async def test_upstream_errors_in_json_rounds(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue_many(calling(read_call(0, 10)), error_reply(429))
    status, headers, raw = await post_raw(proxy.base_url, conversation())
    assert status == 429 and headers["retry-after"] == "1"
    assert json.loads(raw)["error"]["code"] == "rate_limit_exceeded"
    fake_upstream.enqueue(invalid_json_reply())
    status, _, raw = await post_raw(proxy.base_url, conversation())
    assert status == 502
    assert json.loads(raw)["error"]["code"] == "upstream_invalid_response"


@pytest.mark.parametrize(
    ("second", "code"),
    [
        (error_reply(500), None),
        (stream_completion(["a", "b", "c"], abort_after=2), "upstream_unavailable"),
    ],
)
async def test_later_round_failure_is_an_sse_error_event(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, second: Any, code: str | None
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue_many(calling(read_call(0, 10), stream=True, text="Hm. "), second)
    status, _, raw = await post_raw(proxy.base_url, conversation(stream=True))
    assert status == 200
    data = sse_data(raw)
    assert b"[DONE]" not in data
    error = json.loads(data[-1])["error"]
    if code is None:  # the upstream's own envelope passes through
        assert error == default_error_body(500)["error"]
    else:
        assert error["code"] == code and error["ctxproxy"]["request_id"]
    assert streamed_text([json.loads(d) for d in data[:-1]]).startswith("Hm. ")


async def test_client_disconnect_mid_synthetic_round_frees_upstream(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue_many(
        calling(read_call(0, 10), stream=True, text="Reading. "),
        stream_completion([f"w{i} " for i in range(300)], delay_s=0.02),
    )
    seen = b""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{proxy.base_url}/chat/completions", json=conversation(stream=True),
            headers=CLIENT_KEY,
        ) as response,
    ):
        while b"w1 " not in seen:
            chunk = await asyncio.wait_for(response.content.readany(), 30)
            assert chunk, f"the stream ended before the second round's text: {seen!r}"
            seen += chunk
    await fake_upstream.wait_idle()
    assert len(fake_upstream.requests(CHAT)) == 2
    assert fake_upstream.completed == 1 and fake_upstream.cancelled == 1


async def test_client_disconnect_while_json_round_waits_frees_upstream(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue_many(calling(read_call(0, 10)), never_reply())
    client = asyncio.create_task(post_raw(proxy.base_url, conversation()))
    await fake_upstream.wait_for_requests(2)
    client.cancel()  # the client gives up while the second round waits for its first byte
    with pytest.raises(asyncio.CancelledError):
        await client
    await fake_upstream.wait_idle()
    assert len(fake_upstream.requests(CHAT)) == 2
    assert fake_upstream.completed == 1 and fake_upstream.cancelled == 1


async def test_zero_rounds_sends_no_synthetic_tools(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(max_rounds=0)
    fake_upstream.enqueue(calling(read_call(0, 10), text="I would read it."))
    status, headers, raw = await post_raw(proxy.base_url, conversation())
    assert status == 200
    [sent] = fake_upstream.requests(CHAT)
    assert tool_names(sent) == ["dump"]
    assert sent.json()["messages"][2]["content"].startswith("[ctxproxy")  # still offloaded
    message = json.loads(raw)["choices"][0]["message"]
    assert message["content"] == "I would read it." and "tool_calls" not in message
    assert headers["x-ctxproxy-synthetic-rounds"] == "0"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_client_tool_named_read_context_artifact_stays_the_clients(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, stream: bool
) -> None:
    # Issue 11 item 10: two tools of one name went upstream and the proxy ran the client's.
    proxy = await proxies.start()
    own = lambda aid: call_spec(READ + "_ctxproxy", {"artifact_id": aid}, "call_own")  # noqa: E731
    clients = lambda aid: call_spec(READ, {"artifact_id": aid}, "call_client")  # noqa: E731
    fake_upstream.enqueue_many(calling(own, stream=stream), calling(clients, stream=stream))
    clients_tool = {
        "type": "function",
        "function": {
            "name": READ,
            "description": "The client's own reader",
            "parameters": {"type": "object"},
        },
    }
    body = conversation(stream=stream) | {"tools": [CLIENT_TOOL, clients_tool]}
    status, _, raw = await post_raw(proxy.base_url, body)
    assert status == 200
    first, second = fake_upstream.requests(CHAT)
    assert tool_names(first) == ["dump", READ, READ + "_ctxproxy", SEARCH]
    assert first.json()["tools"][1] == clients_tool
    page = tool_results(second)[0]["content"]
    assert page and BIG.startswith(page)
    if stream:
        calls = [
            c
            for chunk in sse_chunks(raw)
            if chunk["choices"]
            for c in chunk["choices"][0]["delta"].get("tool_calls", [])
            if c.get("id")
        ]
        assert [(c["id"], c["function"]["name"]) for c in calls] == [("call_client", READ)]
    else:
        calls = json.loads(raw)["choices"][0]["message"]["tool_calls"]
        assert [(c["id"], c["function"]["name"]) for c in calls] == [("call_client", READ)]


async def test_a_stream_flag_of_1_is_refused_before_any_round(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    # Issue 11 item 11: the upstream streamed, the proxy expected a JSON round: 502.
    proxy = await proxies.start()
    fake_upstream.enqueue(calling(read_call(0, 10), stream=True))
    status, _, raw = await post_raw(proxy.base_url, conversation(stream=1))
    assert status == 400
    error = json.loads(raw)["error"]
    assert (error["code"], error["param"]) == ("invalid_request", "stream")
    assert fake_upstream.requests(CHAT) == []
