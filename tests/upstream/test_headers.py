"""`proxy.upstream.headers`: the headers forwarded upstream and the headers relayed back."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from proxy.http.auth import Tenant
from proxy.settings import UpstreamSettings
from proxy.upstream.headers import (
    CREDENTIAL_HEADERS,
    HOP_BY_HOP,
    forward_request_headers,
    is_forwarding_header,
    relay_response_headers,
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
        [
            ("HOST", "x"),
            ("cOnNeCtIoN", "close"),
            ("X-CTXPROXY-Anything", "1"),
            ("X-Tag", "a"),
            ("x-tag", "b"),
        ]
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
        (
            tenant(passthrough=True),
            UPSTREAM.model_copy(update={"api_key": "sk-shared"}),
            "Bearer sk-shared",
        ),
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


@pytest.mark.parametrize("replacement", ["Bearer sk-operator", ""])
def test_replacing_the_credentials_drops_every_credential_header_of_the_client(
    replacement: str,
) -> None:
    incoming = CIMultiDict(
        [
            ("Authorization", "Bearer sk-client"),
            ("X-Api-Key", "sk-ant-client"),
            ("x-api-key", "sk-ant-again"),
            ("Api-Key", "sk-azure-client"),
            ("X-Other", "1"),
        ]
    )
    out = forward_request_headers(incoming, replacement)
    assert {name.lower() for name in out} & set(CREDENTIAL_HEADERS) == (
        {"authorization"} if replacement else set()
    )
    assert "client" not in repr(list(out.items())) and "again" not in repr(list(out.items()))
    assert out.getall("Authorization", []) == ([replacement] if replacement else [])
    assert out["X-Other"] == "1"


def test_passthrough_keeps_every_credential_header_of_the_client() -> None:
    incoming = {"Authorization": "Bearer a", "x-api-key": "b", "api-key": "c"}
    out = forward_request_headers(incoming, None)
    assert dict(out) == incoming


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


def test_a_proxy_key_for_an_anthropic_upstream_goes_as_x_api_key() -> None:
    incoming = {"x-api-key": "client", "Authorization": "Bearer client", "anthropic-beta": "b"}
    out = forward_request_headers(incoming, "Bearer operator", api_key_header=True)
    assert out["x-api-key"] == "operator" and "Authorization" not in out
    assert out["anthropic-beta"] == "b"
    kept = forward_request_headers(incoming, None, api_key_header=True)
    assert kept["x-api-key"] == "client" and kept["Authorization"] == "Bearer client"


FORWARDING = CIMultiDict(
    [
        ("X-Forwarded-For", "203.0.113.9"),
        ("x-forwarded-for", "10.0.0.1"),
        ("X-Forwarded-Host", "admin.internal"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Prefix", "/admin"),
        ("Forwarded", "for=203.0.113.9"),
        ("Via", "1.1 attacker"),
        ("X-Real-IP", "203.0.113.9"),
    ]
)


def test_the_clients_forwarding_headers_are_dropped() -> None:
    out = forward_request_headers(CIMultiDict([*FORWARDING.items(), ("X-Other", "1")]), None)
    assert list(out.items()) == [("X-Other", "1")]
    assert all(is_forwarding_header(name.lower()) for name in FORWARDING)
    assert not is_forwarding_header("x-forward") and not is_forwarding_header("x-request-id")


def test_forwarding_headers_cross_when_the_upstream_passes_them() -> None:
    out = forward_request_headers(FORWARDING, None, pass_forwarding=True)
    assert list(out.items()) == list(FORWARDING.items())


def test_the_clients_content_encoding_never_crosses() -> None:
    """The proxy sends the body it decoded: the client's coding would mislabel it."""
    incoming = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    for pass_forwarding in (False, True):
        out = forward_request_headers(incoming, None, pass_forwarding=pass_forwarding)
        assert dict(out) == {"Content-Type": "application/json"}
