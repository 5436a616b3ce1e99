"""SSE parsing and encoding, on recorded wire data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.formats.openai_chat.stream import DONE
from proxy.formats.sse import SSEEvent, SSEParser, encode_data, encode_event


def parse_all(raw: bytes, size: int) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for start in range(0, len(raw), size):
        events += parser.feed(raw[start : start + size])
    return events + parser.close()


def recorded_data(raw: bytes) -> list[bytes]:
    """The reference split: every `data: ` line of the file, in order."""
    return [line[len(b"data: ") :] for line in raw.split(b"\n") if line.startswith(b"data: ")]


@pytest.mark.parametrize("size", [1, 3, 7, 97, 1000, 1 << 20])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_parser_on_recorded_stream(
    parallel_tool_calls_sse: Path, size: int, newline: bytes
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
    raw = (
        b': keep-alive\n\nevent: error\ndata: {"a":\ndata:1}\nid: 7\nretry: 5\n\n'
        b"data\n\n\n\ndata: last"
    )
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
