"""`RedisCountRatios` on the real test Redis: per upstream, model and contributor, merged by the
same rule as in Python (`tokens.calibration_rule`), in one round trip per sync."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from redis.asyncio.cluster import RedisCluster
from redis_process import RedisProcess, require_redis_server
from shared_redis import delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.redis_ratios import RedisCountRatios
from proxy.artifacts.redis_store import RedisStore
from proxy.tokens.calibration_rule import KeyCalibration, RatioRule

SECRET = b"test-secret-0123456789abcdef0123"
RULE = RatioRule()
K = ("fake", "m")
NOW = 1_000_000.0


Client = redis.asyncio.Redis | RedisCluster


@pytest.fixture(params=["redis", "cluster"])
async def replicas(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[RedisStore, RedisStore, Client]]:
    """Two replicas' stores on one Redis, or on one Redis Cluster."""
    cluster = request.param == "cluster"
    if cluster:
        url = request.getfixturevalue("redis_cluster").url
        client: Client = RedisCluster.from_url(url)
    else:
        url = require_shared_redis()
        client = redis.asyncio.Redis.from_url(url)
    prefix = unique_prefix()
    one, two = (
        RedisStore(url, SECRET, cluster=cluster, key_prefix=prefix),
        RedisStore(url, SECRET, cluster=cluster, key_prefix=prefix),
    )
    try:
        yield one, two, client
    finally:
        await one.close()
        await two.close()
        await delete_prefix(client, prefix)
        await client.aclose()


async def push(ratios: RedisCountRatios, samples: dict[str, tuple[float, int]], **kw: Any) -> Any:
    rule, now = kw.get("rule", RULE), kw.get("now", NOW)
    return (await ratios.exchange({K: samples}, [], rule=rule, now=now)).get(K)


async def test_merges_follow_every_replicas_samples_per_contributor(
    replicas: tuple[RedisStore, RedisStore, Client],
) -> None:
    one, two, client = replicas
    a, b = one.count_ratios(), two.count_ratios()
    assert await push(a, {"x": (1.2, 1)}) == (1.0, {"x": (pytest.approx(1.1), 1.2, 1, NOW)})
    # Two samples of mean 1.6 on the other replica: the average is 1.4667, the ratio one step
    # per sample toward it; "y" is another contributor.
    agreed, entries = await push(b, {"x": (1.6, 2), "y": (1.0, 1)})
    assert agreed == 1.0  # two contributors, neither calibrated: nothing agreed
    assert entries == {
        "x": (pytest.approx(1.3), pytest.approx(1.4666667), 3, NOW),
        "y": (1.0, 1.0, 1, NOW),
    }
    read = await a.exchange({}, [K, ("fake", "unknown")], rule=RULE, now=NOW)
    assert read == {K: (1.0, entries), ("fake", "unknown"): (1.0, {})}
    assert 0 < await client.ttl(a.key(*K)) <= RULE.ttl_seconds
    assert await client.exists(a.key("fake", "unknown")) == 0  # reading writes nothing


async def test_one_contributor_moves_its_own_ratio_and_not_the_agreed_one(
    replicas: tuple[RedisStore, RedisStore, Client],
) -> None:
    one, two, _ = replicas
    a, b = one.count_ratios(), two.count_ratios()
    for who in ("h1", "h2"):
        await push(a, {who: (1.0, 5)})
    agreed, entries = await push(b, {"poisoner": (3.0, 40)})
    assert entries["poisoner"][0] == 2.0 and agreed == 1.0  # a median of (1, 1, 2) is 1
    agreed, _ = await push(a, {"h3": (1.2, 5)})  # a quorum of four: median 1.1, 5 steps
    assert agreed == pytest.approx(1.1)


async def test_a_full_key_admits_no_newcomer_and_silent_contributors_expire(
    replicas: tuple[RedisStore, RedisStore, Client],
) -> None:
    one, _, _ = replicas
    a = one.count_ratios()
    rule = RatioRule(max_contributors=2, ttl_seconds=60)
    await push(a, {"x": (1.2, 3)}, rule=rule, now=NOW)
    await push(a, {"y": (1.2, 3)}, rule=rule, now=NOW + 30)
    _, entries = await push(a, {"z": (2.0, 9)}, rule=rule, now=NOW + 59)
    assert sorted(entries) == ["x", "y"]  # no room: "z" is not kept, nobody else leaves
    _, entries = await push(a, {"z": (2.0, 1)}, rule=rule, now=NOW + 61)
    assert sorted(entries) == ["y", "z"]  # "x" had no sample for 60 s


async def test_concurrent_merges_lose_no_sample(
    replicas: tuple[RedisStore, RedisStore, Client],
) -> None:
    one, two, _ = replicas
    a, b = one.count_ratios(), two.count_ratios()
    await asyncio.gather(*(push(r, {"c": (1.1, 1)}) for r in (a, b) for _ in range(10)))
    assert (await push(a, {}))[1]["c"][1:3] == (pytest.approx(1.1), 20)


