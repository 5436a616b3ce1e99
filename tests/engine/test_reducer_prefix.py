"""Reducer and the system prefix: a step that rewrites both the prefix and its units gives one
output, the prefix's edits first (offload_messages with `system: true`); a request that is only a
system prefix."""

from __future__ import annotations

from typing import Any

from context_harness import big, counter, make_ctx, policy, system, user

from proxy.artifacts.store import MemoryStore
from proxy.engine.budget import Budget
from proxy.engine.reducer import ReductionContext, plan_reduction
from proxy.engine.step_api import StepServices
from proxy.engine.steps.offload_messages import OffloadMessages, OffloadMessagesConfig

SETTINGS: dict[str, Any] = {
    "threshold_chars": 500,
    "preview_head_chars": 60,
    "preview_tail_chars": 20,
    "system": True,
}


def history() -> list[dict[str, Any]]:
    """Items: 0 system (oversized); units: u0 task, u1 pasted log, u2, u3."""
    return [
        system(big("prompt", 3000)),
        user("Task: read the logs."),
        user(big("paste", 4000)),
        user("What failed?"),
        user("Go on."),
    ]


OVER = Budget(100_000, 0, 0, 100_000, 10, 5)


def services() -> StepServices:
    return StepServices(store=MemoryStore(b"k" * 32), scope="s", counter=counter())


def ctx_with(items: list[dict[str, Any]]) -> ReductionContext:
    ctx = make_ctx(items, policy(steps=[{"kind": "offload_messages", **SETTINGS}]))
    assert isinstance(ctx, ReductionContext)
    return ctx


async def test_one_output_holds_the_prefix_and_the_units_edits() -> None:
    ctx = ctx_with(history())
    alone = OffloadMessages(OffloadMessagesConfig(**SETTINGS), ctx)
    prefix, units = alone.prefix_output(ctx), alone.rewrite(ctx, [1])
    assert prefix is not None and [e.index for e in prefix.edits] == [0]
    assert [e.index for e in units.edits] == [2] and units.reason == ""

    plan = await plan_reduction(ctx, OVER, 100, 150, services())
    [(step, out)] = plan.outputs
    assert step.name == "offload_messages"
    assert out.edits == prefix.edits + units.edits
    assert out.artifacts == {**prefix.artifacts, **units.artifacts} and len(out.artifacts) == 2
    assert out.units == units.units == [1]
    assert out.tokens_freed == prefix.tokens_freed + units.tokens_freed
    assert units.tokens_freed > 0 and prefix.tokens_freed > 0
    assert out.reason == "system message over 500 chars: offloaded"


async def test_a_prefix_alone_is_the_steps_output() -> None:
    """No unit to offload (the paste is gone): the step acts on the system prompt alone."""
    items = [m for m in history() if "paste" not in m["content"]]
    ctx = ctx_with(items)
    prefix = OffloadMessages(OffloadMessagesConfig(**SETTINGS), ctx).prefix_output(ctx)
    plan = await plan_reduction(ctx, OVER, 100, 150, services())
    [(step, out)] = plan.outputs
    assert step.name == "offload_messages"
    assert out == prefix and [e.index for e in out.edits] == [0]
    # the base shrinks by what the prefix frees, and carries the read tools (150, not 100)
    assert prefix is not None and prefix.tokens_freed > 0
    full = sum(ctx.unit_cost(u) for u in range(len(ctx.units)))
    assert plan.total == 150 - prefix.tokens_freed + full


async def test_a_request_of_only_a_system_prompt_plans_nothing_and_protects_its_base() -> None:
    ctx = make_ctx([system("You are a careful agent.")], policy())
    assert isinstance(ctx, ReductionContext) and ctx.units == [] and ctx.turn_first_unit == []
    plan = await plan_reduction(ctx, OVER, 100, 150, services())
    assert (plan.outputs, plan.total, plan.protected) == ([], 100, 100)


async def test_a_system_prompt_with_nothing_to_offload_leaves_the_base_alone() -> None:
    """`system: true` and a short prompt: no prefix output, no read tools in the base."""
    items = [system("Be brief."), *history()[1:]]
    ctx = ctx_with(items)
    full = [ctx.unit_cost(u) for u in range(len(ctx.units))]
    under = Budget(100_000, 0, 0, 100_000, 10**6, 10**5)
    plan = await plan_reduction(ctx, under, 100, 150, services())
    assert plan.outputs == [] and plan.total == 100 + sum(full)
