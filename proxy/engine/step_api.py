"""What a reduction step is, sees and returns.

A step is constructed per request from its config entry and plans synchronously; once the planner
has chosen its units it may do I/O in `settle` (through the injected `StepServices`), then it
rewrites synchronously; the reducer writes the artifacts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from proxy.engine.config_base import StepConfig

if TYPE_CHECKING:
    from proxy.artifacts.store import ArtifactStore, NewArtifact
    from proxy.engine.condense_text import Condenser
    from proxy.engine.conversation import Conversation, Unit
    from proxy.engine.plan_totals import StepPlan
    from proxy.engine.steps.summarize.background import Background
    from proxy.engine.steps.summarize.summarizer import Summarizer
    from proxy.engine.wire import WireFormat
    from proxy.tokens.counters import TokenCounter

MARKER = "[ctxproxy"
"""Every text the proxy writes into a conversation starts with this, followed by `#` and a tag
that only the proxy can compute (`tool_text.signed`); such text is never reduced. The marker alone
proves nothing: anyone can write it."""

OwnTextMac = Callable[[str], str]
"""`(text) -> keyed MAC` under the requester's scope, for tagging and recognising the proxy's own
texts (`tool_text`); it must differ from every artifact id, which clients see."""


@dataclass(frozen=True)
class Edit:
    kind: Literal["replace", "remove", "insert_before"]
    index: int
    message: dict[str, Any] | None
    artifact_id: str
    """The edit happens only if the store confirmed writing this artifact."""
    requires: tuple[str, ...] = ()
    """Other artifacts its message names: the edit happens only if these are confirmed too (a
    store may confirm some writes of a batch and not others, e.g. over a write budget)."""


@dataclass
class StepOutput:
    edits: list[Edit] = field(default_factory=list)
    artifacts: dict[str, NewArtifact] = field(default_factory=dict)
    units: list[int] = field(default_factory=list)
    tokens_freed: int = 0
    reason: str = ""
    """Why the step acted (the manifest's action reason); "" = reduced because over trigger."""
    count: int | None = None
    """How many things, in the step's `counts` (turns for drop_turns), the output acts on; None:
    the items it changes. Only a step whose edits stand or fall together may set it."""
    detail: dict[str, Any] | None = None
    """What else the manifest reports of this action (e.g. a summary's source and usage)."""


@dataclass
class PrepareContext:
    """One request being prepared: read-only inputs shared by every step."""

    wire: WireFormat
    """The request's format: steps read and rewrite items only through it."""
    messages: list[Any]
    """The request's items (opaque: see `wire`)."""
    conversation: Conversation
    units: list[Unit]
    """The units after the system prefix, in order; horizons index into this list."""
    unit_turn: list[int]
    turn_first_unit: list[int]
    counter: TokenCounter
    message_costs: list[int]
    result_names: dict[int, str]
    """Tool result item index -> its tool's name (resolved within its own exchange)."""
    pinned_units: frozenset[int]
    first_user_unit: int | None
    read_tool_enabled: bool
    """Whether the model can read artifacts back itself (texts that name an artifact say how)."""
    artifact_id: Callable[[str], str]
    """`(content) -> id` for this request's scope (pure HMAC, no I/O, computed once per text)."""
    own_text_mac: OwnTextMac
    """Tags the proxy's texts and recognises them when a client sends them back (`tool_text`)."""
    allowance: int
    """The request's token allowance (steps scale their fractions by it)."""
    max_stored_chars: int
    """The longest content the store takes (`artifacts.max_chars`): longer ones are stored
    truncated (`result_rewrites.stored_text`)."""
    sizing: int
    """The allowance the texts a step writes are sized by (a summary's budget, when it rolls
    up): the request's own, or the one its conversation's remembered cuts were made with, so
    that a move of the budget does not rewrite them (`engine.cut_memory`)."""
    recent_end: int
    """Where "recent" ends for a relaxed step (the last resort's previews of the recent
    exchanges): after the last unit, or after the units of the remembered request whose last
    resort this request keeps (so that the same results keep the same previews)."""
    condense: Condenser
    """`condense_text.condense`, or the preparer's memo of it (the same function of the text)."""

    def unit_cost(self, u: int) -> int:
        unit = self.units[u]
        return sum(self.message_costs[unit.start : unit.end])

    def is_protected(self, u: int) -> bool:
        return u in self.pinned_units or u == self.first_user_unit


@dataclass(frozen=True)
class StepServices:
    """What a step may use for I/O in `settle` and `precompute`; assembled by the preparer per
    request."""

    store: ArtifactStore
    scope: str
    """The requester's artifact scope: every store call of this request uses it."""
    counter: TokenCounter
    ttl_seconds: int = 86_400
    """How long what a step keeps in the store lives (the policy's `artifacts.ttl_seconds`)."""
    max_per_scope: int = 10_000
    summarizer: Summarizer | None = None
    """Writes summaries through an upstream, with the tenant's credentials (None: no model is
    available to this request)."""
    background: Background | None = None
    """Work that outlives the request (summaries made ahead of time or not waited for)."""
    precompute: bool = False
    """The request is under its trigger but near it: the planner cuts as if it crossed it, and
    the steps only `precompute` (nothing is rewritten)."""


Cut = tuple[int, int]
"""(the time point, a unit index, at which a step's horizon was advanced; the new horizon)."""

ConfigT = TypeVar("ConfigT", bound=StepConfig)


class Step(ABC, Generic[ConfigT]):
    """One reduction step, built per request from its config entry (`config_model`).

    Precedence is the policy's order: where the horizons of several steps cover a unit, the step
    listed last of those that change it applies. `in_default_policy` steps make up a policy's
    `steps` when it sets none.
    """

    name: ClassVar[str]
    config_model: ClassVar[type[StepConfig]]
    in_default_policy: ClassVar[bool] = True
    counts: ClassVar[str | None] = None
    """What the count in the manifest and `x-ctxproxy-actions` counts for this step (None: the
    request's items it changes)."""

    def __init__(self, config: ConfigT, ctx: PrepareContext) -> None:
        self.config = config

    @abstractmethod
    def plan(self, ctx: PrepareContext) -> StepPlan: ...

    async def settle(
        self, ctx: PrepareContext, units: list[int], services: StepServices, cuts: list[Cut]
    ) -> None:
        """Optional I/O once the planner has chosen the `units` this step reduces, before
        `rewrite` (e.g. a summary of them looked up, or written). `cuts`: the step's cuts as
        the planner's replay made them, in order (`Cut`). None by default."""

    @abstractmethod
    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput: ...

    async def precompute(
        self, ctx: PrepareContext, services: StepServices, cuts: list[Cut]
    ) -> None:
        """Optional work started ahead of time for what this step would reduce if the request
        had crossed its trigger now: `cuts` are the step's cuts as that crossing would make them
        (the last one is that hypothetical cut when its time point is the last unit; none when
        the step would not act). Called for every step; it must not wait for the work. None by
        default."""

    def prefix_output(self, ctx: PrepareContext) -> StepOutput | None:
        """Edits of the system prefix (outside the units the planner replays), made whenever
        the request is reduced at all; None (the default) for a step that never touches it."""
        return None
