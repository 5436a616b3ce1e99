"""Step: replace the oldest whole turns by one summary naming their archive (compaction).

It removes what `drop_turns` would (whole turns, oldest first, never the recent ones or the
protected units, cut where drop's hysteresis cuts), archives them the same way, and puts one
message in their place that names the archive and the artifact of every tool result it covers
(so the read and search tools reach each original) and carries a digest of the span: an
extract (`summarizer.kind: extract`, no model: facts with their latest values, identifiers,
paths, numbers, error lines, query-aware against the user's message when the cut was made).

Prefix stable: the digest is a pure function of the span, that query and the settings, and it
is frozen in the store under their digest (`summarize.cache`): the next request with the
same history sends the same bytes. It changes only where a drop would change its notice.
`mode: compact` is `window` with this step in place of `drop_turns`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from proxy.engine.budget import scaled
from proxy.engine.manifest import SummarySource
from proxy.engine.plan_totals import StepPlan
from proxy.engine.step_api import (
    Cut,
    PrepareContext,
    Step,
    StepOutput,
    StepServices,
)
from proxy.engine.steps.drop_turns import archive_span, stand_in, turns_plan
from proxy.engine.steps.summarize import cache as summary_cache
from proxy.engine.steps.summarize import current, model_summary, present
from proxy.engine.steps.summarize import parts as summary_parts
from proxy.engine.steps.summarize import spans as summary_spans
from proxy.engine.steps.summarize.config import SummarizeConfig
from proxy.engine.steps.summarize.model_summary import Obtained
from proxy.engine.steps.summarize.parts import EXTRACT, WIDEST_AUTHOR
from proxy.engine.steps.summarize.spans import SummarySpans
from proxy.engine.steps.summarize.summarizer import SummarizerError

_VERSION = "v4"
"""Part of every summary's identity: a change of what the digest keeps changes it."""
_WIDE = 10**9
MAX_TURN = 99_999
"""The widest turn number a summary's header is sized for (a conversation's turns are fewer)."""
WIDE_TURNS = f"turns {MAX_TURN}-{MAX_TURN}"
"""The widest `covers` of a summary's header (for sizing)."""
PRECOMPUTE_TURNS = 4
"""Spans summarized ahead of time: the cut a crossing would make now, and up to 3 turns on."""


