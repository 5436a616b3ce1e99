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
from redis.asyncio.client import Pipeline
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from shared_redis import delete_prefix, require_shared_redis, scope_keys, unique_prefix

from proxy.artifacts.redis_checks import eviction_policy_warning
from proxy.artifacts.redis_store import RedisStore, encode_value
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
    name = f"{scope_keys(prefix, 't1')}claim:{digest}"
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
    monkeypatch.setattr(down.client, "set", refuse)
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
            assert all(fresh.pinned("t1", aid) for aid in items)
        assert not any(fresh.pinned("t1", aid) for aid in items)
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
    await client.set(f"{scope_keys(prefix, 't1')}a:{bad}", b"\x00no separator")
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
    monkeypatch.setattr(down.client, "mget", refuse)
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
        ({"maxmemory": 1 << 30}, []),  # no policy in INFO: none assumed
        (
            {"maxmemory": 0, "maxmemory_policy": "noeviction"},
            [
                (
                    logging.WARNING,
                    "artifact store at 127.0.0.1:1: Redis has no maxmemory: artifacts grow until "
                    "the host runs out of memory; set maxmemory (with maxmemory-policy "
                    "noeviction) sized for the artifacts' TTL",
                )
            ],
        ),
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

    monkeypatch.setattr(down.client, "info", answer)
    caplog.set_level(logging.DEBUG, logger="ctxproxy.artifacts")
    await down.check_eviction_policy()
    assert store_log(caplog) == logged


# -- the connection pool, compression and partial failures ---------------------------------------


@pytest.mark.parametrize(
    ("given", "socket_timeout", "connect_timeout"),
    [({}, 2.0, 2.0), ({"socket_timeout": 5.0}, 5.0, 5.0), ({"connect_timeout": 0.5}, 2.0, 0.5)],
)
async def test_the_pool_is_configured_as_documented(
    given: dict[str, float], socket_timeout: float, connect_timeout: float
) -> None:
    """32 connections, a 2 s wait for a free one, 2 s socket timeouts (connecting too unless a
    connect timeout is given) and one immediate retry on a stale connection."""
    store = RedisStore("redis://127.0.0.1:6379/13", SECRET, **given)  # type: ignore[arg-type]
    try:
        pool = store.client.connection_pool
        assert (pool.max_connections, pool.timeout) == (32, 2.0)
        kwargs = pool.connection_kwargs
        assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (
            socket_timeout,
            connect_timeout,
        )
        retry = kwargs["retry"]
        assert isinstance(retry._backoff, NoBackoff) and retry._retries == 1
    finally:
        await store.close()


async def test_values_over_4096_bytes_are_compressed_by_default(live: Live) -> None:
    _, client, prefix = live
    store = RedisStore(require_shared_redis(), SECRET, key_prefix=prefix, clock=lambda: 1e9)
    stored = {}
    try:
        for extra in (0, 1):
            text = "0" * 4000  # a body (header, newline, content) of 4096 bytes, then 4097
            probe = encode_value(NewArtifact(text, "k", {}), 1e9, compress_over=1 << 30)
            text += "0" * (4096 + extra - (len(probe) - 1))
            aid = store.artifact_id("t1", text)
            items = {aid: NewArtifact(text, "k", {})}
            assert await store.put_many("t1", items, ttl_seconds=60, max_per_scope=9) == {aid}
            stored[extra] = await client.get(f"{scope_keys(prefix, 't1')}a:{aid}")
            got = await store.get("t1", aid)
            assert got is not None and got.content == text
    finally:
        await store.close()
    assert (stored[0][:1], stored[1][:1]) == (b"\x00", b"\x01")


async def test_a_broken_index_still_stores_and_confirms_the_payloads(
    live: Live, caplog: pytest.LogCaptureFixture
) -> None:
    """A scope's index that is not a sorted set (WRONGTYPE for ZADD and ZRANGE): the payloads
    are written and confirmed, nothing is evicted, the errors are counted and logged."""
    store, client, prefix = live
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    await client.set(f"{scope_keys(prefix, 't1')}idx", b"not a sorted set")
    items = {store.artifact_id("t1", t): NewArtifact(t, "k", {}) for t in ("a", "b")}
    assert await store.put_many("t1", items, ttl_seconds=60, max_per_scope=1) == set(items)
    assert set(await store.get_many("t1", list(items))) == set(items)
    assert store.failed_operations == 1
    where = "artifact store at 127.0.0.1:6379"
    assert [line for _, line in store_log(caplog)] == [
        f"{where} unavailable: ResponseError: "
        "WRONGTYPE Operation against a key holding the wrong kind of value",
        f"{where} available again",  # the payloads' write went through
    ]


async def test_a_write_refused_for_one_payload_confirms_the_others(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis answers each command of a pipeline on its own: a refused SET (here the second,
    e.g. OOM) fails that artifact only."""
    store, _, _ = live
    original = Pipeline.execute

    async def second_set_refused(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        names = [str(args[0]).upper() for args, _ in self.command_stack]
        results: list[Any] = await original(self, False)
        if names.count("SET") == 2:
            results[1] = ResponseError("OOM command not allowed")
            if raise_on_error:
                raise results[1]
        return results

    monkeypatch.setattr(Pipeline, "execute", second_set_refused)
    items = {store.artifact_id("t1", t): NewArtifact(t, "k", {}) for t in ("first", "second")}
    confirmed = await store.put_many("t1", items, ttl_seconds=60, max_per_scope=9)
    assert confirmed == {store.artifact_id("t1", "first")}
