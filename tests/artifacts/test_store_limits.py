"""The stores' limits (issue 11, items 3 and 8): the memory store's byte budget across scopes,
leases that keep what requests in flight reference, the per-scope cap that evicts others first,
and the start-up check of Redis' eviction policy."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
from artifacts_harness import keyed
from shared_redis import REDIS_URL, delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.redis_checks import (
    eviction_policy_warning,
    memory_bound_warning,
    start_up_warnings,
)
from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import ArtifactStore, MemoryStore, NewArtifact

SECRET = b"test-secret-0123456789abcdef0123"
TTL = 3600
CAP = 1000
KB = 1024


@pytest.fixture
async def redis_store() -> AsyncIterator[RedisStore]:
    url = require_shared_redis()
    prefix = unique_prefix()
    store = RedisStore(REDIS_URL, SECRET, key_prefix=prefix)
    try:
        yield store
    finally:
        await store.close()
        client = redis.asyncio.Redis.from_url(url)
        await delete_prefix(client, prefix)
        await client.aclose()


@pytest.fixture
async def memory_store() -> AsyncIterator[MemoryStore]:
    store = MemoryStore(SECRET)
    yield store
    await store.close()


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> ArtifactStore:
    """The same behaviour from both stores."""
    value: ArtifactStore = request.getfixturevalue(f"{request.param}_store")
    return value


async def put(store: ArtifactStore, scope: str, *contents: str, cap: int = CAP) -> set[str]:
    items = keyed(store, scope, *(NewArtifact(c, "tool_result", {}) for c in contents))
    return await store.put_many(scope, items, ttl_seconds=TTL, max_per_scope=cap)


async def readable(store: ArtifactStore, scope: str, content: str) -> bool:
    return await store.get(scope, store.artifact_id(scope, content)) is not None


# -- the memory store's byte budget ----------------------------------------------------------


async def test_memory_budget_evicts_least_recently_used_across_scopes() -> None:
    store = MemoryStore(SECRET, max_bytes=1000 * KB)
    contents = [f"{i:03d}" + "x" * (200 * KB) for i in range(12)]
    for i, content in enumerate(contents):  # one scope per credential, as in passthrough mode
        assert len(await put(store, f"scope-{i}", content)) == 1
        assert store.held_bytes <= 1000 * KB
    present = [await readable(store, f"scope-{i}", c) for i, c in enumerate(contents)]
    assert present[-4:] == [True] * 4 and present[:6] == [False] * 6


async def test_memory_budget_counts_a_re_referenced_artifact_as_recent() -> None:
    store = MemoryStore(SECRET, max_bytes=700 * KB)
    first, second, third = ("abc"[i] + "y" * (200 * KB) for i in range(3))
    await put(store, "s1", first)
    await put(store, "s2", second)
    await put(store, "s1", first)  # referenced again: now more recent than `second`
    await put(store, "s3", third)
    await put(store, "s4", "d" + "y" * (200 * KB))
    assert await readable(store, "s1", first) and not await readable(store, "s2", second)


async def test_memory_budget_never_evicts_what_a_lease_pins() -> None:
    store = MemoryStore(SECRET, max_bytes=500 * KB)
    pinned = "pinned " + "p" * (200 * KB)
    leased = asyncio.Event()
    release = asyncio.Event()

    async def request_in_flight() -> None:
        with store.lease():
            assert len(await put(store, "alice", pinned)) == 1
            leased.set()
            await release.wait()
            assert await readable(store, "alice", pinned)

    task = asyncio.create_task(request_in_flight())
    await asyncio.wait_for(leased.wait(), 30)
    for i in range(6):  # other requests, outside that lease, fill the budget several times
        await put(store, f"other-{i}", f"{i}" + "o" * (200 * KB))
    assert await readable(store, "alice", pinned)
    release.set()
    await task
    assert store.held_bytes <= 500 * KB  # the lease's end brings the store back under budget
    await put(store, "late", "l" * (400 * KB))
    assert not await readable(store, "alice", pinned)


async def test_memory_batch_larger_than_the_budget_is_kept_while_leased() -> None:
    store = MemoryStore(SECRET, max_bytes=300 * KB)
    big = [f"{i}" + "b" * (200 * KB) for i in range(3)]
    with store.lease():
        assert len(await put(store, "s", *big)) == 3
        assert all([await readable(store, "s", c) for c in big])
    assert store.held_bytes <= 300 * KB


# -- the per-scope cap: in-flight references are never evicted --------------------------------


async def test_cap_never_evicts_what_a_request_in_flight_references(store: ArtifactStore) -> None:
    """One conversation's artifact survives four other offloads of its tenant meanwhile."""
    leased, release = asyncio.Event(), asyncio.Event()

    async def conversation() -> bool:
        with store.lease():
            assert len(await put(store, "tenant", "conversation A", cap=3)) == 1
            leased.set()
            await release.wait()
            return await readable(store, "tenant", "conversation A")

    task = asyncio.create_task(conversation())
    await asyncio.wait_for(leased.wait(), 30)
    for i in range(4):
        assert len(await put(store, "tenant", f"other offload {i}", cap=3)) == 1
    release.set()
    assert await task


