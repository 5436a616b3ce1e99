"""`proxy.formats.openai_chat.stream`: the stream filter of the synthetic-tool loop, on recorded
wire data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakes import stream_chunks

from proxy.formats.openai_chat.stream import DONE, StreamFilter
from proxy.formats.sse import SSEEvent, SSEParser, encode_data

READ = "read_context_artifact"
SEARCH = "search_context_artifact"


def parse_all(raw: bytes, size: int) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for start in range(0, len(raw), size):
        events += parser.feed(raw[start : start + size])
    return events + parser.close()


def chunks_of(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in parse_all(raw, 4096) if e.data != DONE]


def run_round(stream: StreamFilter, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [stream.process(json.loads(json.dumps(c))) for c in chunks]
    return [c for c in out if c is not None]


def tool_deltas(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        call
        for c in chunks
        for choice in c.get("choices", [])
        for call in choice.get("delta", {}).get("tool_calls", [])
    ]


def finish_reasons(chunks: list[dict[str, Any]]) -> list[str]:
    return [
        choice["finish_reason"]
        for c in chunks
        for choice in c.get("choices", [])
        if choice.get("finish_reason") is not None
    ]


def test_client_calls_pass_unchanged(parallel_tool_calls_sse: Path) -> None:
    chunks = chunks_of(parallel_tool_calls_sse.read_bytes())
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    out = run_round(stream, chunks)
    assert out == chunks[:-1]  # the usage chunk is held back ...
    assert stream.pending_calls() is None
    usage_chunk = stream.usage_chunk()
    assert usage_chunk == {**chunks[-1]}  # ... and given back once, summed over one round


def test_mixed_round_drops_synthetic_and_renumbers(parallel_tool_calls_sse: Path) -> None:
    raw = parallel_tool_calls_sse.read_bytes().replace(b"GetWeatherArgs", READ.encode())
    chunks = chunks_of(raw)
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    out = run_round(stream, chunks)
    deltas = tool_deltas(out)
    assert {d["index"] for d in deltas} == {0}
    assert deltas[0]["id"] == "call_DNYTawLBoN8fj3KN6qU9N1Ou"
    assert deltas[0]["function"]["name"] == "get_stock_price"
    arguments = "".join(d["function"].get("arguments", "") for d in deltas)
    assert json.loads(arguments) == {"ticker": "AAPL", "exchange": "NASDAQ"}
    assert READ.encode() not in json.dumps(out).encode()
    assert finish_reasons(out) == ["tool_calls"]
    assert stream.pending_calls() is None


def test_synthetic_only_round_is_held_for_execution(parallel_tool_calls_sse: Path) -> None:
    raw = parallel_tool_calls_sse.read_bytes()
    raw = raw.replace(b"GetWeatherArgs", READ.encode()).replace(b"get_stock_price", SEARCH.encode())
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    out = run_round(stream, chunks_of(raw))
    assert tool_deltas(out) == []
    assert finish_reasons(out) == []
    assert len(out) == 1 and out[0]["choices"][0]["delta"]["role"] == "assistant"
    pending = stream.pending_calls()
    assert pending is not None
    content, calls = pending
    assert content is None
    assert [c.as_tool_call() for c in calls] == [
        {
            "id": "call_JMW1whyEaYG438VE1OIflxA2",
            "type": "function",
            "function": {
                "name": READ,
                "arguments": '{"city": "Edinburgh", "country": "GB", "units": "c"}',
            },
        },
        {
            "id": "call_DNYTawLBoN8fj3KN6qU9N1Ou",
            "type": "function",
            "function": {"name": SEARCH, "arguments": '{"ticker": "AAPL", "exchange": "NASDAQ"}'},
        },
    ]


def test_synthetic_only_round_past_the_cap_stops(parallel_tool_calls_sse: Path) -> None:
    raw = parallel_tool_calls_sse.read_bytes()
    raw = raw.replace(b"GetWeatherArgs", READ.encode()).replace(b"get_stock_price", SEARCH.encode())
    stream = StreamFilter()
    stream.start_round(loop_allowed=False)
    out = run_round(stream, chunks_of(raw))
    assert tool_deltas(out) == []
    assert finish_reasons(out) == ["stop"]
    assert stream.pending_calls() is None


def test_later_round_continues_first_identity_and_sums_usage() -> None:
    first = stream_chunks(
        ["Let me look. "],
        tool_calls=[{"name": READ, "arguments": "{}"}],
        include_usage=True,
        usage={
            "prompt_tokens": 100,
            "completion_tokens": 7,
            "total_tokens": 107,
            "prompt_tokens_details": {"cached_tokens": 3},
        },
    )
    second = stream_chunks(
        ["Found", " it."],
        include_usage=True,
        id="chatcmpl-second",
        created=1_800_000_000,
        model="gpt-4o-other",
        usage={
            "prompt_tokens": 150,
            "completion_tokens": 5,
            "total_tokens": 155,
            "prompt_tokens_details": {"cached_tokens": 90},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    )
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    out = run_round(stream, first)
    assert stream.pending_calls() is not None
    stream.start_round(loop_allowed=True)
    out += run_round(stream, second)
    assert {(c["id"], c["created"], c["model"]) for c in out} == {
        (first[0]["id"], first[0]["created"], first[0]["model"])
    }
    roles = [c for c in out if "role" in c["choices"][0]["delta"]]
    assert len(roles) == 1 and roles[0] is out[0]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in out)
    assert text == "Let me look. Found it."
    assert finish_reasons(out) == ["stop"]
    assert all(c.get("usage") is None for c in out)
    usage_chunk = stream.usage_chunk()
    assert usage_chunk is not None
    assert usage_chunk["id"] == first[0]["id"] and usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {
        "prompt_tokens": 250,
        "completion_tokens": 12,
        "total_tokens": 262,
        "prompt_tokens_details": {"cached_tokens": 93},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }


def test_name_in_a_later_delta_is_held_until_known() -> None:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(call: dict[str, Any]) -> dict[str, Any]:
        return {
            **base,
            "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}],
        }

    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    assert stream.process(chunk({"index": 3, "id": "call_a", "type": "function"})) is None
    released = stream.process(chunk({"index": 3, "function": {"name": "ls", "arguments": "{"}}))
    assert released is not None
    assert tool_deltas([released]) == [
        {"index": 0, "id": "call_a", "type": "function"},
        {"index": 0, "function": {"name": "ls", "arguments": "{"}},
    ]
    assert stream.process(chunk({"index": 5, "id": "call_b"})) is None
    finish = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    flushed = stream.process(finish)
    assert flushed is not None
    assert tool_deltas([flushed]) == [{"index": 1, "id": "call_b"}]
    assert finish_reasons([flushed]) == ["tool_calls"]


# -- the AnswerStream side: events in, client bytes out ----------------------------------------


def test_render_forwards_filtered_chunks_and_drops_the_upstream_done() -> None:
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    chunks = stream_chunks(["Hi"], include_usage=True)
    events = [SSEEvent(json.dumps(c).encode()) for c in chunks] + [SSEEvent(DONE)]
    out, failed = stream.render(events)
    assert not failed
    sent = [json.loads(e.data) for e in parse_all(out, 4096)]
    assert sent == [c for c in (stream_copy(c) for c in chunks) if c is not None]
    assert DONE not in out
    usage = stream.usage_chunk()
    assert usage is not None
    assert stream.closing() == encode_data(json.dumps(usage, separators=(",", ":")).encode()) + (
        b"data: [DONE]\n\n"
    )


def stream_copy(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """What a fresh filter makes of one chunk of a single round (for the comparison above)."""
    fresh = StreamFilter()
    fresh.start_round(loop_allowed=True)
    return fresh.process(json.loads(json.dumps(chunk)))


def test_render_passes_other_events_as_they_came_and_flags_an_error() -> None:
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    error = SSEEvent(b'{"error": {"message": "boom"}}', b"error")
    other = SSEEvent(b"not json")
    out, failed = stream.render([other, error])
    assert out == b'data: not json\n\nevent: error\ndata: {"error": {"message": "boom"}}\n\n'
    assert failed
    assert stream.render([other]) == (b"data: not json\n\n", False)


def test_render_holds_back_a_usage_chunk_without_choices_and_sums_it() -> None:
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    usage = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
    bare = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "usage": usage}
    assert stream.render([SSEEvent(json.dumps(bare).encode())]) == (b"", False)
    assert stream.usage_chunk() == {**bare, "choices": []}


def test_render_drops_the_upstream_done_and_goes_on_with_the_events_after_it() -> None:
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    chunks = stream_chunks(["Hi"])
    events = [SSEEvent(DONE)] + [SSEEvent(json.dumps(c).encode()) for c in chunks]
    out, failed = stream.render(events)
    assert not failed
    assert [json.loads(e.data) for e in parse_all(out, 4096)] == chunks


def test_closing_without_usage_is_the_done_marker_alone() -> None:
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    stream.render([SSEEvent(json.dumps(c).encode()) for c in stream_chunks(["Hi"])])
    assert stream.closing() == b"data: [DONE]\n\n"


def test_pending_round_gives_the_held_calls_as_tool_calls() -> None:
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    first = stream_chunks(["Let me look. "], tool_calls=[{"name": READ, "arguments": "{}"}])
    run_round(stream, first)
    pending = stream.pending_calls()
    assert pending is not None
    assert stream.pending_round() == (pending[0], [c.as_tool_call() for c in pending[1]])
    assert stream.pending_round() is not None and pending[0] == "Let me look. "
    stream.start_round(loop_allowed=True)
    assert stream.pending_round() is None


def test_usage_chunk_carries_the_streams_identity_when_the_upstreams_lacks_it() -> None:
    first = stream_chunks(["Let me look. "], tool_calls=[{"name": READ, "arguments": "{}"}])
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    run_round(stream, first)
    stream.start_round(loop_allowed=True)
    bare_usage = {
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
    }
    assert stream.process(bare_usage) is None
    assert stream.usage_chunk() == {
        "object": "chat.completion.chunk",
        "id": first[0]["id"],
        "created": first[0]["created"],
        "model": first[0]["model"],
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
    }


def test_an_error_chunk_goes_out_as_it_is_and_the_end_is_the_proxys() -> None:
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    stream.render([SSEEvent(json.dumps(stream_chunks(["Hi"])[0]).encode())])
    error = b'data: {"error":{"code":"upstream_unavailable"}}\n\n'
    assert stream.error(error) == error
    assert not stream.missing_end() and stream.mixed_content() is None
