"""`relayed`: a stream relayed as it is that breaks hands its last bytes to the error event; a
relay the proxy does not read passes compressed, with its coding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from multidict import CIMultiDict, CIMultiDictProxy
from upstream_double import UpstreamDouble, broken, sse_answer

from proxy.completion.reply import TAIL_BYTES, WHOLE_BODY_BYTES, relayed
from proxy.errors import ProxyError
from proxy.upstream.base import UpstreamError, UpstreamResponse


async def relayed_tail(chunks: list[bytes], *, encoded: bool = False) -> tuple[bytes, bytes]:
    """(what the client got, the tail the error event was given) for a stream that breaks."""
    seen: list[bytes] = []

    def error_event(error: ProxyError, request_id: str, tail: bytes) -> bytes:
        seen.append(tail)
        return b"ERROR"

    upstream = UpstreamDouble(sse_answer(chunks, done=False, error=broken()))
    answer: Any = await upstream.send(headers={}, body=b"{}")
    reply = await relayed(answer, {}, "req_1", error_event, encoded=encoded)
    assert reply.stream is not None
    sent = b"".join([chunk async for chunk in reply.stream])
    return sent, seen[0]


async def test_the_error_event_gets_the_last_bytes_relayed() -> None:
    sent, tail = await relayed_tail([b"data: 1\n\n", b"data: 2\n\n"])
    assert sent == b"data: 1\n\ndata: 2\n\nERROR" and tail == b"data: 1\n\ndata: 2\n\n"


async def test_the_tail_is_bounded_but_never_shorter_than_its_size() -> None:
    chunks = [bytes([65 + k % 26]) * 1000 for k in range(300)]
    sent, tail = await relayed_tail(chunks)
    whole = b"".join(chunks)
    assert sent == whole + b"ERROR"
    assert TAIL_BYTES <= len(tail) < TAIL_BYTES + 1000 and whole.endswith(tail)


class CompressedAnswer(UpstreamResponse):
    """An answer whose bytes as they came (`encoded_chunks`) differ from its decoded chunks."""

    def __init__(
        self, decoded: list[bytes], encoded: list[bytes], error: UpstreamError | None = None
    ) -> None:
        self._decoded, self._encoded, self._error = decoded, encoded, error
        self._headers = CIMultiDictProxy(
            CIMultiDict({"Content-Type": "text/event-stream", "Content-Encoding": "gzip"})
        )
        self.closed_ = False

    @property
    def status(self) -> int:
        return 200

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._headers

    @property
    def content_encoding(self) -> str:
        return "gzip"

    async def read(self) -> bytes:
        return b"".join(self._decoded)

    def chunks(self) -> AsyncIterator[bytes]:
        return self._iterate(self._decoded)

    def encoded_chunks(self) -> AsyncIterator[bytes]:
        return self._iterate(self._encoded)

    async def _iterate(self, chunks: list[bytes]) -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        self.closed_ = True

    @property
    def closed(self) -> bool:
        return self.closed_


def no_event(error: ProxyError, request_id: str, tail: bytes) -> bytes:
    raise AssertionError("no event can be added to a compressed stream")


async def test_a_relay_that_is_not_read_passes_the_bytes_with_their_coding() -> None:
    answer = CompressedAnswer([b"data: 1\n\n"], [b"\x1f\x8bcompressed"])
    reply = await relayed(answer, {}, "req_1", no_event, encoded=True)
    assert reply.headers["Content-Encoding"] == "gzip"
    assert reply.body == b"\x1f\x8bcompressed"
    assert answer.closed


async def test_a_relay_the_proxy_reads_is_decoded_and_loses_the_coding() -> None:
    answer = CompressedAnswer([b"data: 1\n\n"], [b"\x1f\x8bcompressed"])
    reply = await relayed(answer, {}, "req_1", no_event)
    assert "Content-Encoding" not in reply.headers
    assert reply.stream is not None  # an event stream
    assert b"".join([chunk async for chunk in reply.stream]) == b"data: 1\n\n"


async def test_a_compressed_stream_that_breaks_is_cut_without_an_event() -> None:
    encoded = [b"\x1f\x8b" + bytes(WHOLE_BODY_BYTES), b"more"]
    answer = CompressedAnswer([], encoded, error=broken())
    reply = await relayed(answer, {}, "req_1", no_event, encoded=True)
    assert reply.stream is not None
    received: list[bytes] = []
    with pytest.raises(UpstreamError):  # the edge cuts the connection
        async for chunk in reply.stream:
            received.append(chunk)
    assert b"".join(received) == b"".join(encoded)
    await reply.stream.aclose()
    assert answer.closed


async def test_an_answer_without_a_coding_is_relayed_alike_either_way() -> None:
    sent, tail = await relayed_tail([b"data: 1\n\n"], encoded=True)
    assert sent == b"data: 1\n\nERROR" and tail == b"data: 1\n\n"
