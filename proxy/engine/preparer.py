"""`Preparer.prepare()`: count, apply the tenant's policy, and return what goes upstream or refuse.

Every refusal happens here, before any upstream call and before a response starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from proxy.artifacts.no_writes import NoWritesStore
from proxy.artifacts.store import ArtifactStore
from proxy.engine.apply_edits import Reduction, store_and_apply
from proxy.engine.budget import Learned, RatioReader, compute_budget, note_budget
from proxy.engine.cache_marks import marks_mode
from proxy.engine.cache_warmth import CacheApplied, judge, resolve_ttl, sent_key
from proxy.engine.condense_text import CondenseMemo
from proxy.engine.continuity import Made, keep_cuts, recall_history
from proxy.engine.conversation import Conversation
from proxy.engine.finish import finish, plans
from proxy.engine.manifest import CacheReport, Manifest, NoteCode, Outcome, Prepared
from proxy.engine.policy import Policy
from proxy.engine.prepare_request import (
    FIRST_CALL,
    CallOptions,
    PolicyResolver,
    PreparingRequest,
    Requester,
    UpstreamWindows,
    upstream_learned,
)
from proxy.engine.reducer import Plan, ReductionContext, build_context, plan_reduction
from proxy.engine.step_api import StepServices
from proxy.engine.steps.summarize.background import Background, Observer
from proxy.engine.steps.summarize.summarizer import Summarizer
from proxy.engine.threads import (
    OFFLOAD_BYTES,
    OFFLOAD_ITEMS,
    OFFLOAD_THREADS,
    StoreOnLoop,
    SummarizerOnLoop,
    Workers,
)
from proxy.engine.tool_text import own_text_scope, remembered_ids
from proxy.engine.wire import WireFormat
from proxy.engine.working_set import WorkingSetKey, working_set_notes
from proxy.errors import RefusalReason
from proxy.jsonio import long_strings
from proxy.synthetic.registry import ARTIFACT_TOOLS, is_artifact_tool_name, tool_specs
from proxy.tokens.calibration import CountCalibration
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

REDUCED = (Outcome.reduced, Outcome.reduced_above_target)


class Preparer:
    def __init__(
        self,
        *,
        policies: PolicyResolver,
        counters: TokenCounters,
        catalog: ModelCatalog,
        store: ArtifactStore,
        calibration: RatioReader | None = None,
        offload_bytes: int = OFFLOAD_BYTES,
        offload_items: int = OFFLOAD_ITEMS,
        offload_threads: int = OFFLOAD_THREADS,
        background_observer: Observer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._policies = policies
        self._counters = counters
        self._catalog = catalog
        self._store = store
        self._calibration = calibration or CountCalibration()
        self._offload_bytes = offload_bytes
        self._offload_items = offload_items
        self._workers = Workers(offload_threads)
        self._condense = CondenseMemo()
        self._clock = clock
        """Wall-clock seconds: how long ago a conversation's prompt was sent (`cache_warmth`)."""
        self.background = Background(observer=background_observer)
        """Summaries made off the request path (`steps.summarize.background`)."""

    async def prepare(
        self,
        body: dict[str, Any],
        raw: bytes,
        tenant: Requester,
        wire: WireFormat,
        windows: UpstreamWindows | None = None,
        *,
        call: CallOptions | None = None,
        summarizer: Summarizer | None = None,
    ) -> Prepared:
        """Prepare one request of `tenant`, sent in format `wire` (`raw` is its exact bytes).
        A large request is counted and planned in a worker thread (`engine.threads`); the policy
        store and the artifact store are only ever used on this loop. `windows`: what the
        upstream knows of the model's window (asked only for models the map does not know).

        `call` prepares a follow-up call of the synthetic loop instead (see `CallOptions`);
        `summarizer` writes the summaries of a `summarize` step with a model (none: its
        `on_error` applies)."""
        self.background.bind(asyncio.get_running_loop())
        model = wire.model(body)
        policy = self._policies.resolve(tenant.policy, model)
        manifest = Manifest(policy=policy.name, model=model, mode=policy.mode)
        if policy.mode == "off":
            return Prepared(raw, False, manifest, body)
        call = call or FIRST_CALL
        tokenizer = policy.counting.tokenizer
        if not self._counters.loaded(model, tokenizer):  # the first request of its encoding
            await asyncio.to_thread(self._counters.for_model, model, tokenizer)
        unknown = policy.budget.context_window == "auto" and not self._catalog.lookup(model)
        learned = await upstream_learned(
            windows, model, unknown, policy.budget, self._calibration, tenant.contributor
        )
        args = (body, raw, wire, policy, manifest, learned, tenant)
        own = self._store_for(tenant, manifest) if policy.reduces else self._store
        if len(raw) < self._offload_bytes and len(wire.items(body)) < self._offload_items:
            return await self._prepare(*args, summarizer, own, call)
        loop = asyncio.get_running_loop()  # the store's and the summarizer's connections' loop
        store = StoreOnLoop(own, loop)
        there = SummarizerOnLoop(summarizer, loop) if summarizer else None
        return await self._workers.run(lambda: self._prepare_large(*args, there, store, call))

    async def _prepare_large(self, *args: Any) -> Prepared:
        """`_prepare` in a worker, where what it writes may hold long strings (`jsonio`)."""
        with long_strings():
            return await self._prepare(*args)

    def _store_for(self, tenant: Requester, manifest: Manifest) -> ArtifactStore:
        """The store, or for a request without a credential one that stores nothing (its scope
        is its own and dies with it: anything stored could never be read back)."""
        if not tenant.anonymous:
            return self._store
        why = "the request presents no credential: nothing is stored for it, nothing removed"
        manifest.note(NoteCode.no_credential, why)
        return NoWritesStore(self._store)

    def policy_of(self, tenant: Requester, model: str) -> Policy:
        """The policy a request of `tenant` to `model` is prepared under."""
        return self._policies.resolve(tenant.policy, model)

    def unprepared(
        self, body: dict[str, Any], raw: bytes, tenant: Requester, wire: WireFormat, why: str
    ) -> Prepared:
        """A request the proxy must not prepare (it continues history the provider holds, which
        the proxy cannot see): its own bytes, and a manifest that says so (`why`)."""
        model = wire.model(body)
        policy = self._policies.resolve(tenant.policy, model)
        manifest = Manifest(policy=policy.name, model=model, mode=policy.mode)
        manifest.note(NoteCode.history_at_provider, why)
        return Prepared(raw, False, manifest, body)

    def close(self) -> None:
        """Stop the worker threads (preparations still waiting for one are dropped) and the
        background summaries."""
        self._workers.close()
        self.background.close()

    async def _prepare(
        self,
        body: dict[str, Any],
        raw: bytes,
        wire: WireFormat,
        policy: Policy,
        manifest: Manifest,
        learned: Learned,
        tenant: Requester,
        summarizer: Summarizer | None,
        store: ArtifactStore,
        call: CallOptions,
    ) -> Prepared:
        items = wire.items(body)
        first_call = call.offer_tools
        history = await recall_history(
            store, tenant.scope, wire, items, policy, call.offer_tools, call.keeps_cuts
        )
        kept, carries_tools = history.kept, False
        if kept.exchanges:  # the read tools go with reads put back (searches of tools: none)
            carries_tools = _reads_artifacts(wire, kept.items)
            specs = tool_specs(policy.read_tool.max_page_chars) if carries_tools else []
            body = wire.render(body, kept.items, wire.synthetic_tools(specs))
            raw = wire.encode(body)
            if carries_tools:
                call = dataclasses.replace(call, offer_tools=False)
        if history.working_set is not None:
            manifest.notes.extend(working_set_notes(kept))
        request = self._count(wire, body, raw, policy, manifest, call.applied_to(learned))
        request.carries_tools, request.rewritten = carries_tools, bool(kept.exchanges)
        request.marks = marks_mode(policy, call.cache_marks)
        deferring = policy.tool_deferral() if first_call and policy.reduces else None
        if deferring is not None:
            tail = len(ARTIFACT_TOOLS) if carries_tools else 0
            request.defer_tools(deferring, tail)
        request.summarizer = summarizer
        request.history = history
        sent = self._warmth(request, learned)
        if call.within_allowance:
            limit = min(request.budget.limit, request.budget.allowance)
            request.budget = dataclasses.replace(request.budget, limit=limit)
            manifest.refusal_limit = limit
        prepared = await self._decide(request, tenant, store, call)
        prepared.working_set, prepared.sent_key = history.working_set, sent
        return prepared

    def _warmth(self, request: PreparingRequest, learned: Learned) -> WorkingSetKey | None:
        """What is known of the provider's cache of the request's conversation (in its
        manifest), and where the time it goes upstream is kept (None: nowhere)."""
        history = request.history
        if history.place is None:  # not the client's own call of a reducing policy
            return None
        ttl = resolve_ttl(learned.cache_ttl, request.wire.cache_ttl(request.body))
        warmth = judge(history.last_sent, self._clock(), ttl, history.sent_read)
        request.warmth = warmth
        request.manifest.cache = CacheReport(warmth.state, warmth.age_seconds, ttl)
        return sent_key(history.place, ttl)

    async def _decide(
        self, request: PreparingRequest, tenant: Requester, store: ArtifactStore, call: CallOptions
    ) -> Prepared:
        policy, wire = request.policy, request.wire
        over = request.tokens > request.budget.reduce_over
        # Under the trigger, only a step that acts on what it sees (oversized tool results
        # offloaded when seen) reduces anything: a quick scan, no parse, tells.
        seen = policy.acts_under_trigger(wire, request.messages, len(request.raw))
        # A conversation cut before keeps its cuts, even when this request is under its trigger
        # (the budget moved): its prompt keeps the prefix the upstream saw.
        reduce = policy.reduces and (over or seen or request.history.pins)
        conversation = None
        # Structure matters only to refuse broken input or to reduce; a request forwarded
        # untouched either way skips the parse (the passthrough path stays cheap).
        if policy.on_invalid == "reject" or reduce:
            conversation = wire.parse(request.messages)
            if conversation.problems:
                return self._invalid(request, conversation)
        if policy.mode == "inspect":
            return request.unchanged(Outcome.inspected)
        if not reduce and not over:
            if self._near_trigger(request, call):  # the next cut's summaries, made ahead
                parsed = conversation or wire.parse(request.messages)
                if not parsed.problems:
                    await self._reduce(request, parsed, tenant, store, call, precompute=True)
            return request.unchanged(Outcome.within_trigger)
        if policy.mode == "reject":
            if request.tokens <= request.budget.limit:
                return request.unchanged(Outcome.within_allowance)
            raise request.refusal(request.tokens, request.tokens)
        assert conversation is not None  # a reducing mode parses whenever it reduces
        prepared = await self._reduce(request, conversation, tenant, store, call)
        if not over and prepared.manifest.outcome not in REDUCED:  # breakpoints may be added
            prepared.manifest.outcome = Outcome.within_trigger
        return prepared

    def _count(
        self,
        wire: WireFormat,
        body: dict[str, Any],
        raw: bytes,
        policy: Policy,
        manifest: Manifest,
        learned: Learned,
    ) -> PreparingRequest:
        messages = wire.items(body)
        counter = self._counters.for_model(manifest.model, policy.counting.tokenizer)
        output, ratio = wire.output_limit(body), learned.ratio
        budget = compute_budget(
            policy.budget, manifest.model, output, self._catalog, learned.window, ratio.value,
            ratio_source=ratio.source, estimated=counter.method == "estimate",
        )  # fmt: skip
        costs = [counter.count_message(m) for m in messages]
        fixed = wire.overhead_tokens(body, counter)
        request = PreparingRequest(
            wire, body, raw, messages, policy, counter, budget, costs, fixed, manifest
        )
        manifest.counting_method = counter.method
        manifest.context_window = budget.context_window
        manifest.context_window_source = budget.window_source.value
        manifest.reserved_output = budget.reserved_output
        manifest.allowance = budget.allowance
        manifest.refusal_limit = budget.limit
        manifest.count_ratio = round(budget.count_ratio, 4)
        manifest.count_ratio_source = budget.count_ratio_source.value
        manifest.trigger = budget.trigger
        manifest.target = budget.target
        manifest.tokens_before = request.tokens
        note_budget(manifest, budget)
        return request

    def _invalid(self, request: PreparingRequest, conversation: Conversation) -> Prepared:
        first = conversation.problems[0]
        if request.policy.on_invalid == "reject":
            error = request.wire.invalid_error(conversation.problems)
            error.reason = RefusalReason.invalid_messages
            raise error
        text = f"invalid messages forwarded untouched: {first.reason}"
        request.manifest.note(NoteCode.invalid_forwarded, text)
        return request.unchanged(Outcome.invalid_forwarded)

    def _near_trigger(self, request: PreparingRequest, call: CallOptions) -> bool:
        at = request.policy.precompute_at() if request.policy.reduces else None
        near = at is not None and request.tokens >= at * request.budget.trigger
        return near and call.offer_tools and request.summarizer is not None

    async def _reduce(
        self,
        request: PreparingRequest,
        conversation: Conversation,
        tenant: Requester,
        store: ArtifactStore,
        call: CallOptions,
        *,
        precompute: bool = False,
    ) -> Prepared:
        policy, counter, wire = request.policy, request.counter, request.wire
        offered = policy.read_tool.enabled and call.offer_tools
        specs = tool_specs(policy.read_tool.max_page_chars) if offered else []
        synthetic = wire.synthetic_tools(specs)
        system = sum(request.costs[: conversation.system_end])
        base = system + request.fixed
        reduced_base = system + wire.overhead_tokens(request.body, counter, synthetic)
        artifact_id = remembered_ids(lambda text: store.artifact_id(tenant.scope, text))

        def own_text_mac(text: str) -> str:
            return store.artifact_id(own_text_scope(tenant.scope), text)

        limits = policy.artifacts
        services = StepServices(
            store, tenant.scope, counter, limits.ttl_seconds, limits.max_per_scope,
            request.summarizer, self.background, precompute,
        )

        history = request.history
        sizing = history.sizing(request.budget.allowance)

        async def plan(
            policy: Policy, recent_end: int | None = None
        ) -> tuple[ReductionContext, Plan]:
            ctx = build_context(
                wire, request.messages, conversation, policy, counter, request.costs,
                artifact_id, own_text_mac, request.budget.allowance, sizing, recent_end,
                self._condense,
            )  # fmt: skip
            pinned, budget, cold = history.pinned(ctx.units), request.budget, request.warmth.cold
            planned = await plan_reduction(ctx, budget, base, reduced_base, services, pinned, cold)
            return ctx, planned

        if precompute:  # summaries started ahead of time; nothing changes in this request
            await plan(policy)
            return request.unchanged(Outcome.within_trigger)
        ctx, planned, relaxed = await plans(request, plan, call.last_resort)
        _applied(request.manifest, planned)
        reduction = await store_and_apply(ctx, planned.outputs, store, tenant.scope)
        request.manifest.protected_tokens = planned.protected
        prepared = finish(request, reduction, synthetic, planned.log.refused)
        made = _made(request, ctx, planned, reduction, prepared, sizing)
        kept = dataclasses.replace(made, relaxed=relaxed, recent_end=ctx.recent_end)
        await keep_cuts(store, history, kept)
        return prepared


def _applied(manifest: Manifest, planned: Plan) -> None:
    """What the cache's state changed: a due cut kept the prefix, or went deeper (cold)."""
    if manifest.cache is not None and planned.due:
        deeper = planned.deeper
        manifest.cache.applied = CacheApplied.deeper_cut if deeper else CacheApplied.keep_prefix


def _made(
    request: PreparingRequest,
    ctx: ReductionContext,
    planned: Plan,
    reduction: Reduction,
    prepared: Prepared,
    sizing: int,
) -> Made:
    """What this preparation decided, as the next request of its conversation will replay it."""
    sent = prepared.manifest.outcome in (Outcome.reduced, Outcome.reduced_above_target)
    slack = planned.total - prepared.manifest.tokens_after if not reduction.unconfirmed else 0
    return Made(
        request.policy, len(request.messages), len(ctx.units), sizing, planned.log, sent,
        max(slack, 0),
    )  # fmt: skip


def _reads_artifacts(wire: WireFormat, items: list[Any]) -> bool:
    """Whether the conversation holds a result of the read tools (under any name a request gave
    them), which the request must then offer."""
    names = wire.tool_names(items, wire.parse(items).units).values()
    return any(is_artifact_tool_name(name) for name in names)
