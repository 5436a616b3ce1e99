"""An upstream's "context length exceeded" answer, and the window it states.

Recognised: OpenAI's 400 with `code: context_length_exceeded` ("This model's maximum context
length is 8192 tokens. However, ..."), Anthropic's 400 `invalid_request_error` ("prompt is too
long: 210000 tokens > 200000 maximum"), vLLM's 400 with the same sentence, llama.cpp's
`exceed_context_size_error` (with `n_ctx` in the error object) and its older texts ("... exceeds
the available context size (n_ctx = 4096)"). The window is taken only from these shapes; a number
that appears elsewhere in an error is never taken for one.
"""

from __future__ import annotations

import re
from typing import Any

from proxy.errors import ProxyError
from proxy.jsonio import loads

OVERFLOW_STATUSES = frozenset({400, 413})
MAX_ERROR_BYTES = 64 * 1024
"""The most of an error answer read to look for a window (the rest is relayed as it comes)."""

_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_OVERFLOW_TEXT = re.compile(
    r"maximum context length|context (?:size|length|window)|n_ctx|too many tokens"
    r"|prompt is too long",
    re.IGNORECASE,
)
_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d{1,9}) tokens", re.IGNORECASE),
    re.compile(r"n_ctx(?:_slot)?\s*[=:]\s*(\d{1,9})", re.IGNORECASE),
    re.compile(r"context (?:size|length|window) (?:is|of) (\d{1,9})", re.IGNORECASE),
    re.compile(r"prompt is too long: \d{1,12} tokens > (\d{1,9}) maximum", re.IGNORECASE),
)


def is_overflow(status: int, body: bytes) -> bool:
    """Whether an upstream answer says the prompt does not fit the model's context."""
    if status not in OVERFLOW_STATUSES:
        return False
    error = _error_object(body)
    codes = {str(error.get("code")), str(error.get("type"))}
    if codes & _CODES:
        return True
    return bool(_OVERFLOW_TEXT.search(str(error.get("message", ""))))


def stated_window(status: int, body: bytes) -> int | None:
    """The window an overflow answer states (None when it is no overflow or states none)."""
    if not is_overflow(status, body):
        return None
    error = _error_object(body)
    for key in ("n_ctx", "n_ctx_slot"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    message = str(error.get("message", ""))
    for pattern in _WINDOW_PATTERNS:
        match = pattern.search(message)
        if match:
            window = int(match.group(1))
            return window if window > 0 else None
    return None


_PROMPT_PATTERNS = (
    re.compile(r"\((\d{1,9}) in the messages", re.IGNORECASE),  # llama-cpp-python, older OpenAI
    re.compile(r"your messages resulted in (\d{1,9}) tokens", re.IGNORECASE),  # OpenAI
    re.compile(r"prompt is too long: (\d{1,9}) tokens >", re.IGNORECASE),  # Anthropic
)


def stated_prompt_tokens(status: int, body: bytes) -> int | None:
    """The prompt's own size in the upstream's tokens, when an overflow answer states it."""
    if not is_overflow(status, body):
        return None
    error = _error_object(body)
    value = error.get("n_prompt_tokens")  # llama.cpp's server
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    message = str(error.get("message", ""))
    for pattern in _PROMPT_PATTERNS:
        match = pattern.search(message)
        if match and int(match.group(1)) > 0:
            return int(match.group(1))
    return None


def _error_object(body: bytes) -> dict[str, Any]:
    """`{"error": {...}}` (OpenAI, vLLM, llama.cpp) or a bare object with a `message`."""
    try:
        payload = loads(body[:MAX_ERROR_BYTES])
    except ProxyError:
        return {"message": body[:MAX_ERROR_BYTES].decode("utf-8", "replace")}
    if not isinstance(payload, dict):
        return {}
    error = payload.get("error", payload)
    if isinstance(error, str):
        return {"message": error}
    return error if isinstance(error, dict) else {}
