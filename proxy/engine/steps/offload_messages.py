"""Step: replace oversized user messages (and, when asked, system ones) by a preview naming the
stored original.

A pasted log or document costs as much as a tool result, and is as readable back through the read
tool; without this step a huge user message can only go with its whole turn, or get the request
refused. The first user message (the task) and the system prompt are what the model works from:
they are left alone unless the policy says otherwise (`first_user`, `system`). Opt-in: a policy
lists it in its `steps` (after `offload_tool_results`, before the steps that remove content).
System messages sit before every turn (outside the planner's units): when `system` is set, an
oversized one is offloaded whenever the request is reduced at all, so its bytes stay the same
from then on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from proxy.artifacts.store import NewArtifact
from proxy.engine.config_base import StepConfig
from proxy.engine.plan_totals import StepPlan
from proxy.engine.step_api import Edit, PrepareContext, Step, StepOutput
from proxy.engine.steps.result_rewrites import stored_text
from proxy.engine.tool_text import is_proxy_text, preview

if TYPE_CHECKING:
    from proxy.engine.wire import WireFormat

_SYSTEM_ROLES = ("system", "developer")


class OffloadMessagesConfig(StepConfig):
    kind: Literal["offload_messages"] = "offload_messages"
    threshold_chars: Annotated[int, Field(ge=0)] = Field(
        default=20_000, description="User messages longer than this are offloaded behind a preview."
    )
    preview_head_chars: Annotated[int, Field(ge=0)] = Field(
        default=1500, description="The preview keeps this many leading characters ..."
    )
    preview_tail_chars: Annotated[int, Field(ge=0)] = Field(
        default=500, description="... and this many trailing characters."
    )
    first_user: bool = Field(
        default=False, description="Offload the first user message (the task) too."
    )
    system: bool = Field(
        default=False,
        description="Offload oversized system/developer messages of the system prompt too "
        "(whenever the request is reduced at all).",
    )
    when: Literal["always", "over_trigger"] = Field(
        default="over_trigger",
        description="`over_trigger`: only when the request must shrink; `always`: every "
        "oversized message is offloaded when seen, even under the trigger.",
    )

    def acts_under_trigger(self, wire: WireFormat, items: Sequence[Any], chars: int) -> bool:
        if self.when != "always" or chars <= self.threshold_chars:
            return False
        roles = ("user", *_SYSTEM_ROLES) if self.system else ("user",)
        for item in items:
            if wire.pin_facts(item)[0] in roles:
                text = wire.item_text(item)
                if text is not None and len(text) > self.threshold_chars:
                    return True
        return False


class OffloadMessages(Step[OffloadMessagesConfig]):
    name = "offload_messages"
    config_model = OffloadMessagesConfig
    in_default_policy = False  # opt-in: a policy lists it in its `steps`

    def __init__(self, config: OffloadMessagesConfig, ctx: PrepareContext) -> None:
        super().__init__(config, ctx)
        turns = enumerate(ctx.conversation.turns)
        self._first_user = next((ctx.turn_first_unit[t] for t, n in turns if not n.leading), None)
        self._edits: dict[int, tuple[Edit, NewArtifact, int] | None] = {}

    def plan(self, ctx: PrepareContext) -> StepPlan:
        n = len(ctx.units)
        costs = [self._unit_cost(ctx, u) for u in range(n)]
        limits = [t + 1 for t in range(n)]
        return StepPlan(costs=costs, limits=limits, when_seen=self.config.when == "always")

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        offloaded = [u for u in units if self._offloadable(ctx, u)]
        out = self._output([ctx.units[u].start for u in offloaded])
        out.units = offloaded
        return out

    def prefix_output(self, ctx: PrepareContext) -> StepOutput | None:
        if not self.config.system:
            return None
        system_end = ctx.conversation.system_end
        out = self._output([i for i in range(system_end) if self._edit(ctx, i) is not None])
        out.reason = f"system message over {self.config.threshold_chars} chars: offloaded"
        return out

    def _output(self, indices: list[int]) -> StepOutput:
        out = StepOutput()
        for index in indices:
            found = self._edits.get(index)
            if found is None:
                continue
            edit, artifact, freed = found
            out.edits.append(edit)
            out.artifacts[edit.artifact_id] = artifact
            out.tokens_freed += freed
        return out

    def _offloadable(self, ctx: PrepareContext, u: int) -> bool:
        unit = ctx.units[u]
        if unit.kind != "message" or u in ctx.pinned_units:
            return False
        if u == self._first_user and not self.config.first_user:
            return False
        return self._edit(ctx, unit.start) is not None

    def _unit_cost(self, ctx: PrepareContext, u: int) -> int:
        found = self._edit(ctx, ctx.units[u].start) if self._offloadable(ctx, u) else None
        return ctx.unit_cost(u) - (found[2] if found else 0)

    def _edit(self, ctx: PrepareContext, index: int) -> tuple[Edit, NewArtifact, int] | None:
        """The preview replacing item `index`, its artifact and the tokens it frees (cached)."""
        if index not in self._edits:
            self._edits[index] = self._compute(ctx, index)
        return self._edits[index]

    def _compute(self, ctx: PrepareContext, index: int) -> tuple[Edit, NewArtifact, int] | None:
        settings, item = self.config, ctx.messages[index]
        role = ctx.wire.pin_facts(item)[0]
        system = index < ctx.conversation.system_end
        if role not in (_SYSTEM_ROLES if system else ("user",)):
            return None
        text = ctx.wire.item_text(item)
        if text is None or len(text) <= settings.threshold_chars:
            return None
        if settings.preview_head_chars + settings.preview_tail_chars >= len(text):
            return None
        if is_proxy_text(text, ctx.own_text_mac):
            return None
        stored = stored_text(ctx, text)
        shown = preview(
            stored,
            text,
            ctx.message_costs[index],
            settings.preview_head_chars,
            settings.preview_tail_chars,
            ctx.read_tool_enabled,
            ctx.own_text_mac,
            what=f"{role} message",
        )
        new = ctx.wire.with_item_text(item, shown)
        freed = ctx.message_costs[index] - ctx.counter.count_message(new)
        if freed <= 0:
            return None
        meta = {"message_role": role, ctx.wire.items_param: index, "step": self.name}
        artifact = NewArtifact(stored.content, "message", meta)
        return Edit("replace", index, new, stored.artifact_id), artifact, freed