async def test_a_batch_over_the_cap_is_kept_and_others_go_first(store: ArtifactStore) -> None:
    assert len(await put(store, "t", "old 1", "old 2", cap=3)) == 2
    batch = [f"needed {i}" for i in range(5)]
    assert len(await put(store, "t", *batch, cap=3)) == 5
    assert all([await readable(store, "t", c) for c in batch])
    assert not await readable(store, "t", "old 1") and not await readable(store, "t", "old 2")


async def test_lease_pins_also_what_a_request_reads(store: ArtifactStore) -> None:
    await put(store, "t", "read back", cap=2)
    leased, release = asyncio.Event(), asyncio.Event()

    async def reader() -> bool:
        with store.lease():
            assert await readable(store, "t", "read back")
            leased.set()
            await release.wait()
            return await readable(store, "t", "read back")

    task = asyncio.create_task(reader())
    await asyncio.wait_for(leased.wait(), 30)
    for i in range(3):
        await put(store, "t", f"newer {i}", cap=2)
    release.set()
    assert await task


# -- Redis' eviction policy -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "warned"),
    [
        ("noeviction", False),
        ("allkeys-lru", True),
        ("allkeys-lfu", True),
        ("allkeys-random", True),
        ("volatile-lru", True),
        ("volatile-ttl", True),
        ("volatile-random", True),
    ],
)
def test_evicting_redis_policies_are_warned(policy: str, warned: bool) -> None:
    warning = eviction_policy_warning(policy)
    assert (warning is not None) == warned
    if warning is not None:
        assert policy in warning and "noeviction" in warning and "\n" not in warning


async def test_redis_start_up_check_warns_once_on_an_evicting_policy(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def info(section: str | None = None, *_: Any) -> dict[str, Any]:
        assert section == "memory"
        return {"maxmemory_policy": "allkeys-lru", "maxmemory": 1 << 30}

    monkeypatch.setattr(redis_store.client, "info", info)
    with caplog.at_level(logging.WARNING, logger="ctxproxy.artifacts"):
        await redis_store.check_eviction_policy()
    lines = [r.getMessage() for r in caplog.records if r.name == "ctxproxy.artifacts"]
    assert len(lines) == 1 and "allkeys-lru" in lines[0]


async def test_redis_start_up_check_is_quiet_on_noeviction_and_on_failure(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxproxy.artifacts"):
        await redis_store.check_eviction_policy()  # the test server's own policy

        async def broken(*_: Any) -> dict[str, Any]:
            raise OSError("down")

        monkeypatch.setattr(redis_store.client, "info", broken)
        await redis_store.check_eviction_policy()
    client = redis.asyncio.Redis.from_url(REDIS_URL)
    memory = await client.info("memory")
    await client.aclose()
    expected = (memory["maxmemory_policy"] != "noeviction") + (int(memory["maxmemory"]) == 0)
    assert len([r for r in caplog.records if r.name == "ctxproxy.artifacts"]) == expected


@pytest.mark.parametrize(("maxmemory", "warned"), [(0, True), ("0", True), (1 << 30, False)])
def test_a_redis_without_a_memory_bound_is_warned(maxmemory: object, warned: bool) -> None:
    warning = memory_bound_warning(maxmemory)
    assert (warning is not None) == warned
    if warning is not None:
        assert "maxmemory" in warning and "\n" not in warning


def test_the_start_up_warnings_of_a_clusters_masters_are_each_given_once() -> None:
    safe = {"maxmemory_policy": "noeviction", "maxmemory": 1 << 30}
    unbounded = {"maxmemory_policy": "noeviction", "maxmemory": 0}
    evicting = {"maxmemory_policy": "allkeys-lru", "maxmemory": 0}
    assert start_up_warnings([safe, safe, safe]) == []
    assert start_up_warnings([unbounded] * 3) == [memory_bound_warning(0)]
    assert start_up_warnings([safe, evicting, evicting]) == [
        eviction_policy_warning("allkeys-lru"),
        memory_bound_warning(0),
    ]
    assert start_up_warnings([{}]) == []  # INFO hidden: nothing to warn about
