"""Step: replace older tool results by a short placeholder naming the stored original."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from proxy.engine.planner import StepPlan
from proxy.engine.step_api import PrepareContext, StepOutput
from proxy.engine.steps.result_rewrites import UnitRewrites, matches_any
from proxy.engine.tool_text import placeholder


class ClearToolResultsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["clear_tool_results"] = "clear_tool_results"


class ClearToolResults:
    name = "clear_tool_results"
    rank = 2

    def __init__(self, config: ClearToolResultsConfig, ctx: PrepareContext) -> None:
        self._rewrites = UnitRewrites(ctx, self.name, self._placeholder)

    def _placeholder(
        self, ctx: PrepareContext, index: int, message: dict[str, Any], text: str, name: str | None
    ) -> str | None:
        refetchable = matches_any(name, ctx.policy.tool_results.refetchable_tools)
        return placeholder(ctx.artifact_id(text), len(text), name, refetchable)

    def plan(self, ctx: PrepareContext) -> StepPlan:
        n = len(ctx.units)
        exchanges = [u for u in range(n) if ctx.units[u].kind == "tool_exchange"]
        keep = ctx.policy.protect.recent_tool_exchanges
        limits = []
        for t in range(n):
            seen = bisect_right(exchanges, t)
            # Units before the keep-th most recent exchange at time t may be cleared.
            if keep == 0:
                limits.append(t + 1)
            else:
                limits.append(exchanges[seen - keep] if seen > keep else 0)
        costs = [self._rewrites.cost(u) for u in range(n)]
        at_least = ctx.policy.tool_results.clear_at_least
        return StepPlan(rank=self.rank, costs=costs, limits=limits, at_least=at_least)

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        return self._rewrites.output(units)
