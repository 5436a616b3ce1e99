"""`proxy.upstream.http_upstream`: the URL, opening requests, and the typed response it returns."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from bombs import MIB, bomb, encode
from fakes import FakeUpstream, json_reply, never_reply, reset_reply, sse_reply
from multidict import CIMultiDict
from yarl import URL

from proxy.codings import SLICE_BYTES
from proxy.errors import ErrorCode, ProxyError
from proxy.settings import UpstreamSettings
from proxy.stats import RequestStats
from proxy.upstream.base import MESSAGES_ROUTE, Upstream, UpstreamError, UpstreamResponse
from proxy.upstream.http_upstream import HttpUpstream

# -- the URL -----------------------------------------------------------------------------------


def upstream_at(base_url: str, **timeouts: float) -> HttpUpstream:
    settings = UpstreamSettings(name="up", base_url=base_url, timeouts=timeouts)
    return HttpUpstream(settings, session=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/chat/completions", "/chat/completions"),
        ("chat/completions", "/chat/completions"),
        ("", "/"),
        ("/", "/"),
        ("//", "/"),
        (".", "/"),
        ("..", "/"),
        ("../../../etc/passwd", "/etc/passwd"),
        ("/a/./b/../c", "/a/b/c"),
        ("a//b", "/a/b"),
        ("...", "/..."),
        (".../x", "/.../x"),
        ("%2e%2e/x", "/%252e%252e/x"),
        ("%2E%2E%2Fx", "/%252E%252E%252Fx"),
        ("a%2F..%2F..%2Fx", "/a%252F..%252F..%252Fx"),
        ("models?x=1#y", "/models%3Fx=1%23y"),
        ("a b/ü", "/a%20b/%C3%BC"),
        ("@evil.example/x", "/@evil.example/x"),
        ("http://evil.example/x", "/http:/evil.example/x"),
        ("\\..\\x", "/%5C..%5Cx"),
    ],
)
def test_url_never_escapes_the_base_path(path: str, expected: str) -> None:
    up = upstream_at("http://up.example:8080/api/v1/")
    url = up.url(path)
    assert url == "http://up.example:8080/api/v1" + expected
    parsed = URL(url, encoded=True)
    assert parsed.host == "up.example" and parsed.port == 8080
    assert parsed.raw_path.startswith("/api/v1/")
    assert parsed.query_string == "" and parsed.fragment == ""
    assert not {".", ".."} & set(parsed.raw_path.split("/"))


def test_parsed_urls_are_remembered_within_a_bound_and_never_with_a_query() -> None:
    up = upstream_at("http://up.example/v1")
    for n in range(600):
        parsed = up._parsed_url(f"files/{n}", "", False)
        assert str(parsed) == f"http://up.example/v1/files/{n}"
        assert len(up._parsed) <= 256
    assert up._parsed_url("models", "", False) is up._parsed_url("models", "", False)
    queried = up._parsed_url("models", "a=1&b=%2F", False)
    assert str(queried) == "http://up.example/v1/models?a=1&b=%2F"
    assert up._parsed_url("models", "", False).query_string == ""
    assert str(up._parsed_url("props", "", True)) == "http://up.example/props"
    assert str(up._parsed_url("props", "", False)) == "http://up.example/v1/props"


def test_url_of_a_base_without_path() -> None:
    assert upstream_at("http://up.example").url("../models") == "http://up.example/models"


def test_urls_are_remembered_within_a_bound() -> None:
    up = upstream_at("http://up.example/v1")
    for n in range(1000):  # paths come from clients (passthrough routes)
        assert up.url(f"files/{n}/../x{n}") == f"http://up.example/v1/files/{n}/x{n}"
        assert len(up._urls) <= 256
    assert (
        up.url("chat/completions")
        == up.url("chat/completions")
        == ("http://up.example/v1/chat/completions")
    )


async def test_open_sends_the_encoded_url_literally(fake_upstream: FakeUpstream) -> None:
    async with aiohttp.ClientSession() as session:
        settings = UpstreamSettings(name="up", base_url=fake_upstream.base_url)
        up = HttpUpstream(settings, session)
        answer = await up.open(
            "GET",
            "../%2e%2e/models",
            headers=CIMultiDict(),
            body=None,
            query="a=%2F b&c=d",
        )
        answer.close()
    record = fake_upstream.last
    assert record.path == "/v1/%2e%2e/models"
    assert record.query == "a=/ b&c=d"  # decoded by the server: the escapes arrived intact


async def test_open_maps_a_missing_first_byte_to_upstream_timeout(
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.enqueue(never_reply())
    async with aiohttp.ClientSession() as session:
        settings = UpstreamSettings(
            name="slow", base_url=fake_upstream.base_url, timeouts={"first_byte_s": 0.05}
        )
        with pytest.raises(ProxyError) as caught:
            await HttpUpstream(settings, session).open(
                "POST",
                "/chat/completions",
                headers=CIMultiDict(),
                body=b"{}",
            )
    assert caught.value.code is ErrorCode.upstream_timeout
    assert isinstance(caught.value, UpstreamError)
    assert "'slow'" in caught.value.message


# -- opening requests and their responses ------------------------------------------------------


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def fake_at(fake: FakeUpstream, session: aiohttp.ClientSession, **timeouts: float) -> Upstream:
    settings = UpstreamSettings(name="up", base_url=fake.base_url, timeouts=timeouts)
    return HttpUpstream(settings, session)


async def test_chat_completions_posts_the_body_to_its_own_path(
    fake_upstream: FakeUpstream, session: aiohttp.ClientSession
) -> None:
    fake_upstream.enqueue(json_reply(b'{"id": "x"}', headers={"x-request-id": "r1"}))
    stats = RequestStats()
    headers = CIMultiDict({"Content-Type": "application/json", "X-Tag": "t"})
    answer = await fake_at(fake_upstream, session).send(
        headers=headers, body=b'{"model": "m"}', timer=stats
    )
    assert isinstance(answer, UpstreamResponse)
    assert (answer.status, answer.is_event_stream) == (200, False)
    assert answer.headers["x-request-id"] == "r1"
    assert await answer.read() == b'{"id": "x"}'
    answer.close()
    answer.close()  # twice is harmless
    assert answer.closed
    record = fake_upstream.last
    assert (record.method, record.path, record.body) == (
        "POST",
        "/v1/chat/completions",
        b'{"model": "m"}',
    )
    assert record.headers["X-Tag"] == "t"
    assert stats.upstream_sent is not None
    assert [call.upstream for call in stats.upstream_calls] == ["up"]


async def test_a_route_names_the_client_formats_endpoint(
    fake_upstream: FakeUpstream, session: aiohttp.ClientSession
) -> None:
    fake_upstream.enqueue(json_reply(b'{"id": "resp_1"}'))
    headers = CIMultiDict({"Content-Type": "application/json"})
    answer = await fake_at(fake_upstream, session).send(
        headers=headers, body=b'{"model": "m"}', route="/responses"
    )
    assert await answer.read() == b'{"id": "resp_1"}'
    answer.close()
    assert (fake_upstream.last.method, fake_upstream.last.path) == ("POST", "/v1/responses")


async def test_chunks_arrive_as_the_upstream_sends_them(
    fake_upstream: FakeUpstream, session: aiohttp.ClientSession
) -> None:
    reply = sse_reply([{"n": 1}, {"n": 2}], delay_s=0.02)
    fake_upstream.enqueue(reply)
    answer = await fake_at(fake_upstream, session).open(
        "GET", "/stream", headers=CIMultiDict(), body=None
    )
    assert answer.is_event_stream
    received = [chunk async for chunk in answer.chunks()]
    answer.close()
    assert b"".join(received) == b"".join(reply.payloads())
    assert len(received) > 1


async def test_a_body_cut_short_is_an_upstream_error(
    fake_upstream: FakeUpstream, session: aiohttp.ClientSession
) -> None:
    fake_upstream.enqueue(reset_reply(after_bytes=20))
    answer = await fake_at(fake_upstream, session).open(
        "GET", "/x", headers=CIMultiDict(), body=None
    )
    with pytest.raises(UpstreamError) as caught:
        await answer.read()
    answer.close()
    assert caught.value.code is ErrorCode.upstream_unavailable
    assert caught.value.message.startswith("Upstream 'up' broke the connection")


async def test_a_stream_cut_short_is_an_upstream_error_after_its_chunks(
    fake_upstream: FakeUpstream, session: aiohttp.ClientSession
) -> None:
    reply = sse_reply([{"n": i} for i in range(3)], abort_after=2)
    fake_upstream.enqueue(reply)
    answer = await fake_at(fake_upstream, session).open(
        "GET", "/x", headers=CIMultiDict(), body=None
    )
    received = []
    with pytest.raises(UpstreamError) as caught:
        async for chunk in answer.chunks():
            received.append(chunk)
    answer.close()
    assert b"".join(received) == b"".join(reply.payloads()[:2])
    assert caught.value.code is ErrorCode.upstream_unavailable


async def test_an_idle_stream_is_an_upstream_timeout(
    fake_upstream: FakeUpstream, session: aiohttp.ClientSession
) -> None:
    fake_upstream.enqueue(sse_reply([{"n": 1}, {"n": 2}], delay_s=1.0))
    answer = await fake_at(fake_upstream, session, idle_read_s=0.1).open(
        "GET", "/x", headers=CIMultiDict(), body=None
    )
    with pytest.raises(UpstreamError) as caught:
        async for _ in answer.chunks():
            pass
    answer.close()
    assert caught.value.code is ErrorCode.upstream_timeout
    assert caught.value.message == "Upstream 'up' stopped sending"


async def test_an_unreachable_upstream_is_an_upstream_error(
    session: aiohttp.ClientSession,
) -> None:
    with socket.socket() as closed_port:
        closed_port.bind(("127.0.0.1", 0))
        port = closed_port.getsockname()[1]
    settings = UpstreamSettings(name="gone", base_url=f"http://127.0.0.1:{port}/v1")
    stats = RequestStats()
    with pytest.raises(UpstreamError) as caught:
        await HttpUpstream(settings, session).send(
            headers=CIMultiDict(), body=b"{}", timer=stats
        )
    assert caught.value.code is ErrorCode.upstream_unavailable
    assert caught.value.message.startswith("Upstream 'gone' is unreachable: ")
    assert stats.upstream_sent is not None and stats.upstream_calls == []


def test_at_root_paths_drop_the_api_version_segment() -> None:
    assert upstream_at("http://h:8080/v1").url("/props", at_root=True) == "http://h:8080/props"
    assert upstream_at("http://h/llama/v1/").url("props", at_root=True) == "http://h/llama/props"
    assert upstream_at("http://h/api").url("/props", at_root=True) == "http://h/api/props"
    assert upstream_at("http://h/v1").url("/../../props", at_root=True) == "http://h/props"
    assert upstream_at("http://h/v1").url("/props") == "http://h/v1/props"


async def test_a_messages_completion_goes_to_the_servers_messages_route(
    fake_upstream: FakeUpstream,
) -> None:
    """vLLM and llama.cpp serve Anthropic's `/v1/messages` beside chat completions."""
    async with aiohttp.ClientSession() as session:
        answer = await fake_at(fake_upstream, session).send(
            headers=CIMultiDict(), body=b"{}", route=MESSAGES_ROUTE
        )
        answer.close()
    assert fake_upstream.last.path == "/v1/messages"


