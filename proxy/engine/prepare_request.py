"""What a preparation is asked: who asks (`Requester`), which upstream call (`CallOptions`),
and the request as the `Preparer` holds it while it prepares it (`PreparingRequest`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.engine.budget import (
    Budget,
    BudgetPolicy,
    Learned,
    LearnedWindow,
    RatioReader,
    count_ratio_for,
)
from proxy.engine.continuity import History
from proxy.engine.manifest import Action, Manifest, NoteCode, Outcome, Prepared, SyntheticTools
from proxy.engine.policy import Policy
from proxy.engine.refusal import refusal
from proxy.engine.steps.summarize.summarizer import Summarizer
from proxy.engine.tool_deferral import Deferral
from proxy.engine.wire import WireFormat
from proxy.engine.working_set import Reinserted
from proxy.errors import ProxyError
from proxy.synthetic.find_tools import FIND_TOOLS
from proxy.synthetic.registry import ARTIFACT_TOOLS
from proxy.tokens.calibration_rule import CalibrationKey
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
    window, upstream = None, ""
    if windows is not None:
        window, upstream = await windows.window(model, ask=unknown), windows.upstream_name
    key = CalibrationKey(upstream, model)
    return Learned(window, count_ratio_for(budget, ratios, key, contributor))


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

    @property
    def tokens(self) -> int:
        return sum(self.costs) + self.fixed

    deferral: Deferral | None = None
    """What the `defer_tools` step did to the request's tools (None: nothing)."""

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
        self.manifest.outcome = outcome
        self.manifest.tokens_after = self.tokens if self.deferral else self.manifest.tokens_before
        tools = self.carried_tools()
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


FOLLOW_UP = CallOptions(within_allowance=True)


FIRST_CALL = CallOptions(offer_tools=True, keeps_cuts=True)

LOOKING = CallOptions(offer_tools=True)
"""A dry run or a token count: prepared as the client's call would be, nothing kept for later."""
