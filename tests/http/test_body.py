"""`proxy.http.body`: a request body's content coding, undone after authentication and within
`server.max_body_bytes`, through the real server (`EdgeRunner`) and a raw client."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest
from bombs import MIB, bomb, encode
from fakes import FakeUpstream
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.http import body as body_module
from proxy.http.body import LARGE_BODY_BYTES, SLICED_BODY_BYTES
from proxy.jsonio import loads_object

KEY = "sk-proxy-body-tests"
KEYS_MODE: dict[str, Any] = {
    "auth": {"mode": "keys"},
    "tenants": [{"name": "t", "keys": [KEY], "policy": "default"}],
    "server": {"max_body_bytes": 2 * MIB},
}
BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi " * 50}]}
RAW = json.dumps(BODY).encode()
ACCEPTED = "identity, gzip, deflate, br"


@pytest.fixture
async def proxy(fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    running = await start_proxy(make_settings(fake_upstream.base_url, **KEYS_MODE))
    yield running
    await running.stop()


async def send(
    proxy: RunningProxy,
    path: str,
    data: bytes,
    encoding: str | None,
    *,
    key: str | None = KEY,
    method: str = "POST",
) -> tuple[int, Mapping[str, str], Any]:
    headers = {"Content-Type": "application/json"}
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, f"{proxy.url}{path}", data=data, headers=headers) as response,
    ):
        return response.status, response.headers, json.loads(await response.read())


@pytest.mark.parametrize(
    ("coding", "header"),
    [
        ("gzip", "gzip"),
        ("gzip", "x-gzip"),
        ("deflate", "deflate"),
        ("deflate-raw", "deflate"),
        ("br", "br"),
        ("br", "BR, identity"),
    ],
)
async def test_each_coding_is_undone_before_the_body_is_parsed(
    proxy: RunningProxy, coding: str, header: str
) -> None:
    status, _, answer = await send(proxy, "/v1/context/prepare", encode(RAW, coding), header)
    assert status == 200, answer
    assert answer["body"] == BODY


async def test_codings_on_top_of_each_other_and_identity_are_undone(proxy: RunningProxy) -> None:
    layered = encode(encode(RAW, "deflate"), "gzip")
    status, _, answer = await send(proxy, "/v1/context/prepare", layered, "deflate, gzip")
    assert (status, answer["body"]) == (200, BODY)
    status, _, answer = await send(proxy, "/v1/context/prepare", RAW, "identity")
    assert (status, answer["body"]) == (200, BODY)


@pytest.mark.parametrize("header", ["zstd", "compress", "gzip, zstd", "gzip, " * 4 + "gzip"])
async def test_a_coding_the_proxy_does_not_decode_is_415_naming_those_it_does(
    proxy: RunningProxy, header: str
) -> None:
    status, headers, answer = await send(proxy, "/v1/chat/completions", RAW, header)
    assert status == 415
    assert answer["error"]["code"] == "unsupported_content_encoding"
    assert answer["error"]["type"] == "invalid_request_error"
    assert ACCEPTED in answer["error"]["message"]
    assert headers["Accept-Encoding"] == ACCEPTED


async def test_messages_routes_answer_in_anthropics_envelope(proxy: RunningProxy) -> None:
    status, _, answer = await send(proxy, "/v1/messages", RAW, "zstd")
    assert status == 415
    assert answer["type"] == "error"
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["ctxproxy"]["code"] == "unsupported_content_encoding"
    too_large = bomb("gzip", 8 * MIB)
    status, _, answer = await send(proxy, "/v1/messages/count_tokens", too_large, "gzip")
    assert status == 413
    assert answer["error"]["type"] == "request_too_large"


@pytest.mark.parametrize(
    ("coding", "data"),
    [
        ("gzip", b"this is not gzip"),
        ("gzip", encode(RAW, "gzip")[:-9]),
        ("deflate", encode(RAW, "gzip")),
        ("br", RAW),
        ("br", encode(RAW, "br")[:-3]),
    ],
)
async def test_bytes_that_do_not_decode_are_400_invalid_content_encoding(
    proxy: RunningProxy, coding: str, data: bytes
) -> None:
    status, _, answer = await send(proxy, "/v1/chat/completions", data, coding)
    assert status == 400
    assert answer["error"]["code"] == "invalid_content_encoding"
    assert answer["error"]["message"].startswith("The request body does not decode as its")


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
async def test_a_body_over_max_body_bytes_once_decoded_is_413(
    proxy: RunningProxy, fake_upstream: FakeUpstream, coding: str
) -> None:
    status, _, answer = await send(proxy, "/v1/chat/completions", bomb(coding, 64 * MIB), coding)
    assert status == 413
    assert answer["error"]["code"] == "request_too_large"
    assert f"larger than {2 * MIB} bytes once decoded" in answer["error"]["message"]
    assert fake_upstream.requests() == []


async def test_a_body_of_exactly_max_body_bytes_once_decoded_is_read(proxy: RunningProxy) -> None:
    empty = json.dumps({**BODY, "padding": ""}).encode()  # a field no policy counts
    raw = json.dumps({**BODY, "padding": "x" * (2 * MIB - len(empty))}).encode()
    assert len(raw) == 2 * MIB
    status, _, answer = await send(proxy, "/v1/context/prepare", encode(raw, "gzip"), "gzip")
    assert status == 200, answer
    status, _, answer = await send(proxy, "/v1/context/prepare", encode(raw + b" ", "gzip"), "gzip")
    assert status == 413, answer


async def test_an_empty_body_with_a_coding_is_an_empty_body(proxy: RunningProxy) -> None:
    status, _, answer = await send(proxy, "/v1/chat/completions", b"", "gzip")
    assert status == 400
    assert answer["error"]["code"] == "invalid_json"


@pytest.mark.parametrize(
    ("coding", "data"),
    [("gzip", b"this is not gzip"), ("zstd", RAW), ("gzip", bomb("gzip", 64 * MIB))],
)
async def test_nothing_is_decoded_before_authentication(
    proxy: RunningProxy, coding: str, data: bytes
) -> None:
    """Without a key the answer is 401 whatever the body: it is never decoded. (aiohttp decoded
    it as it arrived, before the key was looked at: a coding it did not know was a 400, a bomb
    held the event loop for seconds, `bench/hostile/compression.py`.)"""
    status, _, answer = await send(proxy, "/v1/chat/completions", data, coding, key=None)
    assert status == 401
    assert answer["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/"])
@pytest.mark.parametrize(("coding", "data"), [("gzip", b"garbage"), ("zstd", b"x" * 5000)])
async def test_routes_that_read_no_body_ignore_its_coding(
    proxy: RunningProxy, path: str, coding: str, data: bytes
) -> None:
    headers = {"Content-Encoding": coding}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{proxy.url}{path}", data=data, headers=headers) as response,
    ):
        assert response.status == 200, await response.read()


@pytest.mark.parametrize("chunked", [False, True])
async def test_a_large_body_arrives_whole_sent_at_once_or_in_chunks(
    proxy: RunningProxy, chunked: bool
) -> None:
    """From `LARGE_BODY_BYTES` the pieces are joined in a worker thread: the same bytes."""
    padding = "é" * (MIB // 4) + "x" * MIB
    raw = json.dumps({**BODY, "padding": padding}, ensure_ascii=False).encode()

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), 100_003):
            yield raw[start : start + 100_003]

    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{proxy.url}/v1/context/prepare",
            data=pieces() if chunked else raw,
            headers=headers,
        ) as response,
    ):
        answer = json.loads(await response.read())
    assert response.status == 200, answer
    assert answer["body"] == json.loads(raw)


async def test_a_body_over_max_body_bytes_as_sent_is_413(proxy: RunningProxy) -> None:
    raw = json.dumps({**BODY, "padding": "x" * (2 * MIB)}).encode()
    status, _, answer = await send(proxy, "/v1/context/prepare", raw, None)
    assert status == 413
    assert answer["error"]["code"] == "request_too_large"


@pytest.mark.parametrize(("size", "sliced"), [(LARGE_BODY_BYTES, False), (SLICED_BODY_BYTES, True)])
async def test_large_bodies_are_parsed_off_the_loop_and_in_slices_only_when_very_large(
    monkeypatch: pytest.MonkeyPatch, fake_upstream: FakeUpstream, size: int, sliced: bool
) -> None:
    """From `LARGE_BODY_BYTES` in a worker thread; from `SLICED_BODY_BYTES` in slices too (the
    slicer costs ~8x one orjson call's CPU: worth it only where one call would hold the GIL
    long)."""
    seen: list[tuple[bool, bool]] = []

    def parse(raw: bytes, *, sliced: bool = False) -> Any:
        seen.append((sliced, threading.current_thread() is threading.main_thread()))
        return loads_object(raw, sliced=sliced)

    monkeypatch.setattr(body_module, "loads_object", parse)
    limits = {**KEYS_MODE, "server": {"max_body_bytes": 8 * MIB}}
    proxy = await start_proxy(make_settings(fake_upstream.base_url, **limits))
    try:
        raw = json.dumps({**BODY, "padding": "x" * size}).encode()
        status, _, answer = await send(proxy, "/v1/context/prepare", raw, None)
    finally:
        await proxy.stop()
    assert status == 200, answer
    assert answer["body"] == json.loads(raw)
    assert seen == [(sliced, False)]