# -- content codings ---------------------------------------------------------------------------


async def test_the_upstream_is_asked_for_the_codings_the_proxy_decodes(
    fake_upstream: FakeUpstream, session: aiohttp.ClientSession
) -> None:
    up = fake_at(fake_upstream, session)
    headers: CIMultiDict[str] = CIMultiDict()
    (await up.open("GET", "/models", headers=headers, body=None)).close()
    assert fake_upstream.last.headers.getall("Accept-Encoding") == ["gzip, deflate, br"]
    assert headers == {}  # the caller's headers are left as they were
    asked = CIMultiDict({"accept-encoding": "identity"})  # a relay passes the client's own
    (await up.open("GET", "/models", headers=asked, body=None)).close()
    assert fake_upstream.last.headers.getall("Accept-Encoding") == ["identity"]


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
async def test_an_answer_is_decoded_in_bounded_pieces_or_kept_as_it_came(
    fake_upstream: FakeUpstream, session: aiohttp.ClientSession, coding: str
) -> None:
    compressed = bomb(coding, 8 * MIB)
    for _ in range(2):
        fake_upstream.enqueue(json_reply(compressed, headers={"Content-Encoding": coding}))
    up = fake_at(fake_upstream, session)
    answer = await up.open("GET", "/x", headers=CIMultiDict(), body=None)
    assert answer.content_encoding == coding
    pieces = [piece async for piece in answer.chunks()]
    answer.close()
    assert sum(map(len, pieces)) == 8 * MIB and set(b"".join(pieces)) == {0}
    assert max(map(len, pieces)) <= 2 * SLICE_BYTES
    answer = await up.open("GET", "/x", headers=CIMultiDict(), body=None)
    assert b"".join([chunk async for chunk in answer.encoded_chunks()]) == compressed
    answer.close()