async def test_one_sync_merges_keys_on_every_slot_and_reloads_a_flushed_script(
    replicas: tuple[RedisStore, RedisStore, Client],
) -> None:
    """Many models' keys (on a Cluster: on several nodes) in one sync; after the script cache is
    flushed (a restart, a failover to a replica that never loaded it) the next sync reloads it."""
    one, _, client = replicas
    ratios = one.count_ratios()
    keys = [("fake", f"model-{i}") for i in range(12)]
    pushed = {key: {"x": (1.2, 1)} for key in keys}
    first = await ratios.exchange(pushed, [], rule=RULE, now=NOW)
    assert sorted(first) == sorted(keys)
    if isinstance(client, RedisCluster):
        await client.initialize()
        assert len({client.get_node_from_key(ratios.key(*key)).name for key in keys}) > 1
    await client.script_flush()  # a cluster client sends it to every master
    assert await client.script_exists(_merge_sha(ratios)) == [False]
    second = await ratios.exchange(pushed, [], rule=RULE, now=NOW)
    assert {key: state[1]["x"][2] for key, state in second.items()} == dict.fromkeys(keys, 2)


def _merge_sha(ratios: RedisCountRatios) -> str:
    return str(ratios._sha)


BATCHES = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.floats(0.25, 4.0), st.integers(1, 7)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=examples(25))
@given(batches=BATCHES)
def test_the_store_merges_by_the_same_rule_as_this_process(batches: list[Any]) -> None:
    url = require_shared_redis()
    rule = RatioRule(max_contributors=3)

    async def check() -> None:
        prefix = unique_prefix()
        store = RedisStore(url, SECRET, key_prefix=prefix)
        local = KeyCalibration(rule)
        try:
            for who, mean, count in batches:
                local.observe(who, mean, count, NOW)
                shared = await push(store.count_ratios(), {who: (mean, count)}, rule=rule)
            agreed, entries = shared
            assert agreed == pytest.approx(local.agreed, abs=1e-6)
            assert entries == {
                who: (pytest.approx(c.ratio, abs=1e-6), pytest.approx(c.average, abs=1e-6),
                      c.samples, NOW)
                for who, c in local.contributors.items()
            }  # fmt: skip
        finally:
            client = redis.asyncio.Redis.from_url(url)
            await delete_prefix(client, prefix)
            await client.aclose()
            await store.close()

    asyncio.run(check())


async def test_an_unreachable_redis_merges_nothing_and_counts_one_failure() -> None:
    store = RedisStore("redis://127.0.0.1:1/13", SECRET, socket_timeout=0.3, pool_timeout=0.3)
    try:
        ratios = store.count_ratios()
        pushed = {K: {"x": (1.2, 1)}}
        assert await ratios.exchange(pushed, [("fake", "n")], rule=RULE, now=NOW) == {}
        assert store.failed_operations == 1  # one round trip for pushing and reading
    finally:
        await store.close()


async def test_keys_carry_the_prefix_and_never_the_upstream_or_model_name() -> None:
    store = RedisStore("redis://127.0.0.1:1/13", SECRET, key_prefix="p:")
    try:
        ratios = store.count_ratios()
        key = ratios.key("secret-upstream", "secret-model\x00name")
        assert key != ratios.key("secret-upstream\x00secret-model", "name")
    finally:
        await store.close()
    assert key.startswith("p:ratios:") and "secret" not in key
    assert len(key) == len("p:ratios:") + 24


@pytest.fixture
def private_redis() -> Iterator[RedisProcess]:
    server = RedisProcess(require_redis_server())
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


async def test_a_sync_is_one_pipeline_of_the_script_which_is_loaded_when_redis_lacks_it(
    private_redis: RedisProcess,
) -> None:
    store = RedisStore(private_redis.url, SECRET, key_prefix="p:")
    client = redis.asyncio.Redis.from_url(private_redis.url)
    wanted = [("fake", "n"), ("fake", "o")]
    try:
        ratios = store.count_ratios()
        for loaded in (False, True):  # a fresh server knows no script: loaded, sent once more
            await client.config_resetstat()
            merged = await ratios.exchange({K: {"x": (1.2, 1)}}, wanted, rule=RULE, now=NOW)
            assert merged[K][1]["x"][2] == (2 if loaded else 1)
            stats = await client.info("commandstats")
            calls = {name: value["calls"] for name, value in stats.items()}
            assert calls["cmdstat_evalsha"] == (3 if loaded else 6)
            assert calls.get("cmdstat_script|load", 0) == (0 if loaded else 1)
            assert "cmdstat_script|exists" not in calls and "cmdstat_hmget" not in calls
    finally:
        await store.close()
        await client.aclose()
