"""Compressed bodies both ways through the real proxy and the fake upstream, and the client's
forwarding headers.

Requests: the upstream gets the decoded body, never the client's `Content-Encoding` (which it
got beside the decoded bytes, and could not read: the client saw an error). Answers: a relay the
proxy does not read passes compressed, in the coding the client accepts; an answer the proxy
reads is decoded (within `server.max_parsed_response_bytes`); one that does not decode is a 502.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from bombs import MIB, bomb, encode
from fakes import FakeUpstream, Recorded, completion_body, json_reply, stream_chunks
from fakes.replies import write_sse
from proxy_harness import RunningProxy, make_settings, start_proxy
from synthetic_harness import SyntheticProxies, conversation

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


# -- answers relayed as they are ---------------------------------------------------------------


async def test_a_relayed_answer_passes_through_still_compressed(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    compressed = bomb("gzip", 64 * MIB)
    fake_upstream.enqueue(json_reply(compressed, headers={"Content-Encoding": "gzip"}))
    status, headers, answer = await call(
        f"{proxy.base_url}/models", method="GET", headers={"Accept-Encoding": "gzip, br"}
    )
    assert status == 200
    assert headers["Content-Encoding"] == "gzip"
    assert answer == compressed  # never inflated on the way
    assert fake_upstream.last.headers["Accept-Encoding"] == "gzip, br"  # the client's


async def test_a_relay_for_a_client_that_accepts_no_coding_asks_for_identity(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    status, headers, _ = await call(
        f"{proxy.base_url}/models", method="GET", skip=("Accept-Encoding",)
    )
    assert status == 200
    assert "Content-Encoding" not in headers
    assert fake_upstream.last.headers["Accept-Encoding"] == "identity"


# -- answers the proxy reads -------------------------------------------------------------------


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
async def test_a_compressed_answer_the_proxy_reads_reaches_the_client_decoded(
    proxy: RunningProxy, fake_upstream: FakeUpstream, coding: str
) -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11,
             "prompt_tokens_details": {"cached_tokens": 4}}  # fmt: skip
    answer_body = json.dumps(completion_body("hi", usage=usage)).encode()
    compressed = encode(answer_body, coding)
    fake_upstream.enqueue(json_reply(compressed, headers={"Content-Encoding": coding}))
    status, headers, answer = await call(proxy.url + CHAT, RAW)
    assert status == 200
    assert "Content-Encoding" not in headers
    assert answer == answer_body
    assert headers["x-ctxproxy-cached-tokens"] == "4"  # the proxy read the usage
    assert fake_upstream.last.headers["Accept-Encoding"] == "gzip, deflate, br"


@dataclass(frozen=True)
class CompressedStream:
    """An event stream compressed as a server streams it: each event flushed as it is sent."""

    events: list[bytes]

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        pieces = [packer.compress(e) + packer.flush(zlib.Z_SYNC_FLUSH) for e in self.events]
        pieces.append(packer.flush())
        return await write_sse(request, pieces, headers={"Content-Encoding": "gzip"})


async def test_a_compressed_stream_reaches_the_client_decoded_event_by_event(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    events = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in stream_chunks(["Hel", "lo"])]
    events.append(b"data: [DONE]\n\n")
    fake_upstream.enqueue(CompressedStream(events))
    status, headers, answer = await call(
        proxy.url + CHAT, json.dumps({**BODY, "stream": True}).encode()
    )
    assert status == 200
    assert "Content-Encoding" not in headers
    assert answer == b"".join(events)


@pytest.mark.parametrize(
    ("body", "coding", "problem"),
    [
        (b"this is not gzip", "gzip", "cannot decode: not valid gzip data"),
        (b"{}", "zstd", "cannot decode: Content-Encoding 'zstd' is not supported"),
    ],
)
async def test_an_answer_that_does_not_decode_is_a_502(
    proxy: RunningProxy, fake_upstream: FakeUpstream, body: bytes, coding: str, problem: str
) -> None:
    fake_upstream.enqueue(json_reply(body, headers={"Content-Encoding": coding}))
    status, _, answer = await call(proxy.url + CHAT, RAW)
    assert status == 502
    error = json.loads(answer)["error"]
    assert error["code"] == "upstream_invalid_response"
    assert problem in error["message"]


async def test_a_bomb_the_proxy_must_read_stops_at_max_parsed_response_bytes(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    proxies = SyntheticProxies(fake_upstream, tmp_path)
    proxy = await proxies.start(server={"max_parsed_response_bytes": MIB})
    try:
        for coding in ("gzip", "br"):
            fake_upstream.enqueue(
                json_reply(bomb(coding, 256 * MIB), headers={"Content-Encoding": coding})
            )
            status, _, answer = await call(proxy.url + CHAT, json.dumps(conversation()).encode())
            assert status == 502
            assert json.loads(answer)["error"]["code"] == "upstream_response_too_large"
            assert "read_context_artifact" in fake_upstream.last.body.decode()  # a read loop
    finally:
        await proxies.stop_all()

