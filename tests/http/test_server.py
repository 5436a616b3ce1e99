"""`proxy.http.server`: the header deadline, JSON for aiohttp's own errors, the body deadline."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web
from fakes import FakeUpstream
from proxy_harness import make_settings, shared_parts

from proxy.app import create_app
from proxy.http.server import EdgeRunner, raise_open_files_limit, tokenizers_on_one_core
from proxy.settings import ServerSettings

HEADER_TIMEOUT = 0.2
HANG_S = 30.0
"""How long a test waits for the server to close or answer: only a broken server takes it."""
SECRET = b"sk-secret-0123456789"
SLOW_STARTED: web.AppKey[asyncio.Event] = web.AppKey("slow_started", asyncio.Event)
SLOW_RELEASE: web.AppKey[asyncio.Event] = web.AppKey("slow_release", asyncio.Event)


@dataclass
class Served:
    port: int
    app: web.Application

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)

    async def a_header_deadline_passes(self) -> None:
        """Returns once a connection opened now, which sends nothing, has been cut by its header
        deadline: any deadline the server armed before it has passed too."""
        reader, writer = await self.connect()
        assert _response(await _closed(reader))[0] == 408
        writer.close()


async def _slow(request: web.Request) -> web.Response:
    """Answers once the test releases it (after a header deadline has passed meanwhile)."""
    request.app[SLOW_STARTED].set()
    await request.app[SLOW_RELEASE].wait()
    return web.Response(text="slow but fine")


async def _ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _start(app: web.Application, limits: ServerSettings) -> tuple[web.AppRunner, int]:
    runner = EdgeRunner(app, limits)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    return runner, server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    app = web.Application()
    app[SLOW_STARTED], app[SLOW_RELEASE] = asyncio.Event(), asyncio.Event()
    app.router.add_get("/ok", _ok)
    app.router.add_get("/slow", _slow)
    runner, port = await _start(app, ServerSettings(header_timeout_s=HEADER_TIMEOUT))
    yield Served(port, app)
    app[SLOW_RELEASE].set()
    await runner.cleanup()


async def _closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sent before it closed the connection (fails if it stays open: a
    broken deadline; HANG_S only bounds that)."""
    return await asyncio.wait_for(reader.read(), HANG_S)


def _response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


# -- headers must arrive in time (issue 11 item 4) ---------------------------------------------


async def test_headers_sent_a_line_at_a_time_are_cut_with_a_408(served: Served) -> None:
    reader, writer = await served.connect()
    writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n")

    async def trickle() -> None:  # a line every 50 ms, never the end of the headers
        i = 0
        while True:
            await asyncio.sleep(0.05)
            writer.write(f"X-Slow-{i}: 1\r\n".encode())
            i += 1

    trickling = asyncio.create_task(trickle())
    raw = await _closed(reader)  # a deadline renewed by each line would never close it
    assert not trickling.done()  # cut while it was still trickling
    trickling.cancel()
    status, headers, body = _response(raw)
    assert status == 408 and headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "request_timeout"
    writer.close()


async def test_a_connection_that_sends_nothing_is_closed(served: Served) -> None:
    reader, writer = await served.connect()
    raw = await _closed(reader)
    assert _response(raw)[0] == 408
    writer.close()


async def test_an_idle_keep_alive_connection_is_not_a_slow_request(served: Served) -> None:
    reader, writer = await served.connect()
    for _ in range(2):
        writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
        await served.a_header_deadline_passes()  # idle meanwhile: keep-alive's business
    writer.write(b"GET /ok HTTP/1.1\r\n")  # a later request that stalls is cut like the first
    raw = await _closed(reader)
    assert _response(raw)[0] == 408
    writer.close()


async def test_a_later_request_gets_its_own_full_header_deadline(served: Served) -> None:
    reader, writer = await served.connect()  # the connection's deadline is armed now
    writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
    await asyncio.sleep(HEADER_TIMEOUT * 0.6)
    writer.write(b"GET /ok HTTP/1.1\r\n")  # stalls before the first deadline would have passed
    stalled = time.monotonic()
    raw = await _closed(reader)
    assert _response(raw)[0] == 408
    # Its own deadline, not the first: cut no sooner than a whole deadline after its first byte
    # (a lower bound, which a loaded machine only makes easier to meet).
    assert time.monotonic() - stalled >= HEADER_TIMEOUT * 0.9
    writer.close()


