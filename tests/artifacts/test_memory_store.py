"""MemoryStore on a controlled clock: the exact expiry instant, eviction around expired entries,
periodic sweeps, and the secret's validation (the shared contract is in test_store.py)."""

from __future__ import annotations

import hashlib
import hmac
import sys

import pytest

from proxy.artifacts import store as store_module
from proxy.artifacts.store import MemoryStore, NewArtifact, compute_artifact_id

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


# -- mutation run 4: the exact bounds of the limits, the sweep's schedule, the id's formula -------


def size(text: str) -> int:
    """What the store counts for an artifact of `text` (the content object + 512 bytes)."""
    return sys.getsizeof(text) + 512


async def put_in(store: MemoryStore, scope: str, text: str, *, ttl: int, cap: int = 9) -> None:
    items = {store.artifact_id(scope, text): NewArtifact(text, "k", {})}
    assert await store.put_many(scope, items, ttl_seconds=ttl, max_per_scope=cap) == set(items)


async def test_the_default_sweep_runs_every_60_s_from_the_stores_creation() -> None:
    clock = Clock()
    store = MemoryStore(SECRET, clock=clock)  # created at 1000: first sweep due at 1060
    assert store.held_bytes == 0
    clock.now = 1_050.0
    await put_in(store, "t1", "a", ttl=10)  # expires exactly at 1060
    assert store.held_bytes == size("a")
    clock.now = 1_060.0
    await put_in(store, "t2", "b", ttl=5)  # due: sweeps "a" (expired exactly now)
    assert store.held_bytes == size("b")
    clock.now = 1_119.0
    await put_in(store, "t3", "c", ttl=100)  # "b" expired at 1065, next sweep due at 1120
    assert store.held_bytes == size("b") + size("c")
    clock.now = 1_120.0
    await put_in(store, "t3", "d", ttl=100)
    assert store.held_bytes == size("c") + size("d")
    await store.close()
    assert store.held_bytes == 0


async def test_a_scope_exactly_at_its_cap_is_not_trimmed() -> None:
    clock = Clock()
    store = MemoryStore(SECRET, clock=clock, sweep_interval=10_000)
    await put_in(store, "t1", "a", ttl=5, cap=2)
    clock.now += 10  # "a" expired, still held
    await put_in(store, "t1", "b", ttl=100, cap=2)
    assert store.held_bytes == size("a") + size("b")
    await put_in(store, "t1", "c", ttl=100, cap=2)  # over the cap: the expired one goes first
    assert store.held_bytes == size("b") + size("c")


@pytest.mark.parametrize(
    ("budget", "kept"),
    [
        (2 * size("aaa") - 1, ["ccc"]),  # two are one byte over: only the newest stays
        (2 * size("aaa"), ["bbb", "ccc"]),  # exactly the budget once "aaa" went: no more
    ],
)
async def test_the_budget_evicts_until_exactly_within_it(budget: int, kept: list[str]) -> None:
    store = MemoryStore(SECRET, max_bytes=budget)
    for text in ("aaa", "bbb", "ccc"):
        await put_in(store, "t1", text, ttl=100)
    assert [t for t in ("aaa", "bbb", "ccc") if await readable(store, t)] == kept
    assert store.held_bytes == len(kept) * size("aaa") <= budget


async def test_a_budget_exceeded_by_one_byte_evicts() -> None:
    store = MemoryStore(SECRET, max_bytes=2 * size("aaa") - 1)
    await put_in(store, "t1", "aaa", ttl=100)
    await put_in(store, "t1", "bbb", ttl=100)
    assert [await readable(store, "aaa"), await readable(store, "bbb")] == [False, True]


@pytest.mark.parametrize("max_bytes", [0, -1])
def test_the_budget_must_be_positive(max_bytes: int) -> None:
    with pytest.raises(ValueError, match=rf"^max_bytes must be > 0, got {max_bytes}$"):
        MemoryStore(SECRET, max_bytes=max_bytes)


async def test_a_budget_of_one_byte_is_allowed() -> None:
    store = MemoryStore(SECRET, max_bytes=1)
    await put_in(store, "t1", "a", ttl=100)  # kept: the batch being put is never evicted
    assert await readable(store, "a")


async def test_invalid_put_arguments_are_named() -> None:
    store = MemoryStore(SECRET)
    items = {store.artifact_id("t1", "x"): NewArtifact("x", "k", {})}
    with pytest.raises(ValueError, match=r"^ttl_seconds must be > 0, got 0$"):
        await store.put_many("t1", items, ttl_seconds=0, max_per_scope=9)
    with pytest.raises(ValueError, match=r"^max_per_scope must be > 0, got -1$"):
        await store.put_many("t1", items, ttl_seconds=10, max_per_scope=-1)


async def test_a_claim_expires_at_exactly_its_ttl_and_expired_claims_go_at_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store_module, "MAX_CLAIMS", 2)
    clock = Clock()
    store = MemoryStore(SECRET, clock=clock)
    assert await store.claim("t1", "a", ttl_seconds=5)
    assert await store.claim("t1", "b", ttl_seconds=5)
    clock.now += 4.999
    assert not await store.claim("t1", "a", ttl_seconds=5)
    clock.now = 1_005.0  # both expire exactly now
    assert await store.claim("t1", "a", ttl_seconds=5)  # at the limit: the expired ones go
    assert store.held_claims == 1  # "b" went; "a" is held until 1_010
    clock.now = 1_009.999
    assert not await store.claim("t1", "a", ttl_seconds=5)
    clock.now = 1_010.0
    assert await store.claim("t1", "a", ttl_seconds=5)


def test_an_id_is_the_hmac_of_the_length_prefixed_scope_and_the_content() -> None:
    scope, content = "t\u00e9", "x\ud800"  # a lone surrogate is hashed as written
    message = b"\x00\x00\x00\x03" + "t\u00e9".encode() + b"\x00" + b"x\xed\xa0\x80"
    digest = hmac.new(SECRET, message, hashlib.sha256).hexdigest()
    assert compute_artifact_id(SECRET, scope, content) == "art_" + digest[:32]
