"""Store what the steps remove and apply their edits: the confirmed writes decide which edits
stand (`store_and_apply`), and the `Reduction` says what came of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.artifacts.budgets import Refused, budget_refusals
from proxy.artifacts.store import ArtifactStore, NewArtifact
from proxy.engine.manifest import Action, Manifest, NoteCode
from proxy.engine.policy import ArtifactsPolicy
from proxy.engine.reducer import ReductionContext
from proxy.engine.step_api import Edit, PrepareContext, Step, StepOutput


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
