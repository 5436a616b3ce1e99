"""Reducer: the growth the planner sizes its cuts by is measured at each turn and at each tool
exchange after the first of a turn (an agent working inside one turn)."""

from __future__ import annotations

from typing import Any

import pytest
from context_harness import assistant, call, counter, make_ctx, policy, result, system, user

import proxy.engine.reducer as reducer
from proxy.artifacts.store import MemoryStore
from proxy.engine.budget import Budget
from proxy.engine.growth import growth_starts
from proxy.engine.reducer import ReductionContext, plan_reduction
from proxy.engine.step_api import StepServices


async def test_the_planner_gets_the_growth_steps_of_the_tool_exchanges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[list[bool]] = []

    def recording(exchanges: list[bool], turn_starts: list[int]) -> list[int]:
        seen.append(exchanges)
        return growth_starts(exchanges, turn_starts)

    monkeypatch.setattr(reducer, "growth_starts", recording)
    items: list[dict[str, Any]] = [system(), user("Task: audit.")]
    for t in range(3):  # one turn, three exchanges, then a question
        items += [call(f"c{t}", "read_file"), result(f"c{t}", f"{t}.py: fine")]
    items += [assistant("All fine."), user("Sure?"), assistant("Yes.")]
    ctx = make_ctx(items, policy())
    assert isinstance(ctx, ReductionContext)
    services = StepServices(MemoryStore(b"k"), "s", counter())
    await plan_reduction(ctx, Budget(10**6, 0, 0, 10**6, 10, 5), 100, 150, services)
    assert seen == [[u.kind == "tool_exchange" for u in ctx.units]]
    assert seen[0].count(True) == 3
