"""Bad input and broken upstreams get typed errors in the OpenAI envelope, never a 500."""

from __future__ import annotations

import socket

import aiohttp
import openai
import pytest
from fakes import FakeUpstream, never_reply, reset_reply, stream_completion
from proxy_harness import RunningProxy, make_settings, start_proxy

CHAT = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
JSON = {"Content-Type": "application/json"}


async def call(
    method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, data=body, headers=headers or {}) as response,
    ):
        return response.status, await response.json(content_type=None)


def assert_envelope(payload: dict, code: str) -> None:
    error = payload["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert set(error) >= {"message", "type", "param", "code"}


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        (b'{"model": "gpt-4o", "messages": [', JSON, 400, "invalid_json"),
        (b"", JSON, 400, "invalid_json"),
        (b"[1, 2]", JSON, 400, "invalid_request"),
        (b'{"model": "gpt-4o"}', JSON, 400, "invalid_request"),
        (b'{"model": "gpt-4o", "messages": "hi"}', JSON, 400, "invalid_request"),
        (
            b"model=gpt-4o",
            {"Content-Type": "application/x-www-form-urlencoded"},
            415,
            "unsupported_media_type",
        ),
        (b"\xff\xfe{}", JSON, 400, "invalid_json"),
    ],
)
async def test_bad_bodies(
    proxy: RunningProxy,
    fake_upstream: FakeUpstream,
    body: bytes,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    got, payload = await call("POST", f"{proxy.base_url}/chat/completions", body, headers)
    assert got == status
    assert_envelope(payload, code)
    assert payload["error"]["ctxproxy"]["request_id"]
    assert fake_upstream.received == []


async def test_unknown_route(proxy: RunningProxy) -> None:
    got, payload = await call("GET", f"{proxy.url}/nope")
    assert got == 404
    assert_envelope(payload, "not_found")


async def test_oversized_body(fake_upstream: FakeUpstream) -> None:
    settings = make_settings(fake_upstream.base_url, server={"max_body_bytes": 1000})
    running = await start_proxy(settings)
    try:
        body = b'{"model":"gpt-4o","messages":[{"role":"user","content":"' + b"x" * 2000 + b'"}]}'
        got, payload = await call("POST", f"{running.base_url}/chat/completions", body, JSON)
        assert got == 413
        assert_envelope(payload, "request_too_large")
        assert fake_upstream.received == []
    finally:
        await running.stop()


async def test_keys_mode_rejects_unknown_key_and_swaps_known_one(
    fake_upstream: FakeUpstream,
) -> None:
    settings = make_settings(
        fake_upstream.base_url,
        auth={"mode": "keys"},
        tenants=[{"name": "acme", "keys": ["sk-proxy-acme"], "upstream_key": "sk-upstream"}],
    )
    running = await start_proxy(settings)
    try:
        async with openai.AsyncOpenAI(
            base_url=running.base_url, api_key="sk-wrong", max_retries=0
        ) as client:
            with pytest.raises(openai.AuthenticationError) as caught:
                await client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": "x"}]
                )
        assert caught.value.code == "invalid_api_key"
        assert fake_upstream.received == []
        got, _ = await call(
            "POST",
            f"{running.base_url}/chat/completions",
            CHAT,
            {**JSON, "Authorization": "Bearer sk-proxy-acme"},
        )
        assert got == 200
        assert fake_upstream.last.headers["Authorization"] == "Bearer sk-upstream"
    finally:
        await running.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_upstream_unreachable_is_502() -> None:
    running = await start_proxy(make_settings(f"http://127.0.0.1:{free_port()}/v1"))
    try:
        got, payload = await call("POST", f"{running.base_url}/chat/completions", CHAT, JSON)
        assert got == 502
        assert_envelope(payload, "upstream_unavailable")
    finally:
        await running.stop()


async def test_upstream_first_byte_timeout_is_504(fake_upstream: FakeUpstream) -> None:
    settings = make_settings(fake_upstream.base_url)
    settings = settings.model_copy(
        update={
            "upstreams": [
                settings.upstreams[0].model_copy(
                    update={
                        "timeouts": settings.upstreams[0].timeouts.model_copy(
                            update={"first_byte_s": 0.3}
                        )
                    }
                )
            ]
        }
    )
    running = await start_proxy(settings)
    try:
        fake_upstream.enqueue(never_reply())
        got, payload = await call("POST", f"{running.base_url}/chat/completions", CHAT, JSON)
        assert got == 504
        assert_envelope(payload, "upstream_timeout")
        await fake_upstream.wait_idle()
    finally:
        await running.stop()


async def test_upstream_reset_mid_body_is_502(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(reset_reply(after_bytes=10))
    got, payload = await call("POST", f"{proxy.base_url}/chat/completions", CHAT, JSON)
    assert got == 502
    assert_envelope(payload, "upstream_unavailable")


async def test_stream_cut_becomes_sse_error_event(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.enqueue(stream_completion(["a", "b", "c", "d"], abort_after=2))
    body = b'{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"x"}]}'
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.base_url}/chat/completions", data=body, headers=JSON) as response,
    ):
        assert response.status == 200
        text = (await response.read()).decode()
    events = [e for e in text.split("\n\n") if e.strip()]
    assert events[-1].startswith('data: {"error":')
    assert '"code":"upstream_unavailable"' in events[-1]
    assert "[DONE]" not in text
