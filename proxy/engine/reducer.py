"""Window mode: plan horizons, let the steps rewrite, store what they remove, apply the edits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.artifacts.budgets import Refused, budget_refusals
from proxy.artifacts.store import ArtifactStore, NewArtifact
from proxy.engine.budget import Budget
from proxy.engine.condense_text import Condenser, condense
from proxy.engine.conversation import Conversation, Unit
from proxy.engine.growth import GrowthSizing, growth_starts
from proxy.engine.manifest import Action, Manifest, NoteCode
from proxy.engine.planner import (
    Pinned,
    ReplayLog,
    StepPlan,
    applying_step,
    plan_horizons,
    total_after,
)
from proxy.engine.policy import ArtifactsPolicy, Policy, ProtectPolicy
from proxy.engine.step_api import (
    Cut,
    Edit,
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
class Reduction:
    messages: list[Any]
    item_tokens: list[int] = field(default_factory=list)
    """Tokens of each of `messages`: kept ones reuse their counts, only new ones are counted."""
    stable_items: int = 0
    """The leading `messages` through the first one a step put in (a notice, or a summary that
    a short item of the turns dropped since its roll-up may follow: the summary changes less)."""
    actions: list[Action] = field(default_factory=list)
    referenced: list[str] = field(default_factory=list)
    unconfirmed: int = 0
    budget_refused: tuple[Refused, ...] = ()
    """The writes among `unconfirmed` that the tenant's write budgets refused."""
    over_scope_cap: int = 0
    """Artifacts this request references when more than `artifacts.max_per_scope` (else 0)."""

    @property
    def message_tokens(self) -> int:
        return sum(self.item_tokens)

    @property
    def store_failed(self) -> int:
        """Writes the store did not confirm for another reason than a write budget."""
        return self.unconfirmed - sum(r.writes for r in self.budget_refused)

    def note_store(self, manifest: Manifest, max_per_scope: int) -> None:
        """What the manifest says about this reduction's writes."""
        if self.budget_refused:
            manifest.note(NoteCode.store_write_budget, budget_note(self.budget_refused))
        if self.store_failed:
            manifest.notes.append(
                f"artifact store did not confirm {self.store_failed} write(s): "
                "that content was kept"
            )
        if self.over_scope_cap:
            manifest.notes.append(
                f"this request references {self.over_scope_cap} artifacts, more than "
                f"artifacts.max_per_scope ({max_per_scope}): all are kept, the scope's other "
                "artifacts are evicted first"
            )


def budget_note(refused: tuple[Refused, ...]) -> str:
    """The manifest's note naming the write budgets that refused writes."""
    parts = [
        f"{r.budget.value} ({r.limit:,} bytes): {r.writes} write(s) of {r.bytes:,} bytes refused"
        for r in refused
    ]
    return (
        "store write budget of this tenant reached, "
        + "; ".join(parts)
        + ": that content was kept in the prompt"
    )


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


async def store_and_apply(
    ctx: ReductionContext,
    outputs: list[tuple[Step[Any], StepOutput]],
    store: ArtifactStore,
    scope: str,
) -> Reduction:
    wanted: dict[str, NewArtifact] = {}
    for _, out in outputs:
        wanted.update(out.artifacts)
    sent, confirmed, refused = await _store(ctx.policy.artifacts, store, scope, wanted)
    reduction = Reduction(messages=[], budget_refused=refused)
    edits: list[Edit] = []
    for step, out in outputs:
        kept = [
            e for e in out.edits if e.artifact_id in confirmed and confirmed.issuperset(e.requires)
        ]
        if not kept:
            continue
        edits.extend(kept)
        ids = sorted({e.artifact_id for e in kept})
        indices = sorted({e.index for e in kept if e.kind != "insert_before"})
        freed = _tokens_freed(ctx, kept)
        own = out.count is not None and step.counts is not None and len(kept) == len(out.edits)
        count = out.count if own and out.count is not None else len(indices)
        unit = step.counts if own and step.counts is not None else ctx.wire.items_param
        reason = out.reason or "over trigger: reduced toward target"
        action = Action(step.name, reason, indices, freed, ids, count, unit, out.detail)
        reduction.actions.append(action)
        reduction.referenced.extend(ids)
    # Contents over `artifacts.max_chars` (archives of dropped turns; texts are stored truncated)
    # were never sent: kept by policy, not a store failure.
    reduction.unconfirmed = sent - len(confirmed)
    if sent > ctx.policy.artifacts.max_per_scope:
        reduction.over_scope_cap = sent
    reduction.messages, reduction.item_tokens, reduction.stable_items = _apply(ctx, edits)
    return reduction


def _tokens_freed(ctx: PrepareContext, edits: list[Edit]) -> int:
    """What the applied edits free: removed or replaced counts minus what stands in their place."""
    freed = 0
    for edit in edits:
        if edit.kind != "insert_before":
            freed += ctx.message_costs[edit.index]
        if edit.message is not None:
            freed -= ctx.counter.count_message(edit.message)
    return freed


async def _store(
    limits: ArtifactsPolicy, store: ArtifactStore, scope: str, wanted: dict[str, NewArtifact]
) -> tuple[int, set[str], tuple[Refused, ...]]:
    """(how many artifacts were sent, the ids the store confirmed, what budgets refused)."""
    sendable = {i: a for i, a in wanted.items() if len(a.content) <= limits.max_chars}
    if not sendable:
        return 0, set(), ()
    confirmed = await store.put_many(
        scope, sendable, ttl_seconds=limits.ttl_seconds, max_per_scope=limits.max_per_scope
    )
    return len(sendable), confirmed & sendable.keys(), budget_refusals(confirmed)


def _apply(ctx: PrepareContext, edits: list[Edit]) -> tuple[list[Any], list[int], int]:
    """The edited items, the tokens of each, and how many lead through the first inserted."""
    replaced = {e.index: e.message for e in edits if e.kind == "replace"}
    removed = {e.index for e in edits if e.kind == "remove"}
    inserted = {e.index: e.message for e in edits if e.kind == "insert_before"}
    out: list[Any] = []
    tokens: list[int] = []
    stable = 0
    for index, message in enumerate(ctx.messages):
        if index in inserted:
            out.append(inserted[index])
            tokens.append(ctx.counter.count_message(inserted[index]))
            stable = stable or len(out)
        if index in removed:
            continue
        new = index in replaced
        out.append(replaced[index] if new else message)
        tokens.append(ctx.counter.count_message(out[-1]) if new else ctx.message_costs[index])
    return out, tokens, stable
