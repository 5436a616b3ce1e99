"""The two stores apply the same write budgets (property): on any sequence of writes, refreshes
and pauses, over one owner's scope, its session and another owner's scope, `MemoryStore` and
`RedisStore` (on the shared test Redis, its keys aged with the clock) confirm the same writes and
report the same refusals; and an owner's confirmed new bytes never exceed its budgets."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import redis.asyncio
from artifacts_harness import keyed
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from shared_redis import REDIS_URL, age_keys, delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.budgets import (
    Refused,
    WriteBudget,
    WriteBudgets,
    budget_owner,
    budget_refusals,
    counted_bytes,
)
from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import ArtifactStore, MemoryStore, NewArtifact

SECRET = b"test-secret-0123456789abcdef0123"
TTL = 100
SCOPES = ("acme", "acme#session:" + "1" * 32, "other")
PAUSES = (0, 1, 10, 30, 59, 60, 61, 99, 100, 101)


@dataclass(frozen=True)
class Op:
    scope: int
    sizes: tuple[int, ...]
    again: int | None
    """Also put the `again`-th text written before in this scope (a refresh, or a rewrite)."""
    pause: int


OPS = st.builds(
    Op,
    scope=st.integers(0, len(SCOPES) - 1),
    sizes=st.lists(st.integers(0, 900), min_size=0, max_size=3).map(tuple),
    again=st.none() | st.integers(0, 5),
    pause=st.sampled_from(PAUSES),
)
LIMITS = st.builds(
    WriteBudget,
    bytes_per_minute=st.sampled_from([None, 700, 1000, 2500]),
    live_bytes=st.sampled_from([None, 1200, 3000]),
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


async def put(
    store: ArtifactStore, scope: str, texts: list[str]
) -> tuple[set[str], tuple[Refused, ...]]:
    """The texts whose write is confirmed, and what the budgets refused."""
    items = keyed(store, scope, *(NewArtifact(t, "tool_result", {}) for t in texts))
    confirmed = await store.put_many(scope, items, ttl_seconds=TTL, max_per_scope=1000)
    ids = {t for t in texts if store.artifact_id(scope, t) in confirmed}
    return ids, budget_refusals(confirmed)


async def run(budget: WriteBudget, ops: list[Op]) -> None:
    limits = WriteBudgets(budget)
    clock, prefix = Clock(), unique_prefix()
    memory = MemoryStore(SECRET, clock=clock, budgets=limits)
    shared = RedisStore(REDIS_URL, SECRET, key_prefix=prefix, clock=clock, budgets=limits)
    client = redis.asyncio.Redis.from_url(REDIS_URL)
    written: dict[int, list[str]] = {}
    new_bytes: dict[tuple[str, float], int] = {}  # (owner, time) -> bytes newly stored
    try:
        for step, op in enumerate(ops):
            scope = SCOPES[op.scope]
            before = written.setdefault(op.scope, [])
            texts = [f"{step}.{i}:".ljust(size, "x") for i, size in enumerate(op.sizes)]
            if op.again is not None and op.again < len(before):
                texts.append(before[op.again])
            got = await put(memory, scope, texts)
            assert await put(shared, scope, texts) == got, f"step {step}: {op}"
            for refused in got[1]:
                event(f"refused by {refused.budget.value}")
            fresh = got[0] - set(before)
            before.extend(t for t in texts if t in fresh)
            key = (budget_owner(scope), clock.now)
            new_bytes[key] = new_bytes.get(key, 0) + sum(counted_bytes(t) for t in fresh)
            clock.now += op.pause
            await age_keys(client, prefix, op.pause)
    finally:
        await memory.close()
        await shared.close()
        await delete_prefix(client, prefix)
        await client.aclose()
    if budget.bytes_per_minute is not None:
        for (owner, at), _ in new_bytes.items():  # any minute: at most two minutes' worth
            minute = sum(b for (o, t), b in new_bytes.items() if o == owner and at <= t < at + 60)
            assert minute <= 2 * budget.bytes_per_minute


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(budget=LIMITS, ops=st.lists(OPS, min_size=1, max_size=12))
def test_both_stores_confirm_and_refuse_alike(
    loop: asyncio.AbstractEventLoop, budget: WriteBudget, ops: list[Op]
) -> None:
    require_shared_redis()
    loop.run_until_complete(run(budget, ops))
