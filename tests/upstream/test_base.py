"""`proxy.upstream.base`: the one error type of transport failures, the response's own logic."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from multidict import CIMultiDict, CIMultiDictProxy
from upstream_double import Answer, UpstreamDouble

from proxy.errors import ErrorCode, ProxyError
from proxy.upstream.base import (
    UpstreamError,
    UpstreamResponse,
    read_at_most,
    upstream_read_error,
)


class Headers(UpstreamResponse):
    """Only headers: enough for the response's own logic."""

    def __init__(self, *pairs: tuple[str, str]) -> None:
        self._headers = CIMultiDictProxy(CIMultiDict(pairs))

    @property
    def status(self) -> int:
        return 200

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._headers

    async def read(self) -> bytes:
        return b""

    def chunks(self) -> AsyncIterator[bytes]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    @property
    def closed(self) -> bool:
        return False


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([("Content-Type", "text/event-stream")], True),
        ([("content-type", "text/event-stream; charset=utf-8")], True),
        ([("Content-Type", "application/json")], False),
        ([], False),
    ],
)
def test_is_event_stream_reads_the_content_type(
    pairs: list[tuple[str, str]], expected: bool
) -> None:
    assert Headers(*pairs).is_event_stream is expected


def test_an_upstream_error_is_a_proxy_error() -> None:
    error = UpstreamError(ErrorCode.upstream_timeout, "slow")
    assert isinstance(error, ProxyError)
    assert error.envelope("r")["error"]["code"] == "upstream_timeout"


# -- read errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "code", "text"),
    [
        (TimeoutError(), ErrorCode.upstream_timeout, "Upstream 'up' stopped sending"),
        (TimeoutError(), ErrorCode.upstream_timeout, "Upstream 'up' stopped sending"),
        (
            aiohttp.ClientPayloadError("cut"),
            ErrorCode.upstream_unavailable,
            "Upstream 'up' broke the connection: ClientPayloadError",
        ),
        (
            aiohttp.ServerDisconnectedError(),
            ErrorCode.upstream_unavailable,
            "Upstream 'up' broke the connection: ServerDisconnectedError",
        ),
        (
            asyncio.IncompleteReadError(b"partial", 100),
            ErrorCode.upstream_unavailable,
            "Upstream 'up' broke the connection: IncompleteReadError",
        ),
    ],
)
def test_upstream_read_error(exc: BaseException, code: ErrorCode, text: str) -> None:
    error = upstream_read_error(exc, "up")
    assert isinstance(error, UpstreamError)
    assert (error.code, error.message) == (code, text)
    assert error.code.status in (502, 504)


def test_upstream_read_error_does_not_leak_the_exception_text() -> None:
    error = upstream_read_error(aiohttp.ClientPayloadError("token sk-secret in body"), "up")
    assert "sk-secret" not in error.message


async def test_read_at_most_stops_reading_soon_after_the_limit() -> None:
    chunks = [bytes(1000)] * 50
    upstream = UpstreamDouble(Answer(chunks=chunks))
    answer = await upstream.open("GET", "/x", headers=CIMultiDict(), body=None)
    head = await read_at_most(answer, 2500)
    assert len(head) == 3000  # a little over the limit: the caller sees it is too long
    assert len(upstream.responses[0].delivered) == 3  # and the rest was never read
    answer = await UpstreamDouble(Answer(chunks=chunks)).open(
        "GET", "/x", headers=CIMultiDict(), body=None
    )
    assert await read_at_most(answer, 50_000) == bytes(50_000)
