"""What goes upstream once the steps have rewritten a request: the reduced request, or the request
as it came when the reduction would not fit where the request does or would not be smaller
(never worse), or a refusal; and the last resort tried before a refusal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from proxy.engine.apply_edits import Reduction
from proxy.engine.config_base import StepConfig
from proxy.engine.manifest import NoteCode, Outcome, Prepared
from proxy.engine.policy import Policy
from proxy.engine.prepare_request import PreparingRequest
from proxy.engine.reducer import Plan, ReductionContext, relaxed_policy

NOT_SMALLER = (
    "the reduced request would not be smaller than the request as it came (the read tools it "
    "brings included): sent as it came"
)
CUTS_REFUSED = (
    "no reduction would make this request smaller (the read tools a reduction brings cost more "
    "than it frees): sent as it came"
)


def finish(
    request: PreparingRequest, reduction: Reduction, synthetic: list[Any], refused: int = 0
) -> Prepared:
    """The prepared request (`reduction` rendered, `synthetic` tools added when it names an
    artifact, breakpoints as the policy's `cache_marks` wants them), or the request as it came,
    or a refusal. `refused`: reductions the planner left out because they would not have
    lowered the count (never worse)."""
    manifest, counter = request.manifest, request.counter
    manifest.actions = [*request.tool_actions(), *reduction.actions]
    reduction.note_store(manifest, request.policy.artifacts.max_per_scope)
    wire = request.wire
    added = synthetic if reduction.referenced else []
    body = wire.render(request.body, reduction.messages, added)
    overhead = wire.overhead_tokens(body, counter)
    after = reduction.message_tokens + overhead
    manifest.tokens_after = after
    if after > request.budget.limit >= request.tokens:
        # What the steps did (e.g. the read tools an offload adds) would not fit, the
        # request itself does: it goes as it came.
        manifest.notes.append("the reduced request would not fit: forwarded unchanged")
        return request.unchanged(Outcome.within_allowance)
    if after > request.budget.limit:
        failed = bool(reduction.store_failed)
        raise request.refusal(after, manifest.protected_tokens, store_failed=failed)
    if not reduction.actions:
        if refused:
            manifest.note(NoteCode.never_worse, CUTS_REFUSED)
        return request.unchanged(Outcome.nothing_reduced)
    # Never worse holds when the provider's cache is cold too: it is about size, not about the
    # prefix. Cold, every token of the prompt is billed uncached, so a rewrite that is not
    # smaller costs at least what the request as it came costs, and removes content for nothing.
    if after >= request.tokens:  # the request as it came is no larger
        manifest.note(NoteCode.never_worse, NOT_SMALLER)
        return request.unchanged(Outcome.nothing_reduced)
    manifest.outcome = (
        Outcome.reduced if after <= request.budget.target else Outcome.reduced_above_target
    )
    marked = request.marked(body, reduction.item_tokens, overhead, reduction.stable_items)
    body = body if marked is None else marked
    artifacts = bool(reduction.referenced and synthetic) or request.carries_tools
    return Prepared(
        wire.encode(body), True, manifest, body, synthetic=request.synthetic_tools(artifacts)
    )


Planner = Callable[[Policy, int | None], Awaitable[tuple[ReductionContext, Plan]]]
"""Plans the request under a policy (the request's own, or a relaxed one), and where "recent"
ends for the relaxed steps (`PrepareContext.recent_end`; None: after the last unit)."""


async def plans(
    request: PreparingRequest, plan: Planner, last_resort_allowed: bool
) -> tuple[ReductionContext, Plan, int]:
    """The plan that goes: the request's policy, or the last resort (only while the plan would
    be refused); and the relaxed level used (0: none). A form the conversation's previous request
    went at under the last resort is kept (relaxed the same way) until a new cut is due."""
    history, manifest = request.history, request.manifest
    relaxed = relaxed_policy(request.policy, history.relaxed) if history.relaxed else None
    if relaxed is not None:
        ctx, planned = await plan(relaxed.policy, history.recent_end)
        if not history.cut_since(planned.log) and planned.expected <= request.budget.limit:
            manifest.notes.extend(n for n in relaxed.notes if n not in manifest.notes)
            return ctx, planned, history.relaxed
    ctx, planned = await plan(request.policy, None)
    if not last_resort_allowed:
        return ctx, planned, 0
    return await last_resort(request, ctx, planned, plan)


async def last_resort(
    request: PreparingRequest, ctx: ReductionContext, planned: Plan, plan: Planner
) -> tuple[ReductionContext, Plan, int]:
    """Loosen what is protected, level by level, only while the plan would be refused."""
    used = 0
    for level in range(1, StepConfig.RELAX_LEVELS + 1):
        if planned.expected <= request.budget.limit:
            break
        relaxed = relaxed_policy(request.policy, level)
        if relaxed is None:
            break
        ctx, planned = await plan(relaxed.policy, None)
        used = level
        notes = [n for n in relaxed.notes if n not in request.manifest.notes]
        request.manifest.notes.extend(notes)
    return ctx, planned, used
