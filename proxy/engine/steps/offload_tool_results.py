"""Step: replace oversized tool results by a preview naming the stored original."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from proxy.engine.planner import StepPlan
from proxy.engine.step_api import PrepareContext, StepOutput
from proxy.engine.steps.result_rewrites import UnitRewrites
from proxy.engine.tool_text import preview


class OffloadToolResultsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["offload_tool_results"] = "offload_tool_results"


class OffloadToolResults:
    name = "offload_tool_results"
    rank = 1

    def __init__(self, config: OffloadToolResultsConfig, ctx: PrepareContext) -> None:
        self._rewrites = UnitRewrites(ctx, self.name, self._preview)

    def _preview(
        self, ctx: PrepareContext, index: int, message: dict[str, Any], text: str, name: str | None
    ) -> str | None:
        settings = ctx.policy.tool_results
        if len(text) <= settings.offload_threshold_chars:
            return None
        if settings.preview_head_chars + settings.preview_tail_chars >= len(text):
            return None
        tokens = ctx.message_costs[index]  # the whole message's count: cached, never recounted
        return preview(
            ctx.artifact_id(text),
            text,
            tokens,
            settings.preview_head_chars,
            settings.preview_tail_chars,
            ctx.policy.read_tool.enabled,
        )

    def plan(self, ctx: PrepareContext) -> StepPlan:
        n = len(ctx.units)
        costs = [self._rewrites.cost(u) for u in range(n)]
        return StepPlan(rank=self.rank, costs=costs, limits=[t + 1 for t in range(n)])

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        return self._rewrites.output(units)
