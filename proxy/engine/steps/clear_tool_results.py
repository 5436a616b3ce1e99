"""Step: replace older tool results by a short placeholder naming the stored original.

Acts on what offloading left: results the model has most likely used already. The most recent
exchanges are kept (the model is working on them) unless nothing else avoids a refusal; then
(`clear_recent_before_refusing`) their results are offloaded behind a short preview, never
blanked: the model keeps the head and tail of what it just asked for.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, PrivateAttr

from proxy.engine.config_base import StepConfig
from proxy.engine.plan_totals import StepPlan
from proxy.engine.step_api import PrepareContext, Step, StepOutput
from proxy.engine.steps.result_rewrites import UnitRewrites, matches_any, stored_text
from proxy.engine.steps.summarize import current
from proxy.engine.tool_text import placeholder, preview


class ClearToolResultsConfig(StepConfig):
    kind: Literal["clear_tool_results"] = "clear_tool_results"
    keep_recent_exchanges: Annotated[int, Field(ge=0)] = Field(
        default=1, description="The most recent N tool exchanges are never cleared."
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
        description="Last resort before a refusal: reduce the recent tool exchanges' results "
        "too, each to a short preview (head and tail; the whole stays readable through the "
        "read tool), and clear the older ones.",
    )
    recent_preview_head_chars: Annotated[int, Field(ge=0)] = Field(
        default=500,
        description="The last resort's preview of a recent result keeps this many "
        "leading characters ...",
    )
    recent_preview_tail_chars: Annotated[int, Field(ge=0)] = Field(
        default=200, description="... and this many trailing characters."
    )
    _previewed_recent: int = PrivateAttr(default=0)
    """Set on the relaxed copy: this many recent exchanges get previews, never placeholders."""

    relax_note: ClassVar[str] = (
        "last resort before refusing: tool results of the protected recent exchanges "
        "were offloaded behind short previews (stored, readable with the read tool)"
    )

    def relaxed(self, level: int = 1) -> Self | None:
        """Level 1: the protected recent exchanges' results get previews. Level 2 (when those
        do not fit either): only the newest exchange's results do, with half the head and tail,
        and the others are cleared. The newest result is never blanked."""
        if not self.clear_recent_before_refusing or self.keep_recent_exchanges == 0:
            return None
        update: dict[str, int] = {"keep_recent_exchanges": 0}
        if level >= 2:
            update["recent_preview_head_chars"] = self.recent_preview_head_chars // 2
            update["recent_preview_tail_chars"] = self.recent_preview_tail_chars // 2
        relaxed = self.model_copy(update=update)
        relaxed._previewed_recent = self.keep_recent_exchanges if level < 2 else 1
        return relaxed

    @property
    def previewed_recent(self) -> int:
        """How many of the most recent exchanges get previews instead of placeholders (the
        exchanges the unrelaxed config protects; 0 unless relaxed)."""
        return self._previewed_recent


class ClearToolResults(Step[ClearToolResultsConfig]):
    name = "clear_tool_results"
    config_model = ClearToolResultsConfig

    def __init__(self, config: ClearToolResultsConfig, ctx: PrepareContext) -> None:
        super().__init__(config, ctx)
        self._rewrites = UnitRewrites(ctx, self.name, self._placeholder, config.exclude_tools)
        exchanges = [u for u in ctx.units[: ctx.recent_end] if u.kind == "tool_exchange"]
        recent = exchanges[len(exchanges) - config.previewed_recent :]
        self._previewed = {i for unit in recent for i in unit.result_indices}
        self._facts: current.Facts | None = None

    def _stated(self, ctx: PrepareContext, text: str) -> list[str]:
        """The facts `text` states, at present (the request's ledger is read once, and only
        when a cleared result states a fact)."""
        stated = current.stated(text, {})
        if not stated:
            return []
        if self._facts is None:
            self._facts = current.request_facts(ctx)
        return current.stated(text, self._facts)

    def _placeholder(
        self, ctx: PrepareContext, index: int, message: dict[str, Any], text: str, name: str | None
    ) -> str | None:
        if index in self._previewed:
            return self._preview(ctx, index, text)
        refetchable = matches_any(name, self.config.refetchable_tools)
        stored = stored_text(ctx, text)
        cut = len(stored.content) if stored.truncated else None
        mac = ctx.own_text_mac
        facts = self._stated(ctx, text)
        return placeholder(stored.artifact_id, len(text), name, refetchable, mac, cut, facts)

    def _preview(self, ctx: PrepareContext, index: int, text: str) -> str | None:
        """A recent result under the last resort: head and tail stay visible (None, i.e. kept
        whole, when they would show all of it)."""
        head, tail = self.config.recent_preview_head_chars, self.config.recent_preview_tail_chars
        if head + tail >= len(text):
            return None
        tokens = ctx.message_costs[index]
        stored = stored_text(ctx, text)
        return preview(stored, text, tokens, head, tail, ctx.read_tool_enabled, ctx.own_text_mac)

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
