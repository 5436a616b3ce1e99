"""Request records never fail a request: the proxy on a private Redis that goes away still
answers every completion, drops their records and counts them; once Redis is back, records are
kept again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fakes import FakeUpstream
from proxy_harness import RunningProxy, make_settings, start_proxy
from records_harness import get, listed, post, written
from redis_process import RedisProcess

SOCKET_TIMEOUT_S = 0.25
CHAT = "/v1/chat/completions"
HELLO = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello"}]}


@pytest.fixture
async def proxy(
    fake_upstream: FakeUpstream, redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[RunningProxy]:
    redis_server.start()
    store = {
        "kind": "redis",
        "url": redis_server.url,
        "secret": "test-secret",
        "socket_timeout_s": SOCKET_TIMEOUT_S,
        "pool_timeout_s": SOCKET_TIMEOUT_S,
    }
    auth = {"mode": "keys"}
    tenants = [{"name": "acme", "keys": ["sk-acme"]}]
    settings = make_settings(fake_upstream.base_url, store=store, auth=auth, tenants=tenants)
    running = await start_proxy(settings)
    try:
        yield running
    finally:
        redis_server.cleanup()
        await running.stop()


def dropped(proxy: RunningProxy, reason: str) -> float:
    value = proxy.services.metrics.registry.get_sample_value(
        "ctxproxy_records_dropped_total", {"reason": reason}
    )
    return value or 0.0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_store_that_goes_away_fails_no_request(
    proxy: RunningProxy, redis_server: RedisProcess, stream: bool
) -> None:
    _, kept, _ = await post(proxy, CHAT, {**HELLO, "stream": stream})
    assert await listed(proxy) == [kept]
    redis_server.kill()
    for _ in range(3):
        status, _, answer = await post(proxy, CHAT, {**HELLO, "stream": stream})
        assert status == 200 and (b"data: [DONE]" in answer if stream else b"echo: Hello" in answer)
    await written(proxy)
    assert dropped(proxy, "store_unavailable") == 3
    status, body = await get(proxy, "requests")
    assert status == 503 and body["error"]["code"] == "artifact_store_unavailable"
    redis_server.start()
    _, after, _ = await post(proxy, CHAT, {**HELLO, "stream": stream})
    assert await listed(proxy) == [after]  # the store restarted empty
    assert dropped(proxy, "store_unavailable") == 3
