"""The Responses stream filter: a recorded event stream replayed byte for byte, synthetic calls and
their reasoning held back, later rounds continuing the client's one stream."""

from __future__ import annotations

import json
from typing import Any

from fakes.responses import (
    encode_response_events,
    function_call_item,
    message_item,
    reasoning_item,
    response_events,
    responses_usage,
)
from fakes.wire import VENDORED_WIRE_DIR

from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_responses import OPENAI_RESPONSES
from proxy.formats.openai_responses.errors import error_event
from proxy.formats.openai_responses.stream import ResponsesStream
from proxy.formats.sse import SSEParser
from proxy.synthetic.names import names_avoiding
from proxy.synthetic.read import READ_TOOL

RECORDED = (VENDORED_WIRE_DIR / "openai-responses-stream-reasoning-call.sse").read_bytes()
NAMES = names_avoiding(set())


def feed(stream: ResponsesStream, raw: bytes, chunk: int = 97) -> tuple[bytes, bool]:
    """Parse `raw` in chunks of `chunk` bytes and render every event (as the loop does)."""
    parser = SSEParser()
    out, failed = [], False
    for start in range(0, len(raw), chunk):
        rendered, bad = stream.render(parser.feed(raw[start : start + chunk]))
        out.append(rendered)
        failed = failed or bad
    rendered, bad = stream.render(parser.close())
    return b"".join([*out, rendered]), failed or bad


