"""MemoryStore on a controlled clock: the exact expiry instant, eviction around expired entries,
periodic sweeps, and the secret's validation (the shared contract is in test_store.py)."""

from __future__ import annotations

import pytest

from proxy.artifacts.store import MemoryStore, NewArtifact

SECRET = b"memory-store-secret"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def put(store: MemoryStore, text: str, *, ttl: int, cap: int = 9) -> bool:
    aid = store.artifact_id("t1", text)
    items = {aid: NewArtifact(text, "k", {})}
    return await store.put_many("t1", items, ttl_seconds=ttl, max_per_scope=cap) == {aid}


async def readable(store: MemoryStore, text: str) -> bool:
    return await store.get("t1", store.artifact_id("t1", text)) is not None


async def test_an_artifact_expires_at_exactly_its_ttl() -> None:
    clock = Clock()
    store = MemoryStore(SECRET, clock=clock)
    assert await put(store, "x", ttl=10)
    clock.now += 9.999
    assert await readable(store, "x")
    clock.now = 1_010.0
    assert not await readable(store, "x")


async def test_the_cap_drops_what_expired_before_a_live_artifact() -> None:
    clock = Clock()
    store = MemoryStore(SECRET, clock=clock, sweep_interval=10_000)  # no sweep in between
    assert await put(store, "old but live", ttl=1_000, cap=2)
    clock.now += 10
    assert await put(store, "expires at 100", ttl=90, cap=2)
    clock.now += 90  # "expires at 100" expires now
    assert await put(store, "new", ttl=1_000, cap=2)
    assert await readable(store, "old but live") and await readable(store, "new")


async def test_puts_keep_working_across_several_sweeps() -> None:
    clock = Clock()
    store = MemoryStore(SECRET, clock=clock, sweep_interval=60)
    for n in range(4):
        assert await put(store, f"item {n}", ttl=30)
        clock.now += 61
    assert not await readable(store, "item 0")
    assert await put(store, "last", ttl=30) and await readable(store, "last")


@pytest.mark.parametrize("secret", [b"", "text"])
def test_the_secret_must_be_non_empty_bytes(secret: object) -> None:
    with pytest.raises(ValueError, match=r"^artifact store secret must be non-empty bytes$"):
        MemoryStore(secret)  # type: ignore[arg-type]


async def test_a_sweep_keeps_the_live_artifacts_of_every_scope() -> None:
    clock = Clock()
    store = MemoryStore(SECRET, clock=clock, sweep_interval=60)
    assert await put(store, "live", ttl=1_000)
    clock.now += 61
    other = {store.artifact_id("t2", "y"): NewArtifact("y", "k", {})}
    assert await store.put_many("t2", other, ttl_seconds=10, max_per_scope=9)  # sweeps
    assert await readable(store, "live")


async def test_a_put_refreshes_a_live_artifact_and_replaces_an_expired_one() -> None:
    clock = Clock()
    store = MemoryStore(SECRET, clock=clock)
    aid = store.artifact_id("t1", "x")

    async def put_meta(version: int) -> None:
        items = {aid: NewArtifact("x", "k", {"v": version})}
        assert await store.put_many("t1", items, ttl_seconds=10, max_per_scope=9) == {aid}

    await put_meta(1)
    clock.now += 5
    await put_meta(2)  # live: refreshed, not replaced
    got = await store.get("t1", aid)
    assert got is not None and (got.meta, got.created_at) == ({"v": 1}, 1_000.0)
    clock.now += 10  # expires exactly now (refreshed at 1005 for 10 s)
    await put_meta(3)
    got = await store.get("t1", aid)
    assert got is not None and (got.meta, got.created_at) == ({"v": 3}, 1_015.0)
