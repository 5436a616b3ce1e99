"""engine/summary_cache.py: summaries frozen under the digest of their span."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import pytest

from proxy.artifacts.store import Artifact, MemoryStore, NewArtifact, StoreUnavailable
from proxy.engine.steps.summarize.cache import (
    KIND,
    Summary,
    keep,
    lookup,
    span_digest,
    summaries_scope,
)
from proxy.formats.openai_chat import OPENAI_CHAT

ITEMS = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]


def test_the_key_depends_on_identity_query_and_every_item() -> None:
    base = span_digest(OPENAI_CHAT, ITEMS, "extract:v1:100", "q")
    assert base == span_digest(OPENAI_CHAT, [dict(i) for i in ITEMS], "extract:v1:100", "q")
    others = {
        span_digest(OPENAI_CHAT, ITEMS, "extract:v1:101", "q"),
        span_digest(OPENAI_CHAT, ITEMS, "extract:v1:100", "q2"),
        span_digest(OPENAI_CHAT, ITEMS[:1], "extract:v1:100", "q"),
        span_digest(OPENAI_CHAT, [ITEMS[0], {**ITEMS[1], "content": "c"}], "extract:v1:100", "q"),
        span_digest(OPENAI_CHAT, ITEMS, "extract:v1:10", "0q"),  # parts are length-prefixed
    }
    assert base not in others and len(others) == 5


def test_kept_then_found_in_a_scope_of_its_own() -> None:
    store = MemoryStore(b"k")
    summary = Summary("- x is 1", "gpt-x", {"prompt_tokens": 10, "completion_tokens": 3})

    async def go() -> None:
        assert await lookup(store, "s", "key") is None
        assert await keep(store, "s", "key", summary, ttl_seconds=60, max_per_scope=10)
        assert await lookup(store, "s", "key") == summary
        assert await lookup(store, "other", "key") is None
        own = summaries_scope("s")
        assert await store.get("s", store.artifact_id(own, "key")) is None  # not readable
    asyncio.run(go())


def test_a_damaged_entry_or_an_outage_is_no_entry() -> None:
    store = MemoryStore(b"k")
    own = summaries_scope("s")

    async def put(content: str) -> None:
        entry_id = store.artifact_id(own, "k-" + content)
        await store.put_many(own, {entry_id: NewArtifact(content, "summary")},
                             ttl_seconds=60, max_per_scope=10)

    async def go() -> None:
        for bad in ("not json", "[1]", '{"summary": 1, "by": "x", "spent": {}}',
                    '{"summary": "a", "by": "x", "spent": []}'):
            await put(bad)
            assert await lookup(store, "s", "k-" + bad) is None
        await put('{"summary": "a", "by": "x", "spent": {"n": 2, "bad": "3", "b": true}}')
        found = await lookup(store, "s", 'k-{"summary": "a", "by": "x", "spent": '
                             '{"n": 2, "bad": "3", "b": true}}')
        assert found == Summary("a", "x", {"n": 2})
    asyncio.run(go())

    class Down(MemoryStore):
        async def get(self, scope: str, artifact_id: str) -> Artifact | None:
            raise StoreUnavailable("down")

        async def put_many(self, scope: str, items: Mapping[str, NewArtifact], *,
                           ttl_seconds: int, max_per_scope: int) -> set[str]:
            raise StoreUnavailable("down")

    down = Down(b"k")
    assert asyncio.run(lookup(down, "s", "key")) is None
    assert asyncio.run(keep(down, "s", "key", Summary("a", "x"), ttl_seconds=1,
                            max_per_scope=1)) is False


class Broken(MemoryStore):
    async def put_many(self, *args: object, **kwargs: object) -> set[str]:
        raise RuntimeError("store bug")


def test_a_summary_is_kept_as_its_own_kind_and_a_failing_store_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore(b"k")
    made = Summary("- f: v", "m")
    assert asyncio.run(keep(store, "s", "key", made, ttl_seconds=60, max_per_scope=9))
    own = summaries_scope("s")
    stored = asyncio.run(store.get(own, store.artifact_id(own, "key")))
    assert stored is not None and stored.kind == KIND
    caplog.set_level(logging.INFO, logger="ctxproxy")
    assert not asyncio.run(keep(Broken(b"k"), "s", "key", made, ttl_seconds=60, max_per_scope=9))
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.getMessage() == "a summary could not be kept"
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
