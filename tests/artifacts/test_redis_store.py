"""RedisStore's outage handling, on a store whose Redis calls are made to fail (no server needed).

The contract shared with MemoryStore is in test_store.py; these are what only RedisStore does: one
log line per incident (credentials masked), a count of failed operations for /metrics, and a
cancellation that a failing call swallowed is given back to the task.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from shared_redis import delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.redis_store import RedisStore, decode_value, encode_value
from proxy.artifacts.store import NewArtifact, StoreUnavailable

SECRET = b"test-secret-0123456789abcdef0123"


@pytest.fixture
async def store() -> AsyncIterator[RedisStore]:
    """A store whose server has a password and cannot be reached (every call is patched)."""
    unreachable = RedisStore(
        "redis://:hunter2@127.0.0.1:1/13", SECRET, socket_timeout=0.3, pool_timeout=0.3
    )
    yield unreachable
    await unreachable.close()


def store_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ctxproxy.artifacts"]


async def test_outage_is_counted_per_operation_and_logged_once_with_the_password_masked(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RedisConnectionError("invalid password 'hunter2' for user default")

    monkeypatch.setattr(store._redis, "ping", refuse)
    monkeypatch.setattr(store._redis, "get", refuse)
    assert store.failed_operations == 0
    assert await store.ping() is False
    for n in (2, 3, 4):
        with pytest.raises(StoreUnavailable):
            await store.get("t1", store.artifact_id("t1", "x"))
        assert store.failed_operations == n
    await read_fails_first(store, caplog)


async def read_fails_first(store: RedisStore, caplog: pytest.LogCaptureFixture) -> None:
    """The same outage, first noticed by a read."""
    caplog.clear()
    fresh = RedisStore("redis://:hunter2@127.0.0.1:1/13", SECRET)
    fresh._redis.get = store._redis.get  # type: ignore[method-assign]
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await fresh.get("t1", fresh.artifact_id("t1", "x"))
    finally:
        await fresh.close()
    assert str(caught.value) == "artifact store at 127.0.0.1:1 is unavailable"
    assert store_log(caplog) == [
        "artifact store at 127.0.0.1:1 unavailable: ConnectionError: "
        "invalid password '***' for user default"
    ]
    assert store_log(caplog) == [
        "artifact store at 127.0.0.1:1 unavailable: ConnectionError: "
        "invalid password '***' for user default"
    ]


async def test_a_cancellation_swallowed_by_a_failing_call_is_given_back(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel that races a socket timeout: the request must stop, not go on (e.g. upstream)."""
    went_on: list[str] = []

    async def time_out_while_cancelled(*args: Any, **kwargs: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # the cancel arrives ...
        raise RedisTimeoutError("Timeout reading from socket")  # ... and the timeout wins

    monkeypatch.setattr(store._redis, "ping", time_out_while_cancelled)

    async def request() -> None:
        await store.ping()
        went_on.append("called the upstream")

    task = asyncio.create_task(request())
    with pytest.raises(asyncio.CancelledError):
        await task
    assert went_on == []
    assert store.failed_operations == 0, "a cancellation is not a store failure"


# -- stored values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\x07garbage", "unknown artifact encoding byte b'\\x07'"),
        (b"\x00no separator", "artifact value has no header separator"),
        (b"\x00[1, 2]\ncontent", "artifact header is malformed"),
        (b'\x00{"k": "x", "m": []}\ncontent', "artifact header is malformed"),
    ],
)
def test_corrupt_values_are_named(raw: bytes, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        decode_value("art_1", raw)
    assert str(caught.value) == problem


def test_a_header_without_kind_or_time_still_decodes() -> None:
    artifact = decode_value("art_1", b'\x00{"m": {"a": 1}}\nthe content')
    assert (artifact.content, artifact.kind, artifact.meta, artifact.created_at) == (
        "the content", "", {"a": 1}, 0.0
    )


def test_values_are_compressed_only_over_the_threshold() -> None:
    item = NewArtifact("z" * 500, "k", {})
    size = len(encode_value(item, 1.0, compress_over=10**9)) - 1  # the raw body
    assert encode_value(item, 1.0, compress_over=size)[:1] == b"\x00"
    assert encode_value(item, 1.0, compress_over=size - 1)[:1] == b"\x01"


@pytest.fixture
async def live() -> AsyncIterator[tuple[RedisStore, redis.asyncio.Redis, str]]:
    url = require_shared_redis()
    prefix = unique_prefix()
    client = redis.asyncio.Redis.from_url(url)
    real = RedisStore(url, SECRET, key_prefix=prefix)
    try:
        yield real, client, prefix
    finally:
        await real.close()
        await delete_prefix(client, prefix)
        await client.aclose()


async def test_large_values_round_trip(
    live: tuple[RedisStore, redis.asyncio.Redis, str],
) -> None:
    real, _, _ = live
    content = secrets.token_urlsafe(1_200_000) + " ünïcødé"  # > 1 MiB even when compressed
    aid = real.artifact_id("t1", content)
    item = NewArtifact(content, "k", {"n": 1})
    assert await real.put_many("t1", {aid: item}, ttl_seconds=60, max_per_scope=9) == {aid}
    got = await real.get("t1", aid)
    assert got is not None and (got.id, got.content, got.meta) == (aid, content, {"n": 1})


async def test_an_unreadable_value_is_logged_and_reads_as_missing(
    live: tuple[RedisStore, redis.asyncio.Redis, str], caplog: pytest.LogCaptureFixture
) -> None:
    real, client, prefix = live
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    aid = real.artifact_id("t1", "whatever")
    await client.set(f"{prefix}{{{real._tag('t1')}}}:a:{aid}", b"\x00no separator")
    assert await real.get("t1", aid) is None
    assert store_log(caplog) == [
        f"artifact {aid} is unreadable and is treated as missing: "
        "artifact value has no header separator"
    ]
