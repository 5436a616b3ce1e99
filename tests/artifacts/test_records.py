"""Request records in the store: per scope, newest first, filtered, paged, bounded and expiring;
the same behaviour from `MemoryRecords` and from `RedisRecords` on the real test Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis.asyncio
from shared_redis import age_keys, delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.records import (
    MemoryRecords,
    RecordQuery,
    RecordStore,
    StoredRecord,
    UnknownRecord,
)
from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import StoreUnavailable

SECRET = b"test-secret"
TTL = 3600
MAX = 5


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Kept:
    store: RecordStore
    clock: Clock
    redis: redis.asyncio.Redis | None = None
    prefix: str = ""

    async def age(self, seconds: float) -> None:
        """Time passes: the clock, and on Redis the keys' TTLs."""
        self.clock.now += seconds
        if self.redis is not None:
            await age_keys(self.redis, self.prefix, seconds)


@pytest.fixture(params=["memory", "redis"])
async def kept(request: pytest.FixtureRequest) -> AsyncIterator[Kept]:
    if request.param == "memory":
        clock = Clock()
        yield Kept(MemoryRecords(ttl_seconds=TTL, max_records=MAX, clock=clock), clock)
        return
    async for on_redis in redis_kept():
        yield on_redis


@pytest.fixture(name="redis_kept")
async def redis_kept_fixture() -> AsyncIterator[Kept]:
    async for on_redis in redis_kept():
        yield on_redis


async def redis_kept() -> AsyncIterator[Kept]:
    clock = Clock()
    url, prefix = require_shared_redis(), unique_prefix()
    store = RedisStore(url, SECRET, key_prefix=prefix, clock=clock)
    client = redis.asyncio.Redis.from_url(url)
    try:
        yield Kept(store.request_records(ttl_seconds=TTL, max_records=MAX), clock, client, prefix)
    finally:
        await store.close()
        await delete_prefix(client, prefix)
        await client.aclose()


def rid(n: int) -> str:
    return f"{n:032x}"


def record(n: int, time: float, **summary: Any) -> StoredRecord:
    fields = {"request_id": rid(n), "time": time, "tenant": "acme", "status": 200,
              "outcome": "ok", "model": "gpt-4o", "session": None, "policy": "default"}  # fmt: skip
    fields.update(summary)
    return StoredRecord(rid(n), time, fields, {"manifest": {"n": n}})


async def add_all(kept: Kept, scope: str, records: list[StoredRecord]) -> None:
    """One write each."""
    for one in records:
        await kept.store.add_many([(scope, one)])


async def ids(kept: Kept, scopes: list[str] | None, **query: Any) -> tuple[list[str], bool]:
    page = await kept.store.page(scopes, RecordQuery(**query))
    return [item["request_id"] for item in page.data], page.has_more


async def test_newest_first_and_paged_with_before(kept: Kept) -> None:
    now = kept.clock.now
    await add_all(kept, "acme", [record(n, now + n) for n in (1, 3, 2, 4)])
    assert await ids(kept, ["acme"]) == ([rid(4), rid(3), rid(2), rid(1)], False)
    assert await ids(kept, ["acme"], limit=2) == ([rid(4), rid(3)], True)
    assert await ids(kept, ["acme"], limit=2, before=rid(3)) == ([rid(2), rid(1)], False)
    assert await ids(kept, ["acme"], limit=1, before=rid(2)) == ([rid(1)], False)
    assert await ids(kept, ["acme"], before=rid(1)) == ([], False)
    with pytest.raises(UnknownRecord):
        await kept.store.page(["acme"], RecordQuery(before=rid(99)))


async def test_same_time_is_ordered_by_request_id(kept: Kept) -> None:
    now = kept.clock.now
    await add_all(kept, "acme", [record(n, now) for n in (2, 1, 3)])
    assert await ids(kept, ["acme"]) == ([rid(3), rid(2), rid(1)], False)


async def test_filters(kept: Kept) -> None:
    now = kept.clock.now
    await add_all(
        kept,
        "acme",
        [
            record(1, now + 1, status=400, outcome="refused"),
            record(2, now + 2, model="claude", session="s1"),
            record(3, now + 3, session="s1"),
            record(4, now + 4, status=502, outcome="upstream_error"),
        ],
    )
    assert await ids(kept, ["acme"], status=400) == ([rid(1)], False)
    assert await ids(kept, ["acme"], outcome="upstream_error") == ([rid(4)], False)
    assert await ids(kept, ["acme"], model="claude") == ([rid(2)], False)
    assert await ids(kept, ["acme"], session="s1") == ([rid(3), rid(2)], False)
    assert await ids(kept, ["acme"], session="s1", limit=1) == ([rid(3)], True)
    assert await ids(kept, ["acme"], outcome="ok", before=rid(3)) == ([rid(2)], False)
    assert await ids(kept, ["acme"], tenant="globex") == ([], False)


