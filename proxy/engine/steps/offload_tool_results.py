"""Step: replace oversized tool results by a preview naming the stored original.

Acts first and gently: a long result keeps its head and tail, and the model can read the rest
back through the read tool, so offloading loses nothing the model could not fetch itself.
By default (`when: always`) every result over the threshold is offloaded as soon as it is seen,
whether or not the request is over the trigger: re-sending a long log every turn is the cost
users come to cut, and a result offloaded from its first turn on keeps the prompt's prefix
stable. `when: over_trigger` offloads only when the request must shrink.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from proxy.engine.config_base import StepConfig
from proxy.engine.plan_totals import StepPlan
from proxy.engine.step_api import PrepareContext, Step, StepOutput
from proxy.engine.steps.result_rewrites import UnitRewrites, stored_text
from proxy.engine.tool_text import preview
from proxy.synthetic.registry import is_proxy_tool_name

if TYPE_CHECKING:
    from proxy.engine.wire import WireFormat


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
    when: Literal["always", "over_trigger"] = Field(
        default="always",
        description="`always`: every result over the threshold is offloaded when seen, even in "
        "a request under the trigger (prefix-stable from the first turn); `over_trigger`: only "
        "when the request is over the trigger.",
    )

    def acts_under_trigger(self, wire: WireFormat, items: Sequence[Any], chars: int) -> bool:
        """Quick scan (no parse): some tool result is longer than the threshold. `chars` (the
        request's size) bounds every text in it, so small requests skip the scan."""
        if self.when != "always" or chars <= self.threshold_chars:
            return False
        limit = self.threshold_chars
        for item in items:
            if wire.is_tool_result(item):
                text = wire.result_text(item)
                if text is not None and len(text) > limit:
                    return True
        return False


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
            stored_text(ctx, text),
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
        limits = [t + 1 for t in range(n)]
        return StepPlan(costs=costs, limits=limits, when_seen=self.config.when == "always")

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        out = self._rewrites.output(units)
        if self.config.when == "always":
            limit = self.config.threshold_chars
            out.reason = f"tool result over {limit} chars: offloaded when seen"
        return out
