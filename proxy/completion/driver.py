"""The completion driver: one client request end to end, the only owner of the exchange.

The edge (`proxy.http`) authenticates, reads the body, picks the upstream and its credentials,
hands the driver a `ClientRequest` and relays the `Reply` it gets back. The driver does the rest
and never calls back into the edge:

1. prepares the request under the tenant's policy (`engine.Preparer`; every refusal happens
   here, before any upstream call), or leaves it as it came when the format says its history is
   held by the provider;
2. sends it (`run.run_completion`), and when the upstream's first answer is an overflow error that
   states the model's window, records that window and prepares once more against it (`retry`);
3. runs the synthetic rounds, each follow-up call prepared again within the request's allowance
   (`round_fit`), and answers in the client's format.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict

from proxy.artifacts.store import ArtifactStore
from proxy.completion.reply import Reply
from proxy.completion.run import CompletionContext, run_completion
from proxy.completion.summarizer import HeadersFor, UpstreamSummarizer
from proxy.engine.cache_warmth import note_sent
from proxy.engine.manifest import NoteCode, Prepared
from proxy.engine.prepare_request import FIRST_CALL, FOLLOW_UP, LOOKING, CallOptions, Requester
from proxy.engine.preparer import Preparer
from proxy.formats.base import ClientFormat
from proxy.metrics import Metrics
from proxy.settings import MAX_PARSED_RESPONSE_BYTES
from proxy.stats import Pricing, RecordedBodies, RequestStats
from proxy.synthetic.base import SearchWorker
from proxy.tokens.calibration import CountCalibration
from proxy.tokens.prices import PriceTable, estimate
from proxy.upstream.base import Upstream, caches_at_marks
from proxy.upstream.windows import RequestWindows

RETRY_CUSHION = 1.01
"""The retry's ratio, a little above the one the refused prompt showed (its cut prompt differs)."""
MAX_STATED_RATIO = 4.0
"""A stated size further from the proxy's count than a count ratio may be (`budget.count_ratio`
at most 4) is about something else than this prompt's tokens: the retry ignores it."""


@dataclass(slots=True)  # one per request: plain stores, not frozen setattrs
class ClientRequest:
    """One client request as the edge hands it over: what it is, who sends it, where it goes."""

    wire: ClientFormat
    """The client's format (its request and its answer)."""
    body: dict[str, Any]
    raw: bytes
    """The client's exact bytes (forwarded as they are when nothing changes)."""
    requester: Requester
    windows: RequestWindows
    """The upstream serving the request, the headers it gets, and what it said of its windows."""
    headers_for: HeadersFor
    """The client's headers with the requester's credentials for another upstream (a policy's
    summarizer may name one)."""
    stats: RequestStats
    """Filled in as the request goes: its manifest, upstream timings, synthetic rounds."""
    request_id: str


