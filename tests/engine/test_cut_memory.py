"""Remembered cuts: records as stored (damaged ones are none), the policy fingerprint (the budget
left out), which record applies to a request, and where they live."""

from __future__ import annotations

from typing import Any

from proxy.artifacts.store import Artifact, MemoryStore
from proxy.engine.conversation import Unit
from proxy.engine.cut_memory import (
    CutRecord,
    aligned,
    policy_fingerprint,
    recall,
    record_id,
    record_ids,
    remember,
)
from proxy.engine.policy import Policy
from proxy.engine.working_set import (
    Reinserted,
    WorkingSetKey,
    answer_anchors,
    history_digest,
    working_set_scope,
)
from proxy.formats.openai_chat import OPENAI_CHAT

SCOPE = "tenant:abc"
RECORD = CutRecord("fp", 6, 0, 4, 4000, 12, [[(2, 1)], [(3, 2)]], [[(1, 2)], []], 1, 3)
HISTORY: list[Any] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "task"},
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": "more"},
]


def test_a_record_reads_back_as_it_was_written() -> None:
    assert CutRecord.decode(RECORD.encode()) == RECORD
    assert RECORD.pinned().cuts_at(3) == [(1, 2)] and RECORD.pinned().seen_at(1) == [(0, 2)]
    assert RECORD.moves and not CutRecord("fp", 1, 0, 1, 1, 0, [[]], [[]]).moves


def test_a_damaged_record_is_none() -> None:
    good = RECORD.encode()
    for damaged in (
        "{not json",
        "[]",
        good.replace('"v":1', '"v":2'),
        good.replace('"units":4', '"units":-4'),
        good.replace('"cuts":[[[2,1]],[[3,2]]]', '"cuts":[[[2,"1"]],[[3,2]]]'),
        good.replace('"cuts":[[[2,1]],[[3,2]]]', '"cuts":[[[2,1]]]'),
        good.replace('"policy":"fp"', '"policy":1'),
    ):
        assert CutRecord.decode(damaged) is None, damaged


def test_the_fingerprint_leaves_the_budget_out_and_the_steps_in() -> None:
    base = Policy()
    assert policy_fingerprint(base) == policy_fingerprint(
        Policy.model_validate({"budget": {"trigger": 0.8, "count_ratio": 1.2}, "name": "other"})
    )
    for changed in (
        {"mode": "compact"},
        {"steps": [{"kind": "drop_turns", "keep_recent_turns": 3}]},
        {"protect": {"first_user": False}},
        {"read_tool": {"enabled": False}},
    ):
        assert policy_fingerprint(Policy.model_validate(changed)) != policy_fingerprint(base)


def _found(store: MemoryStore, records: dict[int, CutRecord]) -> tuple[dict[int, str], Any]:
    items = [*HISTORY, {"role": "assistant", "content": "yes"}, {"role": "user", "content": "?"}]
    ids = record_ids(store, SCOPE, answer_anchors(OPENAI_CHAT, items))
    found = {
        ids[i]: Artifact(ids[i], record.encode(), "cuts", {}, 0.0) for i, record in records.items()
    }
    return ids, found


def test_the_record_of_the_most_recent_answer_applies() -> None:
    store = MemoryStore(b"secret")
    older = CutRecord("fp", 2, 0, 1, 4000, 0, [[(0, 1)]], [[]])
    newer = CutRecord("fp", 4, 0, 3, 4000, 0, [[(2, 1)]], [[]])
    ids, found = _found(store, {2: older, 4: newer})
    recalled = recall(ids, found, Reinserted([], 0), "fp")
    assert recalled is not None and (recalled.record, recalled.anchor) == (newer, 4)


def test_a_record_of_another_policy_or_over_other_exchanges_does_not_apply() -> None:
    store = MemoryStore(b"secret")
    older = CutRecord("fp", 2, 0, 1, 4000, 0, [[(0, 1)]], [[]])
    ids, found = _found(store, {2: older, 4: CutRecord("other", 4, 0, 3, 1, 0, [[]], [[]])})
    recalled = recall(ids, found, Reinserted([], 0), "fp")
    assert recalled is not None and recalled.record == older
    # the record was made with one exchange put back before its answer at index 2; now none is
    ids, found = _found(store, {4: CutRecord("fp", 6, 1, 5, 1, 0, [[]], [[]])})
    assert recall(ids, found, Reinserted([], 0), "fp") is None
    with_it = Reinserted([], 1, at={2: 2})
    assert recall(ids, found, with_it, "fp") is not None


def test_a_record_applies_only_over_units_that_end_where_its_items_do() -> None:
    units = [Unit(1, 2, "message", ()), Unit(2, 3, "message", ()), Unit(3, 6, "tool_exchange", ())]
    assert aligned(units, CutRecord("fp", 3, 0, 2, 1, 0, [[]], [[]]))
    assert not aligned(units, CutRecord("fp", 4, 0, 2, 1, 0, [[]], [[]]))  # ends inside unit 2
    assert not aligned(units, CutRecord("fp", 9, 0, 4, 1, 0, [[]], [[]]))  # more units
    assert aligned(units, CutRecord("fp", 6, 0, 3, 1, 0, [[]], [[]]))


async def test_records_live_beside_the_working_set_not_among_the_artifacts() -> None:
    store = MemoryStore(b"secret")
    digest = history_digest(OPENAI_CHAT, HISTORY)
    assert await remember(store, WorkingSetKey(SCOPE, digest, 60, 100), RECORD)
    rid = record_id(store, SCOPE, digest)
    assert await store.get(SCOPE, rid) is None
    stored = await store.get(working_set_scope(SCOPE), rid)
    assert stored is not None and CutRecord.decode(stored.content) == RECORD
    assert rid != store.artifact_id(working_set_scope(SCOPE), digest)  # not the exchange's id