async def test_scopes_are_apart_and_none_reads_all(kept: Kept) -> None:
    now = kept.clock.now
    await kept.store.add_many([("acme", record(1, now + 1))])
    await kept.store.add_many([("globex", record(2, now + 2, tenant="globex"))])
    assert await ids(kept, ["acme"]) == ([rid(1)], False)
    assert await ids(kept, ["globex"]) == ([rid(2)], False)
    assert await ids(kept, None) == ([rid(2), rid(1)], False)
    assert await ids(kept, None, tenant="acme") == ([rid(1)], False)
    assert await kept.store.get(["acme"], rid(2)) is None
    whole = await kept.store.get(None, rid(2))
    assert whole is not None and whole["tenant"] == "globex" and whole["manifest"] == {"n": 2}
    with pytest.raises(UnknownRecord):
        await kept.store.page(["acme"], RecordQuery(before=rid(2)))


async def test_at_most_max_records_per_scope_oldest_go(kept: Kept) -> None:
    now = kept.clock.now
    await add_all(kept, "acme", [record(n, now + n) for n in range(1, MAX + 3)])
    await kept.store.add_many([("globex", record(100, now))])
    found, _ = await ids(kept, ["acme"], limit=50)
    assert found == [rid(n) for n in range(MAX + 2, 2, -1)]
    assert await kept.store.get(["acme"], rid(1)) is None
    assert await ids(kept, ["globex"]) == ([rid(100)], False)
    if kept.redis is not None:  # the evicted records' keys are gone, not left to expire
        keys = [k async for k in kept.redis.scan_iter(match=f"{kept.prefix}*rec:[sd]:*")]
        assert len(keys) == 2 * (MAX + 1)


async def test_records_expire_after_the_ttl(kept: Kept) -> None:
    now = kept.clock.now
    await kept.store.add_many([("acme", record(1, now))])
    await kept.age(TTL / 2)
    await kept.store.add_many([("acme", record(2, kept.clock.now))])
    assert await ids(kept, ["acme"]) == ([rid(2), rid(1)], False)
    await kept.age(TTL / 2 + 1)
    assert await ids(kept, ["acme"]) == ([rid(2)], False)
    assert await kept.store.get(["acme"], rid(1)) is None
    assert await kept.store.get(["acme"], rid(2)) is not None
    await kept.age(TTL)
    assert await ids(kept, None) == ([], False)


async def test_summaries_reads_every_match(kept: Kept) -> None:
    now = kept.clock.now
    policies = {1: "p", 2: "q", 3: "p"}
    await add_all(kept, "acme", [record(n, now + n, policy=p) for n, p in policies.items()])
    found = await kept.store.summaries(["acme"], RecordQuery(policy="p"))
    assert [s["request_id"] for s in found] == [rid(3), rid(1)]
    assert all("manifest" not in s for s in found)


async def test_a_redis_that_is_down_raises_store_unavailable() -> None:
    store = RedisStore("redis://127.0.0.1:1/0", SECRET, socket_timeout=0.5)
    records = store.request_records(ttl_seconds=TTL, max_records=MAX)
    try:
        with pytest.raises(StoreUnavailable):
            await records.add_many([("acme", record(1, 0.0))])
        with pytest.raises(StoreUnavailable):
            await records.page(["acme"], RecordQuery())
        with pytest.raises(StoreUnavailable):
            await records.get(None, rid(1))
        assert store.failed_operations >= 3
    finally:
        await store.close()


async def test_one_batch_over_two_scopes_keeps_the_same(kept: Kept) -> None:
    now = kept.clock.now
    batch = [(scope, record(n + (100 if scope == "globex" else 0), now + n))
             for n in range(1, MAX + 3) for scope in ("acme", "globex")]  # fmt: skip
    await kept.store.add_many(batch)
    assert (await ids(kept, ["acme"]))[0] == [rid(n) for n in range(MAX + 2, 2, -1)]
    assert (await ids(kept, ["globex"]))[0] == [rid(n + 100) for n in range(MAX + 2, 2, -1)]
    assert len((await ids(kept, None, limit=200))[0]) == 2 * MAX


async def test_redis_loads_its_script_again_after_a_flush(redis_kept: Kept) -> None:
    kept = redis_kept
    assert kept.redis is not None
    now = kept.clock.now
    await kept.store.add_many([("acme", record(1, now))])
    await kept.redis.script_flush()
    await kept.store.add_many([("acme", record(2, now + 1))])
    assert await ids(kept, ["acme"]) == ([rid(2), rid(1)], False)
