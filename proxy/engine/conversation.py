"""Messages -> system prefix, turns and atomic units, plus structural validation.

Pure functions over an OpenAI chat-completions ``messages`` list; nothing here copies or changes a
message. All indices point into that list and every ``end`` is exclusive.

The model (see ``docs/ARCHITECTURE.md`` and the shared design, "The conversation model"):

* **System prefix** -- the leading ``system``/``developer`` messages: ``messages[:system_end]``.
  A ``system``/``developer`` message after the prefix is an ordinary message unit.
* **Turn** -- a ``user`` message and everything after it up to the next ``user`` message.
  Messages between the system prefix and the first ``user`` message (an assistant greeting, say)
  form a *leading turn* of their own, marked ``Turn.leading``. Turns cover every message after
  the prefix exactly once, in order.
* **Unit** -- the atomic piece of a turn: a plain message (``kind="message"``), or a *tool
  exchange* (``kind="tool_exchange"``): an assistant message with non-empty ``tool_calls`` plus the
  ``tool`` messages directly following it (results of parallel calls may come in any order).
  Legacy functions: an assistant message with ``function_call`` plus the directly following
  ``role: "function"`` message is one exchange too, with empty ``tool_call_ids``.
  ``tool_calls: []`` (empty list) counts as no tool calls: the message is a plain unit.

Structural breakage is reported in ``Conversation.problems``, never repaired. Each ``reason`` is a
complete sentence starting with ``messages[i]:`` and may be shown to a client verbatim. Turns and
units are still returned, best effort: an exchange always spans its assistant message and the
whole run of ``tool`` messages directly after it (orphans in that run stay inside it), and any
other broken message is a unit of its own.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

UnitKind = Literal["message", "tool_exchange"]

_PREFIX_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True, slots=True)
class Problem:
    """One structural defect: the message index, the tool call id involved (if any), and why."""

    index: int
    tool_call_id: str | None
    reason: str

    @property
    def param(self) -> str:
        """The OpenAI error ``param`` naming the offending message, e.g. ``messages[5]``."""
        return f"messages[{self.index}]"


class _Span:
    """``messages[start:end]``: what units and turns share."""

    __slots__ = ()
    start: int
    end: int

    @property
    def size(self) -> int:
        """Number of messages."""
        return self.end - self.start

    @property
    def indices(self) -> range:
        return range(self.start, self.end)


@dataclass(frozen=True, slots=True)
class Unit(_Span):
    """``messages[start:end]``: one plain message or one tool exchange (never split)."""

    start: int
    end: int
    kind: UnitKind
    tool_call_ids: tuple[str, ...] = ()

    @property
    def is_tool_exchange(self) -> bool:
        return self.kind == "tool_exchange"

    @property
    def result_indices(self) -> range:
        """Indices of the result (``tool``/``function``) messages; empty for a plain message."""
        if self.kind == "tool_exchange":
            return range(self.start + 1, self.end)
        return range(0)


@dataclass(frozen=True, slots=True)
class Turn(_Span):
    """``messages[start:end]``: a user message and what follows, split into units.

    ``leading`` is True only for the turn before the first user message (its first message is
    not a user message).
    """

    start: int
    end: int
    units: tuple[Unit, ...]
    leading: bool = False

    @property
    def first_message_index(self) -> int:
        """Index of the turn's first message (the user message unless ``leading``)."""
        return self.start

    @property
    def has_tool_exchange(self) -> bool:
        return any(u.kind == "tool_exchange" for u in self.units)


@dataclass(frozen=True, slots=True)
class Conversation:
    """The parsed shape of a ``messages`` list."""

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
        """Number of messages covered (== ``len(messages)``)."""
        return self.turns[-1].end if self.turns else self.system_end

    @property
    def units(self) -> tuple[Unit, ...]:
        """All units of all turns, in message order (the system prefix is not a unit)."""
        return tuple(u for t in self.turns for u in t.units)

    @property
    def leading_turn(self) -> Turn | None:
        if self.turns and self.turns[0].leading:
            return self.turns[0]
        return None

    @property
    def user_turns(self) -> tuple[Turn, ...]:
        """Turns that start with a user message (every turn but the leading one)."""
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
        """For each message index, its unit (None in the system prefix): O(1) lookups after."""
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


def parse_conversation(messages: Sequence[Any]) -> Conversation:
    """Split ``messages`` into system prefix, turns and units; report structural problems."""
    problems: list[Problem] = []
    n = len(messages)
    system_end = 0
    while system_end < n and _role_of(messages[system_end]) in _PREFIX_ROLES:
        system_end += 1

    turns: list[Turn] = []
    units: list[Unit] = []
    turn_start = system_end
    i = system_end
    while i < n:
        if units and _role_of(messages[i]) == "user":
            leading = _role_of(messages[turn_start]) != "user"
            turns.append(Turn(turn_start, i, tuple(units), leading))
            units = []
            turn_start = i
        unit = _next_unit(messages, i, problems)
        units.append(unit)
        i = unit.end
    if units:
        leading = _role_of(messages[turn_start]) != "user"
        turns.append(Turn(turn_start, n, tuple(units), leading))

    problems.sort(key=_problem_index)
    return Conversation(system_end, tuple(turns), tuple(problems))


