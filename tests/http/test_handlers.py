"""`proxy.http.handlers`: JSON body intake (media types, empty bodies) and readiness."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fakes import FakeUpstream
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.jsonio import loads

BODY = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'


@pytest.fixture
async def proxy(fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    running = await start_proxy(make_settings(fake_upstream.base_url))
    yield running
    await running.stop()


async def post(
    proxy: RunningProxy, body: bytes, content_type: str | None
) -> tuple[int, dict[str, Any]]:
    headers = {} if content_type is None else {"Content-Type": content_type}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{proxy.base_url}/context/prepare",
            data=body,
            headers=headers,
            skip_auto_headers=["Content-Type"],
        ) as response,
    ):
        return response.status, loads(await response.read())


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "application/json",
        "application/json; charset=utf-8",
        "APPLICATION/JSON",
        " application/json ;charset=UTF-8",
        "text/json",
        "application/vnd.api+json",
        "application/merge-patch+json; charset=utf-8",
    ],
)
async def test_json_media_types_are_accepted(
    proxy: RunningProxy, fake_upstream: FakeUpstream, content_type: str | None
) -> None:
    status, payload = await post(proxy, BODY, content_type)
    assert status == 200, payload
    assert payload["changed"] is False
    assert payload["body"] == loads(BODY)
    assert fake_upstream.received == []


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/octet-stream",
        "multipart/form-data; boundary=x",
        "application/jsonl",
        "application/x-json-stream",
        "json",
    ],
)
async def test_other_media_types_are_refused(
    proxy: RunningProxy, fake_upstream: FakeUpstream, content_type: str
) -> None:
    status, payload = await post(proxy, BODY, content_type)
    assert status == 415, payload
    error = payload["error"]
    assert error["code"] == "unsupported_media_type"
    media = content_type.split(";")[0].strip().lower()
    assert error["message"] == f"Content-Type {media!r} is not supported; send application/json"
    assert fake_upstream.received == []


@pytest.mark.parametrize("content_type", [None, "application/json"])
async def test_empty_body_is_invalid_json(proxy: RunningProxy, content_type: str | None) -> None:
    status, payload = await post(proxy, b"", content_type)
    assert status == 400
    assert payload["error"]["code"] == "invalid_json"
    assert payload["error"]["message"] == "Request body is empty; expected a JSON object"


async def test_the_media_type_is_checked_before_the_body(proxy: RunningProxy) -> None:
    status, payload = await post(proxy, b"", "text/plain")
    assert status == 415 and payload["error"]["code"] == "unsupported_media_type"


# -- readiness ---------------------------------------------------------------------------------


async def ready(proxy: RunningProxy) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(f"{proxy.url}/readyz") as response:
        return response.status, await response.json()


async def test_ready_when_store_and_policies_are(proxy: RunningProxy) -> None:
    assert await ready(proxy) == (200, {"status": "ready", "store": True, "policies": True})


async def test_not_ready_when_the_store_ping_fails(
    proxy: RunningProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = proxy.services.store
    assert store is not None
    pings = []

    async def failing_ping() -> bool:
        pings.append(1)
        return False

    monkeypatch.setattr(store, "ping", failing_ping)
    assert await ready(proxy) == (503, {"status": "not_ready", "store": False, "policies": True})
    assert pings == [1]
    monkeypatch.undo()
    assert (await ready(proxy))[0] == 200


async def test_a_broken_policy_edit_is_degraded_not_hidden(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    """The previous policies stay in use (still ready), and /readyz and /metrics say the files
    on disk did not load, until they are mended."""
    (tmp_path / "acme.yaml").write_text("mode: window\n")
    proxy = await start_proxy(make_settings(fake_upstream.base_url, policies_dir=str(tmp_path)))
    try:
        policies = proxy.services.policies
        assert policies is not None
        (tmp_path / "acme.yaml").write_text("mode: windw\n")
        assert not policies.reload_if_changed()
        status, body = await ready(proxy)
        assert (status, body["status"], body["policies"]) == (200, "degraded", True)
        failure = body["policy_reload_failure"]
        assert "acme.yaml" in failure and "mode" in failure
        assert "ctxproxy_policy_reload_failed 1.0" in await metrics(proxy)
        (tmp_path / "acme.yaml").write_text("mode: inspect\n")
        assert policies.reload_if_changed()
        assert await ready(proxy) == (200, {"status": "ready", "store": True, "policies": True})
        assert "ctxproxy_policy_reload_failed 0.0" in await metrics(proxy)
    finally:
        await proxy.stop()


async def metrics(proxy: RunningProxy) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"{proxy.url}/metrics") as response:
        return await response.text()


async def test_not_ready_without_policies(
    proxy: RunningProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proxy.services, "policies", None)
    assert await ready(proxy) == (503, {"status": "not_ready", "store": True, "policies": False})


@pytest.mark.parametrize("route", ["/chat/completions", "/context/prepare"])
@pytest.mark.parametrize("stream", [1, 0, "true", [], {}, 1.0])
async def test_a_stream_flag_that_is_not_a_boolean_is_refused(
    proxy: RunningProxy, fake_upstream: FakeUpstream, route: str, stream: Any
) -> None:
    # Issue 11 item 11: `"stream": 1` streamed upstream while the proxy expected JSON (502).
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.base_url}{route}", json=body) as response,
    ):
        status, payload = response.status, loads(await response.read())
    assert status == 400
    assert payload["error"]["code"] == "invalid_request" and payload["error"]["param"] == "stream"
    assert fake_upstream.received == []


@pytest.mark.parametrize("stream", [True, False, None])
async def test_a_boolean_or_null_stream_flag_is_accepted(
    proxy: RunningProxy, stream: bool | None
) -> None:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    status, payload = await post(proxy, json.dumps(body).encode(), "application/json")
    assert status == 200 and payload["body"]["stream"] == stream
