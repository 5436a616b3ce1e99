"""The OpenAI Chat Completions error event: how an error reaches a client whose stream started.

Before the response headers went out, an error is an HTTP answer with the same envelope (the edge
writes it); after, the status is spent and the error is one SSE `data:` event.
"""

from __future__ import annotations

from proxy.errors import ProxyError, error_envelope
from proxy.jsonio import dumps


def error_event(error: ProxyError, request_id: str) -> bytes:
    """An error after the stream has started: one SSE `data:` event in the OpenAI envelope."""
    body = error_envelope(
        error.code, error.message, param=error.param, details=error.details, request_id=request_id
    )
    return b"data: " + dumps(body) + b"\n\n"


def relayed_error_event(error: ProxyError, request_id: str, tail: bytes) -> bytes:
    """The same event after a relayed stream (chat chunks carry no sequence number)."""
    return error_event(error, request_id)
