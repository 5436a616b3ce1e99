"""Step: replace older tool results by a short placeholder naming the stored original.

Acts on what offloading left: results the model has most likely used already. The most recent
exchanges are kept (the model is working on them) unless nothing else avoids a refusal.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field

from proxy.engine.config_base import StepConfig
from proxy.engine.planner import StepPlan
from proxy.engine.step_api import PrepareContext, Step, StepOutput
from proxy.engine.steps.result_rewrites import UnitRewrites, matches_any
from proxy.engine.tool_text import placeholder


class ClearToolResultsConfig(StepConfig):
    kind: Literal["clear_tool_results"] = "clear_tool_results"
    keep_recent_exchanges: Annotated[int, Field(ge=0)] = Field(
        default=2, description="The most recent N tool exchanges are never cleared."
    )
    exclude_tools: list[str] = Field(
        default_factory=list, description="Tool names (globs) whose results are never cleared."
    )
    refetchable_tools: list[str] = Field(
        default_factory=list,
        description="Tool names (globs) whose cleared results tell the model to call them again.",
    )
    clear_at_least: Annotated[int, Field(ge=0)] = Field(
        default=0, description="Clear nothing unless at least this many tokens would be freed."
    )
    clear_recent_before_refusing: bool = Field(
        default=True,
        description="Last resort before a refusal: clear the recent tool exchanges' results too "
        "(they stay readable through the read tool).",
    )

    relax_note: ClassVar[str] = (
        "last resort before refusing: tool results of the protected recent exchanges "
        "were cleared too (stored, readable with the read tool)"
    )

    def relaxed(self) -> Self | None:
        if not self.clear_recent_before_refusing or self.keep_recent_exchanges == 0:
            return None
        return self.model_copy(update={"keep_recent_exchanges": 0})


class ClearToolResults(Step[ClearToolResultsConfig]):
    name = "clear_tool_results"
    config_model = ClearToolResultsConfig

    def __init__(self, config: ClearToolResultsConfig, ctx: PrepareContext) -> None:
        super().__init__(config, ctx)
        self._rewrites = UnitRewrites(ctx, self.name, self._placeholder, config.exclude_tools)

    def _placeholder(
        self, ctx: PrepareContext, index: int, message: dict[str, Any], text: str, name: str | None
    ) -> str | None:
        refetchable = matches_any(name, self.config.refetchable_tools)
        return placeholder(ctx.artifact_id(text), len(text), name, refetchable, ctx.own_text_mac)

    def plan(self, ctx: PrepareContext) -> StepPlan:
        n = len(ctx.units)
        exchanges = [u for u in range(n) if ctx.units[u].kind == "tool_exchange"]
        keep = self.config.keep_recent_exchanges
        limits = []
        for t in range(n):
            seen = bisect_right(exchanges, t)
            # Units before the keep-th most recent exchange at time t may be cleared.
            if keep == 0:
                limits.append(t + 1)
            else:
                limits.append(exchanges[seen - keep] if seen > keep else 0)
        costs = [self._rewrites.cost(u) for u in range(n)]
        return StepPlan(costs=costs, limits=limits, at_least=self.config.clear_at_least)

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        return self._rewrites.output(units)
