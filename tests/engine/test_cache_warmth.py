"""`engine.cache_warmth`: the lifetime that applies, the judgement (warm, cold, unknown), and the
time a conversation's prompt went upstream, kept in the store where every replica reads it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
from shared_redis import delete_prefix, require_shared_redis, unique_prefix

from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import ArtifactStore, MemoryStore, NewArtifact, StoreUnavailable
from proxy.engine.cache_warmth import (
    RECORD_MARGIN_SECONDS,
    CacheState,
    judge,
    note_sent,
    record_id,
    resolve_ttl,
    sent_key,
)
from proxy.engine.continuity import History, recall_history
from proxy.engine.policy import Policy
from proxy.engine.working_set import WorkingSetKey, history_digest, working_set_scope
from proxy.formats.openai_chat import OPENAI_CHAT

SCOPE = "t:scope"
FIRST = [{"role": "user", "content": "Task: audit the repository."}]
SECOND = [*FIRST, {"role": "assistant", "content": "On it."}, {"role": "user", "content": "Go."}]


@pytest.mark.parametrize(
    ("configured", "marked", "ttl"),
    [
        (300, None, 300),
        (300, 3600, 3600),  # the request's own one-hour marks
        (600, 300, 600),  # marks never shorten it
        (0, 3600, 0),  # the operator says the upstream caches nothing
        (None, 3600, None),  # unknown stays unknown
    ],
)
def test_the_lifetime_that_applies(configured: int | None, marked: int | None, ttl: int) -> None:
    assert resolve_ttl(configured, marked) == ttl


def test_judged_warm_within_the_lifetime_and_cold_past_it_or_without_a_record() -> None:
    assert judge(1000.0, 1300.0, 300, True).state is CacheState.warm
    late = judge(1000.0, 1300.5, 300, True)
    assert (late.state, late.age_seconds, late.ttl_seconds) == (CacheState.cold, 300.5, 300)
    assert judge(None, 1300.0, 300, True).state is CacheState.cold
    assert judge(1000.0, 1001.0, 0, True).state is CacheState.cold  # caches nothing


def test_unknown_without_a_lifetime_or_an_answer_from_the_store() -> None:
    assert judge(1000.0, 5000.0, None, True).state is CacheState.unknown
    assert judge(None, 5000.0, 300, False).state is CacheState.unknown
    assert not judge(None, 5000.0, 300, False).cold


def test_no_record_is_kept_for_an_unknown_lifetime_or_an_upstream_without_cache() -> None:
    place = WorkingSetKey(SCOPE, "d", 3600, 100)
    assert sent_key(place, None) is None
    assert sent_key(place, 0) is None
    key = sent_key(place, 300)
    assert key is not None and key.ttl_seconds == 300 + RECORD_MARGIN_SECONDS


async def history_of(store: ArtifactStore, items: list[Any]) -> History:
    return await recall_history(store, SCOPE, OPENAI_CHAT, items, Policy(), first_call=True)


async def send(store: ArtifactStore, items: list[Any], at: float) -> None:
    place = (await history_of(store, items)).place
    assert place is not None
    key = sent_key(place, 300)
    assert key is not None
    assert await note_sent(store, key, at)


async def test_the_next_request_reads_when_the_previous_one_went_upstream() -> None:
    store = MemoryStore(b"s" * 32)
    first = await history_of(store, FIRST)
    assert (first.last_sent, first.sent_read) == (None, True)  # nothing could have been sent
    await send(store, FIRST, 1000.0)
    second = await history_of(store, SECOND)
    assert (second.last_sent, second.sent_read) == (1000.0, True)
    retried = await history_of(store, FIRST)  # decides as the call did, not by its own record
    assert retried.last_sent is None


async def test_a_damaged_record_is_no_record() -> None:
    store = MemoryStore(b"s" * 32)
    digest = history_digest(OPENAI_CHAT, FIRST)
    damaged = NewArtifact('{"v": 1, "at": "yesterday"}', "sent")
    own = working_set_scope(SCOPE)
    await store.put_many(
        own, {record_id(store, SCOPE, digest): damaged}, ttl_seconds=60, max_per_scope=10
    )
    assert (await history_of(store, SECOND)).last_sent is None


class Down(MemoryStore):
    async def get_many(self, scope: str, artifact_ids: Any) -> Any:
        raise StoreUnavailable("down")


async def test_a_store_that_does_not_answer_leaves_it_unknown() -> None:
    history = await history_of(Down(b"s" * 32), SECOND)
    assert (history.last_sent, history.sent_read) == (None, False)


@pytest.fixture
async def replicas() -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    url = require_shared_redis()
    prefix = unique_prefix()
    one, two = (RedisStore(url, b"s" * 32, key_prefix=prefix) for _ in range(2))
    yield one, two
    await one.close()
    await two.close()
    client = redis.asyncio.Redis.from_url(url)
    await delete_prefix(client, prefix)
    await client.aclose()


async def test_a_replica_that_did_not_send_it_reads_the_same_time(
    replicas: tuple[RedisStore, RedisStore],
) -> None:
    one, two = replicas
    await send(one, FIRST, 1234.5)
    history = await history_of(two, SECOND)
    assert (history.last_sent, history.sent_read) == (1234.5, True)
