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
from urllib.parse import urlsplit

import pytest
import redis.asyncio
from redis.asyncio.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from shared_redis import delete_prefix, require_shared_redis, scope_keys, unique_prefix

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

    monkeypatch.setattr(store.client, "ping", refuse)
    monkeypatch.setattr(store.client, "get", refuse)
    assert store.failed_operations == 0
    assert await store.ping() is False
    for n in (2, 3, 4):
        with pytest.raises(StoreUnavailable):
            await store.get("t1", store.artifact_id("t1", "x"))
        assert store.failed_operations == n
    assert store_log(caplog) == [
        "artifact store at 127.0.0.1:1 unavailable: ConnectionError: "
        "invalid password '***' for user default"
    ]

    async def missing(*args: Any, **kwargs: Any) -> Any:
        return None

    monkeypatch.setattr(store.client, "get", missing)
    assert await store.get("t1", store.artifact_id("t1", "x")) is None
    assert store_log(caplog)[1:] == ["artifact store at 127.0.0.1:1 available again"]
    monkeypatch.setattr(store.client, "get", refuse)
    await read_fails_first(store, caplog)


async def read_fails_first(store: RedisStore, caplog: pytest.LogCaptureFixture) -> None:
    """The same outage, first noticed by a read."""
    caplog.clear()
    fresh = RedisStore("redis://:hunter2@127.0.0.1:1/13", SECRET)
    fresh.client.get = store.client.get  # type: ignore[method-assign]
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

    monkeypatch.setattr(store.client, "ping", time_out_while_cancelled)

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
        "the content",
        "",
        {"a": 1},
        0.0,
    )


def test_values_are_compressed_only_over_the_threshold() -> None:
    item = NewArtifact("z" * 500, "k", {})
    size = len(encode_value(item, 1.0, compress_over=10**9)) - 1  # the raw body
    assert encode_value(item, 1.0, compress_over=size)[:1] == b"\x00"
    assert encode_value(item, 1.0, compress_over=size - 1)[:1] == b"\x01"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def live(clock: Clock) -> AsyncIterator[tuple[RedisStore, redis.asyncio.Redis, str]]:
    url = require_shared_redis()
    prefix = unique_prefix()
    client = redis.asyncio.Redis.from_url(url)
    real = RedisStore(url, SECRET, key_prefix=prefix, clock=clock)
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


async def test_a_content_parts_layout_in_meta_round_trips(
    live: tuple[RedisStore, redis.asyncio.Redis, str],
) -> None:
    """The layout of a result sent as content parts (issue 11.11) reads back as it was written:
    nesting, nulls, key order."""
    real, _, _ = live
    layout = [
        {"span": [0, 3], "part": {"text": None, "type": "text"}},
        {"span": [3, 5], "part": {"type": "text", "text": None, "cache_control": {"ttl": "1h"}}},
    ]
    meta = {"tool": "dump", "tool_call_id": "c1", "content_parts": layout, "step": "s"}
    aid = real.artifact_id("t1", "abcde")
    item = NewArtifact("abcde", "tool_result", meta)
    assert await real.put_many("t1", {aid: item}, ttl_seconds=60, max_per_scope=9) == {aid}
    got = await real.get("t1", aid)
    assert got is not None and got.meta == meta
    assert [list(e["part"]) for e in got.meta["content_parts"]] == [list(e["part"]) for e in layout]


async def test_an_unreadable_value_is_logged_and_reads_as_missing(
    live: tuple[RedisStore, redis.asyncio.Redis, str], caplog: pytest.LogCaptureFixture
) -> None:
    real, client, prefix = live
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    aid = real.artifact_id("t1", "whatever")
    await client.set(f"{scope_keys(prefix, 't1')}a:{aid}", b"\x00no separator")
    assert await real.get("t1", aid) is None
    assert store_log(caplog) == [
        f"artifact {aid} is unreadable and is treated as missing: "
        "artifact value has no header separator"
    ]


Live = tuple[RedisStore, redis.asyncio.Redis, str]


async def put_texts(store: RedisStore, scope: str, *texts: str, cap: int = 9) -> set[str]:
    items = {store.artifact_id(scope, t): NewArtifact(t, "k", {}) for t in texts}
    confirmed = await store.put_many(scope, items, ttl_seconds=60, max_per_scope=cap)
    return {t for t in texts if store.artifact_id(scope, t) in confirmed}


async def readable(store: RedisStore, scope: str, *texts: str) -> list[bool]:
    return [await store.get(scope, store.artifact_id(scope, t)) is not None for t in texts]


async def test_order_within_a_batch_counts_only_until_a_later_reference(
    live: Live, clock: Clock
) -> None:
    real, _, _ = live
    assert await put_texts(real, "t1", "x", "y", "z", cap=3) == {"x", "y", "z"}
    clock.now += 0.5
    assert await put_texts(real, "t1", "x", cap=3) == {"x"}  # x referenced again, later
    clock.now += 0.5
    assert await put_texts(real, "t1", "w", cap=3) == {"w"}
    assert await readable(real, "t1", "x", "y", "z", "w") == [True, False, True, True]