async def test_a_long_request_is_not_cut_by_the_header_deadline(served: Served) -> None:
    reader, writer = await served.connect()
    writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(served.app[SLOW_STARTED].wait(), HANG_S)
    writer.write(b"GET /ok HTTP/1.1\r\n")  # pipelined while the first one runs
    await served.a_header_deadline_passes()  # the first one runs longer than a deadline
    served.app[SLOW_RELEASE].set()
    first = await asyncio.wait_for(reader.readuntil(b"slow but fine"), HANG_S)
    assert first.startswith(b"HTTP/1.1 200")
    writer.write(b"Host: x\r\n\r\n")
    assert (await asyncio.wait_for(reader.readuntil(b"ok"), HANG_S)).startswith(b"HTTP/1.1 200")
    writer.close()


async def test_many_slow_clients_are_all_released(served: Served) -> None:
    connections = [await served.connect() for _ in range(200)]
    for _, writer in connections:
        writer.write(b"GET /ok HTTP/1.1\r\n")
    answers = await asyncio.gather(*(_closed(reader) for reader, _ in connections))
    assert {_response(raw)[0] for raw in answers} == {408}
    reader, writer = await served.connect()  # the server still serves
    writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await asyncio.wait_for(reader.readuntil(b"ok"), HANG_S)).startswith(b"HTTP/1.1 200")
    for _, w in [*connections, (reader, writer)]:
        w.close()


def test_the_open_files_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        assert raise_open_files_limit() >= soft
        now, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert now == hard or hard == resource.RLIM_INFINITY
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- aiohttp's own errors: JSON, nothing echoed (issue 11 item 11) -----------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /ok HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + SECRET + b"\x01\r\n\r\n",
        b"GET /ok HTTP/1.1\r\nHost: x\r\nAuthorization Bearer " + SECRET + b"\r\n\r\n",
        b"GET /\x00" + SECRET + b" HTTP/1.1\r\n\r\n",
        b"GET /ok HTTP/1.1\r\nX-Long: " + SECRET * 1000 + b"\r\n\r\n",
        b"\x16\x03\x01" + SECRET + b"\r\n\r\n",
    ],
    ids=["bad-header-char", "no-colon", "bad-path", "line-too-long", "not-http"],
)
async def test_a_malformed_request_gets_json_that_echoes_nothing(
    served: Served, raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader, writer = await served.connect()
    writer.write(raw)
    answer = await _closed(reader)
    status, headers, body = _response(answer)
    assert status == 400 and headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "invalid_request" and error["type"] == "invalid_request_error"
    assert error["message"].startswith("Malformed HTTP request (")
    assert SECRET not in answer and b"sk-" not in answer
    assert all(SECRET.decode() not in r.getMessage() and r.exc_info is None for r in caplog.records)
    writer.close()


# -- the body must arrive in time --------------------------------------------------------------


async def test_a_body_that_trickles_gets_a_408(fake_upstream: FakeUpstream) -> None:
    settings = make_settings(fake_upstream.base_url, server={"body_timeout_s": HEADER_TIMEOUT})
    counters, catalog = shared_parts()
    app = create_app(settings, counters=counters, catalog=catalog)
    runner, port = await _start(app, settings.server)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"model": '
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HANG_S)
        status, headers, _ = _response(head)
        assert status == 408
        body = await reader.readexactly(int(headers["content-length"]))
        assert json.loads(body)["error"]["code"] == "request_timeout"
        assert fake_upstream.received == []
        writer.close()
    finally:
        await runner.cleanup()


def test_tokenizers_count_on_one_core_unless_the_operator_says_otherwise() -> None:
    environ: dict[str, str] = {}
    tokenizers_on_one_core(environ)
    assert environ == {"TOKENIZERS_PARALLELISM": "false"}
    mine = {"TOKENIZERS_PARALLELISM": "true"}
    tokenizers_on_one_core(mine)
    assert mine == {"TOKENIZERS_PARALLELISM": "true"}
