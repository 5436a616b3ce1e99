"""The Responses error event: the proxy's errors and an upstream's, after a stream started."""

from __future__ import annotations

import json

from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_responses.errors import encode_event, error_event, upstream_error_event


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
