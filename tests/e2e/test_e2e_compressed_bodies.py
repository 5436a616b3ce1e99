"""Compressed bodies through the real proxy and the fake upstream, and the client's forwarding
headers.

Requests: the upstream gets the decoded body, never the client's `Content-Encoding` (which it
got beside the decoded bytes, and could not read: the client saw an error).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping

import aiohttp
import pytest
from bombs import encode
from fakes import FakeUpstream
from proxy_harness import RunningProxy, make_settings, start_proxy

CHAT = "/v1/chat/completions"
BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Say hi."}]}
RAW = json.dumps(BODY).encode()
FORWARDING = {
    "X-Forwarded-For": "203.0.113.9",
    "X-Forwarded-Host": "admin.internal",
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Port": "443",
    "Forwarded": "for=203.0.113.9;proto=https",
    "Via": "1.1 attacker",
    "X-Real-IP": "203.0.113.9",
}


async def call(
    url: str,
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    method: str = "POST",
    skip: tuple[str, ...] = (),
) -> tuple[int, Mapping[str, str], bytes]:
    """A raw client: the body as sent, the answer as it came (nothing decoded)."""
    sent = {"Authorization": "Bearer sk-client", "Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.request(
            method, url, data=data, headers={**sent, **(headers or {})}, skip_auto_headers=skip
        ) as response,
    ):
        return response.status, response.headers, await response.read()


@pytest.fixture
async def passing(fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    """A proxy whose upstream is configured to get the client's forwarding headers."""
    settings = make_settings(fake_upstream.base_url)
    upstream = settings.upstreams[0].model_copy(update={"forwarded_headers": "pass"})
    running = await start_proxy(settings.model_copy(update={"upstreams": [upstream]}))
    yield running
    await running.stop()


# -- requests ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("coding", "header"),
    [("gzip", "gzip"), ("deflate", "deflate"), ("deflate-raw", "deflate"), ("br", "br")],
)
async def test_a_compressed_request_goes_upstream_decoded_without_its_coding(
    proxy: RunningProxy, fake_upstream: FakeUpstream, coding: str, header: str
) -> None:
    status, _, answer = await call(
        proxy.url + CHAT, encode(RAW, coding), {"Content-Encoding": header}
    )
    assert status == 200, answer
    assert json.loads(answer)["object"] == "chat.completion"
    sent = fake_upstream.last
    assert "Content-Encoding" not in sent.headers
    assert sent.body == RAW  # unchanged by preparation: the client's bytes, decoded


async def test_a_compressed_passthrough_request_goes_upstream_decoded(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    body = json.dumps({"model": "text-embedding-3-small", "input": "hello"}).encode()
    status, _, answer = await call(
        f"{proxy.base_url}/embeddings", encode(body, "gzip"), {"Content-Encoding": "gzip"}
    )
    assert status == 200, answer
    assert fake_upstream.last.path == "/v1/embeddings"
    assert "Content-Encoding" not in fake_upstream.last.headers
    assert fake_upstream.last.body == body


async def test_the_clients_forwarding_headers_never_reach_the_upstream(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    for url in (proxy.url + CHAT, f"{proxy.base_url}/embeddings"):
        status, _, answer = await call(url, RAW, FORWARDING)
        assert status == 200, answer
        received = fake_upstream.last.headers
        assert [name for name in FORWARDING if name in received] == []
        assert received["Authorization"] == "Bearer sk-client"


async def test_forwarding_headers_pass_to_an_upstream_configured_to_get_them(
    passing: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    status, _, answer = await call(passing.url + CHAT, RAW, FORWARDING)
    assert status == 200, answer
    received = fake_upstream.last.headers
    assert {name: received.get(name) for name in FORWARDING} == FORWARDING
