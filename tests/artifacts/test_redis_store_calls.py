"""RedisStore's claims, batch reads and start-up check, word for word: the keys a claim takes, its
expiry, what an outage answers and logs, and the lines the eviction-policy check writes.

(Mutation run 4: these pin what test_redis_store.py and the store contract left open.)
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError as RedisConnectionError
from shared_redis import delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.redis_store import RedisStore, eviction_policy_warning
from proxy.artifacts.store import NewArtifact, StoreUnavailable

SECRET = b"test-secret-0123456789abcdef0123"

Live = tuple[RedisStore, redis.asyncio.Redis, str]


@pytest.fixture
async def live() -> AsyncIterator[Live]:
    url = require_shared_redis()
    prefix = unique_prefix()
    client = redis.asyncio.Redis.from_url(url)
    store = RedisStore(url, SECRET, key_prefix=prefix)
    try:
        yield store, client, prefix
    finally:
        await store.close()
        await delete_prefix(client, prefix)
        await client.aclose()


@pytest.fixture
async def down() -> AsyncIterator[RedisStore]:
    """A store whose every call is made to fail (patched per test; no server needed)."""
    store = RedisStore("redis://127.0.0.1:1/13", SECRET, socket_timeout=0.3, pool_timeout=0.3)
    yield store
    await store.close()


def store_log(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "ctxproxy.artifacts"]


async def refuse(*args: Any, **kwargs: Any) -> Any:
    raise RedisConnectionError("Connection refused")


# -- claims -----------------------------------------------------------------------------------


async def test_a_claim_is_one_key_named_by_the_sha256_of_its_key(live: Live) -> None:
    store, client, prefix = live
    key = "making:\ud800"  # a lone surrogate (the stdlib JSON parser lets one through) is a key
    assert await store.claim("t1", key, ttl_seconds=30)
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    name = f"{prefix}{{{store._tag('t1')}}}:claim:{digest}"
    assert [k.decode() async for k in client.scan_iter(match=f"{prefix}*")] == [name]
    assert 29_000 < await client.pttl(name) <= 30_000
    assert not await store.claim("t1", key, ttl_seconds=30)


@pytest.mark.parametrize("ttl", [0, 1])
async def test_a_claim_lasts_its_ttl_and_at_least_a_second(live: Live, ttl: int) -> None:
    store, client, prefix = live
    assert await store.claim("t1", "k", ttl_seconds=ttl)
    keys = [k async for k in client.scan_iter(match=f"{prefix}*")]
    assert len(keys) == 1
    assert 0 < await client.pttl(keys[0]) <= 1000


async def test_a_claim_the_store_cannot_answer_is_not_taken_and_is_logged(
    down: RedisStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    monkeypatch.setattr(down._redis, "set", refuse)
    assert await down.claim("t1", "k", ttl_seconds=30) is False
    assert down.failed_operations == 1
    assert store_log(caplog) == [
        (
            logging.WARNING,
            "artifact store at 127.0.0.1:1 unavailable: ConnectionError: Connection refused",
        )
    ]


# -- get_many ---------------------------------------------------------------------------------


async def test_get_many_reads_each_artifact_under_its_own_id_and_pins_it_in_its_scope(
    live: Live,
) -> None:
    store, _, _ = live
    items = {store.artifact_id("t1", t): NewArtifact(t, "k", {"n": t}) for t in ("a", "b")}
    assert await store.put_many("t1", items, ttl_seconds=60, max_per_scope=9) == set(items)
    fresh = RedisStore(require_shared_redis(), SECRET, key_prefix=live[2])
    try:
        with fresh.lease():
            found = await fresh.get_many("t1", list(items))
            assert all(fresh._leases.pinned("t1", aid) for aid in items)
        assert fresh._leases.count == 0
    finally:
        await fresh.close()
    assert {aid: (a.id, a.content, a.meta) for aid, a in found.items()} == {
        aid: (aid, item.content, item.meta) for aid, item in items.items()
    }


async def test_get_many_logs_an_unreadable_value_and_leaves_it_out(
    live: Live, caplog: pytest.LogCaptureFixture
) -> None:
    store, client, prefix = live
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    good = store.artifact_id("t1", "good")
    await store.put_many(
        "t1", {good: NewArtifact("good", "k", {})}, ttl_seconds=60, max_per_scope=9
    )
    bad = store.artifact_id("t1", "bad")
    await client.set(f"{prefix}{{{store._tag('t1')}}}:a:{bad}", b"\x00no separator")
    assert list(await store.get_many("t1", [bad, good])) == [good]
    assert store_log(caplog) == [
        (
            logging.WARNING,
            f"artifact {bad} is unreadable and is treated as missing: "
            "artifact value has no header separator",
        )
    ]


async def test_get_many_on_an_outage_raises_and_logs_what_failed(
    down: RedisStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    monkeypatch.setattr(down._redis, "mget", refuse)
    with pytest.raises(StoreUnavailable) as caught:
        await down.get_many("t1", [down.artifact_id("t1", "x")])
    assert str(caught.value) == "artifact store at 127.0.0.1:1 is unavailable"
    assert down.failed_operations == 1
    assert store_log(caplog) == [
        (
            logging.WARNING,
            "artifact store at 127.0.0.1:1 unavailable: ConnectionError: Connection refused",
        )
    ]


# -- the start-up check of the eviction policy --------------------------------------------------


def test_the_eviction_policy_warning_word_for_word() -> None:
    assert eviction_policy_warning("allkeys-lru") == (
        "Redis maxmemory-policy is allkeys-lru: when Redis is full it evicts artifacts that "
        "prompts still reference (any tenant's); set maxmemory-policy noeviction"
    )


@pytest.mark.parametrize(
    ("info", "logged"),
    [
        (
            {"maxmemory_policy": "volatile-ttl"},
            [
                (
                    logging.WARNING,
                    "artifact store at 127.0.0.1:1: Redis maxmemory-policy is volatile-ttl: when "
                    "Redis is full it evicts artifacts that prompts still reference (any "
                    "tenant's); set maxmemory-policy noeviction",
                )
            ],
        ),
        ({"maxmemory": 0}, []),  # no policy in INFO (a managed Redis may hide it): none assumed
        (OSError("down"), [(logging.DEBUG, "maxmemory-policy not checked: OSError")]),
    ],
)
async def test_the_start_up_check_logs_exactly(
    down: RedisStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    info: dict[str, Any] | Exception,
    logged: list[tuple[int, str]],
) -> None:
    async def answer(*_: Any) -> dict[str, Any]:
        if isinstance(info, Exception):
            raise info
        return info

    monkeypatch.setattr(down._redis, "info", answer)
    caplog.set_level(logging.DEBUG, logger="ctxproxy.artifacts")
    await down.check_eviction_policy()
    assert store_log(caplog) == logged
