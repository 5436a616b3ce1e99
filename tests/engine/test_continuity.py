"""What a conversation's earlier requests leave for the next one: the working set's exchanges and
the remembered cuts in one store round trip; a request's own cuts kept only when they pin or
supersede something."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.artifacts.store import Artifact, MemoryStore, StoreUnavailable
from proxy.engine.continuity import History, Made, keep_cuts, recall_history
from proxy.engine.cut_memory import CutRecord, policy_fingerprint, record_id, remember
from proxy.engine.planner import ReplayLog
from proxy.engine.policy import Policy
from proxy.engine.working_set import WorkingSetKey, history_digest, working_set_scope
from proxy.engine.working_set import remember as remember_exchange
from proxy.formats.openai_chat import OPENAI_CHAT

SCOPE = "tenant:abc"
HISTORY: list[Any] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "what is in the log?"},
]
LATER: list[Any] = [
    *HISTORY,
    {"role": "assistant", "content": "an error"},
    {"role": "user", "content": "why?"},
]
EXCHANGE: list[Any] = [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "page"},
]


class Counting(MemoryStore):
    def __init__(self) -> None:
        super().__init__(b"secret")
        self.calls = 0

    async def get_many(self, scope: str, artifact_ids: Sequence[str]) -> dict[str, Artifact]:
        self.calls += 1
        return await super().get_many(scope, artifact_ids)


def key(items: list[Any]) -> WorkingSetKey:
    return WorkingSetKey(SCOPE, history_digest(OPENAI_CHAT, items), 60, 100)


def record(policy: Policy, **changes: Any) -> CutRecord:
    fields: dict[str, Any] = {
        "policy": policy_fingerprint(policy), "items": 2, "exchanges": 0, "units": 1,
        "sizing": 7000, "slack": 5, "cuts": [[], [], [(0, 1)]], "seen": [[], [], []],
    }  # fmt: skip
    return CutRecord(**{**fields, **changes})


async def test_exchanges_and_cuts_come_back_in_one_round_trip() -> None:
    store, policy = Counting(), Policy()
    await remember_exchange(store, key(HISTORY), EXCHANGE)
    assert await remember(store, key(HISTORY), record(policy))
    history = await recall_history(store, SCOPE, OPENAI_CHAT, LATER, policy, True)
    assert store.calls == 1
    # the exchange goes back after the remembered history (its rounds came after it)
    assert history.kept.exchanges == 1 and history.kept.items[2:4] == EXCHANGE
    assert history.recalled is not None and history.recalled.record == record(policy)
    # a record made over other items (an exchange put back inside it) does not apply here
    other = Counting()
    await remember_exchange(other, key(HISTORY), EXCHANGE)
    await remember(other, key(HISTORY), record(policy, items=4, exchanges=1))
    assert (await recall_history(other, SCOPE, OPENAI_CHAT, LATER, policy, True)).recalled is None
    assert history.pins and history.sizing(9000) == 7000
    assert history.working_set == history.cuts_key
    assert history.cuts_key is not None and history.cuts_key.digest == key(LATER).digest


async def test_nothing_is_looked_up_for_a_follow_up_call_or_a_policy_that_does_not_reduce() -> None:
    store = Counting()
    for policy, first in ((Policy(), False), (Policy(mode="inspect"), True)):
        history = await recall_history(store, SCOPE, OPENAI_CHAT, LATER, policy, first)
        assert history.cuts_key is None and history.recalled is None
    assert store.calls == 0


async def test_without_the_working_set_the_cuts_are_still_remembered() -> None:
    store = Counting()
    policy = Policy.model_validate({"read_tool": {"working_set": False}})
    await remember_exchange(store, key(HISTORY), EXCHANGE)
    await remember(store, key(HISTORY), record(policy))
    history = await recall_history(store, SCOPE, OPENAI_CHAT, LATER, policy, True)
    assert history.working_set is None and history.kept.exchanges == 0
    assert history.recalled is not None
    assert history.cuts_key is not None and history.cuts_key.digest == key(LATER).digest


async def test_a_store_that_does_not_answer_leaves_nothing() -> None:
    class Down(MemoryStore):
        async def get_many(self, scope: str, artifact_ids: Any) -> Any:
            raise StoreUnavailable("down")

    history = await recall_history(Down(b"s"), SCOPE, OPENAI_CHAT, LATER, Policy(), True)
    assert history.kept.unavailable and history.recalled is None and not history.pins
    # this request's own cuts may still be kept
    assert history.cuts_key is not None and history.cuts_key.digest == key(LATER).digest


async def fresh(store: MemoryStore, policy: Policy) -> History:
    """A request of a conversation with nothing remembered yet."""
    history = await recall_history(store, SCOPE, OPENAI_CHAT, LATER, policy, True)
    assert history.recalled is None and history.cuts_key is not None
    return history


def made(policy: Policy, log: ReplayLog, *, sent: bool = True) -> Made:
    return Made(policy, 4, 3, 8000, log, sent, 7)


async def test_a_request_keeps_its_cuts_for_the_next_one() -> None:
    store, policy = MemoryStore(b"s"), Policy()
    history = await fresh(store, policy)
    log = ReplayLog([[], [], [(2, 1)]], [[], [], []])
    assert await keep_cuts(store, history, made(policy, log))
    stored = await store.get(working_set_scope(SCOPE), record_id(store, SCOPE, key(LATER).digest))
    assert stored is not None
    kept = CutRecord.decode(stored.content)
    assert kept is not None and (kept.cuts, kept.sizing, kept.slack) == (log.cuts, 8000, 7)


async def test_nothing_is_written_when_there_is_nothing_to_pin_or_supersede() -> None:
    store, policy = MemoryStore(b"s"), Policy()
    history = await fresh(store, policy)
    assert not await keep_cuts(store, history, made(policy, ReplayLog.empty(3)))
    # a reduction that did not go (never worse): its moves are not kept
    log = ReplayLog([[], [], [(2, 1)]], [[], [], []])
    assert not await keep_cuts(store, history, made(policy, log, sent=False))
    assert not await keep_cuts(store, History(history.kept), made(policy, log))  # no key
