"""The neutral conversation: system prefix, turns and atomic units, plus structural problems.

A format adapter (`proxy.formats`, through `engine.wire.WireFormat.parse`) builds it from the
request's items; nothing here reads or changes an item. All indices point into the items list and
every ``end`` is exclusive.

The model (see ``docs/ARCHITECTURE.md`` and the shared design, "The conversation model"):

* **System prefix** -- the leading system items: ``items[:system_end]`` (empty when the format
  keeps its system prompt outside the items).
* **Turn** -- a user item and everything after it up to the next one that opens a turn. Items
  between the system prefix and the first user item form a *leading turn* of their own, marked
  ``Turn.leading``. Turns cover every item after the prefix exactly once, in order.
* **Unit** -- the atomic piece of a turn: a plain item (``kind="message"``), or a *tool exchange*
  (``kind="tool_exchange"``): the call item(s) and the results answering them. Nothing splits a
  unit. A plain item that gives the model instructions after the prefix (a mid-conversation
  system or developer message) is an ``instruction`` unit: protected where it stands.

Structural breakage is reported in ``Conversation.problems``, never repaired. Each ``reason`` is a
complete sentence naming the item (the format's own wording) and may be shown to a client
verbatim; ``param`` names the item for an error envelope.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Literal

UnitKind = Literal["message", "tool_exchange"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One structural defect: the item index, the tool call id involved (if any), why, and the
    error ``param`` naming the item in the client's format (e.g. ``messages[5]``)."""

    index: int
    tool_call_id: str | None
    reason: str
    param: str


class _Span:
    """``items[start:end]``: what units and turns share."""

    __slots__ = ()
    start: int
    end: int

    @property
    def size(self) -> int:
        """Number of items."""
        return self.end - self.start

    @property
    def indices(self) -> range:
        return range(self.start, self.end)


@dataclass(frozen=True, slots=True)
class Unit(_Span):
    """``items[start:end]``: one plain item or one tool exchange (never split).

    In an exchange the first ``call_items`` items hold the call(s) (one assistant message in
    OpenAI chat; reasoning and function-call items in Responses) and the rest are the results.
    """

    start: int
    end: int
    kind: UnitKind
    tool_call_ids: tuple[str, ...] = ()
    call_items: int = 1
    instruction: bool = False
    """An instruction the client placed inside the conversation (a system or developer message
    after the prefix), or the provider's own compaction of the conversation before it (which
    stands for all of that history): never dropped, cleared, summarized or moved, like the
    system prefix."""

    @property
    def is_tool_exchange(self) -> bool:
        return self.kind == "tool_exchange"

    @property
    def result_indices(self) -> range:
        """Indices of the result items; empty for a plain item."""
        if self.kind == "tool_exchange":
            return range(self.start + self.call_items, self.end)  # empty when it has none
        return range(0)


@dataclass(frozen=True, slots=True)
class Turn(_Span):
    """``items[start:end]``: a user item and what follows, split into units.

    ``leading`` is True only for the turn before the first user item (its first item is not a
    user item).
    """

    start: int
    end: int
    units: tuple[Unit, ...]
    leading: bool = False

    @property
    def first_message_index(self) -> int:
        """Index of the turn's first item (the user item unless ``leading``)."""
        return self.start

    @property
    def has_tool_exchange(self) -> bool:
        return any(u.kind == "tool_exchange" for u in self.units)


@dataclass(frozen=True, slots=True)
class Conversation:
    """The parsed shape of a request's items."""

    system_end: int
    turns: tuple[Turn, ...]
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """True when no structural problem was found (the conversation may be reduced)."""
        return not self.problems

    @property
    def system_indices(self) -> range:
        return range(0, self.system_end)

    @property
    def end(self) -> int:
        """Number of items covered (== ``len(items)``)."""
        return self.turns[-1].end if self.turns else self.system_end

    @property
    def units(self) -> tuple[Unit, ...]:
        """All units of all turns, in item order (the system prefix is not a unit)."""
        return tuple(u for t in self.turns for u in t.units)

    @property
    def leading_turn(self) -> Turn | None:
        if self.turns and self.turns[0].leading:
            return self.turns[0]
        return None

    @property
    def user_turns(self) -> tuple[Turn, ...]:
        """Turns that start with a user item (every turn but the leading one)."""
        return tuple(t for t in self.turns if not t.leading)

    @property
    def last_turn(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    def turn_index_of(self, message_index: int) -> int | None:
        """Position in ``turns`` of the turn holding ``message_index``; None for the prefix."""
        if message_index < self.system_end or message_index >= self.end:
            return None
        starts = [t.start for t in self.turns]
        return bisect_right(starts, message_index) - 1

    def unit_of(self, message_index: int) -> Unit | None:
        """The unit holding ``message_index``; None for the system prefix or out of range."""
        ti = self.turn_index_of(message_index)
        if ti is None:
            return None
        units = self.turns[ti].units
        pos = bisect_right([u.start for u in units], message_index) - 1
        return units[pos]

    def unit_by_message(self) -> tuple[Unit | None, ...]:
        """For each item index, its unit (None in the system prefix): O(1) lookups after."""
        table: list[Unit | None] = [None] * self.system_end
        for turn in self.turns:
            for unit in turn.units:
                table.extend([unit] * (unit.end - unit.start))
        return tuple(table)

    def problem_summary(self, limit: int = 5) -> str:
        """The first ``limit`` reasons joined for an error message ("; "-separated)."""
        reasons = [p.reason for p in self.problems[:limit]]
        more = len(self.problems) - limit
        if more > 0:
            reasons.append(f"and {more} more problem(s)")
        return "; ".join(reasons)