def _problem_index(problem: Problem) -> int:
    return problem.index


def _role_of(message: Any) -> str | None:
    """The role when it is a string (a list or object role is never hashed or matched)."""
    role = message.get("role") if isinstance(message, dict) else None
    return role if isinstance(role, str) else None


def _next_unit(messages: Sequence[Any], i: int, problems: list[Problem]) -> Unit:
    """The unit starting at ``messages[i]``; appends what is wrong with it to ``problems``."""
    message = messages[i]
    if not isinstance(message, dict):
        problems.append(Problem(i, None, f"messages[{i}]: message is not an object"))
        return Unit(i, i + 1, "message")
    role = message.get("role")
    if role == "user" or role == "system" or role == "developer":
        return Unit(i, i + 1, "message")
    if role == "assistant":
        calls = message.get("tool_calls")
        if calls is not None and calls != []:
            return _tool_exchange(messages, i, calls, problems)
        if message.get("function_call") is not None:
            return _function_exchange(messages, i, problems)
    elif role == "tool":
        problems.append(_stray_tool_result(message, i))
    elif role == "function":
        problems.append(
            Problem(
                i,
                None,
                f"messages[{i}]: function result does not directly follow an assistant message "
                "with a function_call",
            )
        )
    elif "role" not in message:
        problems.append(Problem(i, None, f"messages[{i}]: message has no 'role'"))
    elif not isinstance(role, str):
        problems.append(Problem(i, None, f"messages[{i}]: 'role' is not a string"))
    return Unit(i, i + 1, "message")


def _stray_tool_result(message: dict[str, Any], i: int) -> Problem:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str):
        return Problem(i, None, f"messages[{i}]: tool message has no string 'tool_call_id'")
    return Problem(
        i,
        call_id,
        f"messages[{i}]: tool result for '{call_id}' does not follow an assistant message "
        "with tool_calls",
    )


def _call_ids(message_index: int, calls: Any, problems: list[Problem]) -> list[str]:
    """The usable, distinct ids of an assistant message's ``tool_calls``, in order."""
    i = message_index
    if not isinstance(calls, list):
        problems.append(Problem(i, None, f"messages[{i}]: 'tool_calls' is not a list"))
        return []
    ids: list[str] = []
    for k, call in enumerate(calls):
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call, dict):
            problems.append(Problem(i, None, f"messages[{i}]: tool_calls[{k}] is not an object"))
        elif not isinstance(call_id, str) or not call_id:
            problems.append(Problem(i, None, f"messages[{i}]: tool_calls[{k}] has no string 'id'"))
        elif call_id in ids:
            problems.append(
                Problem(
                    i,
                    call_id,
                    f"messages[{i}]: tool call id '{call_id}' appears more than once in tool_calls",
                )
            )
        else:
            ids.append(call_id)
    return ids


def _tool_exchange(messages: Sequence[Any], i: int, calls: Any, problems: list[Problem]) -> Unit:
    """An assistant message with tool_calls plus the run of tool messages directly after it."""
    ids = _call_ids(i, calls, problems)
    pending = set(ids)
    answered: set[str] = set()
    n = len(messages)
    j = i + 1
    while j < n:
        result = messages[j]
        if not isinstance(result, dict) or result.get("role") != "tool":
            break
        call_id = result.get("tool_call_id")
        if not isinstance(call_id, str):
            problems.append(
                Problem(j, None, f"messages[{j}]: tool message has no string 'tool_call_id'")
            )
        elif call_id in pending:
            pending.remove(call_id)
            answered.add(call_id)
        elif call_id in answered:
            problems.append(
                Problem(
                    j,
                    call_id,
                    f"messages[{j}]: tool result for '{call_id}' answers a tool call that "
                    "already has a result",
                )
            )
        else:
            problems.append(
                Problem(
                    j,
                    call_id,
                    f"messages[{j}]: tool result for '{call_id}' has no matching tool call in the "
                    "preceding assistant message",
                )
            )
        j += 1
    if pending:
        where = f"before messages[{j}]" if j < n else "before the end of the messages"
        for call_id in ids:
            if call_id in pending:
                reason = f"messages[{i}]: tool call '{call_id}' has no result {where}"
                problems.append(Problem(i, call_id, reason))
    return Unit(i, j, "tool_exchange", tuple(ids))


def _function_exchange(messages: Sequence[Any], i: int, problems: list[Problem]) -> Unit:
    """Legacy: an assistant ``function_call`` plus the directly following ``function`` message."""
    if i + 1 < len(messages) and _role_of(messages[i + 1]) == "function":
        return Unit(i, i + 2, "tool_exchange")
    problems.append(
        Problem(i, None, f"messages[{i}]: function_call has no function result in the next message")
    )
    return Unit(i, i + 1, "tool_exchange")
