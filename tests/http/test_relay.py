"""`proxy.http.relay`: JSON and SSE replies of a real upstream (the fake) written to a client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from fakes import FakeUpstream, error_reply, json_reply, reset_reply, sse_reply
from fakes.bodies import default_error_body
from multidict import CIMultiDict

from proxy.completion.reply import ChunkStream, Reply, relayed
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.http.relay import respond
from proxy.http.services import REQUEST_ID
from proxy.settings import UpstreamSettings
from proxy.upstream.base import UpstreamResponse
from proxy.upstream.http_upstream import HttpUpstream

EXTRA = {"x-ctxproxy-policy": "default", "x-ctxproxy-actions": "none"}
EVENTS = [{"id": "c1", "choices": [{"index": 0, "delta": {"content": f"w{i}"}}]} for i in range(3)]


@dataclass
class Rig:
    """A one-route app that opens the upstream and relays its answer, recording what happened."""

    client: TestClient
    answers: list[UpstreamResponse] = field(default_factory=list)
    errors: list[ProxyError] = field(default_factory=list)
    returned: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def rig(fake_upstream: FakeUpstream) -> AsyncIterator[Rig]:
    async with aiohttp.ClientSession() as session:
        app = web.Application()
        holder: list[Rig] = []
        settings = UpstreamSettings(name="up", base_url=fake_upstream.base_url)
        upstream = HttpUpstream(settings, session)

        async def handler(request: web.Request) -> web.StreamResponse:
            state = holder[0]
            request[REQUEST_ID] = "req-relay-1"
            answer = await upstream.open("GET", "/anything", headers=CIMultiDict(), body=None)
            state.answers.append(answer)
            try:
                reply = await relayed(
                    answer, EXTRA, request[REQUEST_ID], OPENAI_CHAT.relayed_error_event
                )
                return await respond(request, reply)
            except ProxyError as exc:
                state.errors.append(exc)
                return web.Response(status=599)
            finally:
                state.returned.set()

        app.router.add_get("/relay", handler)
        async with TestClient(TestServer(app)) as client:
            holder.append(Rig(client))
            yield holder[0]


async def test_json_body_status_and_headers(rig: Rig, fake_upstream: FakeUpstream) -> None:
    body = b'{"id": "x",  "object": "chat.completion", "n": 1e400}'  # bytes, not re-encoded
    fake_upstream.enqueue(json_reply(body, status=201, headers={"x-request-id": "req_up"}))
    async with rig.client.get("/relay") as response:
        assert response.status == 201
        assert await response.read() == body
        assert response.headers["Content-Type"] == "application/json"
        assert response.headers["x-request-id"] == "req_up"
        assert response.headers["x-ctxproxy-policy"] == "default"
        assert response.headers["x-ctxproxy-actions"] == "none"
        assert response.headers["Content-Length"] == str(len(body))
    assert not rig.answers[0].is_event_stream
    assert rig.answers[0].closed
    assert rig.errors == []


async def test_upstream_error_answers_are_relayed_as_they_are(
    rig: Rig, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(error_reply(429))
    async with rig.client.get("/relay") as response:
        assert response.status == 429
        assert response.headers["retry-after"] == "1"
        payload = await response.json()
    assert payload == default_error_body(429)
    assert rig.answers[0].closed


async def test_sse_body_is_relayed_byte_for_byte(rig: Rig, fake_upstream: FakeUpstream) -> None:
    reply = sse_reply([*EVENTS, ": keep-alive comment\n\n"])
    fake_upstream.enqueue(reply)
    async with rig.client.get("/relay") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers["x-ctxproxy-request-id"] == "req-relay-1"
        assert response.headers["x-ctxproxy-policy"] == "default"
        assert "Content-Length" not in response.headers
        raw = await response.read()
    assert raw == b"".join(reply.payloads())
    assert raw.endswith(b"data: [DONE]\n\n")
    assert rig.answers[0].is_event_stream
    assert rig.answers[0].closed


async def test_broken_json_body_is_a_typed_error(rig: Rig, fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(reset_reply(after_bytes=20))
    async with rig.client.get("/relay") as response:
        assert response.status == 599
    assert len(rig.errors) == 1
    assert rig.errors[0].code is ErrorCode.upstream_unavailable
    assert rig.errors[0].message.startswith("Upstream 'up' broke the connection")
    assert rig.answers[0].closed


async def test_broken_stream_ends_with_one_sse_error_event(
    rig: Rig, fake_upstream: FakeUpstream
) -> None:
    reply = sse_reply(EVENTS, abort_after=2)
    fake_upstream.enqueue(reply)
    async with rig.client.get("/relay") as response:
        assert response.status == 200
        raw = await response.read()
    events = [e for e in raw.split(b"\n\n") if e]
    assert b"".join(e + b"\n\n" for e in events[:2]) == b"".join(reply.payloads()[:2])
    assert len(events) == 3 and b"[DONE]" not in raw
    error = json.loads(events[2].removeprefix(b"data: "))["error"]
    assert error["code"] == "upstream_unavailable" and error["type"] == "api_error"
    assert error["ctxproxy"] == {"request_id": "req-relay-1"}
    assert rig.errors == []  # written into the stream, not raised
    assert rig.answers[0].closed


async def test_client_gone_stops_reading_the_upstream(
    rig: Rig, fake_upstream: FakeUpstream
) -> None:
    many = [{"choices": [{"index": 0, "delta": {"content": "x" * 64}}]}] * 200
    fake_upstream.enqueue(sse_reply(many, delay_s=0.02))  # ~4 s if read to the end
    response = await rig.client.get("/relay")
    assert response.status == 200
    await response.content.readuntil(b"\n\n")
    response.close()  # the client hangs up mid-stream
    await asyncio.wait_for(rig.returned.wait(), 30)  # only bounds a hang
    assert rig.answers[0].closed
    assert rig.errors == []
    await fake_upstream.wait_idle()
    assert fake_upstream.cancelled == 1 and fake_upstream.completed == 0


async def test_each_stream_item_is_one_http_chunk_and_the_stream_is_closed_once() -> None:
    items = [b"data: 1\n\n", b"data: 2\n\ndata: 3\n\n", b"data: [DONE]\n\n"]
    closed: list[str] = []

    async def produce() -> AsyncGenerator[bytes, None]:
        for item in items:
            await asyncio.sleep(0.01)
            yield item

    async def handler(request: web.Request) -> web.StreamResponse:
        request[REQUEST_ID] = "req-relay-2"
        headers = CIMultiDict({"Content-Type": "text/event-stream", "x-up": "1"})
        stream = ChunkStream(produce(), lambda: closed.append("closed"))
        return await respond(request, Reply(200, headers, stream=stream))

    app = web.Application()
    app.router.add_get("/stream", handler)
    async with TestClient(TestServer(app)) as client, client.get("/stream") as response:
        assert list(response.headers.items())[:2] == [
            ("Content-Type", "text/event-stream"),
            ("x-up", "1"),
        ]
        assert response.headers["x-ctxproxy-request-id"] == "req-relay-2"
        received, current = [], b""
        async for data, end_of_chunk in response.content.iter_chunks():
            current += data
            if end_of_chunk:
                received.append(current)
                current = b""
    assert received == items
    assert closed == ["closed"]


@dataclass(frozen=True)
class _LargeBody:
    """A non-SSE body of `size` bytes in 64 KiB writes; it breaks after `break_after` bytes."""

    size: int
    break_after: int | None = None

    async def respond(self, request: web.Request, record: object) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = self.size
        await response.prepare(request)
        sent = 0
        while sent < self.size:
            if self.break_after is not None and sent >= self.break_after:
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(b"z" * 65536)
            sent += 65536
        await response.write_eof()
        return response


async def test_a_large_body_is_relayed_chunked(rig: Rig, fake_upstream: FakeUpstream) -> None:
    fake_upstream.enqueue(_LargeBody(2 * 1024 * 1024))
    async with rig.client.get("/relay") as response:
        assert response.status == 200
        assert "Content-Length" not in response.headers
        assert response.headers["Transfer-Encoding"] == "chunked"
        assert response.headers["x-ctxproxy-request-id"] == "req-relay-1"
        assert await response.read() == b"z" * 2 * 1024 * 1024
    assert rig.answers[0].closed and rig.errors == []


async def test_a_large_body_that_breaks_is_cut_for_the_client(
    rig: Rig, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(_LargeBody(4 * 1024 * 1024, break_after=1024 * 1024))
    async with rig.client.get("/relay") as response:
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()  # never a body that looks complete
    await asyncio.wait_for(rig.returned.wait(), 30)  # only bounds a hang
    assert rig.answers[0].closed and rig.errors == []


async def test_a_stream_that_fails_unexpectedly_is_cut_not_left_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bug (any exception, not a ProxyError) after the headers went out: the client sees the
    connection cut at once, never a stream left open; the failure is logged with its traceback."""
    closed: list[str] = []

    async def produce() -> AsyncGenerator[bytes, None]:
        yield b"data: 1\n\n"
        raise TypeError("a bug in a later round")

    async def handler(request: web.Request) -> web.StreamResponse:
        request[REQUEST_ID] = "req-relay-3"
        headers = CIMultiDict({"Content-Type": "text/event-stream"})
        stream = ChunkStream(produce(), lambda: closed.append("closed"))
        return await respond(request, Reply(200, headers, stream=stream))

    app = web.Application()
    app.router.add_get("/stream", handler)
    async with TestClient(TestServer(app)) as client, client.get("/stream") as response:
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(response.read(), 30)  # only bounds a hang
    assert closed == ["closed"]
    [record] = [r for r in caplog.records if r.name == "ctxproxy.http"]
    assert record.levelname == "ERROR" and record.exc_info is not None
    assert "stream failed after it started" in record.getMessage()
