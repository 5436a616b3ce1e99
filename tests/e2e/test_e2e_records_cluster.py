"""Request records on a Redis Cluster: each tenant's under its own hash tag, the operator's view
across them (the scopes' index on another slot), the bounded count."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fakes import FakeUpstream
from proxy_harness import RunningProxy, make_settings, start_proxy
from records_harness import KEYS, get, listed, post
from redis_cluster import LocalCluster

from proxy.artifacts.redis_store import RedisStore

CHAT = "/v1/chat/completions"
HELLO = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello"}]}


@pytest.fixture
async def proxy(
    fake_upstream: FakeUpstream, redis_cluster: LocalCluster, tmp_path: Path
) -> AsyncIterator[RunningProxy]:
    (tmp_path / "small.yaml").write_text("extends: default\n")
    store = {"kind": "redis-cluster", "url": redis_cluster.url, "secret": "test-secret",
             "key_prefix": f"ctxtest:{uuid.uuid4().hex}:"}  # fmt: skip
    settings = make_settings(
        fake_upstream.base_url, policies_dir=str(tmp_path), store=store,
        server={"records": {"max_records": 3}}, **KEYS,
    )  # fmt: skip
    running = await start_proxy(settings)
    assert isinstance(running.services.store, RedisStore)
    try:
        yield running
    finally:
        await running.stop()


async def test_records_per_tenant_and_across_them(proxy: RunningProxy) -> None:
    acme = [(await post(proxy, CHAT, HELLO, key="sk-acme"))[1] for _ in range(4)]
    _, globex, _ = await post(proxy, CHAT, HELLO, key="sk-globex")
    assert await listed(proxy, key="sk-acme") == acme[:0:-1]  # at most 3, the newest
    assert await listed(proxy, key="sk-globex") == [globex]
    assert set(await listed(proxy, key="sk-operator")) == {*acme[1:], globex}
    status, record = await get(proxy, f"requests/{acme[-1]}", key="sk-acme")
    assert status == 200 and record["manifest"]["model"] == "gpt-4o"
    status, _ = await get(proxy, f"requests/{globex}", key="sk-acme")
    assert status == 404
