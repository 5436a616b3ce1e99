"""`RedisCountRatios` on the real test Redis: merged running averages shared by replicas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
from shared_redis import delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.redis_ratios import TTL_SECONDS, RedisCountRatios
from proxy.artifacts.redis_store import RedisStore

SECRET = b"test-secret-0123456789abcdef0123"
RULE = {"alpha": 0.5, "low": 0.5, "high": 2.0}


@pytest.fixture
async def replicas() -> AsyncIterator[tuple[RedisStore, RedisStore, redis.asyncio.Redis]]:
    url = require_shared_redis()
    prefix = unique_prefix()
    client = redis.asyncio.Redis.from_url(url)
    one, two = (
        RedisStore(url, SECRET, key_prefix=prefix),
        RedisStore(url, SECRET, key_prefix=prefix),
    )
    try:
        yield one, two, client
    finally:
        await one.close()
        await two.close()
        await delete_prefix(client, prefix)
        await client.aclose()


async def test_merges_are_running_averages_over_every_replicas_samples(
    replicas: tuple[RedisStore, RedisStore, redis.asyncio.Redis],
) -> None:
    one, two, client = replicas
    a, b = one.count_ratios(), two.count_ratios()
    assert await a.merge({"m": (1.2, 1)}, **RULE) == {"m": (pytest.approx(1.2), 1)}
    # Two samples of mean 1.6 on the other replica: 1.2 + (1 - 0.5^2) * (1.6 - 1.2) = 1.5
    assert await b.merge({"m": (1.6, 2)}, **RULE) == {"m": (pytest.approx(1.5), 3)}
    assert await a.fetch(["m", "unknown"]) == {"m": (pytest.approx(1.5), 3)}
    assert 0 < await client.ttl(a.key("m")) <= TTL_SECONDS


async def test_a_merge_is_clamped_and_concurrent_merges_lose_no_sample(
    replicas: tuple[RedisStore, RedisStore, redis.asyncio.Redis],
) -> None:
    one, two, _ = replicas
    a, b = one.count_ratios(), two.count_ratios()
    assert await a.merge({"hot": (3.5, 1)}, **RULE) == {"hot": (2.0, 1)}
    await asyncio.gather(*(r.merge({"c": (1.1, 1)}, **RULE) for r in (a, b) for _ in range(10)))
    assert await a.fetch(["c"]) == {"c": (pytest.approx(1.1), 20)}


async def test_an_unreachable_redis_merges_nothing_and_counts_the_failure() -> None:
    store = RedisStore("redis://127.0.0.1:1/13", SECRET, socket_timeout=0.3, pool_timeout=0.3)
    try:
        ratios = store.count_ratios()
        assert await ratios.merge({"m": (1.2, 1)}, **RULE) == {}
        assert await ratios.fetch(["m"]) == {}
        assert store.failed_operations == 2
    finally:
        await store.close()


async def test_keys_carry_the_prefix_and_never_the_model_name() -> None:
    store = RedisStore("redis://127.0.0.1:1/13", SECRET, key_prefix="p:")
    try:
        key = RedisCountRatios.key(store.count_ratios(), "secret-model\x00name")
    finally:
        await store.close()
    assert key.startswith("p:calib:") and "secret" not in key and len(key) == len("p:calib:") + 24
