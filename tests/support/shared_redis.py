"""The shared test Redis (127.0.0.1:6379, db 13): its availability rule and per-test key prefixes.

Tests that need it SKIP with the reason when it is unreachable, except under CI (env `CI` set to
a true value), where they FAIL: CI must exercise Redis. Every test writes under its own key prefix
and deletes those keys afterwards, so tests never see each other's data.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
import redis.asyncio
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import RedisCluster
from redis_process import ci_requires_services

# A dedicated DB; override with CTXPROXY_TEST_REDIS_URL (e.g. another host in CI).
REDIS_URL = os.environ.get("CTXPROXY_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 6379}"


def require_shared_redis() -> str:
    """The test Redis URL; skips (or, under CI, fails) the test when the server is unreachable."""
    client = redis.Redis.from_url(REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        client.ping()
        problem = ""
    except redis.RedisError as exc:
        problem = f"Redis at {_where(REDIS_URL)} is unreachable ({type(exc).__name__}: {exc})"
    finally:
        client.close()
    if problem and ci_requires_services():
        pytest.fail(f"{problem}; CI is set, so the Redis tests must run", pytrace=False)
    if problem:
        pytest.skip(f"{problem}; start Redis to run the Redis tests")
    return REDIS_URL


def unique_prefix() -> str:
    return f"ctxtest:{uuid.uuid4().hex}:"


def scope_keys(prefix: str, scope: str) -> str:
    """What every key of `scope` starts with in a RedisStore whose `key_prefix` is `prefix`, by
    the key scheme of proxy/artifacts/redis_store.py: `{prefix}{<24 hex of SHA-256(scope)>}:`."""
    tag = hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{prefix}{{{tag}}}:"


async def delete_prefix(client: redis.asyncio.Redis | RedisCluster, prefix: str) -> None:
    keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
    if keys:
        await client.delete(*keys)


async def age_keys(client: redis.asyncio.Redis | RedisCluster, prefix: str, seconds: float) -> None:
    """Make every key under `prefix` `seconds` older: its remaining TTL shrinks by that much
    (a key whose TTL runs out is deleted by Redis, as real expiry would). Lets TTL tests check
    "still there" with a wide margin instead of sleeping close to a short real expiry."""
    elapsed_ms = round(seconds * 1000)
    async for key in client.scan_iter(match=f"{prefix}*", count=1000):
        left = await client.pttl(key)
        if left > 0:
            await client.pexpire(key, left - elapsed_ms)  # <= 0: Redis deletes the key


def record_pipelines(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """From now on (for one test), the command names of every pipeline round trip, in order."""
    calls: list[list[str]] = []
    original = Pipeline.execute

    async def spy(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        calls.append([str(args[0]).upper() for args, _ in self.command_stack])
        return await original(self, raise_on_error)

    monkeypatch.setattr(Pipeline, "execute", spy)
    return calls
