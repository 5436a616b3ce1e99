"""What a completion answers, before any server type: `Reply`, and `relayed` to build one from an
upstream answer passed through as it is.

A reply is either a whole body or a `ChunkStream`: the bytes to write, one item per client write.
The edge writes them as they come and calls `aclose()` when it stops, at the end or because the
client went away; that releases every upstream response the stream still holds.

Memory stays bounded whatever an upstream sends: a relayed answer is held whole only up to
`WHOLE_BODY_BYTES` (so small answers keep their Content-Length), larger ones stream chunk by
chunk; an answer the proxy must parse is read with `read_capped`, which refuses one over its cap.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from multidict import CIMultiDict

from proxy.errors import ErrorCode, ProxyError
from proxy.upstream.base import UpstreamError, UpstreamResponse
from proxy.upstream.headers import relay_response_headers

RelayedErrorEvent = Callable[[ProxyError, str, bytes], bytes]
"""How an error reaches a client whose relayed stream started: (error, request id, the last bytes
relayed: at least `TAIL_BYTES` of them when there were that many) -> the event's bytes
(`ClientFormat.relayed_error_event`)."""
TAIL_BYTES = 64 * 1024

WHOLE_BODY_BYTES = 256 * 1024
"""A relayed answer up to this size is read whole and answered with its Content-Length."""


class ChunkStream:
    """An async iterator of the bytes to write; `aclose()` ends it and runs `on_close` once.

    `on_close` releases what the stream holds even when it was closed before its first item (a
    generator that never started runs no `finally`).
    """

    def __init__(self, chunks: AsyncGenerator[bytes, None], on_close: Callable[[], None]) -> None:
        self._chunks = chunks
        self._on_close: Callable[[], None] | None = on_close

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks  # the generator itself: no extra frame per chunk

    async def __anext__(self) -> bytes:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        on_close, self._on_close = self._on_close, None
        try:
            await self._chunks.aclose()
        finally:
            if on_close is not None:
                on_close()


@dataclass
class Reply:
    """The answer to the client: status, headers, and exactly one of `body` and `stream`."""

    status: int
    headers: CIMultiDict[str]
    body: bytes | None = None
    stream: ChunkStream | None = None


async def relayed(
    answer: UpstreamResponse,
    extra_headers: Mapping[str, str],
    request_id: str,
    error_event: RelayedErrorEvent,
    observe: Callable[[bytes], None] | None = None,
    *,
    encoded: bool = False,
) -> Reply:
    """The upstream's answer as it is (status, filtered headers + `extra_headers`, body bytes).

    An event stream is relayed chunk by chunk; if it breaks, the client gets one error event
    (`error_event`) and the stream ends. Any other body up to `WHOLE_BODY_BYTES` is read whole
    (one that breaks raises `UpstreamError`); a larger one streams chunk by chunk whatever its
    content type, and if it breaks after it started, the stream raises `UpstreamError` and the
    edge cuts the connection (the client sees an incomplete body, never a body that looks whole).
    `answer` is closed when its body is read or the stream is closed. `observe` sees each chunk
    of a relayed event stream as it passes (unchanged).

    The body is decoded from its content coding, in bounded steps (`UpstreamResponse.chunks`),
    unless `encoded`: then it goes as it came, with its `Content-Encoding` (a relay the proxy
    does not read; a compressed event stream that breaks is cut, no event can be added to it).
    """
    headers = relay_response_headers(answer.headers)
    headers.update(extra_headers)
    coding = answer.content_encoding if encoded else ""
    if coding:
        headers["Content-Encoding"] = coding
    if answer.is_event_stream and not coding:
        chunks_out = _chunks(answer, request_id, error_event, observe)
        return Reply(answer.status, headers, stream=ChunkStream(chunks_out, answer.close))
    chunks = answer.encoded_chunks() if encoded else answer.chunks()
    try:
        head, complete = await _read_head(chunks, WHOLE_BODY_BYTES)
    except BaseException:
        answer.close()
        raise
    if complete:
        answer.close()
        return Reply(answer.status, headers, body=head)
    body = ChunkStream(_body_chunks(head, chunks, answer), answer.close)
    return Reply(answer.status, headers, stream=body)


async def read_capped(answer: UpstreamResponse, limit: int, upstream: str) -> bytes:
    """The whole body of an answer the proxy must parse; `answer` is always closed.

    Raises `ProxyError(upstream_response_too_large)` as soon as more than `limit` bytes came.
    """
    try:
        return b"".join([chunk async for chunk in CappedChunks(answer, limit, upstream)])
    finally:
        answer.close()


class CappedChunks:
    """`answer.chunks()` raising `upstream_response_too_large` once more than `limit` bytes came
    (an iterator, not a generator: nothing is left to finalise when its reader stops early)."""

    def __init__(self, answer: UpstreamResponse, limit: int, upstream: str) -> None:
        self._chunks = answer.chunks()
        self._limit = limit
        self._upstream = upstream
        self._size = 0

    def __aiter__(self) -> CappedChunks:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._chunks.__anext__()
        self._size += len(chunk)
        if self._size > self._limit:
            raise response_too_large(self._upstream, self._limit)
        return chunk


def response_too_large(upstream: str, limit: int) -> ProxyError:
    return ProxyError(
        ErrorCode.upstream_response_too_large,
        f"Upstream {upstream!r} answered with more than {limit} bytes, the most the proxy "
        "reads to run its tools (server.max_parsed_response_bytes)",
    )


async def _read_head(chunks: AsyncIterator[bytes], limit: int) -> tuple[bytes, bool]:
    """Up to a little over `limit` bytes from `chunks`, and whether that was the whole body."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(parts), False
    return b"".join(parts), True


async def _body_chunks(
    head: bytes, rest: AsyncIterator[bytes], answer: UpstreamResponse
) -> AsyncGenerator[bytes, None]:
    try:
        yield head
        async for chunk in rest:
            yield chunk
    finally:
        answer.close()


async def _chunks(
    answer: UpstreamResponse,
    request_id: str,
    error_event: RelayedErrorEvent,
    observe: Callable[[bytes], None] | None = None,
) -> AsyncGenerator[bytes, None]:
    tail: deque[bytes] = deque()
    size = 0
    try:
        async for chunk in answer.chunks():
            if observe is not None:
                observe(chunk)
            tail.append(chunk)
            size += len(chunk)
            while size - len(tail[0]) >= TAIL_BYTES:
                size -= len(tail.popleft())
            yield chunk
    except UpstreamError as exc:
        yield error_event(exc, request_id, b"".join(tail))
    finally:
        answer.close()
