"""Preparer: the provider's cache, warm or cold. The same history prepares the same way while
the conversation's cache is warm (its remembered cuts kept, the prompt prefix kept); once it is
cold, a cut that is due is planned afresh and goes to the target (or as deep as the growth says)
without keeping the earlier cuts. Under the trigger nothing changes, warm or cold."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from moving_ratio import kept_prefix, requests_of
from pipeline_harness import TENANT, Harness, agent_history, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.engine.cache_warmth import note_sent
from proxy.engine.manifest import Prepared
from proxy.engine.prepare_request import FIRST_CALL
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.jsonio import dumps
from proxy.synthetic.registry import ARTIFACT_TOOLS
from proxy.tokens.counters import TokenCounters

POLICY = """
extends: default
mode: {mode}
budget: {{context_window: 6000, reserved_output: 500, safety_margin: 0, trigger: 0.9,
         target: 0.6}}
steps:
  - {{kind: offload_tool_results, threshold_chars: 4000}}
  - {{kind: clear_tool_results, keep_recent_exchanges: 1}}
  - {{kind: {last}, keep_recent_turns: 2}}
"""
STEP_S = 10.0
PAUSE_S = 1000.0
REQUESTS = requests_of(agent_history(30, result_chars=1200, seed=3))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Windows:
    """The request's upstream: no window to ask, a cache lifetime of `ttl`."""

    ttl: int | None = 300
    upstream_name: str = "up"

    async def window(self, model: str, *, ask: bool) -> None:
        return None

    def prompt_cache_ttl(self, model: str) -> int | None:
        return self.ttl


@dataclass
class Walk:
    harness: Harness
    clock: Clock
    windows: Windows

    async def send(self, items: list[Any], wait_s: float = STEP_S) -> Prepared:
        """One request `wait_s` after the previous, sent as the driver sends it (its time kept)."""
        self.clock.now += wait_s
        body = {"model": "gpt-4o", "messages": items}
        prepared = await self.harness.preparer.prepare(
            body, dumps(body), TENANT, OPENAI_CHAT, self.windows, call=FIRST_CALL
        )
        if prepared.sent_key is not None:
            await note_sent(self.harness.store, prepared.sent_key, self.clock())
        return prepared


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


def walk(directory: Path, counters: TokenCounters, mode: str = "window", ttl: int | None = 300,
         last: str = "drop_turns") -> Walk:  # fmt: skip
    write_policy(directory, POLICY.format(mode=mode, last=last))
    clock = Clock()
    return Walk(make_harness(directory, counters, clock=clock), clock, Windows(ttl))


async def first_warm_cut(directory: Path, counters: TokenCounters, mode: str, last: str) -> int:
    """The first request (after `last` cut the conversation) whose due cut kept the prefix."""
    w = walk(directory, counters, mode, last=last)
    cut = False
    for n, items in enumerate(REQUESTS):
        prepared = await w.send(items)
        cache = prepared.manifest.cache
        assert cache is not None and cache.state == ("cold" if n == 0 else "warm")
        if cut and cache.applied == "keep_prefix":
            return n
        cut = cut or any(a.step == last for a in prepared.manifest.actions)
    raise AssertionError("no cut was due over remembered cuts")


@pytest.mark.parametrize(("mode", "last"), [("window", "drop_turns"), ("compact", "summarize")])
async def test_the_same_history_keeps_its_prefix_warm_and_cuts_afresh_cold(
    tmp_path: Path, counters: TokenCounters, mode: str, last: str
) -> None:
    due = await first_warm_cut(tmp_path / "find", counters, mode, last)
    outcomes = {}
    runs = (("warm", STEP_S, 300), ("cold", PAUSE_S, 300), ("today", STEP_S, None))
    for state, wait, ttl in runs:
        w = walk(tmp_path / state, counters, mode, ttl, last)
        for items in REQUESTS[:due]:
            previous = await w.send(items)
        outcomes[state] = (previous.parsed, await w.send(REQUESTS[due], wait))
    (before, warm), (same_before, cold) = outcomes["warm"], outcomes["cold"]
    assert before == same_before  # the same history up to the pause
    assert warm.manifest.cache is not None and cold.manifest.cache is not None
    assert (warm.manifest.cache.state, warm.manifest.cache.applied) == ("warm", "keep_prefix")
    assert (cold.manifest.cache.state, cold.manifest.cache.applied) == ("cold", "deeper_cut")
    assert cold.manifest.cache.age_seconds == PAUSE_S
    assert cold.manifest.cache.ttl_seconds == 300
    # warm is today's behaviour exactly (the earlier cuts kept); cold plans the cut afresh
    assert warm.body == outcomes["today"][1].body
    assert cold.manifest.tokens_after <= cold.manifest.target < cold.manifest.trigger


async def test_a_cold_cut_rolls_the_summary_up_at_once(
    tmp_path: Path, counters: TokenCounters
) -> None:
    """Warm, the turns dropped since the summary's last roll-up wait behind a short item (the
    summary's bytes stay); cold, the summary takes them in at once."""
    due = await first_warm_cut(tmp_path / "find", counters, "compact", "summarize")
    details = {}
    for state, wait in (("warm", STEP_S), ("cold", PAUSE_S)):
        w = walk(tmp_path / state, counters, "compact", last="summarize")
        for items in REQUESTS[:due]:
            await w.send(items)
        prepared = await w.send(REQUESTS[due], wait)
        summaries = [a.detail for a in prepared.manifest.actions if a.step == "summarize"]
        assert len(summaries) == 1 and summaries[0] is not None
        details[state] = summaries[0]
    assert "tail" in details["warm"]
    assert "tail" not in details["cold"]
    assert details["cold"]["span"][1] > details["warm"]["span"][1]  # it covers more turns


async def test_an_unknown_lifetime_never_goes_cold(tmp_path: Path, counters: TokenCounters) -> None:
    w = walk(tmp_path, counters, ttl=None)
    applied = set()
    for n, items in enumerate(REQUESTS):
        prepared = await w.send(items, PAUSE_S if n % 3 == 0 else STEP_S)
        cache = prepared.manifest.cache
        assert cache is not None and cache.state == "unknown"
        assert prepared.sent_key is None  # nothing to keep
        applied.add(cache.applied)
    assert "deeper_cut" not in applied and "keep_prefix" in applied


def _tools_added(previous: dict[str, Any], body: dict[str, Any]) -> bool:
    """The one break by design: the read tools added for the first time, the messages kept."""
    old, new = previous.get("tools") or [], body.get("tools") or []
    names = {t.get("function", {}).get("name") for t in new[len(old) :]}
    return new[: len(old)] == old and names == set(ARTIFACT_TOOLS)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(pauses=st.sets(st.integers(1, len(REQUESTS) - 1), max_size=12))
async def test_without_a_due_cut_the_previous_prompt_stays_the_prefix_warm_or_cold(
    tmp_path_factory: pytest.TempPathFactory, pauses: set[int]
) -> None:
    w = walk(tmp_path_factory.mktemp("walk"), shared_counters())
    previous: dict[str, Any] | None = None
    for n, items in enumerate(REQUESTS):
        prepared = await w.send(items, PAUSE_S if n in pauses else STEP_S)
        cache = prepared.manifest.cache
        assert cache is not None
        assert cache.state == ("cold" if n in pauses or n == 0 else "warm")
        if previous is not None and cache.applied == "none":
            body = prepared.parsed
            kept = kept_prefix(previous, body)
            messages = body["messages"][: len(previous["messages"])] == previous["messages"]
            assert kept or (messages and _tools_added(previous, body)), n
        previous = prepared.parsed
