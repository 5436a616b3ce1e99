"""Reducer: once planned, a request whose total is at least `precompute_at` of its trigger starts
the next cut's work (summaries) in the background; the preparer's own check before any plan is
in tests/engine/test_preparer_precompute.py."""

from __future__ import annotations

from typing import Any

import pytest
from context_harness import assistant, call, counter, make_ctx, policy, result, system, user

import proxy.engine.reducer as reducer
from proxy.artifacts.store import MemoryStore
from proxy.engine.budget import Budget
from proxy.engine.reducer import Plan, ReductionContext, plan_reduction
from proxy.engine.step_api import StepServices
from proxy.engine.steps.summarize.background import Background

SUMMARIZE = {"kind": "summarize", "summarizer": {"kind": "llm", "model": "m", "precompute_at": 0.5}}


def history() -> list[dict[str, Any]]:
    return [
        system(),
        user("Task: audit the repository."),
        call("c0", "read_file"),
        result("c0", "a.py: fine " * 40),
        assistant("a.py is fine."),
        user("Next, please."),
        call("c1", "read_file"),
        result("c1", "b.py: fine " * 40),
        assistant("b.py is fine."),
    ]


async def planned(
    monkeypatch: pytest.MonkeyPatch, items: list[dict[str, Any]], trigger_of: Any, *,
    allowance: int | None = None, summarizer: bool = True, background: bool = True,
    precompute: bool = False, target_share: int = 2,
) -> tuple[Plan, list[Any], int, int]:
    """`items` planned under a trigger of `trigger_of(total)` (the target `1 / target_share` of
    it): the plan, the cuts handed to each start of the precompute, the request's total and its
    units."""
    calls: list[Any] = []

    async def record(steps: Any, ctx: Any, services: Any, cuts: Any) -> None:
        calls.append(cuts)

    monkeypatch.setattr(reducer, "_precompute", record)
    options = {} if allowance is None else {"allowance": allowance}
    ctx = make_ctx(items, policy(steps=[SUMMARIZE]), **options)
    assert isinstance(ctx, ReductionContext)
    total = 100 + sum(ctx.unit_cost(u) for u in range(len(ctx.units)))
    services = StepServices(
        MemoryStore(b"k"), "s", counter(),
        summarizer=object() if summarizer else None,  # type: ignore[arg-type]
        background=Background() if background else None, precompute=precompute,
    )
    trigger = trigger_of(total)
    budget = Budget(10**6, 0, 0, 10**6, trigger, trigger // target_share)
    plan = await plan_reduction(ctx, budget, 100, 150, services)
    if not precompute:
        assert plan.outputs == [] and plan.total == total
    return plan, calls, total, len(ctx.units)


async def started(monkeypatch: pytest.MonkeyPatch, trigger_of: Any, **options: Any) -> int:
    """How many times planning the two turns under the trigger starts the precompute."""
    return len((await planned(monkeypatch, history(), trigger_of, **options))[1])


async def test_a_total_of_exactly_precompute_at_of_the_trigger_starts_the_next_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await started(monkeypatch, lambda total: 2 * total) == 1
    assert await started(monkeypatch, lambda total: 2 * total + 2) == 0
    assert await started(monkeypatch, lambda total: 20 * total) == 0


async def test_without_a_summarizer_or_a_background_nothing_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await started(monkeypatch, lambda total: 2 * total, summarizer=False) == 0
    assert await started(monkeypatch, lambda total: 2 * total, background=False) == 0


async def planned_at_half_the_trigger(
    monkeypatch: pytest.MonkeyPatch, *, precompute: bool
) -> tuple[Plan, list[Any], int]:
    """Six turns at exactly half the trigger: the plan, the cuts handed to the precompute, and
    the number of units."""
    items = [system(), user("Task: audit the repository.")]
    for t in range(6):
        items += [user(f"Step {t}."), call(f"c{t}", "read_file"),
                  result(f"c{t}", f"{t}.py: fine " * 800), assistant(f"{t}.py is fine.")]
    plan, calls, _, units = await planned(
        monkeypatch, items, lambda total: 2 * total, allowance=10_000, precompute=precompute,
        target_share=4,
    )
    return plan, calls, units


async def test_the_next_cut_is_planned_as_if_the_newest_unit_crossed_the_trigger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing is cut now, but the cuts handed to the precompute are those the request crossing
    the trigger would make (`cut_last`)."""
    _, calls, units = await planned_at_half_the_trigger(monkeypatch, precompute=False)
    [[cuts]] = calls
    assert cuts and all(cut[0] < units for cut in cuts), calls


async def test_a_precompute_only_plan_hands_over_the_same_cuts_and_plans_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The preparer's own precompute call (`services.precompute`): the same cuts, an empty
    plan."""
    _, planned, _ = await planned_at_half_the_trigger(monkeypatch, precompute=False)
    plan, calls, _ = await planned_at_half_the_trigger(monkeypatch, precompute=True)
    assert calls == planned and plan == Plan([], 0, 0)