class Summarize(Step[SummarizeConfig]):
    name = "summarize"
    config_model = SummarizeConfig
    in_default_policy = False
    counts = "turns"

    def __init__(self, config: SummarizeConfig, ctx: PrepareContext) -> None:
        super().__init__(config, ctx)
        self.obtained: Obtained | None = None
        """The summary this request uses and where it came from (set by `settle`)."""
        self.spans: SummarySpans | None = None
        """What the summary covers and what is dropped since it (set by `settle`)."""
        self._facts: current.Facts | None = None
        self._cut_at: int | None = None
        """The time point of the step's last cut (`restate: at_cuts`; set by `settle`)."""

    def facts(self, ctx: PrepareContext, stated: str = "") -> current.Facts:
        """The request's facts at present, those of the summary's body `stated` included (read
        once, when the summary is written)."""
        if self._facts is None:
            upto = self._cut_at if self.config.restate == "at_cuts" else None
            self._facts = current.request_facts(ctx, present.stated_facts(stated), upto)
        return self._facts

    def budget(self, ctx: PrepareContext) -> int:
        """The tokens of the summary and the digest of the turns behind it, together."""
        if self.config.header_only:
            return 0
        return scaled(self.config.summarizer.max_summary_tokens, ctx.sizing)

    def tail_budget(self, ctx: PrepareContext) -> int:
        """The changes the turns dropped since the summary's last roll-up make to it: a sixth
        of the summary's budget, on top of it."""
        if not self._lags() or self.config.header_only:
            return 0
        return self.budget(ctx) // 6

    def plan(self, ctx: PrepareContext) -> StepPlan:
        author = EXTRACT if self.config.summarizer.kind == EXTRACT else WIDEST_AUTHOR
        sizing = ctx.artifact_id("sizing")
        sized = self._item(ctx, _WIDE, _WIDE, sizing, "", "", author, WIDE_TURNS)
        extra = ctx.counter.count_message(sized) + self.budget(ctx)
        if self._lags() and not self.config.header_only:
            text = summary_parts.tail_text(_WIDE, _WIDE, sizing, "", ctx.own_text_mac)
            tail = ctx.wire.notice_item(self.config.notice_role, text)
            extra += ctx.counter.count_message(tail) + self.tail_budget(ctx)
        # A summary is paced by its roll-ups: never taken deeper than the cut asks for.
        return dataclasses.replace(turns_plan(ctx, self.config, extra), deep_cuts=False)

    def _roll_up(self, ctx: PrepareContext) -> summary_spans.RollUp:
        config = self.config
        return summary_spans.RollUp(
            int(config.roll_up_after * ctx.sizing), config.roll_up_turns
        )

    def _lags(self) -> bool:
        """Whether turns may stand behind the tail item (the summary does not roll up at every
        cut)."""
        return bool(self.config.roll_up_after or self.config.roll_up_turns)

    async def settle(
        self, ctx: PrepareContext, units: list[int], services: StepServices, cuts: list[Cut]
    ) -> None:
        dropped = self._dropped(ctx, units)
        if not dropped or self.config.header_only:  # the last resort: one header, no tail
            return
        self._cut_at = cuts[-1][0] if cuts else None
        self.spans = summary_spans.split(ctx, dropped, cuts, self._roll_up(ctx))
        if self.config.summarizer.kind == "llm":
            self.obtained = await self._from_model(ctx, self.spans, services)
        else:
            self.obtained = await self._from_extract(ctx, self.spans, services)

    async def _from_extract(
        self, ctx: PrepareContext, spans: SummarySpans, services: StepServices
    ) -> Obtained:
        """The digest: frozen under the span and the query, or made (a pure function) and
        frozen."""
        dropped = spans.summarized
        items = [ctx.messages[i] for u in dropped for i in ctx.units[u].indices]
        query = self._query(ctx, spans.rolled_at)
        key = summary_cache.span_digest(ctx.wire, items, self._identity(ctx), query)
        found = await summary_cache.lookup(services.store, services.scope, key)
        if found is not None:
            return Obtained(found, SummarySource.cache)
        made = self._extract(ctx, dropped, query, self.budget(ctx))
        await summary_cache.keep(
            services.store, services.scope, key, made,
            ttl_seconds=services.ttl_seconds, max_per_scope=services.max_per_scope,
        )
        return Obtained(made, SummarySource.fresh)

    async def _from_model(
        self, ctx: PrepareContext, split: SummarySpans, services: StepServices
    ) -> Obtained:
        """The model's summary: frozen, or made in the background (ahead of time, or now and
        waited for at most `timeout_s`: the request is never held longer), else the fallback."""
        dropped = split.summarized
        spans = (dropped, split.previous)
        settings = self.model_settings(ctx)
        if services.background is None:  # no background here: made while the request waits
            try:
                return await model_summary.obtain(
                    ctx, services, settings, spans, ctx.counter.count_text
                )
            except SummarizerError as error:
                return self._fallback(ctx, dropped, error)
        key = model_summary.span_key(ctx, settings, dropped)
        found = await summary_cache.lookup(services.store, services.scope, key)
        if found is not None:
            return Obtained(found, SummarySource.cache)
        ahead = services.background.running(key)
        if not ahead:
            refused = await self._start(ctx, services, settings, spans, key)
            if refused is not None:
                return self._fallback(ctx, dropped, refused)
        start = time.monotonic()
        ready = await model_summary.wait_ready(services, key, settings.timeout_s)
        if isinstance(ready, SummarizerError):
            return self._fallback(ctx, dropped, ready)
        source = SummarySource.background if ahead else SummarySource.fresh
        return Obtained(ready, source, seconds=time.monotonic() - start, usage=ready.usage)

    async def _start(
        self, ctx: PrepareContext, services: StepServices, settings: model_summary.ModelSettings,
        spans: model_summary.Spans, key: str,
    ) -> SummarizerError | None:
        """Start making the summary of `spans` in the background; the reason not to wait for
        it when it is not started: it just failed, or another replica (or this tenant's
        bounded background) is busy with it."""
        assert services.background is not None
        failed = services.background.recent_failure(key)
        if isinstance(failed, SummarizerError):
            return failed
        made = self._in_background(settings)
        count = ctx.counter.count_text
        if await model_summary.start_in_background(ctx, services, made, [spans], count):
            return None
        return SummarizerError("timeout", "the summary is being made elsewhere")

    async def precompute(
        self, ctx: PrepareContext, services: StepServices, cuts: list[Cut]
    ) -> None:
        """Start, in the background, the summaries of the spans the next cut may remove (each
        rolling up the one before), so that the request crossing the trigger finds its own
        frozen: the cut a crossing would make now, and the deepest cuts the next turns allow
        (the turns up to the current one; growth-sized cuts usually go that deep)."""
        if self.config.summarizer.kind != "llm" or not ctx.turn_first_unit:
            return
        rolled = summary_spans.roll_ups(ctx, cuts, self._roll_up(ctx))
        forced = bool(rolled) and rolled[-1][0] == len(ctx.units) - 1
        real = rolled[:-1] if forced else rolled
        if real and not forced and self._rolls_up_later(ctx, real[-1][0]):
            return  # the next cuts go behind the tail item: no summary is due yet
        current = real[-1][1] if real else 0
        last = ctx.turn_first_unit[-1]
        deepest = [h for h in ctx.turn_first_unit if current < h <= last][-PRECOMPUTE_TURNS:]
        wanted = sorted({*deepest, *([rolled[-1][1]] if forced else [])})
        chain: list[model_summary.Spans] = []
        before = [u for u in range(current) if not ctx.is_protected(u)]
        for h in wanted:
            span = [u for u in range(h) if not ctx.is_protected(u)]
            if span:
                chain.append((span, before))
                before = span
        made = self._in_background(self.model_settings(ctx))
        await model_summary.start_in_background(ctx, services, made, chain, ctx.counter.count_text)

    def _rolls_up_later(self, ctx: PrepareContext, rolled_at: int) -> bool:
        """Whether even a crossing `PRECOMPUTE_TURNS` turns from now is too early to roll up."""
        since = ctx.unit_turn[len(ctx.units) - 1] - ctx.unit_turn[rolled_at]
        return since + PRECOMPUTE_TURNS < self.config.roll_up_turns

    def _in_background(self, settings: model_summary.ModelSettings) -> model_summary.ModelSettings:
        timeout = self.config.summarizer.background_timeout_s
        return dataclasses.replace(settings, timeout_s=timeout)

    def _fallback(
        self, ctx: PrepareContext, dropped: list[int], error: SummarizerError
    ) -> Obtained:
        on_error = self.config.summarizer.on_error
        if on_error == "refuse":
            raise summary_parts.summarizer_refusal(error)
        budget = self.budget(ctx)
        summary = self._extract(ctx, dropped, "", budget) if on_error == "extract" else None
        return Obtained(summary, SummarySource.fallback, failure=error.failure)

    def model_settings(self, ctx: PrepareContext) -> model_summary.ModelSettings:
        config = self.config.summarizer
        return model_summary.ModelSettings(
            config.model, config.upstream, self.budget(ctx), config.timeout_s,
            config.batch_tokens or ctx.sizing,
        )

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        dropped = self._dropped(ctx, units)
        if not dropped:
            return StepOutput()
        spans = self.spans or summary_spans.SummarySpans(dropped, [], [], -1)
        turns = len({ctx.unit_turn[u] for u in dropped})
        out = StepOutput(units=dropped, count=turns)
        obtained = self.obtained
        if obtained is None:
            made = self._extract(ctx, spans.summarized, "", self.budget(ctx))
            obtained = Obtained(made, SummarySource.fresh)
        if self.config.header_only:
            obtained = Obtained(None, SummarySource.last_resort)
        budget = self.budget(ctx) if obtained.summary is not None else 0
        indices, item = self._summary(ctx, spans.summarized, obtained, out, budget)
        by = obtained.summary.by if obtained.summary is not None else "none"
        out.reason = f"over trigger: turns compacted ({by}, {obtained.source})"
        out.detail = self._detail(ctx, indices, obtained, item)
        if spans.tail:
            out.detail["tail"] = self._tail(ctx, spans.tail, obtained, out)
        return out

    def _summary(
        self, ctx: PrepareContext, span: list[int], obtained: Obtained, out: StepOutput,
        budget: int,
    ) -> tuple[list[int], Any]:
        """An item in place of the `span`'s units (a summary within `budget`, or its header
        alone), added to `out`: (their items, the item)."""
        indices, archive_id, tokens = archive_span(ctx, span, out)
        named = summary_parts.tool_results(ctx, span, self.name)
        for _, artifact_id, artifact in named:
            out.artifacts[artifact_id] = artifact
        results = summary_parts.listed(ctx, named, budget)
        body, by = "", "none"
        if obtained.summary is not None:
            by = obtained.summary.by
            left = budget - ctx.counter.count_text(results)
            summary = obtained.summary.body
            stated = current.at_present(summary, self.facts(ctx, summary))
            body = summary_parts.trimmed(ctx, summary_parts.quoted(stated), left)
        numbers = sorted({ctx.unit_turn[u] + 1 for u in span})
        covers = f"turns {numbers[0]}-{numbers[-1]}" if len(numbers) > 1 else f"turn {numbers[0]}"
        item = self._item(ctx, len(numbers), tokens, archive_id, results, body, by, covers)
        shown = tuple(artifact_id for _, artifact_id, _ in named if artifact_id in results)
        stand_in(ctx, indices, archive_id, tokens, item, out, shown)
        return indices, item

    def _tail(
        self, ctx: PrepareContext, tail: list[int], obtained: Obtained, out: StepOutput
    ) -> list[int]:
        """The turns dropped since the summary's last roll-up, behind one short item after the
        summary with what they change of it (added to `out`): their items' span."""
        indices, archive_id, tokens = archive_span(ctx, tail, out)
        stated = obtained.summary.body if obtained.summary is not None else ""
        texts, _ = summary_parts.span_texts(ctx, tail)
        changes = present.tail(texts, stated, self.tail_budget(ctx), ctx.counter.count_text)
        changes = current.at_present(changes, self.facts(ctx))
        changes = summary_parts.trimmed(ctx, changes, self.tail_budget(ctx))
        turns = len({ctx.unit_turn[u] for u in tail})
        text = summary_parts.tail_text(turns, tokens, archive_id, changes, ctx.own_text_mac)
        item = ctx.wire.notice_item(self.config.notice_role, text)
        stand_in(ctx, indices, archive_id, tokens, item, out)
        return [indices[0], indices[-1] + 1]

    def _detail(
        self, ctx: PrepareContext, indices: list[int], obtained: Obtained, item: Any
    ) -> dict[str, Any]:
        """What the manifest reports of the summary (and the metrics and the access line)."""
        summary = obtained.summary
        return {
            "span": [indices[0], indices[-1] + 1],
            "kind": "drop" if summary is None else EXTRACT if summary.by == EXTRACT else "llm",
            "by": summary.by if summary is not None else None,
            "tokens": ctx.counter.count_message(item),
            "source": obtained.source.value,
            "failure": obtained.failure,
            "seconds": round(obtained.seconds, 3),
            "summarizer_usage": obtained.usage,
            "manifest": present.manifest(
                None if summary is None else current.at_present(summary.body, self.facts(ctx))
            ),
        }

    def _dropped(self, ctx: PrepareContext, units: list[int]) -> list[int]:
        return [u for u in units if not ctx.is_protected(u)]

    def _item(
        self, ctx: PrepareContext, turns: int, tokens: int, archive_id: str, results: str,
        body: str, by: str, covers: str = "",
    ) -> Any:
        text = summary_parts.summary_text(
            ctx.read_tool_enabled, turns, tokens, archive_id, results, body, by,
            ctx.own_text_mac, covers,
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
        self, ctx: PrepareContext, dropped: list[int], query: str, budget: int
    ) -> summary_cache.Summary:
        """The digest of the span, within what the list of its tool results leaves of
        `budget`."""
        named = summary_parts.tool_results(ctx, dropped, self.name)
        budget -= ctx.counter.count_text(summary_parts.listed(ctx, named, budget))
        texts, resources = summary_parts.span_texts(ctx, dropped)
        body = present.summary(texts, query, budget, ctx.counter.count_text, resources)
        return summary_cache.Summary(body, EXTRACT)
