"""Reply builders: the public way to script the fake upstream (one call, one queued reply)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from .bodies import DEFAULT_ID, ToolCallSpec, default_error_body
from .defaults import DefaultReply
from .records import Recorded
from .replies import (
    CompletionReply,
    DynamicReply,
    JsonReply,
    NeverReply,
    ReplayFileReply,
    Reply,
    ResetReply,
    SlowReply,
    SSEReply,
    StreamCompletionReply,
)


def json_reply(
    body: Mapping[str, Any] | bytes, status: int = 200, headers: Mapping[str, str] | None = None
) -> JsonReply:
    """A JSON (or raw bytes) body with a status and extra headers."""
    return JsonReply(body, status, dict(headers or {}))


def completion(
    content: str | None = "Hello from the fake upstream.",
    tool_calls: Sequence[ToolCallSpec] | None = None,
    usage: Mapping[str, Any] | None = None,
    model: str | None = None,
    id: str = DEFAULT_ID,
    finish_reason: str | None = None,
) -> CompletionReply:
    """A full non-streaming `chat.completion` reply (usage None: derived from the output)."""
    return CompletionReply(content, tool_calls, usage, model, id, finish_reason)


def sse_reply(
    events: Sequence[Mapping[str, Any] | str | bytes],
    *,
    delay_s: float = 0.0,
    status: int = 200,
    done: bool = True,
    abort_after: int | None = None,
) -> SSEReply:
    """Streams `data: <json>` events then `data: [DONE]`; raw str/bytes events go out verbatim."""
    return SSEReply(list(events), delay_s, status, done, abort_after)


def stream_completion(
    text_chunks: Sequence[str] = ("Hello", " from", " the", " fake", "."),
    tool_calls: Sequence[ToolCallSpec] | None = None,
    usage: Mapping[str, Any] | None = None,
    include_usage: bool | None = None,
    *,
    model: str | None = None,
    id: str = DEFAULT_ID,
    finish_reason: str | None = None,
    delay_s: float = 0.0,
    abort_after: int | None = None,
    arg_chunk: int = 8,
) -> StreamCompletionReply:
    """A realistic streamed answer (role, content, tool-call deltas, finish, optional usage)."""
    return StreamCompletionReply(
        list(text_chunks),
        tool_calls,
        usage,
        include_usage,
        model,
        id,
        finish_reason,
        delay_s,
        abort_after,
        arg_chunk,
    )


def replay_file(
    path: str | Path,
    *,
    delay_s: float = 0.0,
    chunk_size: int | None = None,
    abort_after: int | None = None,
) -> ReplayFileReply:
    """Replays a recorded `.sse` file byte for byte."""
    return ReplayFileReply(Path(path), delay_s, chunk_size, abort_after)


def error_reply(
    status: int,
    body: Mapping[str, Any] | bytes | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    retry_after: float | Literal["auto"] | None = "auto",
) -> JsonReply:
    """An error with the OpenAI envelope; "auto" adds `retry-after: 1` to 429 answers."""
    extra = dict(headers or {})
    if retry_after == "auto":
        retry_after = 1 if status == 429 else None
    if retry_after is not None:
        extra.setdefault("retry-after", f"{retry_after:g}")
    return JsonReply(body if body is not None else default_error_body(status), status, extra)


def slow_reply(delay_before_headers_s: float, then: Reply | None = None) -> SlowReply:
    """Sends nothing for the delay, then answers with `then` (default: the default reply)."""
    return SlowReply(delay_before_headers_s, then if then is not None else DefaultReply())


def never_reply() -> NeverReply:
    """Never sends a byte; the handler waits until it is cancelled."""
    return NeverReply()


def invalid_json_reply(status: int = 200) -> JsonReply:
    """A JSON content type with a body that is cut off mid-object."""
    return JsonReply(
        b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{', status
    )


def reset_reply(after_bytes: int | None = None) -> ResetReply:
    """Closes the connection before the headers, or after `after_bytes` bytes of the body."""
    return ResetReply(after_bytes)


def dynamic_reply(choose: Callable[[Recorded], Reply]) -> DynamicReply:
    """Picks the reply from the request (e.g. to answer the second synthetic round differently)."""
    return DynamicReply(choose)
