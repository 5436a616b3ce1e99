"""`proxy.upstream.openai_http`: forwarded headers, relayed headers, the URL, read errors."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from fakes import FakeUpstream, never_reply
from multidict import CIMultiDict
from yarl import URL

from proxy.errors import ErrorCode, ProxyError
from proxy.http.auth import Tenant
from proxy.settings import UpstreamSettings
from proxy.upstream.openai_http import (
    HOP_BY_HOP,
    OpenAIHttpUpstream,
    forward_request_headers,
    relay_response_headers,
    upstream_read_error,
)

CLIENT = {
    "Host": "proxy.example:8531",
    "Content-Length": "123",
    "Accept-Encoding": "gzip, br",
    "Expect": "100-continue",
    "Connection": "keep-alive",
    "Keep-Alive": "timeout=5",
    "Transfer-Encoding": "chunked",
    "TE": "trailers",
    "Trailer": "X-Checksum",
    "Upgrade": "h2c",
    "Proxy-Authorization": "Basic cHJveHk6cHc=",
    "Proxy-Authenticate": "Basic",
    "X-Ctxproxy-Debug": "1",
    "x-ctxproxy-request-id": "forged",
    "Content-Type": "application/json",
    "OpenAI-Organization": "org-1",
    "User-Agent": "OpenAI/Python 1.0",
    "X-Stainless-Retry-Count": "0",
}
KEPT = {"Content-Type", "OpenAI-Organization", "User-Agent", "X-Stainless-Retry-Count"}
UPSTREAM = UpstreamSettings(name="up", base_url="http://127.0.0.1:9/v1")


def tenant(*, upstream_key: str | None = None, passthrough: bool = False) -> Tenant:
    return Tenant("t", "default", "t", upstream_key, passthrough)


def test_drops_hop_by_hop_host_length_encoding_expect_and_own_headers() -> None:
    out = forward_request_headers(CLIENT, None)
    assert set(out) == KEPT
    assert all(out[name] == CLIENT[name] for name in KEPT)
    for name in HOP_BY_HOP | {"host", "content-length", "accept-encoding", "expect"}:
        assert name not in out, name


def test_header_names_are_matched_case_insensitively_and_repeats_kept() -> None:
    incoming = CIMultiDict(
        [("HOST", "x"), ("cOnNeCtIoN", "close"), ("X-CTXPROXY-Anything", "1"),
         ("X-Tag", "a"), ("x-tag", "b")]
    )
    out = forward_request_headers(incoming, None)
    assert list(out.items()) == [("X-Tag", "a"), ("x-tag", "b")]


def test_passthrough_tenant_keeps_the_clients_credentials() -> None:
    auth = tenant(passthrough=True).upstream_authorization(UPSTREAM)
    assert auth is None
    out = forward_request_headers(
        {"Authorization": "Bearer sk-client", "api-key": "sk-azure"}, auth
    )
    assert out["Authorization"] == "Bearer sk-client"
    assert out["api-key"] == "sk-azure"


@pytest.mark.parametrize(
    ("who", "upstream", "expected"),
    [
        (tenant(upstream_key="sk-tenant"), UPSTREAM, "Bearer sk-tenant"),
        (tenant(upstream_key="sk-tenant", passthrough=True), UPSTREAM, "Bearer sk-tenant"),
        (tenant(), UPSTREAM.model_copy(update={"api_key": "sk-shared"}), "Bearer sk-shared"),
        (tenant(passthrough=True), UPSTREAM.model_copy(update={"api_key": "sk-shared"}),
         "Bearer sk-shared"),
    ],
)
def test_a_configured_key_replaces_the_clients(
    who: Tenant, upstream: UpstreamSettings, expected: str
) -> None:
    incoming = {"authorization": "Bearer sk-proxy", "API-KEY": "sk-proxy", "X-Other": "1"}
    out = forward_request_headers(incoming, who.upstream_authorization(upstream))
    assert out.getall("Authorization") == [expected]
    assert "api-key" not in out
    assert out["X-Other"] == "1"
    assert "sk-proxy" not in repr(list(out.items()))


def test_keys_tenant_without_any_upstream_key_never_forwards_the_proxy_key() -> None:
    auth = tenant().upstream_authorization(UPSTREAM)
    assert auth == ""
    out = forward_request_headers({"Authorization": "Bearer sk-proxy", "api-key": "k"}, auth)
    assert "sk-proxy" not in repr(list(out.items()))
    assert "api-key" not in out


def test_keys_tenant_without_any_upstream_key_sends_no_authorization() -> None:
    out = forward_request_headers({"Authorization": "Bearer sk-proxy"}, "")
    assert "Authorization" not in out


def test_headers_named_in_connection_are_hop_by_hop() -> None:
    out = forward_request_headers(
        {"Connection": "keep-alive, X-Hop", "X-Hop": "secret", "X-End": "1"}, None
    )
    assert "X-Hop" not in out and out["X-End"] == "1"


def test_relay_response_headers() -> None:
    upstream = CIMultiDict(
        [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Content-Length", "10"),
            ("Content-Encoding", "gzip"),
            ("Transfer-Encoding", "chunked"),
            ("Connection", "keep-alive"),
            ("Server", "cloudflare"),
            ("Date", "Thu, 01 Jan 2026 00:00:00 GMT"),
            ("x-request-id", "req_1"),
            ("openai-processing-ms", "12"),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
            ("retry-after", "1"),
        ]
    )
    out = relay_response_headers(upstream)
    assert list(out.items()) == [
        ("Content-Type", "text/event-stream; charset=utf-8"),
        ("x-request-id", "req_1"),
        ("openai-processing-ms", "12"),
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
        ("retry-after", "1"),
    ]


# -- the URL -----------------------------------------------------------------------------------


def upstream_at(base_url: str, **timeouts: float) -> OpenAIHttpUpstream:
    settings = UpstreamSettings(name="up", base_url=base_url, timeouts=timeouts)
    return OpenAIHttpUpstream(settings, session=None)  # type: ignore[arg-type]


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


def test_url_of_a_base_without_path() -> None:
    assert upstream_at("http://up.example").url("../models") == "http://up.example/models"


def test_urls_are_remembered_within_a_bound() -> None:
    up = upstream_at("http://up.example/v1")
    for n in range(1000):  # paths come from clients (passthrough routes)
        assert up.url(f"files/{n}/../x{n}") == f"http://up.example/v1/files/{n}/x{n}"
        assert len(up._urls) <= 256
    assert up.url("chat/completions") == up.url("chat/completions") == (
        "http://up.example/v1/chat/completions"
    )


async def test_open_sends_the_encoded_url_literally(fake_upstream: FakeUpstream) -> None:
    async with aiohttp.ClientSession() as session:
        settings = UpstreamSettings(name="up", base_url=fake_upstream.base_url)
        up = OpenAIHttpUpstream(settings, session)
        answer = await up.open(
            "GET", "../%2e%2e/models", headers=CIMultiDict(),
            body=None, query="a=%2F b&c=d",
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
            await OpenAIHttpUpstream(settings, session).open(
                "POST", "/chat/completions", headers=CIMultiDict(),
                body=b"{}",
            )
    assert caught.value.code is ErrorCode.upstream_timeout
    assert "'slow'" in caught.value.message


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
    assert isinstance(error, ProxyError)
    assert (error.code, error.message) == (code, text)
    assert error.code.status in (502, 504)


def test_upstream_read_error_does_not_leak_the_exception_text() -> None:
    error = upstream_read_error(aiohttp.ClientPayloadError("token sk-secret in body"), "up")
    assert "sk-secret" not in error.message