@dataclass(frozen=True)
class CompletionDriver:
    """What every exchange of one app shares (assembled once, in `proxy.app`)."""

    preparer: Preparer
    store: ArtifactStore
    metrics: Metrics
    upstreams: Mapping[str, Upstream]
    calibration: CountCalibration | None = None
    search_worker: SearchWorker | None = None
    max_parsed_response_bytes: int = MAX_PARSED_RESPONSE_BYTES
    prices: PriceTable | None = None
    """Prices by upstream and model: the answers' cost, the preparation's estimate."""
    clock: Callable[[], float] = time.time
    """Wall-clock seconds: when a prompt went upstream (`engine.cache_warmth`)."""

    async def prepare(
        self,
        request: ClientRequest,
        summarizer: UpstreamSummarizer | None = None,
        *,
        sent: bool = False,
        estimate_cost: bool = False,
    ) -> Prepared:
        """The request as it would go upstream first (a dry run, a token count, a completion);
        `sent`: it does go (a completion), so its cuts are kept for the next request;
        `estimate_cost`: with the prompt's estimated price in the manifest (a dry run)."""
        summarizer = summarizer or self.summarizer(request)
        held = request.wire.provider_history(request.body)
        if held is not None:
            why = (
                f"not prepared: '{held}' continues history the provider holds, forwarded "
                "unchanged"
            )
            prepared = self.preparer.unprepared(
                request.body, request.raw, request.requester, request.wire, why
            )
        else:
            call = marked_call(FIRST_CALL if sent else LOOKING, request)
            prepared = await self.preparer.prepare(
                request.body, request.raw, request.requester, request.wire, request.windows,
                call=call, summarizer=summarizer,
            )  # fmt: skip
        _noted(request.stats, prepared)
        self._priced(request, prepared, estimate_cost)
        return prepared

    def _priced(self, request: ClientRequest, prepared: Prepared, estimate_cost: bool) -> None:
        """The request's prices in its stats (for its answers' cost) and, when asked, the
        prompt's estimated price in its manifest."""
        if self.prices is None:
            return
        manifest, upstream = prepared.manifest, request.windows.upstream.name
        prices = self.prices.lookup(upstream, manifest.model)
        request.stats.pricing = Pricing(upstream, manifest.model, prices)
        if estimate_cost and manifest.counting_method:
            manifest.cost_estimate = estimate(
                prices, manifest.tokens_before, manifest.tokens_after, manifest.count_ratio,
                manifest.cache_marks,
            )  # fmt: skip

    async def complete(self, request: ClientRequest) -> Reply:
        """Prepare, send, retry once on a stated overflow, run the synthetic rounds, answer."""
        summarizer = self.summarizer(request)
        prepared = await self.prepare(request, summarizer, sent=True)
        self.metrics.record_preparation(prepared.manifest)
        _kept_bodies(self.preparer, request, prepared)
        exchange = _Exchange(self.preparer, request, prepared, summarizer)
        held = request.wire.provider_history(request.body) is not None
        context = CompletionContext(
            upstream=request.windows.upstream,
            headers=request.windows.headers,
            scope=request.requester.scope,
            store=self.store,
            metrics=self.metrics,
            stats=request.stats,
            request_id=request.request_id,
            wire=request.wire,
            max_parsed_response_bytes=self.max_parsed_response_bytes,
            search_worker=self.search_worker,
            prepare_again=None if held else exchange.prepare_again,
            calibration=self.calibration,
            contributor=request.requester.contributor,
            refit=exchange.refit,
        )
        key = prepared.sent_key
        if key is None or request.requester.anonymous:
            return await run_completion(context, prepared)
        # The prompt's cache lives from now. The time is kept while the call is under way (its
        # write costs the request no time); a dry run or a token count never gets here.
        keeping = asyncio.ensure_future(note_sent(self.store, key, self.clock()))
        try:
            return await run_completion(context, prepared)
        finally:
            await keeping

    def summarizer(self, request: ClientRequest) -> UpstreamSummarizer:
        """Its own upstream and credentials by default; another upstream (a policy's
        `summarizer.upstream`) with the requester's credentials for that one."""
        windows = request.windows

        def headers_for(upstream: Upstream) -> CIMultiDict[str]:
            if upstream is windows.upstream:
                return CIMultiDict(windows.headers)
            return request.headers_for(upstream)

        model = request.wire.model(request.body)
        return UpstreamSummarizer(windows.upstream, self.upstreams, headers_for, model)


@dataclass(slots=True)  # one per request: plain stores, not frozen setattrs
class _Exchange:
    """The preparations one exchange may still ask for, after its first."""

    preparer: Preparer
    request: ClientRequest
    first: Prepared
    summarizer: UpstreamSummarizer

    async def prepare_again(self, window: int, prompt_tokens: int | None) -> Prepared | None:
        """The upstream stated `window` in an overflow error: remember it, prepare again (None
        when that changes nothing). When it also stated the prompt's size, the retry counts
        with at least the ratio of that size to the proxy's count of the same prompt: the
        learned ratio was too low for this conversation."""
        request = self.request
        request.windows.record_stated(self.first.manifest.model, window)
        call = FIRST_CALL
        counted = self.first.manifest.tokens_after
        floor = prompt_tokens / counted * RETRY_CUSHION if prompt_tokens and counted else None
        if floor is not None and floor <= MAX_STATED_RATIO:
            call = dataclasses.replace(call, min_count_ratio=floor)
        again = await self._prepared(request.body, request.raw, call)
        if again.body == self.first.body:
            return None
        again.manifest.note(
            NoteCode.retried_after_overflow,
            f"the upstream refused the first attempt as too long (window {window}): "
            "prepared again and retried once",
        )
        _noted(request.stats, again)
        return again

    async def refit(self, body: dict[str, Any], raw: bytes, last_resort: bool) -> Prepared:
        """A follow-up call of the synthetic loop, prepared under the requester's policy."""
        call = dataclasses.replace(FOLLOW_UP, last_resort=last_resort)
        return await self._prepared(body, raw, call)

    async def _prepared(self, body: dict[str, Any], raw: bytes, call: CallOptions) -> Prepared:
        request = self.request
        return await self.preparer.prepare(
            body, raw, request.requester, request.wire, request.windows,
            call=marked_call(call, request), summarizer=self.summarizer,
        )  # fmt: skip


def marked_call(call: CallOptions, request: ClientRequest) -> CallOptions:
    """`call`, told whether its upstream caches at breakpoints (the policy's `cache_marks`)."""
    return dataclasses.replace(call, cache_marks=caches_at_marks(request.windows.upstream))


def _kept_bodies(preparer: Preparer, request: ClientRequest, prepared: Prepared) -> None:
    """The bodies for the request's record, when its policy keeps them (`records.bodies`)."""
    records = preparer.policy_of(request.requester, prepared.manifest.model).records
    if records.bodies:
        bodies = RecordedBodies(request.raw, prepared.body, records.max_body_bytes)
        request.stats.bodies = bodies


def _noted(stats: RequestStats, prepared: Prepared) -> None:
    stats.manifest = prepared.manifest
    stats.policy = prepared.manifest.policy
