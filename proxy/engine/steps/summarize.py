"""Step: replace the oldest whole turns by one summary naming their archive (compaction).

It removes what `drop_turns` would (whole turns, oldest first, never the recent ones or the
protected units, cut where drop's hysteresis cuts), archives them the same way, and puts one
message in their place that names the archive and the artifact of every tool result it covers
(so the read and search tools reach each original) and carries a digest of the span: an
extract (`summarizer.kind: extract`, no model: facts with their latest values, identifiers,
paths, numbers, error lines, query-aware against the user's message when the cut was made).

Prefix stable: the digest is a pure function of the span, that query and the settings, and it
is frozen in the store under their digest (`engine.summary_cache`): the next request with the
same history sends the same bytes. It changes only where a drop would change its notice.
`mode: compact` is `window` with this step in place of `drop_turns`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, PrivateAttr

from proxy.artifacts.read_tool import READ_TOOL, SEARCH_TOOL
from proxy.artifacts.store import NewArtifact
from proxy.engine import extract, summary_cache
from proxy.engine.budget import scaled
from proxy.engine.config_base import StrictModel
from proxy.engine.planner import StepPlan
from proxy.engine.step_api import (
    MARKER,
    Edit,
    OwnTextMac,
    PrepareContext,
    Step,
    StepOutput,
    StepServices,
)
from proxy.engine.steps.drop_turns import TurnsConfig, archived, turns_plan
from proxy.engine.steps.result_rewrites import stored_text
from proxy.engine.tool_text import is_proxy_text, signed

EXTRACT = "extract"
_VERSION = "v1"
"""Part of every summary's identity: a change of what the digest keeps changes it."""
_WIDE = 10**9
_Named = tuple[str, str, NewArtifact]


class SummarizerConfig(StrictModel):
    """Who writes the summary of the dropped turns."""

    kind: Literal["extract"] = Field(
        default="extract",
        description="extract = a deterministic digest of the span, no model.",
    )
    max_summary_tokens: Annotated[float, Field(gt=0)] = Field(
        default=0.15,
        description="The summary's size at most (fraction of the allowance when <= 1, else "
        "tokens), the list of tool results it names included.",
    )


class SummarizeConfig(TurnsConfig):
    kind: Literal["summarize"] = "summarize"
    summarizer: SummarizerConfig = Field(default_factory=SummarizerConfig)

    _header_only: bool = PrivateAttr(default=False)
    relax_note: ClassVar[str] = (
        "last resort before refusing: the summary of the dropped turns was left out (its "
        "header still names the archive)"
    )

    def relaxed(self, level: int = 1) -> Self | None:
        """The last resort before a refusal: the summary shrinks to its header (as much as a
        drop notice), the digest and the list of tool results left out."""
        if self._header_only:
            return None
        relaxed = self.model_copy()
        relaxed._header_only = True
        return relaxed

    @property
    def header_only(self) -> bool:
        return self._header_only


def summary_text(
    read_tool: bool, turns: int, tokens: int, archive_id: str, results: str, body: str,
    by: str, mac: OwnTextMac,
) -> str:
    """The text of the one item that stands where summarized turns were."""
    how = (
        f"{SEARCH_TOOL} or {READ_TOOL} with these ids"
        if read_tool
        else "the operator's artifact endpoint"
    )
    what = "extracted without a model" if by == EXTRACT else f"summarized by {by}"
    named = f"; tool results: {results}" if results else ""
    header = (
        f"{MARKER}: {turns} earlier turn(s) ({tokens} tokens) were compacted to fit the context "
        f"window ({what}). The originals are archived as artifact {archive_id} (one JSON "
        f"message per line){named}; use {how} to look things up.]"
    )
    return signed(f"{header}\n{body}" if body else header, mac)


