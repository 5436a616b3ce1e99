"""Window mode: plan horizons, let the steps rewrite, store what they remove, apply the edits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.engine.budget import Budget
from proxy.engine.condense_text import Condenser, condense
from proxy.engine.conversation import Conversation, Unit
from proxy.engine.growth import GrowthSizing, growth_starts
from proxy.engine.plan_totals import StepPlan, applying_step, total_after
from proxy.engine.planner import Pinned, ReplayLog, plan_horizons
from proxy.engine.policy import Policy, ProtectPolicy
from proxy.engine.step_api import (
    Cut,
    OwnTextMac,
    PrepareContext,
    Step,
    StepOutput,
    StepServices,
)
from proxy.engine.steps import build_steps
from proxy.engine.tool_text import is_proxy_text
from proxy.engine.wire import WireFormat
from proxy.tokens.counters import TokenCounter


@dataclass
class ReductionContext(PrepareContext):
    """What the steps see, plus the policy they were built from (the reducer's business)."""

    policy: Policy



@dataclass(frozen=True)
class Relaxed:
    """A policy whose steps loosened their own protections, and what the manifest says of it."""

    policy: Policy
    notes: list[str]



def relaxed_policy(policy: Policy, level: int = 1) -> Relaxed | None:
    """The last resort before a refusal, at `level`: every step that can relax
    (`StepConfig.relaxed`) does; None when none can."""
    steps = []
    notes: list[str] = []
    for config in policy.steps:
        relaxed = config.relaxed(level)
        if relaxed is not None and relaxed.relax_note not in notes:
            notes.append(relaxed.relax_note)
        steps.append(config if relaxed is None else relaxed)
    if not notes:
        return None
    return Relaxed(policy.model_copy(update={"steps": steps}), notes)



def build_context(
    wire: WireFormat,
    messages: list[Any],
    conversation: Conversation,
    policy: Policy,
    counter: TokenCounter,
    costs: list[int],
    artifact_id: Callable[[str], str],
    own_text_mac: OwnTextMac,
    allowance: int,
    sizing: int | None = None,
    recent_end: int | None = None,
    condenser: Condenser = condense,
) -> ReductionContext:
    units: list[Unit] = []
    unit_turn: list[int] = []
    turn_first_unit: list[int] = []
    for turn_index, turn in enumerate(conversation.turns):
        turn_first_unit.append(len(units))
        units.extend(turn.units)
        unit_turn.extend([turn_index] * len(turn.units))
    names = wire.tool_names(messages, units)
    return ReductionContext(
        wire=wire,
        messages=messages,
        conversation=conversation,
        units=units,
        unit_turn=unit_turn,
        turn_first_unit=turn_first_unit,
        counter=counter,
        message_costs=costs,
        result_names=names,
        pinned_units=_pinned(wire, messages, units, policy.protect, names, own_text_mac),
        first_user_unit=_first_user_unit(conversation, turn_first_unit)
        if policy.protect.first_user
        else None,
        read_tool_enabled=policy.read_tool.enabled,
        artifact_id=artifact_id,
        own_text_mac=own_text_mac,
        allowance=allowance,
        max_stored_chars=policy.artifacts.max_chars,
        sizing=allowance if sizing is None else sizing,
        recent_end=len(units) if recent_end is None else min(recent_end, len(units)),
        condense=condenser,
        policy=policy,
    )



def _pinned(
    wire: WireFormat,
    messages: list[Any],
    units: list[Unit],
    protect: ProtectPolicy,
    result_names: dict[int, str],
    own_text_mac: OwnTextMac,
) -> frozenset[int]:
    """Units matching a pin rule, the client's mid-conversation instructions (`Unit.instruction`)
    and the proxy's own notices (so re-preparing changes nothing; a client's text that only looks
    like one is not pinned).
    A rule's `name` matches a tool result's tool (through its call) or an item's own name."""

    def matches(index: int) -> bool:
        role, name, text, result_item = wire.pin_facts(messages[index])
        if not result_item and is_proxy_text(text, own_text_mac):
            return True
        names = (result_names.get(index), name)
        return any(
            (rule.role is None or role == rule.role)
            and (rule.name is None or rule.name in names)
            and (rule.contains is None or rule.contains in text)
            for rule in protect.pinned
        )

    return frozenset(
        u for u, unit in enumerate(units) if unit.instruction or any(map(matches, unit.indices))
    )



def _first_user_unit(conversation: Conversation, turn_first_unit: list[int]) -> int | None:
    """The unit of the first user item (the task): the first unit of the first user turn."""
    return next(
        (turn_first_unit[t] for t, turn in enumerate(conversation.turns) if not turn.leading),
        None,
    )



@dataclass
class Plan:
    outputs: list[tuple[Step[Any], StepOutput]]
    total: int
    """Planned tokens of the prepared request."""
    protected: int
    """Planned tokens of what no step may remove: tools, system, task, pinned, recent turns."""
    log: ReplayLog = field(default_factory=lambda: ReplayLog.empty(0))
    """What the replay did: each step's cuts and eager moves, the cuts it refused."""
    due: bool = False
    """A new cut was due (after the remembered units)."""
    deeper: bool = False
    """It was planned afresh to the target: the cache was cold (`plan_reduction`)."""

    @property
    def expected(self) -> int:
        """The planned tokens less the slack of a remembered form kept as it was sent."""
        return self.total - self.log.slack



async def plan_reduction(
    ctx: ReductionContext, budget: Budget, base: int, reduced_base: int, services: StepServices,
    pinned: Pinned | None = None, cold: bool = False,
) -> Plan:  # fmt: skip
    """Each step's plan, its horizons (`pinned`: remembered moves, kept), I/O and rewrite.
    `cold`: the provider's cache is cold (`cache_warmth`): a cut due over remembered cuts is
    planned afresh instead, one cut at the last unit, the remembered cuts given up."""
    steps = build_steps(ctx.policy.steps, ctx)
    prefix = {id(step): out for step in steps if (out := _prefix_output(step, ctx))}
    if prefix:  # the system prefix shrinks, and the read tools come with it
        base = reduced_base = reduced_base - sum(out.tokens_freed for out in prefix.values())
    plans = [step.plan(ctx) for step in steps]
    full = [ctx.unit_cost(u) for u in range(len(ctx.units))]
    kwargs = {"base": base, "reduced_base": reduced_base}
    growth = GrowthSizing(
        growth_starts([u.kind == "tool_exchange" for u in ctx.units], ctx.turn_first_unit),
        ctx.policy.budget.growth_turns,
    )
    def replay(cut_last: bool, fresh: bool = False) -> tuple[list[int], ReplayLog]:
        log = ReplayLog.empty(len(steps))
        horizons = plan_horizons(
            full, plans, base=base, reduced_base=reduced_base, trigger=budget.plan_over,
            target=min(budget.target, budget.plan_over), growth=growth,
            cut_last=cut_last, pinned=None if fresh else pinned, log=log, defer=fresh,
        )  # fmt: skip
        return horizons, log

    horizons, log = replay(services.precompute)
    if services.precompute:
        await _precompute(steps, ctx, services, log.cuts)
        return Plan([], 0, 0)
    due = log.cut_from(pinned.units if pinned is not None else 0)
    deeper = cold and due and pinned is not None  # without remembered cuts, nothing to give up
    if deeper:
        horizons, log = replay(False, fresh=True)
    assigned = _assigned(horizons, plans, full)
    for step, units, made in zip(steps, assigned, log.cuts, strict=True):
        if units:
            await step.settle(ctx, units, services, made)
    total = total_after(full, plans, horizons, **kwargs)
    if _near_trigger(ctx, services, total, budget.trigger):
        # the next cut's work (summaries), started now in the background
        await _precompute(steps, ctx, services, replay(True)[1].cuts)
    cost = [
        full[u] if (k := applying_step(horizons, u, plans, full)) < 0 else plans[k].costs[u]
        for u in range(len(full))
    ]
    outputs = [
        (step, _merged(prefix.get(id(step)), step.rewrite(ctx, units) if units else None))
        for step, units in zip(steps, assigned, strict=True)
        if units or id(step) in prefix
    ]
    fixed = total - sum(cost)  # base (or reduced base) plus notices
    protected = fixed + sum(cost[u] for u in _protected_units(ctx, plans))
    return Plan(outputs, total, protected, log, due, deeper)



def _assigned(horizons: list[int], plans: list[StepPlan], full: list[int]) -> list[list[int]]:
    """The units each step reduces (`applying_step`)."""
    assigned: list[list[int]] = [[] for _ in plans]
    for u in range(max(horizons, default=0)):
        assigned[applying_step(horizons, u, plans, full)].append(u)
    return assigned



def _near_trigger(
    ctx: ReductionContext, services: StepServices, total: int, trigger: int
) -> bool:
    at = ctx.policy.precompute_at()
    ready = services.background is not None and services.summarizer is not None
    return at is not None and ready and total >= at * trigger



async def _precompute(
    steps: list[Step[Any]], ctx: ReductionContext, services: StepServices, cuts: list[list[Cut]]
) -> None:
    for step, made in zip(steps, cuts, strict=True):
        await step.precompute(ctx, services, made)



def _prefix_output(step: Step[Any], ctx: ReductionContext) -> StepOutput | None:
    out = step.prefix_output(ctx)
    return out if out is not None and out.edits else None



def _merged(prefix: StepOutput | None, units: StepOutput | None) -> StepOutput:
    """One step's output: its edits of the system prefix, then those of its units."""
    if prefix is None or units is None:
        out = prefix or units
        assert out is not None
        return out
    return StepOutput(
        edits=prefix.edits + units.edits,
        artifacts={**prefix.artifacts, **units.artifacts},
        units=units.units,
        tokens_freed=prefix.tokens_freed + units.tokens_freed,
        reason=units.reason or prefix.reason,
    )



def _protected_units(ctx: PrepareContext, plans: list[StepPlan]) -> list[int]:
    """Pinned units, the task, and the recent units that no step removes (the current turn
    when no step removes any)."""
    bounds = [plan.keeps_from for plan in plans if plan.keeps_from is not None]
    current_turn = ctx.turn_first_unit[-1] if ctx.turn_first_unit else 0
    recent = min(bounds) if bounds else current_turn
    return [u for u in range(len(ctx.units)) if ctx.is_protected(u) or u >= recent]