async def test_the_index_of_a_scope_stays_within_the_cap(live: Live, clock: Clock) -> None:
    real, client, prefix = live
    for text in ("a", "b", "c", "d", "e"):
        clock.now += 1
        await put_texts(real, "t1", text, cap=2)
    [index] = [k async for k in client.scan_iter(match=f"{prefix}*:idx")]
    assert await client.zcard(index) == 2
    assert await readable(real, "t1", "a", "b", "c", "d", "e") == [False] * 3 + [True] * 2


async def test_a_scope_with_a_lone_surrogate_works(live: Live) -> None:
    real, _, _ = live
    scope = "tenant-\ud800"
    assert await put_texts(real, scope, "data") == {"data"}
    assert await readable(real, scope, "data") == [True]


async def test_unserialisable_meta_is_logged(live: Live, caplog: pytest.LogCaptureFixture) -> None:
    real, _, _ = live
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    aid = real.artifact_id("t1", "bad")
    item = NewArtifact("bad", "k", {"x": object()})
    assert await real.put_many("t1", {aid: item}, ttl_seconds=60, max_per_scope=9) == set()
    assert store_log(caplog) == [f"artifact {aid} not stored: unserialisable kind/meta (TypeError)"]


async def test_write_failures_are_counted_logged_and_keep_what_was_stored(
    live: Live, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real, _, _ = live
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    assert await put_texts(real, "t1", "old") == {"old"}
    original = Pipeline.execute

    async def lost_on_set(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        if any(str(args[0]).upper() == "SET" for args, _ in self.command_stack):
            raise RedisConnectionError("Connection lost")
        return await original(self, raise_on_error)

    async def oom_on_set(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        if any(str(args[0]).upper() == "SET" for args, _ in self.command_stack):
            count = len(self.command_stack)
            self.command_stack.clear()
            return [ResponseError("OOM command not allowed")] * count
        return await original(self, raise_on_error)

    url = urlsplit(require_shared_redis())  # named in the logs without credentials
    where = f"artifact store at {url.hostname}:{url.port or 6379}"
    monkeypatch.setattr(Pipeline, "execute", lost_on_set)
    assert await put_texts(real, "t1", "old", "new") == {"old"}
    assert real.failed_operations == 1
    monkeypatch.undo()
    assert await put_texts(real, "t1", "old") == {"old"}  # recovered
    monkeypatch.setattr(Pipeline, "execute", oom_on_set)
    assert await put_texts(real, "t1", "old", "newer") == {"old"}
    assert real.failed_operations == 2
    assert store_log(caplog) == [
        f"{where} unavailable: ConnectionError: Connection lost",
        f"{where} available again",
        f"{where} unavailable: ResponseError: OOM command not allowed",
    ]


async def test_a_write_that_first_notices_an_outage_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    down = RedisStore("redis://127.0.0.1:1/13", SECRET, socket_timeout=0.3, pool_timeout=0.3)
    try:
        assert await put_texts(down, "t1", "x") == set()
    finally:
        await down.close()
    [line] = store_log(caplog)
    assert line.startswith("artifact store at 127.0.0.1:1 unavailable: ConnectionError: ")


async def test_default_keys_are_under_ctxproxy(clock: Clock) -> None:
    url = require_shared_redis()
    client = redis.asyncio.Redis.from_url(url)
    default = RedisStore(url, SECRET, clock=clock)
    scope = f"default-prefix-test-{secrets.token_hex(8)}"
    pattern = f"{scope_keys('ctxproxy:', scope)}*"
    try:
        assert await put_texts(default, scope, "x") == {"x"}
        keys = [k async for k in client.scan_iter(match=pattern)]
        assert len(keys) == 2  # the payload and the scope's index
    finally:
        for key in [k async for k in client.scan_iter(match=pattern)]:
            await client.delete(key)
        await default.close()
        await client.aclose()


@pytest.mark.parametrize("prefix", ["bad{", "bad}", "{bad}:"])
def test_a_key_prefix_with_a_brace_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match=r"^key_prefix must not contain '\{' or '\}' "):
        RedisStore("redis://127.0.0.1:1/13", SECRET, key_prefix=prefix)


async def test_a_url_without_host_or_port_means_localhost_6379(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")
    bare = RedisStore("redis://", SECRET)

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RedisConnectionError("refused")

    monkeypatch.setattr(bare.client, "ping", refuse)
    try:
        assert await bare.ping() is False
    finally:
        await bare.close()
    line = "artifact store at localhost:6379 unavailable: ConnectionError: refused"
    assert store_log(caplog) == [line]
