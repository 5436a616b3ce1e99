"""The Responses API's error event: how an error reaches a client whose stream started.

Before the response headers went out, an error is an HTTP answer in the OpenAI envelope (the edge
writes it: a refusal is 400 with code `context_length_exceeded`, which the `openai` SDK raises as
`BadRequestError` on `/v1/responses` too); after, it is one `event: error` whose data is the
Responses `error` event (`type`, `code`, `message`, `param`, `sequence_number`), followed by
nothing (the stream ends).
"""

from __future__ import annotations

import re
from typing import Any

from proxy.errors import ProxyError, error_envelope
from proxy.formats.openai_responses.answers import error_payload
from proxy.jsonio import dumps

ERROR_SEQUENCE_NUMBER = 0
"""The error event's `sequence_number` when no event went out before it (the stream filter
numbers it after the events it rewrote, `relayed_error_event` after the last one relayed)."""
_SEQUENCE = re.compile(rb'(?<!\\)"sequence_number"\s*:\s*(\d{1,15})')


def encode_event(payload: dict[str, Any]) -> bytes:
    """One Responses stream event: `event: <type>` and `data: <json>`."""
    return b"event: " + str(payload.get("type")).encode() + b"\ndata: " + dumps(payload) + b"\n\n"


def error_event(
    error: ProxyError, request_id: str, sequence: int = ERROR_SEQUENCE_NUMBER
) -> bytes:
    """The proxy's error after the stream started, as the Responses `error` event."""
    envelope = error_envelope(
        error.code, error.message, param=error.param, details=error.details, request_id=request_id
    )
    return encode_event(_event(envelope["error"], sequence))


def relayed_error_event(error: ProxyError, request_id: str, tail: bytes) -> bytes:
    """The proxy's error after a stream relayed as it is, numbered after the last event in the
    bytes relayed last (`tail`)."""
    numbers = _SEQUENCE.findall(tail)
    sequence = int(numbers[-1]) + 1 if numbers else ERROR_SEQUENCE_NUMBER
    return error_event(error, request_id, sequence)


def upstream_error_event(body: bytes) -> bytes | None:
    """An upstream's error answer (OpenAI envelope) as the Responses `error` event."""
    error = error_payload(body)
    return encode_event(_event(error)) if error is not None else None


def _event(error: dict[str, Any], sequence: int = ERROR_SEQUENCE_NUMBER) -> dict[str, Any]:
    event = {
        "type": "error",
        "code": error.get("code"),
        "message": error.get("message"),
        "param": error.get("param"),
        "sequence_number": sequence,
    }
    if "ctxproxy" in error:
        event["ctxproxy"] = error["ctxproxy"]
    return event
