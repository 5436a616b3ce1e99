"""RedisStore's outage handling, on a store whose Redis calls are made to fail (no server needed).

The contract shared with MemoryStore is in test_store.py; these are what only RedisStore does: one
log line per incident (credentials masked), a count of failed operations for /metrics, and a
cancellation that a failing call swallowed is given back to the task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import StoreUnavailable

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
