"""Scripted replies of the fake upstream and their builders.

A reply is any object with `async respond(request, record) -> web.StreamResponse`. Builders are
plain functions returning frozen dataclasses, so a reply can be enqueued more than once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from .bodies import (
    DEFAULT_CREATED,
    DEFAULT_ID,
    DEFAULT_MODEL,
    ToolCallSpec,
    completion_body,
    stream_chunks,
)
from .records import Recorded

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"


class Reply(Protocol):
    """Produces the response to one recorded request."""

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse: ...


def break_connection(request: web.Request) -> None:
    """Close the socket under the response (buffered bytes are flushed first, then FIN)."""
    transport = request.transport
    if transport is not None:
        transport.close()


def encode_event(event: Mapping[str, Any] | str | bytes) -> bytes:
    """A dict becomes `data: <json>\\n\\n`; str/bytes are written verbatim (may be malformed)."""
    if isinstance(event, bytes):
        return event
    if isinstance(event, str):
        return event.encode()
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


@dataclass(frozen=True)
class JsonReply:
    """A complete body (a dict is JSON-encoded; bytes are sent as they are)."""

    body: Mapping[str, Any] | bytes
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        raw = self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()
        headers = {"Content-Type": JSON_CONTENT_TYPE, **self.headers}
        return web.Response(body=raw, status=self.status, headers=headers)


@dataclass(frozen=True)
class CompletionReply:
    """A non-streaming `chat.completion`; model None answers with the requested model."""

    content: str | None
    tool_calls: Sequence[ToolCallSpec] | None = None
    usage: Mapping[str, Any] | None = None
    model: str | None = None
    id: str = DEFAULT_ID
    finish_reason: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def body(self, model: str = DEFAULT_MODEL) -> dict[str, Any]:
        return completion_body(
            self.content,
            tool_calls=self.tool_calls,
            usage=self.usage,
            model=self.model or model,
            id=self.id,
            finish_reason=self.finish_reason,
        )

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        body = self.body(record.model(DEFAULT_MODEL))
        return await JsonReply(body, headers=self.headers).respond(request, record)


async def write_sse(
    request: web.Request,
    payloads: Sequence[bytes],
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    delay_s: float = 0.0,
    abort_after: int | None = None,
) -> web.StreamResponse:
    """Stream payloads one write each; with abort_after=N break the connection after N of them."""
    response = web.StreamResponse(status=status, headers=headers)
    response.headers.setdefault("Content-Type", SSE_CONTENT_TYPE)
    response.headers.setdefault("Cache-Control", "no-cache")
    await response.prepare(request)
    sent = payloads if abort_after is None else payloads[:abort_after]
    for index, payload in enumerate(sent):
        if index and delay_s:
            await asyncio.sleep(delay_s)
        await response.write(payload)
    if abort_after is None:
        await response.write_eof()
        return response
    break_connection(request)
    return response


@dataclass(frozen=True)
class SSEReply:
    """`data:` events, then `data: [DONE]` (unless done=False); abort_after=N breaks after N."""

    events: Sequence[Mapping[str, Any] | str | bytes]
    delay_s: float = 0.0
    status: int = 200
    done: bool = True
    abort_after: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def payloads(self) -> list[bytes]:
        done = self.done and self.abort_after is None
        return [encode_event(e) for e in self.events] + ([b"data: [DONE]\n\n"] if done else [])

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        return await write_sse(
            request,
            self.payloads(),
            status=self.status,
            headers=self.headers,
            delay_s=self.delay_s,
            abort_after=self.abort_after,
        )


@dataclass(frozen=True)
class StreamCompletionReply:
    """A realistic chunk stream (see `bodies.stream_chunks`).

    include_usage None follows the request's `stream_options.include_usage`; model None answers
    with the requested model.
    """

    text_chunks: Sequence[str]
    tool_calls: Sequence[ToolCallSpec] | None = None
    usage: Mapping[str, Any] | None = None
    include_usage: bool | None = None
    model: str | None = None
    id: str = DEFAULT_ID
    finish_reason: str | None = None
    delay_s: float = 0.0
    abort_after: int | None = None
    arg_chunk: int = 8

    def chunks(
        self, model: str = DEFAULT_MODEL, include_usage: bool = False
    ) -> list[dict[str, Any]]:
        return stream_chunks(
            self.text_chunks,
            tool_calls=self.tool_calls,
            usage=self.usage,
            include_usage=include_usage if self.include_usage is None else self.include_usage,
            model=self.model or model,
            id=self.id,
            created=DEFAULT_CREATED,
            finish_reason=self.finish_reason,
            arg_chunk=self.arg_chunk,
        )

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        chunks = self.chunks(record.model(DEFAULT_MODEL), record.include_usage())
        reply = SSEReply(chunks, delay_s=self.delay_s, abort_after=self.abort_after)
        return await reply.respond(request, record)


@dataclass(frozen=True)
class ReplayFileReply:
    """Replays a recorded `.sse` file byte for byte: one write per event, or per chunk_size."""

    path: Path
    delay_s: float = 0.0
    chunk_size: int | None = None
    abort_after: int | None = None

    def payloads(self) -> list[bytes]:
        raw = self.path.read_bytes()
        if self.chunk_size:
            size = self.chunk_size
            return [raw[i : i + size] for i in range(0, len(raw), size)]
        parts = raw.split(b"\n\n")
        payloads = [part + b"\n\n" for part in parts[:-1]]
        return payloads + ([parts[-1]] if parts[-1] else [])

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        return await write_sse(
            request, self.payloads(), delay_s=self.delay_s, abort_after=self.abort_after
        )


@dataclass(frozen=True)
class SlowReply:
    """Waits before sending anything (headers included), then answers with `then`."""

    delay_s: float
    then: Reply

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        await asyncio.sleep(self.delay_s)
        return await self.then.respond(request, record)


@dataclass(frozen=True)
class NeverReply:
    """The first byte never comes: waits until the handler is cancelled (client gone / stop)."""

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        await asyncio.get_running_loop().create_future()
        raise AssertionError("unreachable: the future above is never resolved")


@dataclass(frozen=True)
class ResetReply:
    """Breaks the connection: before the headers (after_bytes None) or after that many body bytes
    of a declared-length JSON completion."""

    after_bytes: int | None = None

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        if self.after_bytes is None:
            break_connection(request)
            return web.Response(status=200)
        body = json.dumps(completion_body("this body is cut short")).encode()
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON_CONTENT_TYPE})
        response.content_length = len(body)
        await response.prepare(request)
        await response.write(body[: self.after_bytes])
        break_connection(request)
        return response


@dataclass(frozen=True)
class DynamicReply:
    """Chooses the reply from the recorded request at reply time."""

    choose: Callable[[Recorded], Reply]

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        return await self.choose(record).respond(request, record)
