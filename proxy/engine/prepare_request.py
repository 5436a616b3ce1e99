"""What a preparation is asked: who asks (`Requester`), which upstream call (`CallOptions`),
and the request as the `Preparer` holds it while it prepares it (`PreparingRequest`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from proxy.engine.budget import (
    Budget,
    BudgetPolicy,
    Learned,
    LearnedWindow,
    RatioReader,
    count_ratio_for,
)
from proxy.engine.cache_marks import apply_marks, client_written
from proxy.engine.cache_warmth import NO_WARMTH, Warmth
from proxy.engine.continuity import History
from proxy.engine.manifest import Action, Manifest, NoteCode, Outcome, Prepared, SyntheticTools
from proxy.engine.policy import Policy
from proxy.engine.refusal import refusal
from proxy.engine.steps.defer_tools import DeferToolsConfig
from proxy.engine.steps.summarize.summarizer import Summarizer
from proxy.engine.tool_deferral import Deferral, defer_tools
from proxy.engine.wire import CacheMarksMode, WireFormat
from proxy.engine.working_set import Reinserted
from proxy.errors import ProxyError
from proxy.synthetic.find_tools import FIND_TOOLS
from proxy.synthetic.registry import ARTIFACT_TOOLS
from proxy.tokens.calibration_rule import AppliedRatio, CalibrationKey, RatioSource
from proxy.tokens.counters import TokenCounter


class Requester(Protocol):
    """Who asks (`http.auth.Tenant`): the name of its policy and its artifact scope."""

    @property
    def policy(self) -> str: ...

    @property
    def scope(self) -> str: ...

    @property
    def anonymous(self) -> bool:
        """True for a request that presented no credential: nothing is stored for it."""
        ...

    @property
    def contributor(self) -> str:
        """Whose samples the count calibration learns (`tokens.calibration_rule.contributor_id`
        of the scope without its session); "" for a request without a credential."""
        ...


class UpstreamWindows(Protocol):
    """What the request's upstream said of its models' windows (`upstream.windows`)."""

    @property
    def upstream_name(self) -> str:
        """The upstream's configured name (what its count ratios are learned under)."""
        ...

    def prompt_cache_ttl(self, model: str) -> int | None:
        """How long the upstream keeps a prompt cached for `model` (seconds; 0: it caches
        nothing; None: unknown)."""
        ...

    async def window(self, model: str, *, ask: bool) -> LearnedWindow | None:
        """A window learned for `model`; `ask`: the upstream may be asked (briefly) when nothing
        is known yet (the model map does not know the model)."""
        ...


async def upstream_learned(
    windows: UpstreamWindows | None,
    model: str,
    unknown: bool,
    budget: BudgetPolicy,
    ratios: RatioReader,
    contributor: str,
) -> Learned:
    """What a request's upstream told of the model's window (asked when the model is `unknown`
    to the model map) and the count ratio the request applies (`budget.count_ratio_for`, read
    from memory: call it on the loop)."""
    window, upstream, ttl = None, "", None
    if windows is not None:
        window, upstream = await windows.window(model, ask=unknown), windows.upstream_name
        ttl = windows.prompt_cache_ttl(model)
    key = CalibrationKey(upstream, model)
    return Learned(window, count_ratio_for(budget, ratios, key, contributor), ttl)


class PolicyResolver(Protocol):
    """The loaded policies (`policy.store.PolicyStore`)."""

    def resolve(self, name: str, model: str) -> Policy: ...


