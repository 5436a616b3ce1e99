"""Step: replace oversized tool results by a preview naming the stored original.

Acts first and gently: a long result keeps its head and tail, and the model can read the rest
back through the read tool, so offloading loses nothing the model could not fetch itself.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from proxy.artifacts.tool_specs import is_proxy_tool_name
from proxy.engine.config_base import StepConfig
from proxy.engine.planner import StepPlan
from proxy.engine.step_api import PrepareContext, Step, StepOutput
from proxy.engine.steps.result_rewrites import UnitRewrites
from proxy.engine.tool_text import preview


class OffloadToolResultsConfig(StepConfig):
    kind: Literal["offload_tool_results"] = "offload_tool_results"
    threshold_chars: Annotated[int, Field(ge=0)] = Field(
        default=8000, description="Tool results longer than this are offloaded behind a preview."
    )
    preview_head_chars: Annotated[int, Field(ge=0)] = Field(
        default=1500, description="The preview keeps this many leading characters ..."
    )
    preview_tail_chars: Annotated[int, Field(ge=0)] = Field(
        default=500, description="... and this many trailing characters."
    )
    exclude_tools: list[str] = Field(
        default_factory=list, description="Tool names (globs) whose results are never offloaded."
    )


class OffloadToolResults(Step[OffloadToolResultsConfig]):
    name = "offload_tool_results"
    config_model = OffloadToolResultsConfig

    def __init__(self, config: OffloadToolResultsConfig, ctx: PrepareContext) -> None:
        super().__init__(config, ctx)
        self._rewrites = UnitRewrites(ctx, self.name, self._preview, config.exclude_tools)

    def _preview(
        self, ctx: PrepareContext, index: int, message: dict[str, Any], text: str, name: str | None
    ) -> str | None:
        settings = self.config
        if len(text) <= settings.threshold_chars or is_proxy_tool_name(name):
            return None  # a page the model read is never offloaded again: it can be cleared
        if settings.preview_head_chars + settings.preview_tail_chars >= len(text):
            return None
        tokens = ctx.message_costs[index]  # the whole message's count: cached, never recounted
        return preview(
            ctx.artifact_id(text),
            text,
            tokens,
            settings.preview_head_chars,
            settings.preview_tail_chars,
            ctx.read_tool_enabled,
            ctx.own_text_mac,
        )

    def plan(self, ctx: PrepareContext) -> StepPlan:
        n = len(ctx.units)
        costs = [self._rewrites.cost(u) for u in range(n)]
        return StepPlan(costs=costs, limits=[t + 1 for t in range(n)])

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        return self._rewrites.output(units)
