"""Per-scope write budgets (security round two, "per-scope write budgets"): the same rule on the
memory store and on Redis. A write over the owner's live bytes or over its bytes-per-minute
bucket is not made, and left out of the confirmed ids; refreshes are never refused; expiry and
the count cap free live bytes; an owner's sessions and sub-scopes share its budget, other owners
are independent. The clock is injected (Redis: the keys' real TTLs are aged alongside)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
import redis.asyncio
from artifacts_harness import keyed
from redis.asyncio.cluster import RedisCluster
from redis_cluster import LocalCluster
from shared_redis import REDIS_URL, age_keys, delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.budgets import (
    Refused,
    WriteBudget,
    WriteBudgets,
    WriteLimit,
    budget_refusals,
    sub_scope,
)
from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import ArtifactStore, MemoryStore, NewArtifact

SECRET = b"test-secret-0123456789abcdef0123"
TTL = 100
CAP = 1000
LIVE = 1000
PER_MINUTE = 1500
SESSION = "acme#session:" + "5" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Rig:
    kind: str
    store: ArtifactStore
    elapse: Callable[[float], Awaitable[None]]
    """Let `seconds` pass: the store's clock, and on Redis the keys' TTLs."""
    refused: Callable[[], dict[WriteLimit, tuple[int, int]]]


def budgets(live: int | None = LIVE, per_minute: int | None = PER_MINUTE) -> WriteBudgets:
    return WriteBudgets(WriteBudget(per_minute, live))


@pytest.fixture
async def memory_rig() -> AsyncIterator[Callable[[WriteBudgets], Rig]]:
    made: list[MemoryStore] = []

    def make(limits: WriteBudgets) -> Rig:
        clock = Clock()
        store = MemoryStore(SECRET, clock=clock, budgets=limits)
        made.append(store)

        async def elapse(seconds: float) -> None:
            clock.now += seconds

        return Rig("memory", store, elapse, store.refused_writes.snapshot)

    yield make
    for store in made:
        await store.close()


@pytest.fixture
async def redis_rig() -> AsyncIterator[Callable[[WriteBudgets], Rig]]:
    require_shared_redis()
    async for make in _redis_rigs(REDIS_URL, cluster=False):
        yield make


@pytest.fixture
async def cluster_rig(redis_cluster: LocalCluster) -> AsyncIterator[Callable[[WriteBudgets], Rig]]:
    """The budgets' scripts on a Redis Cluster: each keeps to its owner's slot."""
    async for make in _redis_rigs(redis_cluster.url, cluster=True):
        yield make


async def _redis_rigs(url: str, *, cluster: bool) -> AsyncIterator[Callable[[WriteBudgets], Rig]]:
    client = RedisCluster.from_url(url) if cluster else redis.asyncio.Redis.from_url(url)
    made: list[tuple[RedisStore, str]] = []

    def make(limits: WriteBudgets) -> Rig:
        clock, prefix = Clock(), unique_prefix()
        store = RedisStore(
            url, SECRET, cluster=cluster, key_prefix=prefix, clock=clock, budgets=limits
        )
        made.append((store, prefix))

        async def elapse(seconds: float) -> None:
            clock.now += seconds
            await age_keys(client, prefix, seconds)

        return Rig("redis", store, elapse, store.refused_writes.snapshot)

    try:
        yield make
    finally:
        for store, prefix in made:
            await store.close()
            await delete_prefix(client, prefix)
        await client.aclose()


@pytest.fixture(params=["memory", "redis", "cluster"])
def rig(request: pytest.FixtureRequest) -> Callable[[WriteBudgets], Rig]:
    """A store of each kind with the budgets a test asks for."""
    made: Callable[[WriteBudgets], Rig] = request.getfixturevalue(f"{request.param}_rig")
    return made


def text(tag: str, size: int) -> str:
    return (tag + ":").ljust(size, "x")


async def put(store: ArtifactStore, scope: str, *texts: str, cap: int = CAP) -> set[str]:
    """The texts whose write `put_many` confirmed."""
    items = keyed(store, scope, *(NewArtifact(t, "tool_result", {}) for t in texts))
    confirmed = await store.put_many(scope, items, ttl_seconds=TTL, max_per_scope=cap)
    return {t for t in texts if store.artifact_id(scope, t) in confirmed}


async def refusals(store: ArtifactStore, scope: str, *texts: str) -> tuple[Refused, ...]:
    items = keyed(store, scope, *(NewArtifact(t, "tool_result", {}) for t in texts))
    return budget_refusals(await store.put_many(scope, items, ttl_seconds=TTL, max_per_scope=CAP))


async def readable(store: ArtifactStore, scope: str, *texts: str) -> list[bool]:
    return [await store.get(scope, store.artifact_id(scope, t)) is not None for t in texts]


async def test_writes_within_both_budgets_are_all_made(rig: Callable[[WriteBudgets], Rig]) -> None:
    made = rig(budgets())
    texts = [text(f"t{i}", 300) for i in range(3)]
    assert await put(made.store, "acme", *texts) == set(texts)
    assert await readable(made.store, "acme", *texts) == [True] * 3
    assert made.refused() == {}


async def test_a_write_over_the_live_bytes_is_refused_and_named(
    rig: Callable[[WriteBudgets], Rig], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    made = rig(budgets(per_minute=None))
    first, second, small = text("a", 700), text("b", 400), text("c", 300)
    assert await put(made.store, "acme", first) == {first}
    assert await refusals(made.store, "acme", second, small) == (
        Refused(WriteLimit.live_bytes, LIVE, 1, 400),
    )
    assert await readable(made.store, "acme", first, second, small) == [True, False, True]
    assert made.refused() == {WriteLimit.live_bytes: (1, 400)}
    [line] = [r.getMessage() for r in caplog.records if "write budget" in r.getMessage()]
    assert "live_bytes 1000: 1 write(s) of 400 bytes refused" in line
    assert "acme" not in line  # a digest of the scope, never the scope (it may hash a key)


async def test_a_write_over_the_rate_waits_for_the_bucket_to_refill(
    rig: Callable[[WriteBudgets], Rig],
) -> None:
    made = rig(budgets(live=None))
    burst = [text(f"b{i}", 500) for i in range(3)]
    assert await put(made.store, "acme", *burst) == set(burst)  # one minute's worth at once
    late = text("late", 500)
    assert await refusals(made.store, "acme", late) == (
        Refused(WriteLimit.bytes_per_minute, PER_MINUTE, 1, 500),
    )
    await made.elapse(19)  # 475 bytes refilled: not yet
    assert await put(made.store, "acme", late) == set()
    await made.elapse(1)  # 500
    assert await put(made.store, "acme", late) == {late}
    await made.elapse(600)  # never more than a minute's worth
    four = [text(f"f{i}", 500) for i in range(4)]
    assert await put(made.store, "acme", *four) == set(four[:3])


async def test_refreshing_what_is_stored_is_never_refused(
    rig: Callable[[WriteBudgets], Rig],
) -> None:
    made = rig(budgets(live=LIVE, per_minute=1000))
    held = text("held", 1000)
    assert await put(made.store, "acme", held) == {held}
    assert await put(made.store, "acme", held, text("new", 10)) == {held}
    for _ in range(3):
        await made.elapse(TTL - 10)  # each refresh keeps it alive another TTL
        assert await put(made.store, "acme", held) == {held}
    assert await readable(made.store, "acme", held) == [True]


async def test_expired_artifacts_stop_counting(rig: Callable[[WriteBudgets], Rig]) -> None:
    made = rig(budgets(per_minute=None))
    old, recent = text("old", 600), text("recent", 300)
    assert await put(made.store, "acme", old) == {old}
    await made.elapse(50)
    assert await put(made.store, "acme", recent) == {recent}
    new = text("new", 500)
    assert await put(made.store, "acme", new) == set()  # 900 live
    await made.elapse(51)  # old has expired, recent has not
    assert await put(made.store, "acme", new) == {new}
    assert await put(made.store, "acme", text("more", 300)) == set()  # 800 live


async def test_a_refreshed_artifact_keeps_counting_past_its_first_expiry(
    rig: Callable[[WriteBudgets], Rig],
) -> None:
    made = rig(budgets(per_minute=None))
    kept = text("kept", 800)
    assert await put(made.store, "acme", kept) == {kept}
    await made.elapse(60)
    assert await put(made.store, "acme", kept) == {kept}  # a refresh: lives until 160
    await made.elapse(60)  # past its first expiry (100), before its second
    assert await put(made.store, "acme", text("new", 300)) == set()
    await made.elapse(41)
    assert await put(made.store, "acme", text("new", 300)) == {text("new", 300)}


async def test_the_count_cap_frees_live_bytes_and_a_refusal_evicts_nothing(
    rig: Callable[[WriteBudgets], Rig],
) -> None:
    made = rig(budgets(per_minute=None))
    a, b = text("a", 400), text("b", 400)
    assert await put(made.store, "acme", a, b, cap=2) == {a, b}
    assert await put(made.store, "acme", text("c", 300), cap=2) == set()  # 1100 > 1000
    assert await readable(made.store, "acme", a, b) == [True, True]  # nothing evicted for it
    await made.elapse(1)
    c = text("c", 100)
    assert await put(made.store, "acme", c, cap=2) == {c}  # a evicted by the cap: 500 live
    assert await readable(made.store, "acme", a, b, c) == [False, True, True]
    d = text("d", 500)
    assert await put(made.store, "acme", d, cap=2) == {d}  # fits only because a went


async def test_sessions_and_sub_scopes_share_their_owners_budget(
    rig: Callable[[WriteBudgets], Rig],
) -> None:
    made = rig(budgets(per_minute=None))
    assert await put(made.store, "acme", text("own", 400)) == {text("own", 400)}
    session = text("session", 400)
    assert await put(made.store, SESSION, session) == {session}
    working_set = sub_scope(SESSION, "working-set")
    assert await put(made.store, working_set, text("ws", 400)) == set()  # 1200 > 1000
    assert await put(made.store, sub_scope("acme", "summaries"), text("s", 200)) == {text("s", 200)}
    assert await readable(made.store, SESSION, session) == [True]
    assert await readable(made.store, "acme", session) == [False]  # still its own scope


async def test_one_tenant_at_its_budget_leaves_another_unaffected(
    rig: Callable[[WriteBudgets], Rig],
) -> None:
    made = rig(budgets())
    full = [text(f"a{i}", 500) for i in range(2)]
    assert await put(made.store, "greedy", *full) == set(full)
    assert await put(made.store, "greedy", text("more", 10)) == set()
    other = [text(f"b{i}", 500) for i in range(2)]
    assert await put(made.store, "modest", *other) == set(other)
    assert await put(made.store, "modest#session:" + "0" * 32, text("x", 10)) == set()


async def test_a_tenant_budget_of_its_own_overrides_the_default(
    rig: Callable[[WriteBudgets], Rig],
) -> None:
    made = rig(WriteBudgets(WriteBudget(None, 100), {"big": WriteBudget(None, 10_000)}))
    assert await put(made.store, "small", text("s", 200)) == set()
    assert await put(made.store, "big", text("b", 5_000)) == {text("b", 5_000)}


async def test_without_budgets_nothing_is_refused(rig: Callable[[WriteBudgets], Rig]) -> None:
    made = rig(WriteBudgets())
    huge = [text(f"h{i}", 100_000) for i in range(5)]
    assert await put(made.store, "acme", *huge) == set(huge)


async def test_content_counts_its_utf8_bytes(rig: Callable[[WriteBudgets], Rig]) -> None:
    made = rig(budgets(per_minute=None))
    wide = "é" * 400  # 800 bytes
    assert await put(made.store, "acme", wide) == {wide}
    assert await refusals(made.store, "acme", "ü" * 101) == (
        Refused(WriteLimit.live_bytes, LIVE, 1, 202),
    )
