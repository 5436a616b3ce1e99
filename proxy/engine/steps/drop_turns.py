"""Step: drop the oldest whole turns, archived as one artifact behind one notice message.

The strongest reduction, listed last: whole turns go (oldest first, never the recent ones), so it
acts only when shrinking tool results was not enough. Drops go deeper than the budget's target so
that they come rarely and each keeps the prompt prefix stable for longer.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from proxy.artifacts.store import NewArtifact
from proxy.engine.budget import scaled
from proxy.engine.config_base import StepConfig
from proxy.engine.plan_totals import StepPlan
from proxy.engine.step_api import MARKER, Edit, OwnTextMac, PrepareContext, Step, StepOutput
from proxy.engine.tool_text import signed
from proxy.jsonio import dumps
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL

_WIDE = 10**9  # numbers in the notice are at most this wide when sizing it for the planner


def notice_text(read_tool: bool, turns: int, tokens: int, artifact_id: str, mac: OwnTextMac) -> str:
    """The text of the one item that stands where dropped turns were."""
    how = (
        f"{SEARCH_TOOL} or {READ_TOOL} with this id"
        if read_tool
        else "the operator's artifact endpoint"
    )
    body = (
        f"{MARKER}: {turns} earlier turn(s) ({tokens} tokens) were removed from this "
        f"conversation to fit the context window. They are archived as artifact "
        f"{artifact_id} (one JSON message per line); use {how} to look things up.]"
    )
    return signed(body, mac)


class TurnsConfig(StepConfig):
    """The settings of a step that removes whole turns (drop_turns, summarize)."""

    keep_recent_turns: Annotated[int, Field(ge=0)] = Field(
        default=1,
        description="The most recent N turns are never dropped (the current one always is kept).",
    )
    notice_role: Literal["user", "system", "developer"] = Field(
        default="user", description="Role of the notice that stands where turns were dropped."
    )
    target: Annotated[float, Field(gt=0)] | None = Field(
        default=0.5,
        description="When turns must be dropped, drop down to this (fraction of the allowance "
        "when <= 1, else tokens), below the budget's target: drops then come rarely and each "
        "keeps the prompt prefix stable for longer. null = the budget's target.",
    )


class DropTurnsConfig(TurnsConfig):
    kind: Literal["drop_turns"] = "drop_turns"


def turns_plan(ctx: PrepareContext, config: TurnsConfig, extra: int) -> StepPlan:
    """The plan of a step that replaces the oldest whole turns by one item costing `extra`:
    cuts at turn starts only, never into the recent turns or the protected units."""
    n = len(ctx.units)
    keep = max(config.keep_recent_turns, 1)
    costs = [ctx.unit_cost(u) if ctx.is_protected(u) else 0 for u in range(n)]
    limits = [ctx.turn_first_unit[max(ctx.unit_turn[t] - keep + 1, 0)] for t in range(n)]
    cuts = sorted(set(ctx.turn_first_unit[1:]))
    target = None
    if config.target is not None:
        target = scaled(config.target, ctx.allowance)
    turns = len(ctx.turn_first_unit)
    keeps_from = ctx.turn_first_unit[turns - keep] if turns > keep else 0
    return StepPlan(
        costs=costs, limits=limits, cuts=cuts, extra_cost=extra, target=target,
        keeps_from=keeps_from,
    )


def archived(ctx: PrepareContext, dropped: list[int]) -> tuple[list[int], str, NewArtifact]:
    """(the items of the `dropped` units, the archive's id, the archive): one JSON item per
    line."""
    indices = [i for u in dropped for i in ctx.units[u].indices]
    archive = b"\n".join(dumps(ctx.messages[i]) for i in indices).decode()
    turns = len({ctx.unit_turn[u] for u in dropped})
    meta = {"turns": turns, ctx.wire.items_param: len(indices), "first_index": indices[0]}
    return indices, ctx.artifact_id(archive), NewArtifact(archive, "dropped_turns", meta)


def archive_span(
    ctx: PrepareContext, span: list[int], out: StepOutput
) -> tuple[list[int], str, int]:
    """The `span`'s archive added to `out`: (its items, the archive's id, their tokens)."""
    indices, archive_id, archive = archived(ctx, span)
    out.artifacts[archive_id] = archive
    return indices, archive_id, sum(ctx.message_costs[i] for i in indices)


def stand_in(
    ctx: PrepareContext, indices: list[int], archive_id: str, tokens: int, item: Any,
    out: StepOutput, requires: tuple[str, ...] = (),
) -> None:
    """`item` in place of the items at `indices` (`tokens` of them), once the archive is
    stored (and the other artifacts `item` names: `requires`)."""
    out.edits.append(Edit("insert_before", indices[0], item, archive_id, requires))
    out.edits.extend(Edit("remove", i, None, archive_id, requires) for i in indices)
    out.tokens_freed += tokens - ctx.counter.count_message(item)


class DropTurns(Step[DropTurnsConfig]):
    name = "drop_turns"
    config_model = DropTurnsConfig
    counts = "turns"

    def plan(self, ctx: PrepareContext) -> StepPlan:
        sized = self._notice(ctx, _WIDE, _WIDE, ctx.artifact_id("sizing"))
        return turns_plan(ctx, self.config, ctx.counter.count_message(sized))

    def _notice(self, ctx: PrepareContext, turns: int, tokens: int, artifact_id: str) -> Any:
        text = notice_text(ctx.read_tool_enabled, turns, tokens, artifact_id, ctx.own_text_mac)
        return ctx.wire.notice_item(self.config.notice_role, text)

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        dropped = [u for u in units if not ctx.is_protected(u)]
        if not dropped:
            return StepOutput()
        turns = len({ctx.unit_turn[u] for u in dropped})
        out = StepOutput(units=dropped, count=turns)
        indices, artifact_id, tokens = archive_span(ctx, dropped, out)
        notice = self._notice(ctx, turns, tokens, artifact_id)
        stand_in(ctx, indices, artifact_id, tokens, notice, out)
        return out
