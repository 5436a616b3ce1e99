"""summarize.precompute: which spans it starts summarizing ahead of time, each with the span it
rolls up (mutation run 4; the end-to-end behaviour is in tests/engine/test_preparer_precompute.py).

The history is test_summarize's: units 0-8, turns starting at units [0, 2, 5, 7], unit 0 the
first user message (protected)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from context_harness import assistant, make_ctx, policy, system

from proxy.artifacts.store import MemoryStore
from proxy.engine.step_api import Cut, StepServices
from proxy.engine.steps.summarize import Summarize, SummarizeConfig, model_summary
from tests.engine.steps.summarize.test_step import SCOPE, counter, history

# every cut a roll-up: the spans the next cut may need are those of the planner's cuts
LLM = {"summarizer": {"kind": "llm", "model": "m"}, "roll_up_turns": 0, "roll_up_after": 0}


def started(
    monkeypatch: pytest.MonkeyPatch,
    cuts: list[Cut],
    messages: list[dict[str, Any]] | None = None,
    **settings: Any,
) -> list[list[model_summary.Spans]]:
    """The chains `precompute` hands to `model_summary.start_in_background` (one per call)."""
    chains: list[list[model_summary.Spans]] = []

    async def record(
        ctx: Any, services: Any, made: Any, chain: list[model_summary.Spans], count: Any
    ) -> bool:
        chains.append(chain)
        return True

    monkeypatch.setattr(model_summary, "start_in_background", record)
    ctx = make_ctx(messages or history(), policy(), allowance=10_000)
    step = Summarize(SummarizeConfig(**{**LLM, **settings}), ctx)
    services = StepServices(MemoryStore(b"k"), SCOPE, counter())
    asyncio.run(step.precompute(ctx, services, cuts))
    return chains


def test_with_no_cut_yet_every_turn_up_to_the_current_one_is_a_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert started(monkeypatch, []) == [
        [([1], []), ([1, 2, 3, 4], [1]), ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4])]
    ]


def test_the_spans_start_after_the_last_real_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    assert started(monkeypatch, [(4, 2)]) == [
        [([1, 2, 3, 4], [1]), ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4])]
    ]


def test_a_cut_forced_at_the_newest_unit_is_a_span_of_its_own_not_a_real_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planner's last cut at the newest unit (8) is the one a crossing would make now."""
    assert started(monkeypatch, [(2, 1), (4, 2), (8, 6)]) == [
        [
            ([1, 2, 3, 4], [1]),
            ([1, 2, 3, 4, 5], [1, 2, 3, 4]),
            ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5]),
        ]
    ]


def test_at_most_four_turns_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = history() + [
        m
        for n in range(3)
        for m in ({"role": "user", "content": f"more {n}"}, assistant(f"done {n}"))
    ]
    [chain] = started(monkeypatch, [], messages)
    assert [len(span) for span, _ in chain] == [6, 8, 10, 12]  # up to turns 7-13 (not 2, 5)


def test_a_leading_turn_is_rolled_up_from_its_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit 0 is an assistant greeting (a leading turn, not protected): the first span starts
    from nothing, so unit 0 is in every span."""
    messages = [system(), assistant("Hello."), *history()[1:]]
    [chain] = started(monkeypatch, [], messages)
    assert chain[0] == ([0], [])
    assert all(span[0] == 0 for span, _ in chain)


def test_an_extract_summarizer_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert started(monkeypatch, [], summarizer={"kind": "extract"}) == []


def test_nothing_starts_while_even_four_turns_on_is_too_early_to_roll_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last roll-up at unit 2 (turn 1); the newest unit (9) is a turn of its own (4): a
    crossing four turns on is 3 + 4 = 7 turns after the roll-up."""
    messages = [*history(), {"role": "user", "content": "And now?"}]
    assert started(monkeypatch, [(2, 1)], messages, roll_up_turns=8) == []
    [chain] = started(monkeypatch, [(2, 1)], messages, roll_up_turns=7)
    assert [len(span) for span, _ in chain] == [1, 4, 6, 8]  # up to turns 1-4
