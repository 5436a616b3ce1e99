"""`proxy.completion.run`: one completion against the upstream double, relayed or looped."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

import pytest
from completion_harness import (
    EXTRA_HEADERS,
    REQUEST_ID,
    answer,
    chunk,
    data_of,
    drain,
    make_context,
    prepared,
    read_call,
    stored,
    tool_call,
)
from upstream_double import BROKEN, Answer, UpstreamDouble, broken, json_answer, sse_answer

from proxy.artifacts.store import MemoryStore
from proxy.completion.reply import WHOLE_BODY_BYTES, relayed
from proxy.completion.rounds import READS_HEADER, ROUNDS_HEADER
from proxy.completion.run import run_completion
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.jsonio import loads
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL
from proxy.upstream.base import UpstreamError

HOP_HEADERS = {
    "Connection": "keep-alive",
    "Content-Length": "999",
    "Content-Encoding": "gzip",
    "Server": "upstream",
    "Date": "Thu, 01 Jan 2026 00:00:00 GMT",
    "x-request-id": "req_up",
}


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


# -- without synthetic tools: relayed as it is -------------------------------------------------


async def test_plain_answer_is_relayed_byte_for_byte() -> None:
    raw = b'{"id": "x",  "object": "chat.completion", "n": 1e400}'
    upstream = UpstreamDouble(json_answer(raw, headers=HOP_HEADERS))
    context = make_context(upstream)
    request = prepared(max_rounds=None)
    reply = await run_completion(context, request)
    assert (reply.status, reply.body, reply.stream) == (200, raw, None)
    assert list(reply.headers.items()) == [
        ("Content-Type", "application/json"),
        ("x-request-id", "req_up"),
        *EXTRA_HEADERS.items(),
    ]
    [call] = upstream.calls
    assert (call.method, call.path, call.body) == ("POST", "/chat/completions", request.body)
    assert list(call.headers.items()) == [
        ("Authorization", "Bearer sk-up"),
        ("X-Tag", "t"),
        ("Content-Type", "application/json"),
    ]
    assert list(context.headers.items()) == [("Authorization", "Bearer sk-up"), ("X-Tag", "t")]
    assert upstream.all_closed
    assert [c.upstream for c in context.stats.upstream_calls] == ["fake"]


async def test_a_client_content_type_is_replaced_in_place() -> None:
    upstream = UpstreamDouble(json_answer({}))
    context = make_context(upstream)
    context.headers.add("content-type", "text/plain")
    context.headers.add("X-Last", "1")
    await run_completion(context, prepared(max_rounds=None))
    assert list(upstream.calls[0].headers.items())[-2:] == [
        ("Content-Type", "application/json"),
        ("X-Last", "1"),
    ]


@pytest.mark.parametrize("max_rounds", [None, 2])
async def test_an_error_answer_is_relayed_with_its_status(max_rounds: int | None) -> None:
    body = b'{"error": {"message": "slow down", "code": "rate_limit_exceeded"}}'
    upstream = UpstreamDouble(json_answer(body, status=429, headers={"retry-after": "1"}))
    reply = await run_completion(make_context(upstream), prepared(max_rounds))
    assert (reply.status, reply.body) == (429, body)
    assert reply.headers["retry-after"] == "1"
    assert reply.headers["x-ctxproxy-policy"] == "p"
    if max_rounds is not None:
        assert (reply.headers[ROUNDS_HEADER], reply.headers[READS_HEADER]) == ("0", "0")
    assert upstream.all_closed


async def test_a_plain_stream_is_relayed_chunk_for_chunk() -> None:
    events: list[dict[str, Any] | bytes] = [
        chunk({"content": "Hi"}),
        b'data: {"raw" :  1}\n\n',
        b": keep-alive\n\n",
    ]
    upstream = UpstreamDouble(sse_answer(events))
    reply = await run_completion(make_context(upstream), prepared(max_rounds=None, stream=True))
    assert reply.status == 200 and reply.body is None
    assert reply.headers["Content-Type"] == "text/event-stream"
    assert reply.headers["x-ctxproxy-actions"] == "none"
    assert not upstream.all_closed  # open while the client reads
    assert await drain(reply) == upstream.responses[0].delivered
    assert upstream.all_closed


async def test_a_broken_plain_stream_ends_with_one_error_event() -> None:
    upstream = UpstreamDouble(sse_answer([chunk({"content": "Hi"})], done=False, error=broken()))
    reply = await run_completion(make_context(upstream), prepared(max_rounds=None, stream=True))
    items = await drain(reply)
    assert len(items) == 2 and items[0] == upstream.responses[0].delivered[0]
    [error] = data_of(items[1:])
    assert error["error"]["code"] == "upstream_unavailable"
    assert error["error"]["message"] == BROKEN
    assert error["error"]["ctxproxy"] == {"request_id": REQUEST_ID}
    assert upstream.all_closed


async def test_a_broken_body_is_an_upstream_error() -> None:
    upstream = UpstreamDouble(Answer(body=b'{"id": ', error=broken()))
    with pytest.raises(UpstreamError) as caught:
        await run_completion(make_context(upstream), prepared(max_rounds=None))
    assert caught.value.code is ErrorCode.upstream_unavailable
    assert upstream.all_closed


@pytest.mark.parametrize("max_rounds", [None, 2])
async def test_an_unreachable_upstream_is_raised(max_rounds: int | None) -> None:
    error = UpstreamError(ErrorCode.upstream_timeout, "Upstream 'fake' did not answer within 1s")
    upstream = UpstreamDouble(error)
    with pytest.raises(UpstreamError) as caught:
        await run_completion(make_context(upstream), prepared(max_rounds))
    assert caught.value is error


async def test_relayed_closes_a_stream_that_never_started() -> None:
    upstream = UpstreamDouble(sse_answer([chunk({"content": "Hi"})]))
    answer_ = await upstream.send(headers=make_context(upstream).headers, body=b"{}")
    reply = await relayed(answer_, {}, REQUEST_ID, OPENAI_CHAT.relayed_error_event)
    assert reply.stream is not None
    await reply.stream.aclose()
    assert upstream.all_closed and upstream.responses[0].delivered == []


# -- with synthetic tools: the rounds ----------------------------------------------------------


async def test_a_synthetic_round_then_the_final_answer() -> None:
    store = MemoryStore(b"secret")
    artifact_id = await stored(store, "line 1\nline 2\n")
    upstream = UpstreamDouble(
        json_answer(answer("let me look", read_call("s1", artifact_id), tokens=(100, 5))),
        json_answer(answer("It says line 2.", tokens=(150, 7)), headers=HOP_HEADERS),
    )
    context = make_context(upstream, store)
    request = prepared(max_rounds=2)
    reply = await run_completion(context, request)

    assert reply.status == 200 and reply.stream is None and reply.body is not None
    payload = loads(reply.body)
    assert payload["choices"][0]["message"] == {"role": "assistant", "content": "It says line 2."}
    assert payload["usage"] == {"prompt_tokens": 250, "completion_tokens": 12, "total_tokens": 262}
    assert list(reply.headers.items()) == [
        ("Content-Type", "application/json"),
        ("x-request-id", "req_up"),
        *EXTRA_HEADERS.items(),
        (ROUNDS_HEADER, "1"),
        (READS_HEADER, "1"),
        ("x-ctxproxy-input-tokens", "250"),  # both rounds, without a price (none in the stats)
        ("x-ctxproxy-output-tokens", "12"),
    ]
    first, second = upstream.calls
    assert first.body == request.body  # the prepared bytes, as they are
    follow_up = second.json()
    assert follow_up["messages"][:1] == request.parsed["messages"]
    assistant, result = follow_up["messages"][1:]
    assert assistant == {
        "role": "assistant",
        "content": "let me look",
        "tool_calls": [read_call("s1", artifact_id)],
    }
    assert result["tool_call_id"] == "s1"
    assert json.loads(result["content"])["content"] == "line 1\nline 2\n"
    assert tool_names(follow_up) == ["run_shell", READ_TOOL, SEARCH_TOOL]
    assert second.headers["Authorization"] == "Bearer sk-up"
    assert (context.stats.synthetic_rounds, context.stats.artifact_reads) == (1, 1)
    assert len(context.stats.upstream_calls) == 2
    assert upstream.all_closed


async def test_the_last_allowed_round_is_sent_without_the_synthetic_tools() -> None:
    again = read_call("s2", "art_" + "0" * 32)
    upstream = UpstreamDouble(
        json_answer(answer(None, read_call("s1", "art_" + "1" * 32))),
        json_answer(answer("still curious", again)),
    )
    context = make_context(upstream)
    reply = await run_completion(context, prepared(max_rounds=1, tool_choice="auto"))
    first, last = upstream.bodies
    assert tool_names(first) == ["run_shell", READ_TOOL, SEARCH_TOOL]
    assert tool_names(last) == ["run_shell"] and last["tool_choice"] == "auto"
    assert reply.body is not None
    choice = loads(reply.body)["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "still curious"}
    assert choice["finish_reason"] == "stop"  # the call it could not make is not the client's
    assert (reply.headers[ROUNDS_HEADER], reply.headers[READS_HEADER]) == ("1", "1")


async def test_no_allowed_round_sends_no_synthetic_tools_at_all() -> None:
    upstream = UpstreamDouble(json_answer(answer("done")))
    await run_completion(make_context(upstream), prepared(max_rounds=0))
    assert tool_names(upstream.bodies[0]) == ["run_shell"]


async def test_client_calls_come_back_and_synthetic_ones_are_stripped() -> None:
    shell = tool_call("k1", "run_shell", {})
    raw_answer = answer("both", read_call("s1", "art_x"), shell)
    upstream = UpstreamDouble(json_answer(raw_answer))
    reply = await run_completion(make_context(upstream), prepared(max_rounds=2))
    assert reply.body is not None
    payload = loads(reply.body)
    assert payload["choices"][0]["message"]["tool_calls"] == [shell]
    assert payload["usage"] == raw_answer["usage"]
    assert len(upstream.calls) == 1


async def test_an_untouched_final_answer_keeps_its_bytes() -> None:
    raw = b'{"choices": [{"index": 0, "message": {"content": "hi"}}],   "usage": null}'
    upstream = UpstreamDouble(json_answer(raw))
    reply = await run_completion(make_context(upstream), prepared(max_rounds=2))
    assert reply.body == raw


async def test_an_error_on_a_follow_up_round_is_relayed_with_the_counts() -> None:
    upstream = UpstreamDouble(
        json_answer(answer(None, read_call("s1", "art_x"))),
        json_answer(b'{"error": {"message": "boom"}}', status=500),
    )
    reply = await run_completion(make_context(upstream), prepared(max_rounds=2))
    assert (reply.status, reply.body) == (500, b'{"error": {"message": "boom"}}')
    assert (reply.headers[ROUNDS_HEADER], reply.headers[READS_HEADER]) == ("1", "1")
    assert upstream.all_closed


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b""])
async def test_an_answer_that_is_not_a_completion_is_refused(raw: bytes) -> None:
    upstream = UpstreamDouble(json_answer(raw))
    with pytest.raises(ProxyError) as caught:
        await run_completion(make_context(upstream), prepared(max_rounds=2))
    assert caught.value.code is ErrorCode.upstream_invalid_response
    assert caught.value.message == (
        "Upstream 'fake' answered with something that is not a JSON completion"
    )
    assert upstream.all_closed


async def test_the_outcome_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    upstream = UpstreamDouble(
        json_answer(answer(None, read_call("s1", "art_x"))), json_answer(answer("done"))
    )
    with caplog.at_level(logging.INFO, logger="ctxproxy.synthetic"):
        await run_completion(make_context(upstream), prepared(max_rounds=2))
    assert [r.getMessage() for r in caplog.records] == [
        f"request {REQUEST_ID}: synthetic rounds=1 artifact reads=1"
    ]


async def test_a_client_tool_named_like_the_read_tool_stays_the_clients() -> None:
    # Issue 11 item 10: the proxy executed the client's own `read_context_artifact` calls.
    store = MemoryStore(b"secret")
    artifact_id = await stored(store, "stored text")
    clients_tool = {"type": "function", "function": {"name": READ_TOOL, "parameters": {}}}
    clients_call = tool_call("k1", READ_TOOL, {"artifact_id": artifact_id})
    own_call = tool_call("s1", READ_TOOL + "_ctxproxy", {"artifact_id": artifact_id})
    upstream = UpstreamDouble(
        json_answer(answer(None, own_call)), json_answer(answer(None, clients_call))
    )
    reply = await run_completion(
        make_context(upstream, store), prepared(max_rounds=2, client_tools=[clients_tool])
    )
    first, second = upstream.bodies
    assert tool_names(first) == [READ_TOOL, READ_TOOL + "_ctxproxy", SEARCH_TOOL]
    assert json.loads(second["messages"][-1]["content"])["content"] == "stored text"
    assert reply.body is not None
    message = loads(reply.body)["choices"][0]["message"]
    assert message["tool_calls"] == [clients_call]  # the client's call goes to the client
    assert reply.headers[READS_HEADER] == "1"


async def test_several_choices_go_upstream_without_the_synthetic_tools() -> None:
    two = answer("one")
    two["choices"].append(
        {"index": 1, "message": {"role": "assistant", "content": "two"}, "finish_reason": "stop"}
    )
    upstream = UpstreamDouble(json_answer(two))
    reply = await run_completion(make_context(upstream), prepared(max_rounds=2, n=2))
    [sent] = upstream.bodies
    assert tool_names(sent) == ["run_shell"] and sent["n"] == 2
    assert reply.body is not None
    assert [c["message"]["content"] for c in loads(reply.body)["choices"]] == ["one", "two"]


# -- bounded memory: relayed answers stream, parsed ones have a cap ----------------------------


def big_answer(size: int, piece: int = 64 * 1024, error: UpstreamError | None = None) -> Answer:
    chunks = [b"x" * piece] * (size // piece)
    return Answer(headers={"Content-Type": "application/octet-stream"}, chunks=chunks, error=error)


@pytest.mark.parametrize("max_rounds", [None, 2])
async def test_a_large_relayed_answer_streams_chunk_by_chunk(max_rounds: int | None) -> None:
    # Issue 11 item 5: a 300 MB passthrough download was held whole (1.1 GB RSS).
    upstream = UpstreamDouble(
        big_answer(4 * 1024 * 1024)
        if max_rounds is None
        else Answer(status=500, chunks=big_answer(4 * 1024 * 1024).chunks)
    )
    reply = await run_completion(make_context(upstream), prepared(max_rounds))
    assert reply.body is None and reply.stream is not None
    read_so_far = sum(map(len, upstream.responses[0].delivered))
    assert read_so_far <= WHOLE_BODY_BYTES + 64 * 1024  # the rest is read as the client reads
    assert "Content-Length" not in reply.headers
    assert b"".join(await drain(reply)) == b"x" * 4 * 1024 * 1024
    assert upstream.all_closed


async def test_a_small_answer_is_still_a_whole_body() -> None:
    upstream = UpstreamDouble(big_answer(WHOLE_BODY_BYTES))
    reply = await run_completion(make_context(upstream), prepared(max_rounds=None))
    assert reply.stream is None and reply.body == b"x" * WHOLE_BODY_BYTES
    assert upstream.all_closed


async def test_a_large_relayed_answer_that_breaks_raises_from_its_stream() -> None:
    upstream = UpstreamDouble(big_answer(1024 * 1024, error=broken()))
    reply = await run_completion(make_context(upstream), prepared(max_rounds=None))
    with pytest.raises(UpstreamError):
        await drain(reply)
    assert upstream.all_closed


async def test_an_answer_to_parse_over_the_cap_is_a_typed_error() -> None:
    # Issue 11 item 5: a 200 MB chat answer in a synthetic round was read whole (824 MB RSS).
    body = json.dumps(answer("x" * 5000)).encode()
    upstream = UpstreamDouble(Answer(chunks=[body[:3000], body[3000:]]))
    context = replace(make_context(upstream), max_parsed_response_bytes=4000)
    with pytest.raises(ProxyError) as caught:
        await run_completion(context, prepared(max_rounds=2))
    assert caught.value.code is ErrorCode.upstream_response_too_large
    assert caught.value.code.status == 502
    assert upstream.responses[0].delivered == [body[:3000], body[3000:]]  # nothing more read
    assert upstream.all_closed
    fits = UpstreamDouble(json_answer(body))
    context = replace(make_context(fits), max_parsed_response_bytes=len(body))
    assert (await run_completion(context, prepared(max_rounds=2))).status == 200
