"""The Responses error event: the proxy's errors and an upstream's, after a stream started."""

from __future__ import annotations

import json

from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_responses.errors import (
    encode_event,
    error_event,
    relayed_error_event,
    upstream_error_event,
)


def test_error_events_in_the_responses_shape() -> None:
    error = ProxyError(ErrorCode.upstream_timeout, "slow", details={"reason": "x"})
    raw = error_event(error, "req_1")
    assert raw.startswith(b"event: error\ndata: ") and raw.endswith(b"\n\n")
    event = json.loads(raw.split(b"data: ", 1)[1])
    assert event["type"] == "error" and event["code"] == "upstream_timeout"
    assert event["message"] == "slow" and event["ctxproxy"]["request_id"] == "req_1"
    upstream = upstream_error_event(b'{"error": {"message": "m", "code": "rate_limit_exceeded"}}')
    assert upstream is not None
    assert json.loads(upstream.split(b"data: ", 1)[1])["code"] == "rate_limit_exceeded"
    assert upstream_error_event(b"not json") is None


def test_an_event_is_its_type_line_and_its_data() -> None:
    assert encode_event({"type": "x", "a": 1}) == b'event: x\ndata: {"type":"x","a":1}\n\n'


def test_an_error_after_a_relayed_stream_is_numbered_after_its_last_event() -> None:
    """Hostile review: a relayed stream (no read tools) that broke gave the client an error
    event with `sequence_number` 0 after events numbered 0..n-1."""
    error = ProxyError(ErrorCode.upstream_unavailable, "gone")
    tail = (b'event: x\ndata: {"type":"x","sequence_number":6,"text":"\\"sequence_number\\":99"}'
            b'\n\nevent: y\ndata: {"type":"y","sequence_number":7,"delta":"cut of')
    event = json.loads(relayed_error_event(error, "req_1", tail).split(b"data: ", 1)[1])
    assert event["sequence_number"] == 8 and event["code"] == "upstream_unavailable"
    assert event["ctxproxy"]["request_id"] == "req_1"
    fresh = json.loads(relayed_error_event(error, "req_1", b"").split(b"data: ", 1)[1])
    assert fresh["sequence_number"] == 0
