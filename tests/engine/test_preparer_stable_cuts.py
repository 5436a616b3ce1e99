"""Preparer: cuts that stay put. Once a conversation was cut, its later requests keep that cut
until the next one is due, whatever the count ratio, the tools or the output limit do meanwhile;
a request under its trigger whose conversation was cut before keeps its cuts too."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
from moving_ratio import JITTER, MovingRatio, kept_prefix, replay, requests_of
from pipeline_harness import TENANT, Harness, agent_history, make_harness, write_policy
from shared_redis import delete_prefix, require_shared_redis, unique_prefix
from shared_tokens import shared_counters

from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import Artifact, MemoryStore, StoreUnavailable
from proxy.engine.cut_memory import record_id
from proxy.engine.manifest import Outcome, Prepared
from proxy.engine.prepare_request import FIRST_CALL, LOOKING, CallOptions
from proxy.engine.preparer import Preparer
from proxy.engine.working_set import history_digest, working_set_scope
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.jsonio import dumps
from proxy.tokens.counters import TokenCounters

WINDOW = """
extends: default
mode: {mode}
budget: {{context_window: 6000, reserved_output: 500, safety_margin: 0, trigger: 0.9,
         target: 0.6}}
steps:
  - {{kind: offload_tool_results, threshold_chars: 4000}}
  - {{kind: clear_tool_results, keep_recent_exchanges: 1}}
  - {{kind: drop_turns, keep_recent_turns: 2}}
"""


class Forgetful(MemoryStore):
    """A store that never has anything in the working set's scope (no memory of cuts)."""

    async def get_many(self, scope: str, artifact_ids: Sequence[str]) -> dict[str, Artifact]:
        if scope == working_set_scope(TENANT.scope):
            return {}
        return await super().get_many(scope, artifact_ids)


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


def harness(
    tmp_path: Path, counters: TokenCounters, ratio: MovingRatio, mode: str = "window",
    store: MemoryStore | None = None,
) -> Harness:  # fmt: skip
    write_policy(tmp_path, WINDOW.format(mode=mode))
    return make_harness(tmp_path, counters, store, calibration=ratio)


def conversation(turns: int = 40) -> list[list[dict[str, Any]]]:
    return requests_of(agent_history(turns, result_chars=1200, seed=3))


async def run(
    tmp_path: Path, counters: TokenCounters, ratios: tuple[float, ...], mode: str = "window",
    store: MemoryStore | None = None, extra: Callable[[int], dict[str, Any]] | None = None,
) -> list[Any]:  # fmt: skip
    ratio = MovingRatio()
    h = harness(tmp_path, counters, ratio, mode, store)
    counter = counters.for_model("gpt-4o")
    requests = conversation()
    return await replay(h.preparer, ratio, TENANT, requests, ratios, counter, extra=extra)


def moved(steps: list[Any]) -> list[int]:
    """Like `undue_breaks`, the messages only (a client that changes its tools changes the
    tools block itself)."""
    return [
        n
        for n, (a, b) in enumerate(itertools.pairwise(steps), start=1)
        if b.fits and b.body["messages"][: len(a.body["messages"])] != a.body["messages"]
    ]


def breaks(steps: list[Any]) -> int:
    return sum(not kept_prefix(a.body, b.body) for a, b in itertools.pairwise(steps))


def undue_breaks(steps: list[Any]) -> list[int]:
    """Requests whose previous prompt plus their new messages fitted, yet changed that prompt."""
    return [
        n
        for n, (a, b) in enumerate(itertools.pairwise(steps), start=1)
        if b.fits and a.body is not None and b.body is not None and not kept_prefix(a.body, b.body)
    ]


@pytest.mark.parametrize("mode", ["window", "compact"])
async def test_cuts_stay_put_while_the_count_ratio_moves(
    tmp_path: Path, counters: TokenCounters, mode: str
) -> None:
    steps = await run(tmp_path / "memory", counters, JITTER, mode)
    assert all(s.body is not None for s in steps)
    cut = [n for n, s in enumerate(steps) if s.manifest.outcome != Outcome.within_trigger]
    assert len(cut) > 10, "the conversation is cut over and over"
    assert undue_breaks(steps) == []
    # without the memory, the same requests under the same ratios move earlier cuts
    forgetting = await run(tmp_path / "forgetful", counters, JITTER, mode, Forgetful(b"x"))
    assert undue_breaks(forgetting) != []


