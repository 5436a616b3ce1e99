"""Anthropic's error envelope, for the proxy's own errors on the Messages routes.

`{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}`, with the
proxy's details under `error.ctxproxy` (its code, the refusal's numbers). A refusal for length
reads "prompt is too long: N tokens > M maximum", the words the `anthropic` SDK and Claude Code
look for; before a stream started it is the HTTP body (the edge writes it), after, one
`event: error`.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import ErrorCode, ProxyError
from proxy.formats.sse import SSEEvent, encode_event
from proxy.jsonio import dumps, loads

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


def error_type(status: int) -> str:
    return _TYPES.get(status, "api_error")


def error_message(error: ProxyError) -> str:
    details = error.details or {}
    final, limit = details.get("final_tokens"), details.get("refusal_limit_tokens")
    if error.code is ErrorCode.context_length_exceeded and final is not None and limit is not None:
        return f"prompt is too long: {final} tokens > {limit} maximum"
    return error.message


def error_body(error: ProxyError, request_id: str | None) -> dict[str, Any]:
    extra: dict[str, Any] = {"code": error.code.name}
    if error.param is not None:
        extra["param"] = error.param
    if error_message(error) != error.message:
        extra["explanation"] = error.message
    extra.update(error.details or {})
    if request_id is not None:
        extra["request_id"] = request_id
    inner = {"type": error_type(error.code.status), "message": error_message(error)}
    body: dict[str, Any] = {"type": "error", "error": {**inner, "ctxproxy": extra}}
    if request_id is not None:
        body["request_id"] = request_id
    return body


def error_event(error: ProxyError, request_id: str) -> bytes:
    """An error after the stream has started: one `event: error`."""
    return encode_event(SSEEvent(dumps(error_body(error, request_id)), b"error"))


def relayed_error_event(error: ProxyError, request_id: str, tail: bytes) -> bytes:
    """The same event after a relayed stream (Anthropic events carry no sequence number)."""
    return error_event(error, request_id)


def upstream_error_event(body: bytes) -> bytes | None:
    """An upstream's error answer as one `event: error`, when it is in Anthropic's envelope."""
    try:
        payload = loads(body)
    except ProxyError:
        return None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        return encode_event(SSEEvent(dumps(payload), b"error"))
    return None
