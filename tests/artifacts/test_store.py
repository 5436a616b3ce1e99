"""Contract tests for the artifact stores: one suite run against MemoryStore and RedisStore.

RedisStore runs against the real server on 127.0.0.1:6379 (db 13, a unique key prefix per test,
keys deleted afterwards). When that server is unreachable the Redis tests SKIP with the reason,
except under CI (env `CI` set to a true value), where they FAIL: CI must exercise Redis.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import redis
import redis.asyncio
from artifacts_harness import keyed
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis_cluster import LocalCluster
from shared_redis import (
    REDIS_URL,
    age_keys,
    delete_prefix,
    record_pipelines,
    require_shared_redis,
    scope_keys,
    unique_prefix,
)

from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import (
    ArtifactStore,
    MemoryStore,
    NewArtifact,
    StoreUnavailable,
    compute_artifact_id,
    is_artifact_id,
)
from proxy.jsonio.slices import LONG_CHARS

SECRET = b"test-secret-0123456789abcdef0123"
TTL = 3600
CAP = 1000


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis URL; skip (or, under CI, fail) when the server is unreachable."""
    return require_shared_redis()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Harness:
    kind: str
    store: ArtifactStore
    advance: Callable[[float], Awaitable[None]]
    """Let `seconds` pass (Redis: really sleep)."""
    age: Callable[[float], Awaitable[None]]
    """Make what is stored `seconds` older without waiting (Redis: shrink every key's TTL)."""


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def redis_store(
    redis_client: redis.asyncio.Redis,
) -> AsyncIterator[tuple[RedisStore, str]]:
    prefix = unique_prefix()
    store = RedisStore(REDIS_URL, SECRET, key_prefix=prefix, socket_timeout=2, pool_timeout=2)
    try:
        yield store, prefix
    finally:
        await store.close()
        await delete_prefix(redis_client, prefix)


@pytest.fixture
async def cluster_harness(redis_cluster: LocalCluster) -> AsyncIterator[Harness]:
    """The Redis store on a Redis Cluster: every command must keep to one slot (hash tags)."""
    prefix = unique_prefix()
    store = RedisStore(redis_cluster.url, SECRET, cluster=True, key_prefix=prefix)
    client = RedisCluster.from_url(redis_cluster.url)

    async def age(seconds: float) -> None:
        await age_keys(client, prefix, seconds)

    try:
        yield Harness("redis-cluster", store, asyncio.sleep, age)
    finally:
        await store.close()
        await delete_prefix(client, prefix)
        await client.aclose()


@pytest.fixture
async def memory_harness() -> AsyncIterator[Harness]:
    clock = FakeClock()
    store = MemoryStore(SECRET, clock=clock)

    async def advance(seconds: float) -> None:
        clock.now += seconds

    yield Harness("memory", store, advance, advance)
    await store.close()


@pytest.fixture
def redis_harness(
    redis_store: tuple[RedisStore, str], redis_client: redis.asyncio.Redis
) -> Harness:
    store, prefix = redis_store

    async def age(seconds: float) -> None:
        await age_keys(redis_client, prefix, seconds)

    return Harness("redis", store, asyncio.sleep, age)  # real Redis expiry either way


@pytest.fixture(params=["memory", "redis", "cluster"])
def harness(request: pytest.FixtureRequest) -> Harness:
    """The same contract runs against every store (Redis: one server and a Cluster)."""
    value: Harness = request.getfixturevalue(f"{request.param}_harness")
    return value


async def put(
    store: ArtifactStore,
    scope: str,
    items: Sequence[NewArtifact],
    *,
    ttl_seconds: int,
    max_per_scope: int,
) -> list[bool]:
    """`put_many` with the ids the store computes; per item: was its write confirmed."""
    by_id = keyed(store, scope, *items)
    confirmed = await store.put_many(
        scope, by_id, ttl_seconds=ttl_seconds, max_per_scope=max_per_scope
    )
    assert confirmed <= by_id.keys()
    return [store.artifact_id(scope, item.content) in confirmed for item in items]


