"""Getting the summary of a span of dropped turns from a summarizer: frozen, rolled up, bounded.

The summary of a span is looked up in the store first (`cache`, keyed by the span, the
summarizer's identity and the budget). When it is not there, the previous cut's summary (the
span that went before this one, frozen when it was made) is rolled up with the turns added
since, in batches of at most `batch_tokens` of transcript, each answer validated
(`summarizer.parse_summary`). The whole takes at most `timeout_s`; any failure (transport,
timeout, an answer of the wrong shape) is a `SummarizerError` for the caller's `on_error`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.engine.manifest import SummarySource
from proxy.engine.step_api import PrepareContext, StepServices
from proxy.engine.steps.summarize import cache as summary_cache
from proxy.engine.steps.summarize.summarizer import (
    INSTRUCTIONS,
    Failure,
    SummarizerError,
    SummaryCall,
    batches,
    parse_summary,
    render,
)
from proxy.engine.tool_text import is_proxy_text

VERSION = "v1"

Spans = tuple[list[int], list[int]]
"""(the units a summary covers, the units of the previous one it may roll up: a prefix)."""


@dataclass(frozen=True)
class ModelSettings:
    model: str | None
    upstream: str | None
    max_tokens: int
    timeout_s: float
    batch_tokens: int


@dataclass
class Obtained:
    """What the step got, and how (the manifest and the metrics report it)."""

    summary: summary_cache.Summary | None
    source: SummarySource
    failure: Failure | None = None
    seconds: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)


def identity(settings: ModelSettings) -> str:
    return f"llm:{VERSION}:{settings.model or ''}:{settings.upstream or ''}:{settings.max_tokens}"


def transcript(ctx: PrepareContext, units: Sequence[int]) -> list[str]:
    """The span as plain lines for the summarizer: `role: words`, tool calls as sent, tool
    results labelled by their call."""
    entries: list[str] = []
    for u in units:
        unit = ctx.units[u]
        results = set(unit.result_indices)
        for k, index in enumerate(unit.indices):
            item = ctx.messages[index]
            role = ctx.wire.pin_facts(item)[0] or "item"
            if index in results:
                label = _call_label(unit.tool_call_ids, index - unit.start - unit.call_items)
                entries.append(f"[result of {label}] {ctx.wire.result_text(item) or ''}")
                continue
            words = ctx.wire.item_text(item) or ""
            if words and not is_proxy_text(words, ctx.own_text_mac):
                entries.append(f"{role}: {words}")
            if unit.is_tool_exchange and k < unit.call_items:
                entries.append(f"[call] {ctx.wire.canonical(item).decode('utf-8', 'replace')}")
    return entries


def _call_label(call_ids: tuple[str, ...], k: int) -> str:
    return call_ids[k] if 0 <= k < len(call_ids) else "a tool call"


async def summarize_span(
    services: StepServices,
    settings: ModelSettings,
    previous: str,
    entries: list[str],
    count: Callable[[str], int],
) -> summary_cache.Summary:
    """Roll `previous` (a summary body, "" for none) up with `entries`, batch by batch, within
    `settings.timeout_s`."""
    summarizer = services.summarizer
    if summarizer is None:
        raise SummarizerError("upstream", "no summarizer is available for this request")
    body, model = previous, ""
    usage: dict[str, int] = {}
    try:
        async with asyncio.timeout(settings.timeout_s):
            for batch in batches(entries, settings.batch_tokens, count):
                call = SummaryCall(
                    INSTRUCTIONS, body, batch, settings.max_tokens, settings.model,
                    settings.upstream,
                )
                reply = await summarizer.summarize(call)
                body, model = render(parse_summary(reply.answer)), reply.model
                for key, value in reply.usage.items():
                    usage[key] = usage.get(key, 0) + value
    except TimeoutError:
        raise SummarizerError("timeout", f"no summary within {settings.timeout_s:g}s") from None
    return summary_cache.Summary(body, model or (settings.model or "summarizer"), usage)


async def obtain(
    ctx: PrepareContext,
    services: StepServices,
    settings: ModelSettings,
    spans: tuple[list[int], list[int]],
    count: Callable[[str], int],
) -> Obtained:
    """The summary of `spans[0]` (the dropped units): frozen, or rolled up from the frozen
    summary of `spans[1]` (the previous cut's units, a prefix of them; may be empty) plus the
    rest. Raises `SummarizerError` when it must be made and cannot be."""
    units, before = spans
    key = span_key(ctx, settings, units)
    found = await summary_cache.lookup(services.store, services.scope, key)
    if found is not None:
        return Obtained(found, SummarySource.cache)
    previous = None
    if before:
        previous = await summary_cache.lookup(
            services.store, services.scope, span_key(ctx, settings, before)
        )
    start = time.monotonic()
    todo = units[len(before) :] if previous is not None else units
    made = await summarize_span(
        services, settings, previous.body if previous else "", transcript(ctx, todo), count
    )
    seconds = time.monotonic() - start
    await summary_cache.keep(
        services.store, services.scope, key, made, ttl_seconds=services.ttl_seconds,
        max_per_scope=services.max_per_scope,
    )
    return Obtained(made, SummarySource.fresh, seconds=seconds, usage=made.usage)


def span_key(ctx: PrepareContext, settings: ModelSettings, units: Sequence[int]) -> str:
    items: list[Any] = [ctx.messages[i] for u in units for i in ctx.units[u].indices]
    return summary_cache.span_digest(ctx.wire, items, identity(settings), "")


async def start_in_background(
    ctx: PrepareContext,
    services: StepServices,
    settings: ModelSettings,
    chain: list[Spans],
    count: Callable[[str], int],
) -> bool:
    """Start the summaries of `chain` (in order, each rolling up the one before) in one task
    that outlives the request, once this replica has claimed the first in the store (another
    replica holding the claim makes it). False when it runs nowhere: no background, or the
    tenant's background is full, or someone else's claim."""
    background = services.background
    if background is None or not chain:
        return False
    keys = [span_key(ctx, settings, units) for units, _ in chain]
    if background.running(keys[-1]):
        return True
    claim = f"making:{keys[-1]}"  # the chain's newest span: earlier ones may be made already
    ttl = int(settings.timeout_s) + 1
    own = summary_cache.summaries_scope(services.scope)
    if not await services.store.claim(own, claim, ttl_seconds=ttl):
        return False

    async def work() -> SummarizerError | None:
        for spans in chain:
            try:
                got = await obtain(ctx, services, settings, spans, count)
            except SummarizerError as error:
                background.report("failed", {})
                return error
            if got.source is SummarySource.fresh:
                background.report("made", got.usage)
        return None

    return background.start(keys, services.scope, work)


async def wait_ready(
    services: StepServices, key: str, timeout_s: float
) -> summary_cache.Summary | SummarizerError:
    """The frozen summary of `key` once this replica's background work has made it, waiting at
    most `timeout_s` for it; the failure otherwise (the work goes on and freezes it later)."""
    background = services.background
    failed: SummarizerError | None = None
    if background is not None and background.running(key):
        done, result = await background.wait(key, timeout_s)
        if not done:
            return SummarizerError("timeout", f"no summary within {timeout_s:g}s")
        failed = result if isinstance(result, SummarizerError) else None
    found = await summary_cache.lookup(services.store, services.scope, key)
    if found is not None:
        return found
    return failed or SummarizerError("timeout", "the summary is being made elsewhere")
