"""What only the Redis store's write budgets do: an owner's keys (its sessions' and sub-scopes'
included) under one hash tag, the accounting in the same round trips as the writes, scripts
loaded again after Redis lost them, and a write error inside the script counted as an outage."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
from artifacts_harness import keyed
from redis.asyncio.client import Pipeline
from redis.exceptions import OutOfMemoryError, ResponseError
from redis_process import RedisProcess, require_redis_server
from shared_redis import (
    REDIS_URL,
    delete_prefix,
    record_pipelines,
    require_shared_redis,
    unique_prefix,
)

from proxy.artifacts.budgets import WriteBudget, WriteBudgets, sub_scope
from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import NewArtifact

SECRET = b"test-secret-0123456789abcdef0123"
SESSION = "acme#session:" + "7" * 32
LIMITS = WriteBudgets(WriteBudget(bytes_per_minute=10_000, live_bytes=10_000))

Live = tuple[RedisStore, redis.asyncio.Redis, str]


@pytest.fixture
async def live() -> AsyncIterator[Live]:
    url = require_shared_redis()
    prefix = unique_prefix()
    client = redis.asyncio.Redis.from_url(url)
    store = RedisStore(REDIS_URL, SECRET, key_prefix=prefix, budgets=LIMITS)
    try:
        yield store, client, prefix
    finally:
        await store.close()
        await delete_prefix(client, prefix)
        await client.aclose()


@pytest.fixture
def pipelines(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The command names of every pipeline round trip."""
    return record_pipelines(monkeypatch)


def tag(scope: str) -> str:
    return hashlib.sha256(scope.encode()).hexdigest()[:24]


async def put(store: RedisStore, scope: str, *texts: str) -> set[str]:
    items = keyed(store, scope, *(NewArtifact(t, "k", {}) for t in texts))
    confirmed = await store.put_many(scope, items, ttl_seconds=600, max_per_scope=100)
    return {t for t in texts if store.artifact_id(scope, t) in confirmed}


async def test_every_key_of_an_owner_carries_its_hash_tag(live: Live) -> None:
    store, client, prefix = live
    for scope in ("acme", SESSION, sub_scope(SESSION, "working-set"), sub_scope("acme", "s")):
        assert await put(store, scope, f"content of {scope!r}") == {f"content of {scope!r}"}
    keys = sorted([k.decode() async for k in client.scan_iter(match=f"{prefix}*")])
    owner = f"{prefix}{{{tag('acme')}}}:"
    assert all(k.startswith(owner) for k in keys), keys
    session = f"{owner}{tag(SESSION)}:"
    assert f"{owner}idx" in keys and f"{session}idx" in keys
    assert {f"{owner}live", f"{owner}exp", f"{owner}rate"} <= set(keys)
    aid = store.artifact_id(SESSION, f"content of {SESSION!r}")
    assert f"{session}a:{aid}" in keys
    assert (
        await client.hget(f"{owner}live", f"{tag(SESSION)}:a:{aid}")
        == str(len(f"content of {SESSION!r}")).encode()
    )
    assert 590 <= await client.ttl(f"{owner}live") <= 600


async def test_budgets_cost_no_round_trip(live: Live, pipelines: list[list[str]]) -> None:
    store, _, _ = live
    texts = [f"payload {i} " * 100 for i in range(3)]
    assert await put(store, "acme", *texts) == set(texts)
    assert len(pipelines) == 2, "first write: the refresh, then the script that writes"
    assert pipelines[0][-1] == "EVALSHA" and pipelines[1] == ["EVALSHA"]
    pipelines.clear()
    assert await put(store, "acme", *texts) == set(texts)
    assert len(pipelines) == 1, "a repeat write is one round trip"
    assert pipelines[0].count("EXPIRE") == 4 and pipelines[0][-1] == "EVALSHA"


async def test_scripts_lost_by_redis_are_loaded_again(live: Live) -> None:
    store, client, _ = live
    assert await put(store, "acme", "first") == {"first"}
    await client.script_flush()
    assert await put(store, "acme", "first", "second") == {"first", "second"}
    await client.script_flush()
    assert await put(store, "acme", "first", "second") == {"first", "second"}  # touch only
    assert store.failed_operations == 0


@pytest.fixture
async def full_redis() -> AsyncIterator[tuple[RedisStore, redis.asyncio.Redis]]:
    """A private Redis just over its maxmemory (noeviction), and a store with budgets on it."""
    server = RedisProcess(require_redis_server())
    server.start()
    client = redis.asyncio.Redis.from_url(server.url)
    store = RedisStore(server.url, SECRET, budgets=LIMITS)
    try:
        used = int((await client.info("memory"))["used_memory"])
        await client.config_set("maxmemory-policy", "noeviction")
        await client.config_set("maxmemory", used + 1024 * 1024)
        for i in range(100):  # until Redis refuses: it is over maxmemory
            try:
                await client.set(f"filler:{i}", b"f" * 64 * 1024)
            except OutOfMemoryError:
                break
        yield store, client
    finally:
        await store.close()
        await client.aclose()
        server.cleanup()


async def test_a_full_redis_refuses_the_scripts_writes_and_keeps_the_accounting(
    full_redis: tuple[RedisStore, redis.asyncio.Redis], caplog: pytest.LogCaptureFixture
) -> None:
    """Under `noeviction`, a Redis over maxmemory refuses the payloads the script would write
    (as it refused plain SETs): nothing is confirmed, the outage is counted and logged, the
    owner's accounting holds only what was stored, and writes resume once memory is freed."""
    store, client = full_redis
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    assert await put(store, "acme", "first", "second") == set()
    assert store.failed_operations == 2  # the refresh's ZADD, then the script's payloads
    lines = [r.getMessage() for r in caplog.records if r.name == "ctxproxy.artifacts"]
    assert len(lines) == 1 and "command not allowed when used memory" in lines[0]
    owner = f"ctxproxy:{{{tag('acme')}}}:"
    assert await client.exists(f"{owner}a:{store.artifact_id('acme', 'first')}") == 0
    assert await client.hget(f"{owner}live", ".total") is None
    await client.delete(*[k async for k in client.scan_iter(match="filler:*")])
    assert await put(store, "acme", "first", "second") == {"first", "second"}
    assert await client.hget(f"{owner}live", ".total") == b"11"


async def test_an_error_status_from_the_script_is_counted(
    live: Live, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store, _, _ = live
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    original = Pipeline.execute

    async def oom(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        names = [str(args[0]).upper() for args, _ in self.command_stack]
        results: list[Any] = await original(self, raise_on_error)
        if names == ["EVALSHA"]:
            return [[b"ok", b"OOM command not allowed when used memory > 'maxmemory'."]]
        return results

    monkeypatch.setattr(Pipeline, "execute", oom)
    assert await put(store, "acme", "first", "second") == {"first"}
    assert store.failed_operations == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "ctxproxy.artifacts"]
    assert lines == [
        "artifact store at 127.0.0.1:6379 unavailable: RedisError: "
        "OOM command not allowed when used memory > 'maxmemory'."
    ]


async def test_a_script_answered_with_an_error_confirms_only_the_refreshed(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _, _ = live
    assert await put(store, "acme", "old") == {"old"}
    original = Pipeline.execute

    async def refused(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        if [str(args[0]).upper() for args, _ in self.command_stack] == ["EVALSHA"]:
            self.command_stack.clear()
            return [ResponseError("BUSY Redis is busy running a script")]
        return await original(self, raise_on_error)

    monkeypatch.setattr(Pipeline, "execute", refused)
    assert await put(store, "acme", "old", "new") == {"old"}
    assert store.failed_operations == 1
