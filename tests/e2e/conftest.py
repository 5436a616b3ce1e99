"""End-to-end fixtures: the real proxy in front of the fake upstream, on either artifact store."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
from fakes import FakeUpstream
from proxy_harness import RunningProxy, make_settings, start_proxy
from redis.asyncio.cluster import RedisCluster
from redis_cluster import LocalCluster
from redis_process import RedisProcess, require_redis_server
from shared_redis import delete_prefix, require_shared_redis, unique_prefix
from synthetic_harness import SyntheticProxies


@pytest.fixture
def redis_server() -> Iterator[RedisProcess]:
    """A private redis-server of the test's own (not started: the test starts it, stops it,
    or lets the proxy find nothing there)."""
    server = RedisProcess(require_redis_server())
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
async def proxy(fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    running = await start_proxy(make_settings(fake_upstream.base_url))
    yield running
    await running.stop()


@pytest.fixture(params=["memory", "redis", "redis-cluster"])
async def store_settings(request: pytest.FixtureRequest) -> AsyncIterator[dict[str, Any]]:
    """The `store` settings of a test's proxies: the memory store, then the shared test Redis
    under a key prefix of this test's own (deleted afterwards), then the session's private Redis
    Cluster the same way. Under CI an unreachable Redis fails the test instead of skipping it;
    a missing redis-server or redis-cli always fails the cluster's."""
    if request.param == "memory":
        yield {"kind": "memory", "secret": "test-secret"}
        return
    if request.param == "redis-cluster":
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        async with _cluster_settings(cluster.url) as settings:
            yield settings
        return
    async with _shared_redis_settings() as settings:
        yield settings


@pytest.fixture
async def redis_store_settings() -> AsyncIterator[dict[str, Any]]:
    """The `store` settings of replicas that share the test Redis (fails under CI without it)."""
    async with _shared_redis_settings() as settings:
        yield settings


@contextlib.asynccontextmanager
async def _shared_redis_settings() -> AsyncIterator[dict[str, Any]]:
    url = require_shared_redis()
    prefix = unique_prefix()
    yield {"kind": "redis", "url": url, "key_prefix": prefix, "secret": "test-secret"}
    client = redis.asyncio.Redis.from_url(url)
    try:
        await delete_prefix(client, prefix)
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def _cluster_settings(url: str) -> AsyncIterator[dict[str, Any]]:
    prefix = unique_prefix()
    yield {"kind": "redis-cluster", "url": url, "key_prefix": prefix, "secret": "test-secret"}
    client = RedisCluster.from_url(url)
    try:
        await delete_prefix(client, prefix)
    finally:
        await client.aclose()


@pytest.fixture
async def proxies(
    fake_upstream: FakeUpstream, tmp_path: Path, store_settings: dict[str, Any]
) -> AsyncIterator[SyntheticProxies]:
    """Proxies with the small-window policy (`synthetic_harness`), on the memory store and on
    Redis; all stopped after the test."""
    started = SyntheticProxies(fake_upstream, tmp_path, store_settings)
    yield started
    await started.stop_all()