# -- ids ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["tenant-a", "tenant-\u00e9#session:x"])
def test_a_long_content_s_id_is_the_hmac_of_the_whole_computed_a_slice_at_a_time(
    scope: str,
) -> None:
    content = ("é中😀 \ud800" + "x" * 1000) * (LONG_CHARS // 500)  # a lone surrogate too
    assert len(content) > 2 * LONG_CHARS
    scope_bytes = scope.encode()
    message = len(scope_bytes).to_bytes(4, "big") + scope_bytes + b"\x00"
    message += content.encode("utf-8", "surrogatepass")
    expected = "art_" + hmac.digest(SECRET, message, "sha256").hex()[:32]
    assert compute_artifact_id(SECRET, scope, content) == expected
    assert compute_artifact_id(SECRET, scope, content[:-1]) != expected


def test_ids_are_stable_scoped_and_keyed() -> None:
    first = compute_artifact_id(SECRET, "tenant-a", "content")
    assert first == compute_artifact_id(SECRET, "tenant-a", "content")
    assert is_artifact_id(first) and re.fullmatch(r"art_[0-9a-f]{32}", first)
    assert first != compute_artifact_id(SECRET, "tenant-b", "content")
    assert first != compute_artifact_id(b"another secret", "tenant-a", "content")
    assert first != compute_artifact_id(SECRET, "tenant-a", "content2")
    # moving the boundary between scope and content gives another id
    assert compute_artifact_id(SECRET, "ab", "c") != compute_artifact_id(SECRET, "a", "bc")
    assert MemoryStore(SECRET).artifact_id("tenant-a", "content") == first
    assert not is_artifact_id("art_XYZ") and not is_artifact_id(None)
    with pytest.raises(ValueError):
        MemoryStore(b"")


# -- contract ----------------------------------------------------------------------------------


async def test_get_many_returns_what_exists_of_the_scope(harness: Harness) -> None:
    store = harness.store
    items = [NewArtifact("one " * 20, "tool_result"), NewArtifact("two " * 20, "tool_result")]
    assert await put(store, "t1", items, ttl_seconds=TTL, max_per_scope=CAP) == [True, True]
    ids = [store.artifact_id("t1", item.content) for item in items]
    absent = store.artifact_id("t1", "never stored")
    found = await store.get_many("t1", [ids[1], absent, "not an id", ids[0]])
    assert sorted(found) == sorted(ids)
    assert [found[i].content for i in ids] == [item.content for item in items]
    assert await store.get_many("t2", ids) == {}
    assert await store.get_many("t1", []) == {}


async def test_round_trip(harness: Harness) -> None:
    store = harness.store
    items = [
        NewArtifact("tool output " * 50, "tool_result", {"tool": "grep", "tokens": 12}),
        NewArtifact('{"role":"user"}\n{"role":"assistant"}', "turns", {"turns": 2}),
    ]
    before = time.time()
    assert await put(store, "t1", items, ttl_seconds=TTL, max_per_scope=CAP) == [True, True]
    for item in items:
        got = await store.get("t1", store.artifact_id("t1", item.content))
        assert got is not None
        assert got.id == store.artifact_id("t1", item.content)
        assert (got.content, got.kind, got.meta) == (item.content, item.kind, item.meta)
        if harness.kind != "memory":
            assert before - 1 <= got.created_at <= time.time() + 1
    assert await store.ping() is True


async def test_put_many_keys_by_the_given_ids_and_returns_the_confirmed_ones(
    harness: Harness,
) -> None:
    store = harness.store
    chosen = "art_" + "c" * 32  # not the HMAC of the content: the store must not recompute it
    items = {chosen: NewArtifact("content", "k", {}), "art_" + "d" * 32: NewArtifact("d", "k")}
    assert await store.put_many("t1", items, ttl_seconds=TTL, max_per_scope=CAP) == set(items)
    got = await store.get("t1", chosen)
    assert got is not None and (got.id, got.content) == (chosen, "content")
    assert await store.get("t1", store.artifact_id("t1", "content")) is None


async def test_put_many_refuses_what_is_not_an_artifact_id(harness: Harness) -> None:
    for bad in ["", "art_XYZ", "content", "art_" + "0" * 31]:
        with pytest.raises(ValueError, match="not an artifact id"):
            await harness.store.put_many(
                "t1", {bad: NewArtifact("x", "k")}, ttl_seconds=TTL, max_per_scope=CAP
            )


async def test_put_many_confirms_a_batch_over_the_cap_whole(harness: Harness) -> None:
    """The request needs every artifact of its batch: the cap never evicts within it."""
    store = harness.store
    items = keyed(store, "t1", *(NewArtifact(f"capped {i}", "k", {}) for i in range(4)))
    confirmed = await store.put_many("t1", items, ttl_seconds=TTL, max_per_scope=2)
    assert confirmed == set(items)
    for aid in items:
        assert await store.get("t1", aid) is not None


async def test_empty_batch_and_duplicates(harness: Harness) -> None:
    store = harness.store
    assert await put(store, "t1", [], ttl_seconds=TTL, max_per_scope=CAP) == []
    dup = [NewArtifact("same", "k", {}), NewArtifact("same", "k", {})]
    assert await put(store, "t1", dup, ttl_seconds=TTL, max_per_scope=CAP) == [True, True]
    got = await store.get("t1", store.artifact_id("t1", "same"))
    assert got is not None and got.content == "same"


async def test_invalid_put_arguments_are_loud(harness: Harness) -> None:
    item = [NewArtifact("x", "k", {})]
    with pytest.raises(ValueError):
        await put(harness.store, "t1", item, ttl_seconds=0, max_per_scope=CAP)
    with pytest.raises(ValueError):
        await put(harness.store, "t1", item, ttl_seconds=TTL, max_per_scope=0)


async def test_unknown_ids_read_as_none(harness: Harness) -> None:
    store = harness.store
    await put(store, "t1", [NewArtifact("x", "k", {})], ttl_seconds=TTL, max_per_scope=CAP)
    assert await store.get("t1", "art_" + "0" * 32) is None
    assert await store.get("t1", store.artifact_id("t1", "never stored")) is None
    for garbage in ["", "art_", "../../etc/passwd", "art_" + "g" * 32, "*", "art_{x}:idx"]:
        assert await store.get("t1", garbage) is None
    assert await store.get("nobody", store.artifact_id("t1", "x")) is None


async def test_scope_isolation(harness: Harness) -> None:
    store = harness.store
    item = NewArtifact("secret of tenant A", "tool_result", {})
    await put(store, "tenant-a", [item], ttl_seconds=TTL, max_per_scope=CAP)
    id_a = store.artifact_id("tenant-a", item.content)
    assert await store.get("tenant-b", id_a) is None
    id_b = store.artifact_id("tenant-b", item.content)
    assert id_a != id_b
    assert await store.get("tenant-b", id_b) is None  # not stored in B yet
    await put(store, "tenant-b", [item], ttl_seconds=TTL, max_per_scope=CAP)
    got_a, got_b = await store.get("tenant-a", id_a), await store.get("tenant-b", id_b)
    assert got_a is not None and got_b is not None
    assert got_a.content == got_b.content == item.content
    assert await store.get("tenant-a", id_b) is None


UNICODE_SAMPLES = [
    "héllo wörld ✓ 日本語テキスト 🧪🚀 e\u0301 \u200d\u2028 tab\tcr\r\nnul\x00end",
    "lone surrogate \ud800 kept",
    "🧪 compressible unicode block ✓ 日本語 " * 5000,
    "",
]


@pytest.mark.parametrize("content", UNICODE_SAMPLES, ids=["mixed", "surrogate", "big", "empty"])
async def test_unicode_content_is_exact(harness: Harness, content: str) -> None:
    store = harness.store
    item = NewArtifact(content, "tool_result", {"note": "ünï"})
    assert await put(store, "t1", [item], ttl_seconds=TTL, max_per_scope=CAP) == [True]
    got = await store.get("t1", store.artifact_id("t1", content))
    assert got is not None and got.content == content and got.meta == {"note": "ünï"}


async def test_ttl_expiry(harness: Harness) -> None:
    # Aged, not slept (as below): 10 s of margin either side of the TTL, however slow the
    # machine (a 1 s TTL could run out between a put and the next line).
    store = harness.store
    item = NewArtifact("short lived", "k", {})
    aid = store.artifact_id("t1", item.content)
    assert await put(store, "t1", [item], ttl_seconds=100, max_per_scope=CAP) == [True]
    assert await store.get("t1", aid) is not None
    await harness.age(90)
    assert await store.get("t1", aid) is not None
    await harness.age(20)
    assert await store.get("t1", aid) is None
    # writing it again after expiry stores it again
    assert await put(store, "t1", [item], ttl_seconds=100, max_per_scope=CAP) == [True]
    assert await store.get("t1", aid) is not None


async def test_ttl_refreshed_by_each_put(harness: Harness) -> None:
    # Aged, not slept: every "still there" has 40 s of margin, however slow the machine.
    store = harness.store
    item = NewArtifact("referenced every turn", "k", {})
    aid = store.artifact_id("t1", item.content)
    await put(store, "t1", [item], ttl_seconds=100, max_per_scope=CAP)
    await harness.age(60)
    assert await put(store, "t1", [item], ttl_seconds=100, max_per_scope=CAP) == [True]
    await harness.age(60)  # 120 s after the first write, 60 s after the refresh
    assert await store.get("t1", aid) is not None
    await harness.age(60)  # 120 s after the refresh
    assert await store.get("t1", aid) is None


async def test_cap_evicts_least_recently_referenced(harness: Harness) -> None:
    store = harness.store
    a, b, c, d = (NewArtifact(name, "k", {}) for name in "abcd")
    for item in (a, b, c):
        assert await put(store, "t1", [item], ttl_seconds=TTL, max_per_scope=3) == [True]
        await harness.advance(0.01)
    assert await put(store, "t1", [a], ttl_seconds=TTL, max_per_scope=3) == [True]
    await harness.advance(0.01)
    assert await put(store, "t1", [d], ttl_seconds=TTL, max_per_scope=3) == [True]
    present = {
        item.content: await store.get("t1", store.artifact_id("t1", item.content))
        for item in (a, b, c, d)
    }
    assert {k for k, v in present.items() if v is not None} == {"a", "c", "d"}
    # other scopes are not affected by this scope's cap
    await put(store, "t2", [b], ttl_seconds=TTL, max_per_scope=3)
    assert await store.get("t2", store.artifact_id("t2", "b")) is not None
    assert await store.get("t1", store.artifact_id("t1", "c")) is not None


async def test_batch_larger_than_cap_is_confirmed_and_kept(harness: Harness) -> None:
    store = harness.store
    items = [NewArtifact(f"item {i}", "k", {}) for i in range(5)]
    results = await put(store, "t1", items, ttl_seconds=TTL, max_per_scope=3)
    assert results == [True] * 5
    for item, ok in zip(items, results, strict=True):
        got = await store.get("t1", store.artifact_id("t1", item.content))
        assert (got is not None) == ok


async def test_batch_over_the_cap_never_confirms_what_it_evicted(harness: Harness) -> None:
    """A stored artifact referenced early in a batch that overflows the cap is part of what the
    request needs: the cap keeps it (confirming an evicted one would let a prompt name an
    artifact whose payload is gone), and evicts the scope's other artifacts first."""
    store = harness.store
    old = [NewArtifact(f"old {i}", "k", {}) for i in range(2)]
    assert await put(store, "t1", old, ttl_seconds=TTL, max_per_scope=3) == [True, True]
    await harness.advance(0.01)
    new = [NewArtifact(f"new {i}", "k", {}) for i in range(4)]
    batch = [old[0], *new, old[1]]  # later in a batch = referenced later
    results = await put(store, "t1", batch, ttl_seconds=TTL, max_per_scope=3)
    for item, ok in zip(batch, results, strict=True):
        got = await store.get("t1", store.artifact_id("t1", item.content))
        if ok:
            assert got is not None, f"{item.content!r} was confirmed but cannot be read"
        else:
            assert got is None, f"{item.content!r} is stored but was not confirmed"
    assert results == [True] * 6


@pytest.mark.parametrize("cap", [1, 2, 3, 5])
async def test_every_confirmed_id_is_readable_after_mixed_batches(
    harness: Harness, cap: int
) -> None:
    store = harness.store
    contents = [f"c{i}" for i in range(6)]
    batches = [contents[:2], [contents[0], *contents[2:5]], contents[3:], contents]
    for batch in batches:
        items = [NewArtifact(c, "k", {}) for c in batch]
        results = await put(store, "t1", items, ttl_seconds=TTL, max_per_scope=cap)
        confirmed = {c for c, ok in zip(batch, results, strict=True) if ok}
        assert confirmed == set(batch)
        for content in confirmed:
            got = await store.get("t1", store.artifact_id("t1", content))
            assert got is not None, f"{content!r} was confirmed but cannot be read"
        await harness.advance(0.01)


# -- Redis specifics ---------------------------------------------------------------------------


@pytest.fixture
def pipeline_spy(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Records the command names of every pipeline round trip."""
    return record_pipelines(monkeypatch)


async def test_redis_repeat_write_skips_payload(
    redis_store: tuple[RedisStore, str], pipeline_spy: list[list[str]]
) -> None:
    store, _ = redis_store
    items = [NewArtifact(f"payload {i} " * 1000, "tool_result", {}) for i in range(3)]
    assert await put(store, "t1", items, ttl_seconds=TTL, max_per_scope=CAP) == [True] * 3
    assert len(pipeline_spy) == 2, "first write: refresh round trip + write round trip"
    assert pipeline_spy[1].count("SET") == 3
    pipeline_spy.clear()
    assert await put(store, "t1", items, ttl_seconds=TTL, max_per_scope=CAP) == [True] * 3
    assert len(pipeline_spy) == 1, "repeat write: one round trip"
    assert "SET" not in pipeline_spy[0] and pipeline_spy[0].count("EXPIRE") == 4
    pipeline_spy.clear()
    new = NewArtifact("the only new one", "tool_result", {})
    assert await put(store, "t1", [*items, new], ttl_seconds=TTL, max_per_scope=CAP) == [True] * 4
    assert len(pipeline_spy) == 2 and pipeline_spy[1].count("SET") == 1


async def test_redis_keys_are_hash_tagged_and_expire(
    redis_store: tuple[RedisStore, str], redis_client: redis.asyncio.Redis
) -> None:
    store, prefix = redis_store
    items = [NewArtifact(f"x{i}", "k", {}) for i in range(3)]
    await put(store, "tenant-a", items, ttl_seconds=500, max_per_scope=CAP)
    keys = sorted([k.decode() async for k in redis_client.scan_iter(match=f"{prefix}*")])
    assert len(keys) == 4
    tags = set()
    for key in keys:
        match = re.fullmatch(
            re.escape(prefix) + r"\{([0-9a-f]{24})\}:(a:art_[0-9a-f]{32}|idx)", key
        )
        assert match, key
        tags.add(match.group(1))
        assert 0 < await redis_client.ttl(key) <= 500
    assert len(tags) == 1 and "tenant-a" not in "".join(keys)
    index = next(k for k in keys if k.endswith(":idx"))
    assert await redis_client.zcard(index) == 3


async def test_redis_cap_deletes_evicted_payloads(
    redis_store: tuple[RedisStore, str], redis_client: redis.asyncio.Redis
) -> None:
    store, prefix = redis_store
    for i in range(5):
        await put(store, "t1", [NewArtifact(f"n{i}", "k", {})], ttl_seconds=TTL, max_per_scope=2)
    keys = [k.decode() async for k in redis_client.scan_iter(match=f"{prefix}*:a:*")]
    assert sorted(keys) == sorted(
        f"{scope_keys(prefix, 't1')}a:{store.artifact_id('t1', f'n{i}')}" for i in (3, 4)
    )


async def test_redis_compresses_large_payloads(
    redis_store: tuple[RedisStore, str], redis_client: redis.asyncio.Redis
) -> None:
    store, prefix = redis_store
    big = "".join(f"line {i}: status=ok value={i % 7}\n" for i in range(20_000))
    small = "tiny"
    await put(
        store,
        "t1",
        [NewArtifact(big, "k", {}), NewArtifact(small, "k", {})],
        ttl_seconds=TTL,
        max_per_scope=CAP,
    )
    keys = scope_keys(prefix, "t1")
    raw_big = await redis_client.get(f"{keys}a:{store.artifact_id('t1', big)}")
    raw_small = await redis_client.get(f"{keys}a:{store.artifact_id('t1', small)}")
    assert isinstance(raw_big, bytes) and isinstance(raw_small, bytes)
    assert raw_big[:1] == b"\x01" and len(raw_big) < len(big) // 4
    assert raw_small[:1] == b"\x00" and raw_small.endswith(b"\ntiny")
    got = await store.get("t1", store.artifact_id("t1", big))
    assert got is not None and got.content == big


async def test_redis_corrupt_value_reads_as_missing(
    redis_store: tuple[RedisStore, str], redis_client: redis.asyncio.Redis
) -> None:
    store, prefix = redis_store
    aid = store.artifact_id("t1", "whatever")
    await redis_client.set(f"{scope_keys(prefix, 't1')}a:{aid}", b"\x07garbage")
    assert await store.get("t1", aid) is None


async def test_redis_pool_waits_for_a_free_connection(
    redis_url: str, redis_client: redis.asyncio.Redis
) -> None:
    prefix = unique_prefix()
    store = RedisStore(redis_url, SECRET, key_prefix=prefix, pool_size=2, pool_timeout=5)
    try:
        items = [NewArtifact(f"c{i}", "k", {}) for i in range(20)]
        assert all(await put(store, "t1", items, ttl_seconds=TTL, max_per_scope=CAP))
        ids = [store.artifact_id("t1", item.content) for item in items]
        results = await asyncio.gather(*(store.get("t1", aid) for aid in ids * 5))
        assert [r.content if r else None for r in results] == [i.content for i in items] * 5
    finally:
        await store.close()
        await delete_prefix(redis_client, prefix)


async def test_redis_unreachable_fails_soft_and_fast(caplog: pytest.LogCaptureFixture) -> None:
    # Fast: a refused connection fails each call at once. With timeouts of an hour, a call that
    # waited for one would hang (30 s only bounds that), whatever the machine's load.
    store = RedisStore(
        "redis://:hunter2@127.0.0.1:1/13", SECRET, socket_timeout=3600, pool_timeout=3600
    )
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")

    async def calls() -> None:
        items = [NewArtifact("a", "k", {}), NewArtifact("b", "k", {})]
        for _ in range(3):
            assert await put(store, "t1", items, ttl_seconds=TTL, max_per_scope=CAP) == [
                False,
                False,
            ]
            with pytest.raises(StoreUnavailable):
                await store.get("t1", store.artifact_id("t1", "a"))
            assert await store.ping() is False

    try:
        await asyncio.wait_for(calls(), 30)
    finally:
        await store.close()
    warnings = [r for r in caplog.records if r.name == "ctxproxy.artifacts"]
    assert len(warnings) == 1, "one log line per incident, not per request"
    assert "127.0.0.1:1" in caplog.text
    assert "hunter2" not in caplog.text and SECRET.decode() not in caplog.text


async def test_redis_incident_logged_once_and_recovery_logged(
    redis_store: tuple[RedisStore, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, _ = redis_store
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    aid = store.artifact_id("t1", "x")
    await put(store, "t1", [NewArtifact("x", "k", {})], ttl_seconds=TTL, max_per_scope=CAP)

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RedisConnectionError("Connection refused")

    with monkeypatch.context() as patch:
        patch.setattr(store.client, "get", refuse)
        for _ in range(5):
            with pytest.raises(StoreUnavailable):
                await store.get("t1", aid)
    got = await store.get("t1", aid)
    assert got is not None and got.content == "x"
    await store.get("t1", aid)
    messages = [r.getMessage() for r in caplog.records if r.name == "ctxproxy.artifacts"]
    assert len(messages) == 2
    assert "unavailable" in messages[0] and "available again" in messages[1]


async def test_redis_write_errors_confirm_only_what_was_stored(
    redis_store: tuple[RedisStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OOM/READONLY reply to the SETs: already-stored items stay True, new ones are False."""
    store, _ = redis_store
    old = NewArtifact("already stored", "k", {})
    new = NewArtifact("rejected by an OOM server", "k", {})
    assert await put(store, "t1", [old], ttl_seconds=TTL, max_per_scope=CAP) == [True]
    original = Pipeline.execute

    async def oom_on_set(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        if any(str(args[0]).upper() == "SET" for args, _ in self.command_stack):
            count = len(self.command_stack)
            self.command_stack.clear()
            return [
                ResponseError("OOM command not allowed when used memory > 'maxmemory'.")
            ] * count
        return await original(self, raise_on_error)

    monkeypatch.setattr(Pipeline, "execute", oom_on_set)
    assert await put(store, "t1", [old, new], ttl_seconds=TTL, max_per_scope=CAP) == [
        True,
        False,
    ]
    monkeypatch.undo()
    assert await store.get("t1", store.artifact_id("t1", new.content)) is None


async def test_redis_unserialisable_meta_is_not_confirmed(
    redis_store: tuple[RedisStore, str],
) -> None:
    store, _ = redis_store
    items = [NewArtifact("ok", "k", {}), NewArtifact("bad", "k", {"x": object()})]
    assert await put(store, "t1", items, ttl_seconds=TTL, max_per_scope=CAP) == [True, False]


def test_redis_store_rejects_brace_in_prefix() -> None:
    with pytest.raises(ValueError):
        RedisStore(REDIS_URL, SECRET, key_prefix="bad{prefix}:")


def test_stores_never_show_their_secret() -> None:
    assert repr(MemoryStore(SECRET)) == "MemoryStore(...)"
    assert repr(RedisStore(REDIS_URL, SECRET)) == "RedisStore(...)"


async def test_a_claim_is_taken_once_per_scope_and_key_until_it_expires(harness: Harness) -> None:
    store = harness.store  # a 100 s claim, aged: it cannot run out between two lines
    assert await store.claim("t1", "making:a", ttl_seconds=100)
    assert not await store.claim("t1", "making:a", ttl_seconds=100)  # held (another replica)
    assert await store.claim("t1", "making:b", ttl_seconds=100)
    assert await store.claim("t2", "making:a", ttl_seconds=100)
    await harness.age(110)
    assert await store.claim("t1", "making:a", ttl_seconds=100)  # expired: taken again
