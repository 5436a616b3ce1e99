"""Messages <-> the engine's items.

An Anthropic user message may answer several tool calls at once (one `tool_result` block each),
and the engine reduces tool results one by one. So the items are the messages, except that a
user message holding `tool_result` blocks is split into *parts*: one item per `tool_result` block
and one per run of other blocks, each a copy of the message with those blocks as its `content`
and `PART_KEY` set to the index of its first block in the original content. `join` puts the
parts back together (a part at index 0, or any message, starts a message; a part at a later
index continues the one before), so the same items always render to the same messages, and a
message nothing touched renders to an equal message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.formats.anthropic_messages.fields import blocks_of, is_tool_result_block
from proxy.formats.common import int_value

PART_KEY = "ctxproxy_part"
"""The key of a part item (never sent upstream: `join` removes it)."""


def part_index(item: object) -> int | None:
    """The index of a part's first block in its message; None for an item that is no part."""
    return int_value(item.get(PART_KEY)) if isinstance(item, dict) else None


def is_result_part(item: object) -> bool:
    """A part holding one `tool_result` block."""
    if part_index(item) is None:
        return False
    blocks = blocks_of(item)
    return len(blocks) == 1 and is_tool_result_block(blocks[0])


def result_block(item: object) -> dict[str, Any] | None:
    """The `tool_result` block of a result part."""
    return blocks_of(item)[0] if is_result_part(item) else None


def split(messages: Sequence[Any]) -> list[Any]:
    """The items of `messages` (see the module docstring)."""
    items: list[Any] = []
    for message in messages:
        blocks = blocks_of(message)
        if _is_user(message) and any(is_tool_result_block(b) for b in blocks):
            items.extend(_parts(message, blocks))
        else:
            items.append(message)
    return items


def _parts(message: dict[str, Any], blocks: list[Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    run_start: int | None = None
    for index, block in enumerate(blocks):
        if not is_tool_result_block(block):
            run_start = index if run_start is None else run_start
            continue
        if run_start is not None:
            parts.append(make_part(message, blocks[run_start:index], run_start))
            run_start = None
        parts.append(make_part(message, [block], index))
    if run_start is not None:
        parts.append(make_part(message, blocks[run_start:], run_start))
    return parts


def make_part(message: dict[str, Any], blocks: list[Any], at: int) -> dict[str, Any]:
    part = {k: v for k, v in message.items() if k != PART_KEY}
    part["content"] = list(blocks)
    part[PART_KEY] = at
    return part


def join(items: Sequence[Any]) -> list[Any]:
    """The messages the items stand for (parts joined, `PART_KEY` removed)."""
    messages: list[Any] = []
    open_message: dict[str, Any] | None = None
    for item in items:
        at = part_index(item)
        if at is None:
            messages.append(item)
            open_message = None
        elif at > 0 and open_message is not None:
            open_message["content"] = open_message["content"] + blocks_of(item)
        else:
            open_message = {k: v for k, v in item.items() if k != PART_KEY}
            open_message["content"] = list(blocks_of(item))
            messages.append(open_message)
    return messages


def _is_user(message: object) -> bool:
    return isinstance(message, dict) and message.get("role") == "user"
