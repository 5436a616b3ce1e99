"""`formats.anthropic_messages.stream`: Anthropic's recorded event streams replayed byte for byte,
and the synthetic rounds folded into one client stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.anthropic import message_body, stream_events, text_block, tool_use_block, usage
from fakes.wire import wire_file

from proxy.formats.anthropic_messages.stream import StreamFilter
from proxy.formats.sse import SSEParser
from proxy.synthetic.names import ToolNames
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL

RECORDED = [
    "anthropic-messages-stream-text.sse",
    "anthropic-messages-stream-tool-use.sse",
    "anthropic-messages-stream-thinking.sse",
]


def run(stream: StreamFilter, raw: bytes, *, chunk: int | None = None, loop: bool = True) -> bytes:
    """One round of `raw` through the filter, fed in chunks of `chunk` bytes (all at once)."""
    stream.start_round(loop)
    parser = SSEParser()
    size = chunk or len(raw) or 1
    out = b""
    for start in range(0, len(raw), size):
        rendered, failed = stream.render(parser.feed(raw[start : start + size]))
        assert not failed
        out += rendered
    rendered, _ = stream.render(parser.close())
    return out + rendered


@pytest.mark.parametrize("name", RECORDED)
@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_a_recorded_stream_is_replayed_byte_for_byte(name: str, chunk: int | None) -> None:
    raw = wire_file(name).read_bytes()
    stream = StreamFilter(ToolNames())
    out = run(stream, raw, chunk=chunk)
    assert stream.pending_round() is None
    assert out + stream.closing() == raw


def events_of(data: bytes) -> list[tuple[str, dict[str, object]]]:
    parser = SSEParser()
    return [
        ((e.event or b"").decode(), json.loads(e.data)) for e in parser.feed(data) + parser.close()
    ]


def test_a_synthetic_tool_use_is_held_and_its_round_is_pending() -> None:
    raw = wire_file("anthropic-messages-stream-tool-use.sse").read_bytes()
    stream = StreamFilter(ToolNames({READ_TOOL: "get_weather", SEARCH_TOOL: SEARCH_TOOL}))
    out = run(stream, raw)
    kinds = [payload["type"] for _, payload in events_of(out)]
    assert "message_delta" not in kinds and "message_stop" not in kinds
    assert all(p.get("index") in (None, 0) for _, p in events_of(out))
    pending = stream.pending_round()
    assert pending is not None
    others, calls = pending
    assert others == [
        {"type": "text", "text": "Okay, let's check the weather for San Francisco, CA:"}
    ]
    assert calls == [
        {
            "type": "tool_use",
            "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "name": "get_weather",
            "input": '{"location": "San Francisco, CA", "unit": "fahrenheit"}',
        }
    ]


def round_bytes(blocks: list[dict[str, object]], input_tokens: int, output_tokens: int) -> bytes:
    body = message_body(blocks, usage_=usage(input_tokens, output_tokens))
    return b"".join(stream_events(body))


def test_rounds_make_one_message_with_contiguous_indices_and_summed_usage() -> None:
    stream = StreamFilter(ToolNames())
    first = round_bytes(
        [text_block("Reading."), tool_use_block("t1", "read_context_artifact", {"a": 1})], 100, 7
    )
    out = run(stream, first)
    assert stream.pending_round() is not None
    second = round_bytes([text_block("Done."), tool_use_block("c1", "client_tool", {})], 120, 9)
    out += run(stream, second)
    assert stream.pending_round() is None and stream.mixed_synthetic_calls() == []
    out += stream.closing()
    events = events_of(out)
    kinds = [p["type"] for _, p in events]
    assert kinds.count("message_start") == 1
    assert kinds.count("message_delta") == 1 and kinds[-1] == "message_stop"
    starts = [p for _, p in events if p["type"] == "content_block_start"]
    assert [p["index"] for p in starts] == [0, 1, 2]
    assert [p["content_block"]["type"] for p in starts] == ["text", "text", "tool_use"]
    delta = next(p for _, p in events if p["type"] == "message_delta")
    assert delta["usage"] == {"input_tokens": 220, "output_tokens": 16}
    assert delta["delta"]["stop_reason"] == "tool_use"


def test_a_mixed_round_gives_its_synthetic_calls_and_ends_with_the_client_calls() -> None:
    stream = StreamFilter(ToolNames())
    blocks = [
        tool_use_block("t1", "read_context_artifact", {"a": 1}),
        tool_use_block("c1", "client_tool", {}),
    ]
    out = run(stream, round_bytes(blocks, 10, 5)) + stream.closing()
    assert stream.pending_round() is None
    assert [c["id"] for c in stream.mixed_synthetic_calls()] == ["t1"]
    assert stream.mixed_content() is None and not stream.missing_end()
    assert stream.error(b"event: error\ndata: {}\n\n") == b"event: error\ndata: {}\n\n"
    starts = [p for _, p in events_of(out) if p["type"] == "content_block_start"]
    assert [(p["index"], p["content_block"]["id"]) for p in starts] == [(0, "c1")]


def test_synthetic_calls_left_out_when_no_round_may_follow_end_the_turn() -> None:
    stream = StreamFilter(ToolNames())
    blocks = [text_block("Hm."), tool_use_block("t1", "read_context_artifact", {})]
    out = run(stream, round_bytes(blocks, 10, 5), loop=False)
    assert stream.pending_round() is None
    out += stream.closing()
    delta = next(p for _, p in events_of(out) if p["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert "tool_use" not in out.decode()


def test_a_round_without_its_message_stop_leaves_the_end_missing() -> None:
    stream = StreamFilter(ToolNames())
    whole = round_bytes([text_block("All of it.")], 10, 5)
    run(stream, whole)
    assert not stream.missing_end()
    cut = whole[: whole.rindex(b"event: message_stop")]
    stream = StreamFilter(ToolNames())
    run(stream, cut)
    assert stream.missing_end()


def test_an_error_event_ends_the_stream() -> None:
    stream = StreamFilter(ToolNames())
    stream.start_round(True)
    error = (
        b"event: error\n"
        b'data: {"type":"error","error":{"type":"overloaded_error","message":"x"}}\n\n'
    )
    parser = SSEParser()
    out, failed = stream.render(parser.feed(error))
    assert failed and out == error


@pytest.mark.parametrize("kind", [b'{"a":1}', b"[1]", b"null", b"5"])
def test_an_event_whose_type_is_not_a_string_passes_as_it_came(kind: bytes) -> None:
    stream = StreamFilter(ToolNames())
    stream.start_round(True)
    odd = b'event: message_delta\ndata: {"type":' + kind + b',"delta":{}}\n\n'
    out, failed = stream.render(SSEParser().feed(odd))
    assert out == odd and not failed


def test_recorded_files_name_their_source() -> None:
    readme = Path(wire_file(RECORDED[0])).parent / "README-anthropic.md"
    assert "build-with-claude/streaming" in readme.read_text()
