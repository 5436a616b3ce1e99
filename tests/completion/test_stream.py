"""`proxy.completion.stream`: the streaming synthetic loop against the upstream double."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest
from completion_harness import (
    EXTRA_HEADERS,
    ID,
    REQUEST_ID,
    call_delta,
    chunk,
    data_of,
    drain,
    make_context,
    prepared,
    stored,
    usage_chunk,
)
from upstream_double import (
    BROKEN,
    Answer,
    UpstreamDouble,
    broken,
    json_answer,
    sse_answer,
    sse_event,
)

from proxy.artifacts.store import MemoryStore
from proxy.completion.reply import Reply
from proxy.completion.run import run_completion
from proxy.errors import ErrorCode
from proxy.jsonio import dumps
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL
from proxy.upstream.base import UpstreamError

SECOND_ID: dict[str, Any] = {"id": "chatcmpl-2", "created": 1700000099, "model": "gpt-4o-2024"}


def read_round(artifact_id: str, text: str = "Let me look.") -> list[dict[str, Any]]:
    """A round that says something, then asks for one read in three deltas."""
    arguments = dumps({"artifact_id": artifact_id}).decode()
    return [
        chunk({"role": "assistant", "content": text}),
        chunk(call_delta(0, "s1", READ_TOOL, "")),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
        chunk(finish="tool_calls"),
        usage_chunk(100, 5),
    ]


def final_round(*texts: str) -> list[dict[str, Any]]:
    return [
        chunk({"role": "assistant", "content": ""}, **SECOND_ID),
        *(chunk({"content": text}, **SECOND_ID) for text in texts),
        chunk(finish="stop", **SECOND_ID),
        usage_chunk(150, 7, **SECOND_ID),
    ]


async def start(
    upstream: UpstreamDouble, store: MemoryStore | None = None, max_rounds: int = 2
) -> Reply:
    context = make_context(upstream, store)
    reply = await run_completion(context, prepared(max_rounds, stream=True))
    assert reply.status == 200 and reply.body is None and reply.stream is not None
    return reply


def texts(payloads: list[Any]) -> str:
    return "".join(
        p["choices"][0]["delta"].get("content") or ""
        for p in payloads
        if isinstance(p, dict) and p.get("choices")
    )


async def test_text_deltas_pass_one_write_per_upstream_chunk() -> None:
    events = [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": w}) for w in ("Hel", "lo")),
        chunk(finish="stop"),
    ]
    upstream = UpstreamDouble(sse_answer(events, headers={"x-request-id": "up-1"}))
    reply = await start(upstream)
    assert list(reply.headers.items()) == [
        ("Content-Type", "text/event-stream"),
        ("x-request-id", "up-1"),
        *EXTRA_HEADERS.items(),
    ]
    items = await drain(reply)
    assert items[:-1] == [b"data: " + dumps(e) + b"\n\n" for e in events]
    assert items[-1] == b"data: [DONE]\n\n"  # no usage reported, no usage chunk
    assert upstream.all_closed


async def test_a_chunk_holding_nothing_for_the_client_is_not_written() -> None:
    two_events = sse_event(chunk({"content": "a"})) + sse_event(chunk({"content": "b"}))
    events: list[dict[str, Any] | bytes] = [
        two_events,
        chunk(call_delta(0, "s1", READ_TOOL, "")),
        b": comment\n\n",
        chunk({"content": "c"}),
        chunk(finish="tool_calls"),
        b"data: [DONE]\n\n",
    ]
    upstream = UpstreamDouble(sse_answer(events, done=False))
    items = await drain(await start(upstream, max_rounds=0))
    # the held synthetic call, the comment and the upstream's [DONE] wrote nothing
    assert len(items) == 4
    assert texts(data_of(items[:1])) == "ab" and texts(data_of(items[1:2])) == "c"
    finish = data_of(items[2:3])[0]["choices"][0]
    assert finish["finish_reason"] == "stop"  # a round that cannot loop asks the client nothing
    assert items[3] == b"data: [DONE]\n\n"


async def test_synthetic_calls_are_held_executed_and_the_stream_continues() -> None:
    store = MemoryStore(b"secret")
    artifact_id = await stored(store, "line 1\nline 2\n")
    upstream = UpstreamDouble(
        sse_answer(read_round(artifact_id)), sse_answer(final_round("It says", " line 2."))
    )
    context = make_context(upstream, store)
    reply = await run_completion(context, prepared(2, stream=True))
    payloads = data_of(await drain(reply))

    assert payloads[-1] == b"[DONE]" and payloads.count(b"[DONE]") == 1
    chunks = payloads[:-1]
    assert texts(chunks) == "Let me look.It says line 2."
    assert not any("tool_calls" in c["choices"][0]["delta"] for c in chunks if c["choices"])
    assert all({k: c[k] for k in ID} == ID for c in chunks)  # one id/created/model throughout
    roles = [c["choices"][0]["delta"].get("role") for c in chunks if c["choices"]]
    assert roles.count("assistant") == 1
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert [f for f in finishes if f is not None] == ["stop"]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {
        "prompt_tokens": 250,
        "completion_tokens": 12,
        "total_tokens": 262,
    }
    assert not any("usage" in c for c in chunks[:-1])  # each round's usage was held back

    second = upstream.bodies[1]
    assert second["stream"] is True
    assistant, result = second["messages"][1:]
    assert assistant["content"] == "Let me look."
    assert assistant["tool_calls"][0]["function"]["name"] == READ_TOOL
    assert result["tool_call_id"] == "s1" and "line 2" in result["content"]
    assert [t["function"]["name"] for t in second["tools"]] == ["run_shell", READ_TOOL, SEARCH_TOOL]
    assert (context.stats.synthetic_rounds, context.stats.artifact_reads) == (1, 1)
    assert upstream.all_closed


async def test_the_last_round_is_sent_without_the_synthetic_tools() -> None:
    upstream = UpstreamDouble(sse_answer(read_round("art_x")), sse_answer(final_round("ok")))
    await drain(await start(upstream, max_rounds=1))
    assert [t["function"]["name"] for t in upstream.bodies[1]["tools"]] == ["run_shell"]


async def test_a_stream_broken_mid_round_ends_with_one_error_event() -> None:
    events = [chunk({"role": "assistant", "content": "partial"})]
    upstream = UpstreamDouble(sse_answer(events, done=False, error=broken()))
    payloads = data_of(await drain(await start(upstream)))
    assert texts(payloads[:1]) == "partial"
    assert payloads[1:] == [
        {
            "error": {
                "message": BROKEN,
                "type": "api_error",
                "param": None,
                "code": "upstream_unavailable",
                "ctxproxy": {"request_id": REQUEST_ID},
            }
        }
    ]
    assert upstream.all_closed and len(upstream.calls) == 1


async def test_an_error_event_from_the_upstream_goes_out_and_ends_the_stream() -> None:
    error = b'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n'
    upstream = UpstreamDouble(sse_answer([chunk({"content": "a"}), error, chunk({"content": "b"})]))
    items = await drain(await start(upstream))
    assert items[1:] == [error]
    assert upstream.all_closed


@pytest.mark.parametrize(
    ("follow_up", "expected"),
    [
        (
            json_answer(b'{"error": {"message": "busy", "code": "x"}}', status=503),
            {"error": {"message": "busy", "code": "x"}},
        ),
        (
            json_answer(b"<html>bad gateway</html>", status=502),
            {"code": "upstream_unavailable", "message": "Upstream 'fake' answered HTTP 502"},
        ),
        (
            json_answer({"id": "x", "choices": []}),
            {
                "code": "upstream_invalid_response",
                "message": "Upstream 'fake' did not stream a follow-up round",
            },
        ),
        (
            UpstreamError(ErrorCode.upstream_timeout, "Upstream 'fake' did not answer within 1s"),
            {"code": "upstream_timeout", "message": "Upstream 'fake' did not answer within 1s"},
        ),
    ],
)
async def test_a_follow_up_round_that_does_not_stream_is_an_error_event(
    follow_up: Any, expected: dict[str, Any]
) -> None:
    upstream = UpstreamDouble(sse_answer(read_round("art_x")), follow_up)
    payloads = data_of(await drain(await start(upstream)))
    assert texts(payloads) == "Let me look."
    assert b"[DONE]" not in payloads
    last = payloads[-1]
    if "ctxproxy" in last.get("error", {}):
        assert last["error"]["ctxproxy"] == {"request_id": REQUEST_ID}
        assert {k: last["error"][k] for k in expected} == expected
    else:
        assert last == expected
    assert len(upstream.calls) == 2 and upstream.all_closed


async def test_a_follow_up_error_body_that_breaks_is_still_an_error_event() -> None:
    upstream = UpstreamDouble(
        sse_answer(read_round("art_x")), Answer(status=500, body=b"{", error=broken())
    )
    payloads = data_of(await drain(await start(upstream)))
    assert payloads[-1]["error"]["message"] == "Upstream 'fake' answered HTTP 500"
    assert upstream.all_closed


async def test_client_gone_closes_the_upstream_response(
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream = UpstreamDouble(sse_answer([chunk({"content": f"w{i}"}) for i in range(5)]))
    reply = await start(upstream)
    assert reply.stream is not None
    first = await reply.stream.__anext__()
    assert texts(data_of([first])) == "w0"
    assert not upstream.responses[0].closed
    with caplog.at_level(logging.INFO, logger="ctxproxy.synthetic"):
        await reply.stream.aclose()  # what the edge does when the client hangs up
        await reply.stream.aclose()  # and only once
    assert upstream.responses[0].closed
    assert len(upstream.responses[0].delivered) == 1  # nothing more was read
    assert [r.getMessage() for r in caplog.records] == [
        f"request {REQUEST_ID}: synthetic rounds=0 artifact reads=0"
    ]


async def test_client_gone_during_a_later_round_closes_that_round() -> None:
    upstream = UpstreamDouble(sse_answer(read_round("art_x")), sse_answer(final_round("a", "b")))
    reply = await start(upstream)
    assert reply.stream is not None
    seen = b""
    while b"Let me look." not in seen or len(upstream.responses) < 2:
        seen += await reply.stream.__anext__()
    await reply.stream.aclose()
    assert upstream.all_closed and len(upstream.responses) == 2


async def test_a_stream_closed_before_it_started_closes_the_first_response() -> None:
    upstream = UpstreamDouble(sse_answer(read_round("art_x")))
    reply = await start(upstream)
    assert reply.stream is not None
    await reply.stream.aclose()
    assert upstream.all_closed and upstream.responses[0].delivered == []


async def test_a_non_streaming_first_answer_takes_the_json_path() -> None:
    upstream = UpstreamDouble(json_answer({"id": "x", "choices": []}))
    reply = await run_completion(make_context(upstream), prepared(2, stream=True))
    assert reply.stream is None and reply.body is not None


async def test_a_client_tool_named_like_the_read_tool_stays_the_clients_in_a_stream() -> None:
    store = MemoryStore(b"secret")
    artifact_id = await stored(store, "stored text")
    arguments = dumps({"artifact_id": artifact_id}).decode()
    own_round = [
        chunk(call_delta(0, "s1", READ_TOOL + "_ctxproxy", arguments)),
        chunk(finish="tool_calls"),
    ]
    clients_round = [
        chunk(call_delta(0, "k1", READ_TOOL, arguments), **SECOND_ID),
        chunk(finish="tool_calls", **SECOND_ID),
    ]
    upstream = UpstreamDouble(sse_answer(own_round), sse_answer(clients_round))
    clients_tool = {"type": "function", "function": {"name": READ_TOOL, "parameters": {}}}
    context = make_context(upstream, store)
    reply = await run_completion(context, prepared(2, stream=True, client_tools=[clients_tool]))
    payloads = data_of(await drain(reply))
    calls = [
        c
        for p in payloads[:-1]
        if p["choices"]
        for c in p["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("k1", READ_TOOL)]
    finishes = [p["choices"][0]["finish_reason"] for p in payloads[:-1] if p["choices"]]
    assert [f for f in finishes if f] == ["tool_calls"]
    first, second = upstream.bodies
    assert [t["function"]["name"] for t in first["tools"]] == [
        READ_TOOL,
        READ_TOOL + "_ctxproxy",
        SEARCH_TOOL,
    ]
    assert "stored text" in second["messages"][-1]["content"]
    assert context.stats.artifact_reads == 1


async def test_a_round_over_the_parse_cap_ends_with_one_error_event() -> None:
    events = [chunk({"role": "assistant", "content": "y" * 3000}) for _ in range(5)]
    upstream = UpstreamDouble(sse_answer(events))
    context = replace(make_context(upstream), max_parsed_response_bytes=10_000)
    reply = await run_completion(context, prepared(2, stream=True))
    payloads = data_of(await drain(reply))
    assert len(payloads) == 4 and b"[DONE]" not in payloads
    error = payloads[-1]["error"]
    assert error["code"] == "upstream_response_too_large"
    assert "10000 bytes" in error["message"]
    assert len(upstream.responses[0].delivered) == 4  # stopped reading at the cap
    assert upstream.all_closed