@dataclass
class PreparingRequest:
    """A request being prepared: its body, policy, counts and budget, and its manifest."""

    wire: WireFormat
    body: dict[str, Any]
    raw: bytes
    messages: list[Any]
    policy: Policy
    counter: TokenCounter
    budget: Budget
    costs: list[int]
    fixed: int
    manifest: Manifest
    carries_tools: bool = False
    """The working set put reads back, and the body carries the read tools."""
    rewritten: bool = False
    """The body is not the client's: the working set put exchanges back."""
    summarizer: Summarizer | None = None
    history: History = field(default_factory=lambda: History(Reinserted([], 0)))
    """What the conversation's earlier requests left for it (exchanges, remembered cuts)."""
    marks: CacheMarksMode | None = None
    """The `cache_marks` mode the body that goes gets (None: its breakpoints are left alone)."""
    warmth: Warmth = NO_WARMTH
    """What is known of the provider's cache of the conversation (`cache_warmth`)."""
    deferral: Deferral | None = None
    """What the `defer_tools` step did to the request's tools (None: nothing)."""
    came: tuple[dict[str, Any], int] | None = None
    """The body before `defer_tools` replaced its tools, and its tokens besides the items
    (None: the body is that one): what the request as it came makes the provider write."""

    @property
    def tokens(self) -> int:
        return sum(self.costs) + self.fixed

    def defer_tools(self, config: DeferToolsConfig, tail: int) -> None:
        """The `defer_tools` step on the request's tools (`tail`: the proxy's tools after
        them): the body keeps the tools it sends, `came` the body as it came."""
        wire, counter = self.wire, self.counter
        deferral = defer_tools(
            config, wire, self.body, self.messages, tail, counter, self.budget.allowance,
            self.manifest,
        )  # fmt: skip
        if deferral is None:
            return
        self.came = (self.body, self.fixed)
        self.body = deferral.body
        self.raw = wire.encode(deferral.body)
        self.fixed = wire.overhead_tokens(deferral.body, counter)
        self.deferral = deferral
        self.manifest.actions.append(deferral.action)

    def marked(
        self, body: dict[str, Any], costs: Sequence[int], fixed: int, stable_items: int
    ) -> dict[str, Any] | None:
        """`body` (which goes upstream; `costs` of its items, `fixed` of the rest) with the
        breakpoints `marks` wants, or None when it stays as it is."""
        if self.marks is None:
            return None
        came, came_fixed = self.came or (self.body, self.fixed)
        before = client_written(self.wire, came, partial(_through, self.costs, came_fixed))
        return apply_marks(
            self.wire, self.marks, body, stable_items, partial(_through, costs, fixed),
            self.manifest, before,
        )  # fmt: skip

    def carried_tools(self) -> SyntheticTools | None:
        return self.synthetic_tools(self.carries_tools)

    def synthetic_tools(self, artifacts: bool) -> SyntheticTools | None:
        """The proxy's tools the prepared body offers: the search tool when tools were
        deferred, then the read tools when `artifacts`."""
        deferral = self.deferral
        names = ((FIND_TOOLS,) if deferral else ()) + (ARTIFACT_TOOLS if artifacts else ())
        if not names:
            return None
        read = self.policy.read_tool
        return SyntheticTools(
            read.max_rounds, read.max_page_chars, self.budget.allowance, names,
            catalog=deferral.catalog if deferral else None,
            given=((FIND_TOOLS, deferral.name),) if deferral else (),
        )  # fmt: skip

    def tool_actions(self) -> list[Action]:
        return [self.deferral.action] if self.deferral else []

    def unchanged(self, outcome: Outcome) -> Prepared:
        """The request as it came (its breakpoints as the policy's `cache_marks` wants them,
        unless it is broken input, which goes untouched)."""
        self.manifest.outcome = outcome
        self.manifest.tokens_after = self.tokens if self.deferral else self.manifest.tokens_before
        tools = self.carried_tools()
        if outcome != Outcome.invalid_forwarded:
            body = self.marked(self.body, self.costs, self.fixed, 0)
            if body is not None:
                return Prepared(self.wire.encode(body), True, self.manifest, body, tools)
        changed = tools is not None or self.rewritten
        return Prepared(self.raw, changed, self.manifest, self.body, tools)

    def refusal(self, final: int, protected: int, *, store_failed: bool = False) -> ProxyError:
        """The refusal of this request at `final` tokens, `protected` of them untouchable."""
        codes = self.manifest.note_codes
        return refusal(
            self.budget, self.policy, self.wire.items_param, final, protected,
            store_failed=store_failed, no_credential=NoteCode.no_credential in codes,
            write_budget=NoteCode.store_write_budget in codes,
        )  # fmt: skip


def _through(costs: Sequence[int], fixed: int, items: int) -> int:
    return fixed + sum(costs[:items])


@dataclass(frozen=True)
class CallOptions:
    """Which upstream call is prepared. The client's request (`FIRST_CALL`) is offered the
    synthetic tools when it needs them. A follow-up call of the synthetic loop already carries the
    tools it should (counted like the client's, none added), and its caller says whether the
    relaxing steps may act as a last resort (it may rather shorten what the model just read).
    A follow-up call must fit the allowance itself (`within_allowance`: the reserved output stays
    free for the answer that follows the pages), not only what the provider would refuse."""

    offer_tools: bool = False
    last_resort: bool = True
    within_allowance: bool = False
    keeps_cuts: bool = False
    """The prepared request goes upstream as the client's own call: its cuts are kept for the
    next request of its conversation (`engine.cut_memory`). A dry run or a token count reads
    them but keeps none: what the upstream saw last is what the next request must keep."""
    cache_marks: bool = False
    """The upstream caches at the request's breakpoints (Anthropic's prompt caching): the
    policy's `cache_marks` applies (`engine.cache_marks`)."""
    min_count_ratio: float | None = None
    """At least this count ratio (a retry after an overflow error that stated the prompt's
    size: the learned ratio was too low for this conversation)."""

    def applied_to(self, learned: Learned) -> Learned:
        """`learned`, its count ratio raised to `min_count_ratio`."""
        floor = self.min_count_ratio
        if floor is None or floor <= learned.ratio.value:
            return learned
        return dataclasses.replace(learned, ratio=AppliedRatio(floor, RatioSource.stated))


FOLLOW_UP = CallOptions(within_allowance=True)


FIRST_CALL = CallOptions(offer_tools=True, keeps_cuts=True)

LOOKING = CallOptions(offer_tools=True)
"""A dry run or a token count: prepared as the client's call would be, nothing kept for later."""