async def test_with_a_steady_ratio_remembering_breaks_the_prompt_no_more_than_replaying(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """While the budget stays the same the replay alone keeps old cuts too; remembering only
    lets a cut wait until the prompt as sent (not as planned, with its stand-in items sized for
    the widest numbers) crosses the trigger."""
    steady = await run(tmp_path / "memory", counters, (1.0,))
    fresh = await run(tmp_path / "forgetful", counters, (1.0,), store=Forgetful(b"x"))
    assert undue_breaks(steady) == undue_breaks(fresh) == []
    assert breaks(steady) <= breaks(fresh)


async def test_a_request_under_its_trigger_keeps_the_cuts_made_before(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """Cut at a ratio of 1.1; the next request at 0.8 is under its (higher) trigger as it came,
    and still goes with the earlier cut in place rather than with the old turns back."""
    ratio = MovingRatio(1.1)
    h = harness(tmp_path, counters, ratio)
    requests = conversation()
    counter = counters.for_model("gpt-4o")
    first = next(
        n for n, items in enumerate(requests)
        if counter.count_request({"model": "gpt-4o", "messages": items}) > 0.9 * 5500 / 1.1
    )  # fmt: skip
    pair = requests[first : first + 2]
    steps = await replay(h.preparer, ratio, TENANT, pair, (1.1, 0.8), counter)
    before, after = steps
    assert before.manifest.outcome in (Outcome.reduced, Outcome.reduced_above_target)
    assert after.manifest.tokens_before <= after.manifest.trigger
    assert after.manifest.outcome == Outcome.reduced
    assert kept_prefix(before.body, after.body)


async def test_a_new_tool_list_or_output_limit_moves_no_earlier_cut(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """A client that adds tools now and then and asks for another output limit every request:
    both move the budget (the tools block is counted, the output limit is reserved)."""
    described = {"description": "Looks things up. " * 40, "parameters": {"type": "object"}}
    tools = [{"type": "function", "function": {"name": f"t{i}", **described}} for i in range(3)]

    def extra(n: int) -> dict[str, Any]:
        return {"max_tokens": 200 + 400 * (n % 3), "tools": tools[: n // 8 % 4]}

    steps = await run(tmp_path / "memory", counters, (1.0,), extra=extra)
    # the client changed its tools block: the messages are what the proxy keeps or not
    client_tools = [[t for t in s.body.get("tools") or [] if t in tools] for s in steps]
    assert len({len(listed) for listed in client_tools}) == 4
    assert moved(steps) == []
    forgetful = Forgetful(b"x")
    forgetting = await run(tmp_path / "forgetful", counters, (1.0,), "window", forgetful, extra)
    assert moved(forgetting) != []  # replayed afresh, the cuts would have moved


async def test_without_the_store_the_request_is_planned_afresh(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """A store that does not answer: the cuts are replayed from the history alone, as before."""
    class Down(MemoryStore):
        async def get_many(self, scope: str, artifact_ids: Sequence[str]) -> dict[str, Artifact]:
            raise StoreUnavailable("down")

    steps = await run(tmp_path, counters, JITTER, store=Down(b"x"))
    assert all(s.body is not None for s in steps)


class Replicas:
    """Two proxies on one Redis taking turns, each request on the other one."""

    def __init__(self, *preparers: Preparer) -> None:
        self.preparers = preparers
        self.turn = 0

    async def prepare(self, body: dict[str, Any], raw: bytes, tenant: Any, wire: Any) -> Prepared:
        self.turn += 1
        return await self.preparers[self.turn % 2].prepare(body, raw, tenant, wire)


@pytest.fixture
async def redis_stores() -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    url = require_shared_redis()
    prefix = unique_prefix()
    one, two = (RedisStore(url, b"s" * 32, key_prefix=prefix) for _ in range(2))
    yield one, two
    await one.close()
    await two.close()
    client = redis.asyncio.Redis.from_url(url)
    await delete_prefix(client, prefix)
    await client.aclose()


async def test_replicas_on_one_redis_keep_each_others_cuts(
    tmp_path: Path, counters: TokenCounters, redis_stores: tuple[RedisStore, RedisStore]
) -> None:
    ratio = MovingRatio()
    write_policy(tmp_path, WINDOW.format(mode="window"))
    preparers = [make_harness(tmp_path, counters, store, calibration=ratio).preparer
                 for store in redis_stores]  # fmt: skip
    counter = counters.for_model("gpt-4o")
    steps = await replay(Replicas(*preparers), ratio, TENANT, conversation(), JITTER, counter)
    assert all(s.body is not None for s in steps) and breaks(steps) > 0
    assert undue_breaks(steps) == []


@pytest.mark.parametrize(("call", "kept"), [(FIRST_CALL, True), (LOOKING, False)])
async def test_only_a_request_that_goes_upstream_keeps_its_cuts(
    tmp_path: Path, counters: TokenCounters, call: CallOptions, kept: bool
) -> None:
    """A dry run or a token count (`LOOKING`) is prepared the same way, remembered cuts
    included, but keeps none of its own: the next request must keep what the upstream saw."""
    h = harness(tmp_path, counters, MovingRatio())
    items = conversation()[-1]
    body = {"model": "gpt-4o", "messages": items}
    prepared = await h.preparer.prepare(body, dumps(body), TENANT, OPENAI_CHAT, call=call)
    assert prepared.changed and prepared.manifest.actions
    digest = history_digest(OPENAI_CHAT, items)
    rid = record_id(h.store, TENANT.scope, digest)
    found = await h.store.get(working_set_scope(TENANT.scope), rid)
    assert (found is not None) is kept
