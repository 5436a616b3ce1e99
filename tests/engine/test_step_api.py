"""step_api: the Step base (optional async phase), StepServices and PrepareContext helpers."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import pytest
from context_harness import counter, make_ctx
from step_harness import tool_history

from proxy.artifacts.store import MemoryStore
from proxy.engine.config_base import StepConfig
from proxy.engine.plan_totals import StepPlan
from proxy.engine.step_api import PrepareContext, Step, StepOutput, StepServices


class NoopConfig(StepConfig):
    kind: Literal["noop"] = "noop"


class Noop(Step[NoopConfig]):
    name = "noop"
    config_model = NoopConfig

    def plan(self, ctx: PrepareContext) -> StepPlan:
        n = len(ctx.units)
        return StepPlan(costs=[ctx.unit_cost(u) for u in range(n)], limits=[0] * n)

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        return StepOutput()


def services() -> StepServices:
    return StepServices(store=MemoryStore(b"s"), scope="t", counter=counter())


def test_a_step_keeps_its_config() -> None:
    ctx = make_ctx(tool_history())
    config = NoopConfig()
    step = Noop(config, ctx)
    assert step.config is config and step.in_default_policy
    assert step.plan(ctx).limits == [0] * len(ctx.units)


def test_plan_and_rewrite_are_required() -> None:
    class Incomplete(Step[NoopConfig]):
        name = "incomplete"
        config_model = NoopConfig

    with pytest.raises(TypeError):
        Incomplete(NoopConfig(), make_ctx(tool_history()))  # type: ignore[abstract]


def test_services_are_immutable() -> None:
    given = services()
    with pytest.raises(dataclasses.FrozenInstanceError):
        given.scope = "other"  # type: ignore[misc]


def test_unit_cost_and_protection() -> None:
    ctx = make_ctx(tool_history())
    unit: Any = ctx.units[1]
    assert ctx.unit_cost(1) == sum(ctx.message_costs[unit.start : unit.end])
    assert ctx.is_protected(0)  # the task (first user message)
    assert not ctx.is_protected(1)
