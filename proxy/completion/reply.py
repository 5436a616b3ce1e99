"""What a completion answers, before any server type: `Reply`, and `relayed` to build one from an
upstream answer passed through as it is.

A reply is either a whole body or a `ChunkStream`: the bytes to write, one item per client write.
The edge writes them as they come and calls `aclose()` when it stops, at the end or because the
client went away; that releases every upstream response the stream still holds.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from multidict import CIMultiDict

from proxy.formats.openai_chat_errors import error_event
from proxy.upstream.base import UpstreamError, UpstreamResponse
from proxy.upstream.headers import relay_response_headers


class ChunkStream:
    """An async iterator of the bytes to write; `aclose()` ends it and runs `on_close` once.

    `on_close` releases what the stream holds even when it was closed before its first item (a
    generator that never started runs no `finally`).
    """

    def __init__(
        self, chunks: AsyncGenerator[bytes, None], on_close: Callable[[], None]
    ) -> None:
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
    answer: UpstreamResponse, extra_headers: Mapping[str, str], request_id: str
) -> Reply:
    """The upstream's answer as it is (status, filtered headers + `extra_headers`, body bytes).

    An event stream is relayed chunk by chunk; if it breaks, the client gets one SSE error event
    and the stream ends. A whole body that breaks raises `UpstreamError`. `answer` is closed when
    its body is read or the stream is closed.
    """
    headers = relay_response_headers(answer.headers)
    headers.update(extra_headers)
    if answer.is_event_stream:
        return Reply(
            answer.status, headers, stream=ChunkStream(_chunks(answer, request_id), answer.close)
        )
    try:
        body = await answer.read()
    finally:
        answer.close()
    return Reply(answer.status, headers, body=body)


async def _chunks(answer: UpstreamResponse, request_id: str) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in answer.chunks():
            yield chunk
    except UpstreamError as exc:
        yield error_event(exc, request_id)
    finally:
        answer.close()