async def test_an_answer_without_a_coding_is_read_as_it_is(
    fake_upstream: FakeUpstream, session: aiohttp.ClientSession
) -> None:
    fake_upstream.enqueue(json_reply(b'{"id": "x"}', headers={"Content-Encoding": "identity"}))
    answer = await fake_at(fake_upstream, session).open(
        "GET", "/x", headers=CIMultiDict(), body=None
    )
    assert answer.content_encoding == "identity"
    assert await answer.read() == b'{"id": "x"}'
    answer.close()


@pytest.mark.parametrize(
    ("body", "coding", "problem"),
    [
        (b"not gzip", "gzip", "not valid gzip data"),
        (encode(b'{"id": "x"}', "br")[:-2], "br", "the br data ends before its end"),
        (b"{}", "zstd", "Content-Encoding 'zstd' is not supported"),
    ],
)
async def test_an_answer_that_does_not_decode_is_an_invalid_response(
    fake_upstream: FakeUpstream,
    session: aiohttp.ClientSession,
    body: bytes,
    coding: str,
    problem: str,
) -> None:
    fake_upstream.enqueue(json_reply(body, headers={"Content-Encoding": coding}))
    answer = await fake_at(fake_upstream, session).open(
        "GET", "/x", headers=CIMultiDict(), body=None
    )
    with pytest.raises(UpstreamError) as caught:
        await answer.read()
    answer.close()
    assert caught.value.code is ErrorCode.upstream_invalid_response
    assert caught.value.message == f"Upstream 'up' sent a body the proxy cannot decode: {problem}"


async def test_an_unreachable_upstream_is_logged_with_where_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client's error names the upstream; the operator's log also says where it is (never
    the user info or the query of its URL)."""
    settings = UpstreamSettings(name="down", base_url="http://user:pw@127.0.0.1:1/v1?key=s")
    caplog.set_level(logging.WARNING, logger="ctxproxy.upstream")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(UpstreamError):
            await HttpUpstream(settings, session).send(headers=CIMultiDict(), body=b"{}")
    [line] = [r.getMessage() for r in caplog.records if r.name == "ctxproxy.upstream"]
    assert "'down' at http://127.0.0.1:1/v1 is unreachable" in line
    assert "pw" not in line and "key=s" not in line