def events(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ")]


def stream_of(
    output: list[dict[str, Any]], usage: dict[str, Any], id: str, created_at: int = 1_700_000_000
) -> bytes:
    events = response_events(output, usage=usage, id=id, created_at=created_at)
    return b"".join(encode_response_events(events))


def test_recorded_stream_goes_through_byte_for_byte() -> None:
    stream = OPENAI_RESPONSES.stream_filter(NAMES)
    stream.start_round(loop_allowed=True)
    out, failed = feed(stream, RECORDED)
    assert out == RECORDED and not failed
    assert stream.pending_round() is None and stream.mixed_synthetic_calls() == []
    assert stream.closing() == b""


def test_recorded_stream_whose_call_is_the_proxys_is_held_for_execution() -> None:
    raw = RECORDED.replace(b'"get_weather"', f'"{READ_TOOL}"'.encode())
    stream = ResponsesStream(NAMES)
    stream.start_round(loop_allowed=True)
    out, _ = feed(stream, raw)
    shown = events(out)
    kinds = [e["type"] for e in shown]
    assert "response.function_call_arguments.delta" not in kinds
    assert "response.completed" not in kinds
    assert kinds.count("response.output_text.delta") == 8  # the text went out at once
    assert [e["sequence_number"] for e in shown] == list(range(len(shown)))
    pending = stream.pending_round()
    assert pending is not None
    output, calls = pending
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call"]
    assert output[0]["encrypted_content"].startswith("gAAAAABpLTk3")
    assert [call["name"] for call in calls] == [READ_TOOL]


def test_a_later_round_continues_the_first() -> None:
    stream = ResponsesStream(NAMES)
    stream.start_round(loop_allowed=True)
    first = [
        reasoning_item("rs_1", "enc"),
        message_item("Reading.", id="msg_1"),
        function_call_item(READ_TOOL, '{"artifact_id": "a"}', call_id="c1"),
    ]
    out1, _ = feed(stream, stream_of(first, responses_usage(100, 4), "resp_first"))
    stream.start_round(loop_allowed=False)
    second = [message_item("Done.", id="msg_2")]
    out2, _ = feed(stream, stream_of(second, responses_usage(150, 6), "resp_second", 1_700_000_9))
    one, two = events(out1), events(out2)
    assert two[0]["type"] == "response.output_item.added"  # no second created
    assert [e["sequence_number"] for e in one + two] == list(range(len(one) + len(two)))
    assert {e["output_index"] for e in two if "output_index" in e} == {2}
    final = two[-1]["response"]
    assert two[-1]["type"] == "response.completed" and final["id"] == "resp_second"
    assert final["created_at"] == one[0]["response"]["created_at"] == 1_700_000_000
    assert [item["id"] for item in final["output"]] == ["rs_1", "msg_1", "msg_2"]
    assert final["usage"]["input_tokens"] == 250 and final["usage"]["output_tokens"] == 10


def test_reasoning_before_a_synthetic_call_is_never_shown() -> None:
    stream = ResponsesStream(NAMES)
    stream.start_round(loop_allowed=True)
    output = [
        reasoning_item("rs_own", "enc", summary=["s"]),
        function_call_item(READ_TOOL, "{}", call_id="c1"),
    ]
    out, _ = feed(stream, stream_of(output, responses_usage(1, 1), "resp_1"), chunk=13)
    assert [e["type"] for e in events(out)] == ["response.created", "response.in_progress"]
    pending = stream.pending_round()
    assert pending is not None and pending[0][0]["id"] == "rs_own"


def test_a_mixed_round_shows_the_client_call_only() -> None:
    stream = ResponsesStream(NAMES)
    stream.start_round(loop_allowed=True)
    client = function_call_item("grep", '{"q": 1}', call_id="g1")
    own = function_call_item(READ_TOOL, "{}", call_id="r1")
    output = [reasoning_item("rs_c", "e1"), client, reasoning_item("rs_o", "e2"), own]
    out, _ = feed(stream, stream_of(output, responses_usage(1, 1), "resp_1"))
    shown = events(out)
    final = shown[-1]["response"]
    assert [item["id"] for item in final["output"]] == ["rs_c", client["id"]]
    assert {e.get("item", {}).get("id") for e in shown} >= {"rs_c", client["id"]}
    assert all(e.get("item_id") != own["id"] for e in shown)
    assert stream.pending_round() is None
    assert [c["call_id"] for c in stream.mixed_synthetic_calls()] == ["r1"]


def test_an_error_event_goes_out_and_fails_the_stream() -> None:
    stream = ResponsesStream(NAMES)
    stream.start_round(loop_allowed=True)
    raw = b'event: error\ndata: {"type":"error","code":"server_error","message":"m"}\n\n'
    out, failed = feed(stream, raw)
    assert failed and events(out)[0]["code"] == "server_error"
    odd, failed = feed(stream, b"data: not json\n\n")
    assert odd == b"data: not json\n\n" and not failed


def test_the_proxys_error_event_is_numbered_after_the_events_sent() -> None:
    """Hostile run: an upstream failing in a later round gave the client an `error` event with
    `sequence_number` 0 after events numbered 0..n-1."""
    stream = ResponsesStream(NAMES)
    stream.start_round(loop_allowed=True)
    whole = stream_of([message_item("hi")], responses_usage(1, 1), "resp_1")
    out, _ = feed(stream, b"\n\n".join(whole.split(b"\n\n")[:4]) + b"\n\n")  # cut off
    sent = events(out)
    error = error_event(ProxyError(ErrorCode.upstream_unavailable, "gone"), "req_1")
    numbered = events(stream.error(error))
    assert numbered[0]["sequence_number"] == len(sent) > 0
    assert numbered[0]["code"] == "upstream_unavailable"
    again = events(stream.error(b'event: error\ndata: {"type":"error","code":"x"}\n\n'))
    assert again[0]["sequence_number"] == len(sent) + 1
    assert stream.error(b"data: not json\n\n") == b"data: not json\n\n"


def test_a_round_without_its_final_event_leaves_the_end_missing() -> None:
    """Hostile run: an upstream stream that ended cleanly before `response.completed` (after
    the proxy's hidden read call) gave the client a stream without any end."""
    call = function_call_item(READ_TOOL, '{"artifact_id": "art_1"}', call_id="r1")
    whole = stream_of([reasoning_item("rs_1", "enc"), call], responses_usage(3, 1), "resp_1")
    cut = whole[: whole.index(b"event: response.completed")]
    stream = ResponsesStream(NAMES)
    stream.start_round(loop_allowed=True)
    out, failed = feed(stream, cut)
    assert not failed and stream.pending_round() is None and stream.missing_end()
    assert [e["type"] for e in events(out)] == ["response.created", "response.in_progress"]
    done = ResponsesStream(NAMES)
    done.start_round(loop_allowed=False)
    feed(done, stream_of([message_item("hi")], responses_usage(1, 1), "resp_2"))
    assert not done.missing_end()


def test_a_mixed_round_hands_over_its_synthetic_calls_with_their_reasoning() -> None:
    own = function_call_item(READ_TOOL, '{"artifact_id": "art_1"}', call_id="r1")
    client = function_call_item("grep", "{}", call_id="c1")
    output = [reasoning_item("rs_o", "enc-o"), own, reasoning_item("rs_c", "enc-c"), client]
    stream = ResponsesStream(NAMES)
    stream.start_round(loop_allowed=True)
    feed(stream, stream_of(output, responses_usage(3, 1), "resp_1"))
    assert [c["call_id"] for c in stream.mixed_synthetic_calls()] == ["r1"]
    assert stream.mixed_content() == output[:2]
    fresh = ResponsesStream(NAMES)
    assert fresh.mixed_content() is None
