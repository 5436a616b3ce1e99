"""Reducer: what an action reports (its count and unit when a counting step's edits are
confirmed in part or whole, the default reason, the step's detail)."""

from __future__ import annotations

from context_harness import ConfirmingStore, make_ctx, policy, user

from proxy.artifacts.store import NewArtifact
from proxy.engine.apply_edits import store_and_apply
from proxy.engine.reducer import ReductionContext
from proxy.engine.step_api import Edit, StepOutput
from proxy.engine.steps.drop_turns import DropTurns, DropTurnsConfig


def two_archives() -> tuple[ReductionContext, DropTurns, StepOutput]:
    """A turns-counting step's output over two spans, each behind its own archive (as a summary
    and its tail are)."""
    ctx = make_ctx([user(f"turn {i}") for i in range(6)], policy())
    assert isinstance(ctx, ReductionContext)
    step = DropTurns(DropTurnsConfig(), ctx)
    out = StepOutput(
        edits=[Edit("remove", 1, None, "first"), Edit("remove", 2, None, "second")],
        artifacts={
            "first": NewArtifact("turn 1", "turns"),
            "second": NewArtifact("turn 2", "turns"),
        },
        units=[1, 2],
        count=2,
        detail={"span": [1, 2]},
    )
    return ctx, step, out


async def test_a_wholly_confirmed_output_counts_in_the_steps_unit() -> None:
    ctx, step, out = two_archives()
    reduction = await store_and_apply(ctx, [(step, out)], ConfirmingStore(lambda a: True), "s")
    [action] = reduction.actions
    assert (action.count, action.unit, action.message_indices) == (2, "turns", [1, 2])
    assert action.reason == "over trigger: reduced toward target"  # the output gave none
    assert action.detail == {"span": [1, 2]}


async def test_an_output_confirmed_in_part_counts_the_messages_it_changed() -> None:
    ctx, step, out = two_archives()
    store = ConfirmingStore(lambda artifact: artifact.content == "turn 2")
    reduction = await store_and_apply(ctx, [(step, out)], store, "s")
    [action] = reduction.actions
    assert (action.count, action.unit, action.message_indices) == (1, "messages", [2])
    assert action.artifact_ids == ["second"] and reduction.unconfirmed == 1
    assert reduction.messages == [m for i, m in enumerate(ctx.messages) if i != 2]
