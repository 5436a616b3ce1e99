"""What a reduction step sees and returns. Steps do no I/O: the pipeline writes artifacts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from proxy.artifacts.store import NewArtifact
    from proxy.engine.conversation import Conversation, Unit
    from proxy.engine.planner import StepPlan
    from proxy.engine.policy import Policy
    from proxy.tokens.counters import TokenCounter

MARKER = "[ctxproxy"
"""Every text the proxy writes into a conversation starts with this; such text is never reduced."""


@dataclass(frozen=True)
class Edit:
    kind: Literal["replace", "remove", "insert_before"]
    index: int
    message: dict[str, Any] | None
    artifact_id: str
    """The edit happens only if the store confirmed writing this artifact."""


@dataclass
class StepOutput:
    edits: list[Edit] = field(default_factory=list)
    artifacts: dict[str, NewArtifact] = field(default_factory=dict)
    units: list[int] = field(default_factory=list)
    tokens_freed: int = 0


@dataclass
class PrepareContext:
    """One request being prepared: read-only inputs shared by every step."""

    messages: list[Any]
    conversation: Conversation
    units: list[Unit]
    """The units after the system prefix, in order; horizons index into this list."""
    unit_turn: list[int]
    turn_first_unit: list[int]
    policy: Policy
    counter: TokenCounter
    message_costs: list[int]
    result_names: dict[int, str]
    """Tool result message index -> its tool's name (resolved within its own exchange)."""
    pinned_units: frozenset[int]
    first_user_unit: int | None
    artifact_id: Any
    """`(content) -> id` for this request's scope (pure HMAC, no I/O)."""
    allowance: int
    """The request's token allowance (steps scale their fractions by it)."""

    def unit_cost(self, u: int) -> int:
        unit = self.units[u]
        return sum(self.message_costs[unit.start : unit.end])

    def is_protected(self, u: int) -> bool:
        return u in self.pinned_units or u == self.first_user_unit


class Step(Protocol):
    name: str
    rank: int

    def plan(self, ctx: PrepareContext) -> StepPlan: ...

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput: ...
