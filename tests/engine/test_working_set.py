"""The working set: keys made of the client's history, exchanges put back before the answer they
preceded, and nothing at all when the store fails or the entry is damaged."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import pytest

from proxy.artifacts.store import MemoryStore, NewArtifact, StoreUnavailable
from proxy.engine.working_set import (
    WorkingSetKey,
    answer_anchors,
    history_digest,
    history_digests,
    reinsert,
    remember,
    working_set_notes,
    working_set_scope,
)
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_responses import OPENAI_RESPONSES as RESPONSES

SCOPE = "tenant:abc"
HISTORY: list[Any] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "what is in the log?"},
]
ANSWER = {"role": "assistant", "content": "an error on line 3"}
EXCHANGE: list[Any] = [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_context_artifact", "arguments": '{"artifact_id": "x"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"content": "line 3: error"}'},
]


def key(history: list[Any]) -> WorkingSetKey:
    return WorkingSetKey(SCOPE, history_digest(OPENAI_CHAT, history), 60, 100)


async def test_an_exchange_goes_back_before_the_answer_it_preceded() -> None:
    store = MemoryStore(b"secret")
    assert await remember(store, key(HISTORY), EXCHANGE)
    later = [*HISTORY, {**ANSWER, "refusal": None}, {"role": "user", "content": "why?"}]
    kept = await reinsert(store, SCOPE, OPENAI_CHAT, later)
    assert kept.exchanges == 1 and not kept.unavailable
    assert kept.items == [*HISTORY, *EXCHANGE, later[2], later[3]]
    assert later[2] == {**ANSWER, "refusal": None}  # the request's own list is left alone
    assert working_set_notes(kept) == [
        "working set: 1 exchange(s) of the read tools put back in place"
    ]


async def test_another_history_scope_or_answerless_request_gets_nothing() -> None:
    store = MemoryStore(b"secret")
    await remember(store, key(HISTORY), EXCHANGE)
    other = [HISTORY[0], {"role": "user", "content": "what is in the other log?"}, ANSWER]
    for scope, items in ((SCOPE, other), ("tenant:xyz", [*HISTORY, ANSWER]), (SCOPE, HISTORY)):
        kept = await reinsert(store, scope, OPENAI_CHAT, items)
        assert (kept.exchanges, kept.items) == (0, items)


async def test_entries_live_apart_from_the_tenants_artifacts() -> None:
    store = MemoryStore(b"secret")
    await remember(store, key(HISTORY), EXCHANGE)
    entry_id = store.artifact_id(working_set_scope(SCOPE), key(HISTORY).digest)
    assert await store.get(SCOPE, entry_id) is None
    assert await store.get(working_set_scope(SCOPE), entry_id) is not None


async def test_the_first_entry_of_a_history_stays() -> None:
    store = MemoryStore(b"secret")
    assert await remember(store, key(HISTORY), EXCHANGE)
    await remember(store, key(HISTORY), [EXCHANGE[0], {**EXCHANGE[1], "content": "other"}])
    kept = await reinsert(store, SCOPE, OPENAI_CHAT, [*HISTORY, ANSWER])
    assert kept.items[2:4] == EXCHANGE


async def test_a_store_outage_or_a_damaged_entry_puts_nothing_back() -> None:
    class Down(MemoryStore):
        async def get_many(self, scope: str, artifact_ids: Any) -> Any:
            raise StoreUnavailable("down")

    items = [*HISTORY, ANSWER]
    kept = await reinsert(Down(b"secret"), SCOPE, OPENAI_CHAT, items)
    assert (kept.items, kept.exchanges, kept.unavailable) == (items, 0, True)
    assert working_set_notes(kept) == [
        "working set: the store did not answer; earlier read rounds are left out"
    ]
    store = MemoryStore(b"secret")
    own = working_set_scope(SCOPE)
    entry = {store.artifact_id(own, key(HISTORY).digest): NewArtifact("{not json", "working_set")}
    await store.put_many(own, entry, ttl_seconds=60, max_per_scope=10)
    assert (await reinsert(store, SCOPE, OPENAI_CHAT, items)).exchanges == 0


def test_anchors_are_the_digests_of_the_history_before_each_answer() -> None:
    items = [*HISTORY, ANSWER, {"role": "user", "content": "more"}, ANSWER]
    anchors = answer_anchors(OPENAI_CHAT, items)
    assert anchors == {
        2: history_digest(OPENAI_CHAT, items[:2]),
        4: history_digest(OPENAI_CHAT, items[:4]),
    }
    assert answer_anchors(OPENAI_CHAT, HISTORY) == {}
    assert history_digests(OPENAI_CHAT, items) == (anchors, history_digest(OPENAI_CHAT, items))


def test_the_key_ignores_what_sdks_add_but_not_what_messages_say() -> None:
    base = history_digest(OPENAI_CHAT, [*HISTORY, ANSWER])
    echoed = {**ANSWER, "refusal": None, "annotations": [], "audio": None}
    assert history_digest(OPENAI_CHAT, [*HISTORY, echoed]) == base
    parts = {**ANSWER, "content": [{"type": "text", "text": ANSWER["content"]}]}
    assert history_digest(OPENAI_CHAT, [*HISTORY, parts]) == base
    changed = {**ANSWER, "content": "an error on line 4"}
    assert history_digest(OPENAI_CHAT, [*HISTORY, changed]) != base
    # moving text between two messages changes the key (items are length-prefixed)
    split = [{"role": "user", "content": "ab"}, {"role": "user", "content": "c"}]
    moved = [{"role": "user", "content": "a"}, {"role": "user", "content": "bc"}]
    assert history_digest(OPENAI_CHAT, split) != history_digest(OPENAI_CHAT, moved)


async def test_answer_items_the_client_sent_again_are_not_repeated() -> None:
    history: list[Any] = [{"role": "user", "content": "what is in the log?"}]
    seen = [
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "e", "summary": []},
        {"type": "message", "role": "assistant", "content": "Reading."},
    ]
    call = {
        "type": "function_call",
        "call_id": "r1",
        "name": "read_context_artifact",
        "arguments": "{}",
    }
    result = {"type": "function_call_output", "call_id": "r1", "output": "page"}
    store = MemoryStore(b"secret")
    digest = history_digest(RESPONSES, history)
    assert await remember(store, WorkingSetKey(SCOPE, digest, 60, 100), [*seen, call, result])
    done = {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "id": "msg_2",
        "content": [{"type": "output_text", "text": "Done."}],
    }
    sdk_copy = [{**seen[0], "status": None}, {**seen[1], "id": "msg_1"}]
    later = [*history, *sdk_copy, done, {"role": "user", "content": "thanks"}]
    kept = await reinsert(store, SCOPE, RESPONSES, later)
    assert kept.items == [*history, *sdk_copy, call, result, done, later[-1]]
    alone = [*history, done]  # nothing of the round came back: all of it goes in
    again = await reinsert(store, SCOPE, RESPONSES, alone)
    assert again.items == [*history, *seen, call, result, done]


async def test_an_answer_sent_again_at_the_end_of_the_history_is_not_repeated() -> None:
    store = MemoryStore(b"secret")
    assert await remember(store, key(HISTORY), [ANSWER, *EXCHANGE])
    kept = await reinsert(store, SCOPE, OPENAI_CHAT, [*HISTORY, ANSWER])
    assert (kept.items, kept.exchanges) == ([*HISTORY, ANSWER, *EXCHANGE], 1)


async def test_nothing_is_kept_for_no_exchange_and_an_entry_is_of_its_own_kind() -> None:
    store = MemoryStore(b"secret")
    assert not await remember(store, key(HISTORY), [])
    assert await remember(store, key(HISTORY), EXCHANGE)
    own = working_set_scope(SCOPE)
    entry = await store.get(own, store.artifact_id(own, key(HISTORY).digest))
    assert entry is not None and entry.kind == "working_set"


async def test_an_entry_that_is_not_a_list_of_items_puts_nothing_back() -> None:
    own = working_set_scope(SCOPE)
    for content in ('{"role": "tool"}', "[]"):
        store = MemoryStore(b"secret")
        entry = {store.artifact_id(own, key(HISTORY).digest): NewArtifact(content, "working_set")}
        await store.put_many(own, entry, ttl_seconds=60, max_per_scope=10)
        items = [*HISTORY, ANSWER]
        assert (await reinsert(store, SCOPE, OPENAI_CHAT, items)).items == items


async def test_a_store_that_fails_a_write_is_logged_and_keeps_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Failing(MemoryStore):
        async def put_many(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("disk full")

    with caplog.at_level(logging.WARNING, logger="ctxproxy.working_set"):
        assert await remember(Failing(b"secret"), key(HISTORY), EXCHANGE) is False
    [record] = caplog.records
    assert record.getMessage() == "the working set could not be kept"
    assert record.exc_info is not None and str(record.exc_info[1]) == "disk full"


async def test_the_callers_anchors_are_the_ones_looked_up() -> None:
    store = MemoryStore(b"secret")
    assert await remember(store, key(HISTORY), EXCHANGE)
    items = [*HISTORY, ANSWER]
    anchors = answer_anchors(OPENAI_CHAT, items)
    assert (await reinsert(store, SCOPE, OPENAI_CHAT, items, anchors)).exchanges == 1
    assert (await reinsert(store, SCOPE, OPENAI_CHAT, items, {})).items == items


async def test_the_exchanges_of_two_answers_each_go_back_in_place() -> None:
    store = MemoryStore(b"secret")
    second: list[Any] = [EXCHANGE[0], {**EXCHANGE[1], "content": "line 4: ok"}]
    why = {"role": "user", "content": "why?"}
    assert await remember(store, key(HISTORY), EXCHANGE)
    assert await remember(store, key([*HISTORY, ANSWER, why]), second)
    later = [*HISTORY, ANSWER, why, ANSWER]
    kept = await reinsert(store, SCOPE, OPENAI_CHAT, later)
    assert kept.exchanges == 2
    assert kept.items == [*HISTORY, *EXCHANGE, ANSWER, why, *second, ANSWER]


def test_the_key_frames_each_item_with_its_length_in_8_big_endian_bytes() -> None:
    # entries outlive a restart in Redis: the framing of the key must not change
    framed = b"".join(
        len(data).to_bytes(8, "big") + data for data in map(OPENAI_CHAT.canonical, HISTORY)
    )
    assert history_digest(OPENAI_CHAT, HISTORY) == hashlib.sha256(framed).hexdigest()


async def test_a_request_with_nothing_to_put_back_keeps_its_own_list() -> None:
    store = MemoryStore(b"secret")
    items = [*HISTORY, ANSWER]
    kept = await reinsert(store, SCOPE, OPENAI_CHAT, items)
    assert kept.items is items and kept.exchanges == 0
