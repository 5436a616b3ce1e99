"""Anthropic Messages items (`items.split`) -> the neutral conversation.

* **System prefix** -- empty: `system` is a field of its own, outside the items (protected,
  counted in `overhead_tokens`).
* **Turn** -- opened by a user message that answers no tool call (a message, not a part).
* **Instruction** -- a `system` message inside `messages` (the mid-conversation system message
  Claude Code sends): a unit of its own, protected where it stands; it does not open a turn.
* **Unit** -- a plain item, or a *tool exchange*: an assistant message with `tool_use` blocks
  plus the result parts directly after it (the `tool_result` blocks of the next user message;
  their order is free). The other blocks of that user message (a part of their own, after the
  results) are a plain unit of the same turn. `thinking`/`redacted_thinking` blocks live inside
  their assistant message, which is never rewritten: they stay byte-identical with it.

Problems (never repaired) name the client's message: `messages[i]` (the index among the
messages, not among the items) starts each reason and is the `param`. A `tool_result` block in
an assistant message and a `tool_use` block in a user message are problems too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from proxy.engine.conversation import Conversation, Problem, Turn, Unit
from proxy.formats.anthropic_messages.fields import (
    TOOL_RESULT,
    TOOL_USE,
    block_type,
    blocks_of,
    role_of,
    tool_use_blocks,
)
from proxy.formats.anthropic_messages.items import is_result_part, part_index, result_block
from proxy.formats.common import str_field


def message_indices(items: Sequence[Any]) -> list[int]:
    """For each item, the index of the client message it comes from."""
    out, current = [], -1
    for item in items:
        at = part_index(item)
        if at is None or at == 0 or current < 0:
            current += 1
        out.append(current)
    return out


def opens_turn(item: Any) -> bool:
    """A user message, or the first part of one that does not start with a tool result."""
    if role_of(item) != "user":
        return False
    at = part_index(item)
    return at is None or (at == 0 and not is_result_part(item))


def parse_conversation(items: Sequence[Any]) -> Conversation:
    where = message_indices(items)
    problems: list[Problem] = []
    turns: list[Turn] = []
    units: list[Unit] = []
    turn_start, i, n = 0, 0, len(items)
    while i < n:
        if units and opens_turn(items[i]):
            turns.append(Turn(turn_start, i, tuple(units), not opens_turn(items[turn_start])))
            units, turn_start = [], i
        unit = _next_unit(items, i, where, problems)
        units.append(unit)
        i = unit.end
    if units:
        turns.append(Turn(turn_start, n, tuple(units), not opens_turn(items[turn_start])))
    problems.sort(key=lambda p: p.index)
    return Conversation(0, tuple(turns), tuple(problems))


def _problem(where: list[int], index: int, call_id: str | None, text: str) -> Problem:
    param = f"messages[{where[index]}]"
    return Problem(index, call_id, f"{param}: {text}", param)


def _next_unit(items: Sequence[Any], i: int, where: list[int], problems: list[Problem]) -> Unit:
    item = items[i]
    if not isinstance(item, dict):
        problems.append(_problem(where, i, None, "message is not an object"))
        return Unit(i, i + 1, "message")
    role = item.get("role")
    _misplaced_blocks(item, where, i, problems)
    if role == "assistant" and tool_use_blocks(item):
        unit = _tool_exchange(items, i, where, problems)
        return replace(unit, instruction=holds_compaction(item))
    if role == "assistant" and holds_compaction(item):
        return Unit(i, i + 1, "message", instruction=True)
    if is_result_part(item):
        call_id = str_field(result_block(item), "tool_use_id")
        text = (
            f"tool_result for '{call_id}' does not answer a tool_use block of the previous "
            "assistant message"
        )
        problems.append(_problem(where, i, call_id, text))
    elif role == "system":
        return Unit(i, i + 1, "message", instruction=True)
    elif role not in ("user", "assistant"):
        text = "'role' must be 'user', 'assistant' or 'system'"
        problems.append(_problem(where, i, None, text))
    return Unit(i, i + 1, "message")


_MISPLACED = {"assistant": f"a {TOOL_RESULT} block in an assistant message",
              "user": f"a {TOOL_USE} block in a user message"}  # fmt: skip
"""What a message of that role may not hold."""


def _misplaced_blocks(
    item: dict[str, Any], where: list[int], i: int, problems: list[Problem]
) -> None:
    """A `tool_result` block in an assistant message, a `tool_use` block in a user message."""
    role = role_of(item)
    if role not in _MISPLACED:
        return
    wrong = TOOL_RESULT if role == "assistant" else TOOL_USE
    if any(block_type(b) == wrong for b in blocks_of(item)):
        problems.append(_problem(where, i, None, _MISPLACED[role]))


def holds_compaction(message: object) -> bool:
    """An assistant message with a `compaction` block: the provider's own summary of the
    conversation before it (server-side compaction), which the client sends back. It stands for
    all of that history: kept where it is, byte for byte, like an instruction."""
    return any(block_type(b) == COMPACTION for b in blocks_of(message))


COMPACTION = "compaction"


def _tool_exchange(items: Sequence[Any], i: int, where: list[int], problems: list[Problem]) -> Unit:
    ids: list[str] = []
    for block in tool_use_blocks(items[i]):
        call_id = str_field(block, "id")
        if not call_id:
            problems.append(_problem(where, i, None, "tool_use block has no string 'id'"))
        elif call_id in ids:
            problems.append(_problem(where, i, call_id, f"tool_use id '{call_id}' repeats"))
        else:
            ids.append(call_id)
    pending, j = set(ids), i + 1
    while j < len(items) and is_result_part(items[j]):
        call_id = str_field(result_block(items[j]), "tool_use_id")
        if call_id in pending:
            pending.discard(call_id)
        elif call_id in ids:
            text = f"tool_result for '{call_id}' answers a tool_use that already has a result"
            problems.append(_problem(where, j, call_id, text))
        else:
            text = f"tool_result for '{call_id}' has no tool_use in the previous assistant message"
            problems.append(_problem(where, j, call_id, text))
        j += 1
    for call_id in ids:
        if call_id in pending:
            text = f"tool_use '{call_id}' has no tool_result in the next user message"
            problems.append(_problem(where, i, call_id, text))
    return Unit(i, j, "tool_exchange", tuple(ids))
