"""The growth measure: where a step of growth starts and the median of the recent ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline_harness import agent_history, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.engine.growth import GrowthMeter, GrowthSizing, growth_starts
from proxy.formats.openai_chat.conversation import parse_conversation


def test_a_turn_is_one_step_of_growth_and_so_is_each_further_exchange_in_it() -> None:
    # units: user, exchange, text | user, text | user, exchange, exchange, exchange
    exchanges = [False, True, False, False, False, False, True, True, True]
    assert growth_starts(exchanges, [0, 3, 5]) == [0, 3, 5, 7, 8]


def test_an_agent_loop_inside_one_turn_grows_by_exchanges() -> None:
    exchanges = [False, True, True, True]
    assert growth_starts(exchanges, [0]) == [0, 2, 3]


def test_exchanges_before_the_first_turn_grow_like_a_turn_s_own() -> None:
    # units: exchange, exchange | user, exchange: the first exchange starts no step of its own
    assert growth_starts([True, True, False, True], [2]) == [1, 2]


def test_an_exchange_that_opens_a_turn_is_its_first() -> None:
    assert growth_starts([True, True, True], [0]) == [0, 1, 2]


def _meter(starts: list[int], turns: int = 3, recent: int = 3) -> GrowthMeter:
    return GrowthMeter(GrowthSizing(starts, turns, recent))


def test_growth_is_the_median_of_the_recent_completed_steps() -> None:
    meter = _meter([0, 2, 4, 6, 8])
    costs = [10, 990, 100, 100, 5000, 0, 300, 0, 7]  # steps: 1000, 200, 5000, 300, (7 so far)
    for unit, tokens in enumerate(costs):
        meter.arrive(unit, tokens)
    assert meter.per_turn() == 300  # median of the last three completed: 200, 5000, 300
    assert meter.room() == 900


def test_before_any_step_is_complete_the_current_one_counts() -> None:
    meter = _meter([0, 5])
    meter.arrive(0, 40)
    meter.arrive(1, 60)
    assert meter.per_turn() == 100
    assert _meter([0]).room() == 0


def test_the_first_step_counts_once_complete_and_units_before_it_in_none() -> None:
    meter = _meter([1, 3])
    for unit, tokens in enumerate([1, 50, 50, 7]):  # before any step: 1; steps: 100, (7 so far)
        meter.arrive(unit, tokens)
    assert meter.per_turn() == 100


def test_the_measure_at_a_unit_depends_only_on_the_units_before_it() -> None:
    starts = [0, 2, 4, 6]
    costs = [100, 200, 300, 400, 50, 60, 70, 80]
    seen = []
    for n in range(1, len(costs) + 1):
        meter = _meter(starts)
        for unit, tokens in enumerate(costs[:n]):
            meter.arrive(unit, tokens)
        seen.append(meter.per_turn())
    whole = _meter(starts)
    replay = []
    for unit, tokens in enumerate(costs):
        whole.arrive(unit, tokens)
        replay.append(whole.per_turn())
    assert replay == seen


GROWING_POLICY = """
extends: default
budget: {{context_window: 16000, reserved_output: 1000, safety_margin: 0, growth_turns: {turns}}}
"""


async def _prefix_breaks(tmp_path: Path, growth_turns: int) -> tuple[int, int]:
    """(prompts that do not start with the previous prompt, prompts reduced) over 40 turns of
    ~1,600 tokens in a 15,000-token allowance, through the real Preparer."""
    directory = tmp_path / f"growth-{growth_turns}"
    write_policy(directory, GROWING_POLICY.format(turns=growth_turns))
    harness = make_harness(directory, shared_counters())
    history = agent_history(40, result_chars=6000)
    previous: list[Any] | None = None
    breaks = reduced = 0
    for turns in range(1, 41):
        prepared = await harness.prepare(
            {"model": "gpt-4o", "messages": history[: 2 + turns * 4 - 1]}
        )
        messages = prepared.parsed["messages"]
        assert prepared.manifest.tokens_after <= prepared.manifest.allowance
        assert not parse_conversation(messages).problems  # no tool pair split
        reduced += prepared.changed
        if previous is not None and messages[: len(previous)] != previous:
            breaks += 1
        previous = messages
    return breaks, reduced


async def test_cuts_sized_to_large_turns_break_the_prefix_less_often(tmp_path: Path) -> None:
    shallow, reduced = await _prefix_breaks(tmp_path, 0)
    deep, _ = await _prefix_breaks(tmp_path, 6)
    assert reduced > 25  # the window is really exercised
    assert deep < shallow
