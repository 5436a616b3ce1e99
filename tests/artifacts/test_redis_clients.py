"""`redis_clients`: the store's two clients and what differs between them, on the test Redis
and on the session's private Redis Cluster (which this module never stops)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis_cluster import LocalCluster
from shared_redis import delete_prefix, require_shared_redis, scope_keys, unique_prefix

from proxy.artifacts import redis_clients
from proxy.artifacts.budgets import WriteBudget, WriteBudgets, sub_scope
from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import NewArtifact, StoreUnavailable

SECRET = b"test-secret-0123456789abcdef0123"


def test_where_names_the_address_never_the_credentials() -> None:
    url = "rediss://user:hunter2@node-0:7000/0"
    assert redis_clients.where(url, cluster=False) == "node-0:7000"
    assert redis_clients.where(url, cluster=True) == "Redis Cluster via node-0:7000"
    assert redis_clients.where("redis://node-1", cluster=True) == "Redis Cluster via node-1:6379"


async def test_the_store_takes_the_client_its_kind_asks_for(redis_cluster: LocalCluster) -> None:
    one = RedisStore(require_shared_redis(), SECRET)
    many = RedisStore(redis_cluster.url, SECRET, cluster=True, pool_size=3)
    try:
        assert isinstance(one.client, Redis) and not redis_clients.is_cluster(one.client)
        assert isinstance(many.client, RedisCluster) and redis_clients.is_cluster(many.client)
        assert await one.ping() and await many.ping()
        for store in (one, many):
            infos = await redis_clients.memory_infos(store.client)
            assert infos and all("maxmemory_policy" in info for info in infos)
        assert len(await redis_clients.memory_infos(many.client)) == 3  # one per master
    finally:
        await one.close()
        await many.close()


def test_node_addresses_are_host_and_port() -> None:
    assert redis_clients.node_address("node-1:6379") == ("node-1", 6379)
    assert redis_clients.node_address("[::1]:7000") == ("::1", 7000)


async def test_the_cluster_is_found_through_another_node_when_the_urls_does_not_answer(
    redis_cluster: LocalCluster,
) -> None:
    other = f"127.0.0.1:{redis_cluster.nodes[1].port}"
    found = RedisStore("redis://127.0.0.1:1", SECRET, cluster=True, cluster_nodes=[other])
    alone = RedisStore("redis://127.0.0.1:1", SECRET, cluster=True)
    try:
        assert await found.ping() is True
        assert len(await redis_clients.memory_infos(found.client)) == 3
        assert await alone.ping() is False
    finally:
        await found.close()
        await alone.close()


async def test_start_up_checks_warn_once_for_all_masters(
    redis_cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The test cluster runs `noeviction` without `maxmemory`: one warning, not one per master."""
    store = RedisStore(redis_cluster.url, SECRET, cluster=True)
    caplog.set_level(logging.WARNING, logger="ctxproxy.artifacts")
    try:
        await store.check_eviction_policy()
    finally:
        await store.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "ctxproxy.artifacts"]
    assert len(lines) == 1 and "Redis has no maxmemory" in lines[0], lines
    assert "Redis Cluster via 127.0.0.1:" in lines[0]


async def test_an_unreachable_cluster_fails_soft(caplog: pytest.LogCaptureFixture) -> None:
    """No node answers (the cluster client raises its own exception types, not RedisError):
    writes are not confirmed, reads raise StoreUnavailable, ping is False, one log line."""
    store = RedisStore("redis://:hunter2@127.0.0.1:1", SECRET, cluster=True, socket_timeout=5)
    caplog.set_level(logging.INFO, logger="ctxproxy.artifacts")

    async def calls() -> None:
        aid = store.artifact_id("t1", "a")
        for _ in range(2):
            confirmed = await store.put_many(
                "t1", {aid: NewArtifact("a", "k", {})}, ttl_seconds=60, max_per_scope=10
            )
            assert confirmed == set()
            with pytest.raises(StoreUnavailable):
                await store.get("t1", aid)
            with pytest.raises(StoreUnavailable):
                await store.get_many("t1", [aid])
            assert await store.ping() is False
            assert await store.claim("t1", "k", ttl_seconds=60) is False

    try:
        await asyncio.wait_for(calls(), 60)
        await store.check_eviction_policy()  # unreachable: left to the health reporting
    finally:
        await store.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "ctxproxy.artifacts"]
    assert len(lines) == 1 and "unavailable" in lines[0], lines
    assert "hunter2" not in caplog.text
    assert store.failed_operations >= 10


async def test_an_owners_sessions_and_sub_scopes_share_its_slot(
    redis_cluster: LocalCluster,
) -> None:
    """Every key a tenant's scopes write (artifacts, indexes, budget accounting) carries the
    owner's hash tag, so each pipeline and script of a request stays on one node; claims carry
    their own scope's tag (one key each)."""
    prefix = unique_prefix()
    session = "acme#session:" + "5" * 32
    scopes = ["acme", session, sub_scope("acme", "ws"), sub_scope(session, "summaries"), "other"]
    budgets = WriteBudgets(WriteBudget(10**9, 10**9))
    store = RedisStore(redis_cluster.url, SECRET, cluster=True, key_prefix=prefix, budgets=budgets)
    client = RedisCluster.from_url(redis_cluster.url)
    try:
        for scope in scopes:
            items = {store.artifact_id(scope, t): NewArtifact(t, "k", {}) for t in ("a", "b")}
            assert await store.put_many(scope, items, ttl_seconds=60, max_per_scope=10) == set(
                items
            )
        keys = [key.decode() async for key in client.scan_iter(match=f"{prefix}*")]
        owner_tag, other_tag = (scope_keys(prefix, s)[len(prefix) :] for s in ("acme", "other"))
        acme = [k for k in keys if not k.startswith(f"{prefix}{other_tag}")]
        assert all(k.startswith(f"{prefix}{owner_tag}") for k in acme)
        assert {k[len(prefix) + len(owner_tag) :] for k in acme} >= {"live", "exp", "rate"}
        assert len(acme) == 4 * 2 + 4 + 3  # payloads, an index per scope, the accounting
        assert len({client.keyslot(k) for k in acme}) == 1
    finally:
        await store.close()
        await delete_prefix(client, prefix)
        await client.aclose()