class Summarize(Step[SummarizeConfig]):
    name = "summarize"
    config_model = SummarizeConfig
    in_default_policy = False
    counts = "turns"

    def __init__(self, config: SummarizeConfig, ctx: PrepareContext) -> None:
        super().__init__(config, ctx)
        self.summary: summary_cache.Summary | None = None
        self.source = ""
        """Where the summary came from: cache or fresh."""

    def budget(self, ctx: PrepareContext) -> int:
        if self.config.header_only:
            return 0
        return scaled(self.config.summarizer.max_summary_tokens, ctx.allowance)

    def plan(self, ctx: PrepareContext) -> StepPlan:
        sized = self._item(ctx, _WIDE, _WIDE, ctx.artifact_id("sizing"), "", "", EXTRACT)
        extra = ctx.counter.count_message(sized) + self.budget(ctx)
        return turns_plan(ctx, self.config, extra)

    async def settle(
        self, ctx: PrepareContext, units: list[int], services: StepServices, cut_at: int
    ) -> None:
        dropped = self._dropped(ctx, units)
        if not dropped or self.config.header_only:
            return
        items = [ctx.messages[i] for u in dropped for i in ctx.units[u].indices]
        query = self._query(ctx, cut_at)
        key = summary_cache.span_digest(ctx.wire, items, self._identity(ctx), query)
        found = await summary_cache.lookup(services.store, services.scope, key)
        if found is not None:
            self.summary, self.source = found, "cache"
            return
        self.summary, self.source = self._extract(ctx, dropped, query), "fresh"
        await summary_cache.keep(
            services.store, services.scope, key, self.summary,
            ttl_seconds=services.ttl_seconds, max_per_scope=services.max_per_scope,
        )

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        dropped = self._dropped(ctx, units)
        if not dropped:
            return StepOutput()
        indices, archive_id, archive = archived(ctx, dropped)
        tokens = sum(ctx.message_costs[i] for i in indices)
        turns = len({ctx.unit_turn[u] for u in dropped})
        out = StepOutput(units=dropped, tokens_freed=tokens, count=turns)
        out.artifacts[archive_id] = archive
        named = self._results(ctx, dropped)
        for _, artifact_id, artifact in named:
            out.artifacts[artifact_id] = artifact
        results = _listed(ctx, named, self.budget(ctx))
        summary = self.summary or self._extract(ctx, dropped, "")
        body = _trimmed(ctx, summary.body, self.budget(ctx) - ctx.counter.count_text(results))
        item = self._item(ctx, turns, tokens, archive_id, results, body, summary.by)
        out.edits.append(Edit("insert_before", indices[0], item, archive_id))
        out.edits.extend(Edit("remove", i, None, archive_id) for i in indices)
        out.tokens_freed -= ctx.counter.count_message(item)
        out.reason = f"over trigger: turns compacted ({summary.by}, {self.source or 'fresh'})"
        return out

    def _dropped(self, ctx: PrepareContext, units: list[int]) -> list[int]:
        return [u for u in units if not ctx.is_protected(u)]

    def _item(
        self, ctx: PrepareContext, turns: int, tokens: int, archive_id: str, results: str,
        body: str, by: str,
    ) -> Any:
        text = summary_text(
            ctx.read_tool_enabled, turns, tokens, archive_id, results, body, by,
            ctx.own_text_mac,
        )
        return ctx.wire.notice_item(self.config.notice_role, text)

    def _identity(self, ctx: PrepareContext) -> str:
        return f"{EXTRACT}:{_VERSION}:{self.budget(ctx)}"

    def _query(self, ctx: PrepareContext, cut_at: int) -> str:
        """The user's message when the cut was made: the first item of that time's turn."""
        if cut_at < 0 or not ctx.units:
            return ""
        first = ctx.turn_first_unit[ctx.unit_turn[min(cut_at, len(ctx.units) - 1)]]
        return ctx.wire.item_text(ctx.messages[ctx.units[first].start]) or ""

    def _extract(
        self, ctx: PrepareContext, dropped: list[int], query: str
    ) -> summary_cache.Summary:
        """The digest of the span, within what the list of its tool results leaves."""
        budget = self.budget(ctx)
        budget -= ctx.counter.count_text(_listed(ctx, self._results(ctx, dropped), budget))
        texts, resources = _span_texts(ctx, dropped)
        body = extract.digest(texts, query, budget, ctx.counter.count_text, resources)
        return summary_cache.Summary(body, EXTRACT)

    def _results(self, ctx: PrepareContext, dropped: list[int]) -> list[_Named]:
        """(label, artifact id, artifact) of each tool result of the span, newest first; each
        is stored as its own artifact (the id offload or clear gives it), so the read tool
        reaches it alone."""
        named: list[_Named] = []
        for u in dropped:
            unit = ctx.units[u]
            for k, index in enumerate(unit.result_indices):
                text = ctx.wire.result_text(ctx.messages[index])
                if text is None or is_proxy_text(text, ctx.own_text_mac):
                    continue
                stored = stored_text(ctx, text)
                meta = {"tool": ctx.result_names.get(index), **ctx.wire.result_meta(
                    ctx.messages[index]), "step": self.name}
                label = _label(unit.tool_call_ids, k, ctx.result_names.get(index))
                artifact = NewArtifact(stored.content, "tool_result", meta)
                named.append((label, stored.artifact_id, artifact))
        return named[::-1]


def _label(call_ids: tuple[str, ...], k: int, tool: str | None) -> str:
    if k < len(call_ids):
        return call_ids[k]
    return tool or "result"


def _span_texts(
    ctx: PrepareContext, dropped: list[int]
) -> tuple[list[extract.SpanText], list[str]]:
    """The texts of the span (tool results labelled by their call) and the resources its tool
    calls named."""
    texts: list[extract.SpanText] = []
    resources: list[str] = []
    for u in dropped:
        unit = ctx.units[u]
        results = set(unit.result_indices)
        for k, index in enumerate(unit.indices):
            item = ctx.messages[index]
            if index in results:
                text = ctx.wire.result_text(item) or ""
                label = _label(unit.tool_call_ids, index - unit.start - unit.call_items, None)
                texts.append(extract.SpanText(text, label))
                continue
            text = ctx.wire.item_text(item) or ""
            if text and not is_proxy_text(text, ctx.own_text_mac):
                texts.append(extract.SpanText(text))
            if unit.is_tool_exchange and k < unit.call_items:
                call = ctx.wire.canonical(item).decode("utf-8", "replace")
                resources.extend(extract.resources(call, unit.tool_call_ids))
    return texts, resources


def _listed(ctx: PrepareContext, named: list[_Named], budget: int) -> str:
    """`call=artifact, ...` for the tool results (newest first) within a third of `budget`."""
    listed: list[str] = []
    spent = 0
    for label, artifact_id, _ in named:
        entry = f"{label}={artifact_id}"
        cost = ctx.counter.count_text(entry + ", ")
        if spent + cost > budget // 3:
            break
        listed.append(entry)
        spent += cost
    more = len(named) - len(listed)
    if not listed:
        return ""
    return ", ".join(listed) + (f" (+{more} more in the archive)" if more else "")


def _trimmed(ctx: PrepareContext, body: str, budget: int) -> str:
    """`body` within `budget` tokens: its last lines go first (a frozen summary written under
    other settings, or a summarizer's answer that ran long)."""
    lines = body.splitlines()
    while lines and ctx.counter.count_text("\n".join(lines)) > budget:
        lines.pop()
    return "\n".join(lines)
