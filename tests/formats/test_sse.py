"""SSE parsing, encoding and the stream filter of the synthetic-tool loop, on recorded wire data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import stream_chunks

from proxy.formats.sse import (
    DONE,
    SSEEvent,
    SSEParser,
    StreamFilter,
    add_usage,
    encode_data,
    encode_event,
)

READ = "read_context_artifact"
SEARCH = "search_context_artifact"


def parse_all(raw: bytes, size: int) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for start in range(0, len(raw), size):
        events += parser.feed(raw[start : start + size])
    return events + parser.close()


def recorded_data(raw: bytes) -> list[bytes]:
    """The reference split: every `data: ` line of the file, in order."""
    return [line[len(b"data: "):] for line in raw.split(b"\n") if line.startswith(b"data: ")]


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


@pytest.mark.parametrize("size", [1, 3, 7, 97, 1000, 1 << 20])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_parser_on_recorded_stream(parallel_tool_calls_sse: Path, size: int, newline: bytes
                                   ) -> None:
    raw = parallel_tool_calls_sse.read_bytes()
    events = parse_all(raw.replace(b"\n", newline), size)
    assert [e.data for e in events] == recorded_data(raw)
    assert len(events) == 26
    assert events[-1].data == DONE
    assert json.loads(events[1].data)["choices"][0]["delta"]["tool_calls"][0]["id"] == (
        "call_JMW1whyEaYG438VE1OIflxA2"
    )


def test_parser_fields_comments_multiline_and_unterminated_tail() -> None:
    raw = (b": keep-alive\n\nevent: error\ndata: {\"a\":\ndata:1}\nid: 7\nretry: 5\n\n"
           b"data\n\n\n\ndata: last")
    events = parse_all(raw, 2)
    assert events == [SSEEvent(b'{"a":\n1}', b"error"), SSEEvent(b""), SSEEvent(b"last")]
    assert json.loads(events[0].data) == {"a": 1}


def test_crlf_split_between_chunks_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\n\r") == [SSEEvent(b"x")]
    assert parser.feed(b"\ndata: y\r\n\r\n") == [SSEEvent(b"y")]


@pytest.mark.parametrize("size", [1, 2, 8])
def test_crlf_split_inside_an_event_does_not_end_it(size: int) -> None:
    # Every split of this event puts some `\r` and its `\n` in different chunks (at size 1, all):
    # a `\n` taken as a second line end would be a blank line, ending the event after "a".
    assert parse_all(b"data: a\r\ndata: b\r\n\r\n", size) == [SSEEvent(b"a\nb")]
    assert parse_all(b"data: a\r\n\r\ndata: b\r\n\r\n", size) == [SSEEvent(b"a"), SSEEvent(b"b")]


def test_crlf_inside_one_chunk_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n") == [
        SSEEvent(b"a\nb"),
        SSEEvent(b"c"),
    ]


def test_encoding_round_trips() -> None:
    event = SSEEvent(b"line one\nline two", b"error")
    assert encode_event(event) == b"event: error\ndata: line one\ndata: line two\n\n"
    assert parse_all(encode_event(event), 5) == [event]
    assert encode_data(DONE) == b"data: [DONE]\n\n"


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
        {"id": "call_JMW1whyEaYG438VE1OIflxA2", "type": "function", "function": {
            "name": READ, "arguments": '{"city": "Edinburgh", "country": "GB", "units": "c"}'}},
        {"id": "call_DNYTawLBoN8fj3KN6qU9N1Ou", "type": "function", "function": {
            "name": SEARCH, "arguments": '{"ticker": "AAPL", "exchange": "NASDAQ"}'}},
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
    first = stream_chunks(["Let me look. "], tool_calls=[{"name": READ, "arguments": "{}"}],
                          include_usage=True, usage={"prompt_tokens": 100, "completion_tokens": 7,
                                                     "total_tokens": 107,
                                                     "prompt_tokens_details": {"cached_tokens": 3}})
    second = stream_chunks(["Found", " it."], include_usage=True, id="chatcmpl-second",
                           created=1_800_000_000, model="gpt-4o-other",
                           usage={"prompt_tokens": 150, "completion_tokens": 5,
                                  "total_tokens": 155,
                                  "prompt_tokens_details": {"cached_tokens": 90},
                                  "completion_tokens_details": {"reasoning_tokens": 2}})
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
        "prompt_tokens": 250, "completion_tokens": 12, "total_tokens": 262,
        "prompt_tokens_details": {"cached_tokens": 93},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }


def test_name_in_a_later_delta_is_held_until_known() -> None:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(call: dict[str, Any]) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]},
                                     "finish_reason": None}]}

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


def test_add_usage() -> None:
    a = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3,
         "prompt_tokens_details": {"cached_tokens": 1, "audio_tokens": None}}
    b = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30,
         "prompt_tokens_details": {"cached_tokens": 5, "audio_tokens": 2}, "cost": None}
    assert add_usage(None, None) is None
    total = add_usage(add_usage(None, a), b)
    assert total == {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33,
                     "prompt_tokens_details": {"cached_tokens": 6, "audio_tokens": 2},
                     "cost": None}
    assert a["prompt_tokens"] == 1 and a["prompt_tokens_details"] == {  # inputs untouched
        "cached_tokens": 1, "audio_tokens": None}


def test_usage_chunk_carries_the_streams_identity_when_the_upstreams_lacks_it() -> None:
    first = stream_chunks(["Let me look. "], tool_calls=[{"name": READ, "arguments": "{}"}])
    stream = StreamFilter()
    stream.start_round(loop_allowed=True)
    run_round(stream, first)
    stream.start_round(loop_allowed=True)
    bare_usage = {"object": "chat.completion.chunk", "choices": [],
                  "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}
    assert stream.process(bare_usage) is None
    assert stream.usage_chunk() == {
        "object": "chat.completion.chunk",
        "id": first[0]["id"], "created": first[0]["created"], "model": first[0]["model"],
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
    }


def test_add_usage_takes_non_integers_from_the_latest_round() -> None:
    assert add_usage({"note": "a", "n": 1}, {"note": "b", "tier": "x", "n": 2}) == {
        "note": "b", "n": 3, "tier": "x"
    }
    assert add_usage({"note": "a"}, {"note": None}) == {"note": "a"}  # None never overwrites
    assert add_usage({"cost": "n/a"}, {"cost": 3}) == {"cost": 3}  # not summed with a string
    assert add_usage({"details": 0}, {"details": {"x": 1}}) == {"details": {"x": 1}}
