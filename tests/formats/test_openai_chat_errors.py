"""`proxy.formats.openai_chat.errors`: an error after the stream started, as one SSE event."""

from __future__ import annotations

from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_chat.errors import error_event
from proxy.jsonio import loads


def test_error_event_is_one_sse_data_event() -> None:
    error = ProxyError(ErrorCode.upstream_timeout, "slow", details={"round": 2})
    raw = error_event(error, "rid")
    assert raw.startswith(b"data: ") and raw.endswith(b"\n\n") and raw.count(b"\n") == 2
    assert loads(raw[6:]) == {
        "error": {
            "message": "slow",
            "type": "api_error",
            "param": None,
            "code": "upstream_timeout",
            "ctxproxy": {"round": 2, "request_id": "rid"},
        }
    }


def test_error_event_bytes_are_compact_json_in_one_data_line() -> None:
    error = ProxyError(ErrorCode.upstream_unavailable, "Upstream 'up' answered HTTP 500")
    assert error_event(error, "r1") == (
        b'data: {"error":{"message":"Upstream \'up\' answered HTTP 500","type":"api_error",'
        b'"param":null,"code":"upstream_unavailable","ctxproxy":{"request_id":"r1"}}}\n\n'
    )


def test_error_event_names_the_parameter_at_fault() -> None:
    error = ProxyError(ErrorCode.invalid_request, "bad n", param="n")
    assert loads(error_event(error, "rid")[6:])["error"]["param"] == "n"
