"""Compressed bodies through the real proxy and the fake upstream.

Requests: the upstream gets the decoded body, never the client's `Content-Encoding` (which it
got beside the decoded bytes, and could not read: the client saw an error).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import aiohttp
import pytest
from bombs import encode
from fakes import FakeUpstream
from proxy_harness import RunningProxy

CHAT = "/v1/chat/completions"
BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Say hi."}]}
RAW = json.dumps(BODY).encode()


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
