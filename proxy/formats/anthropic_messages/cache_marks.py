"""`cache_control` markers: Anthropic accepts at most four per request (tools, system and
messages together). A body keeps the client's own (the policy's `cache_marks` may add some where
the client placed none, or remove them all: `mark_placement`); when a client sent more than
four, the earliest ones in the messages go first (the latest breakpoints cache the most).
An assistant message holding a `thinking` or `redacted_thinking` block is never changed (it goes
upstream byte-identical): its markers stay, even when that leaves more than four."""

from __future__ import annotations

from typing import Any

MAX_CACHE_BREAKPOINTS = 4
THINKING_TYPES = ("thinking", "redacted_thinking")


def marked_blocks(blocks: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict):
            if "cache_control" in block:
                out.append(block)
            if isinstance(block.get("content"), list):
                out.extend(marked_blocks(block["content"]))
    return out


def count_marks(body: dict[str, Any]) -> int:
    total = len(marked_blocks(body.get("tools"))) + len(marked_blocks(body.get("system")))
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            total += len(marked_blocks(message.get("content")))
    return total


def capped_cache_marks(body: dict[str, Any]) -> dict[str, Any]:
    """`body`, or a copy without the earliest message markers beyond the limit (the client's
    objects are never changed: a marked block that loses its marker is a copy)."""
    excess = count_marks(body) - MAX_CACHE_BREAKPOINTS
    if excess <= 0:
        return body
    messages = []
    for message in body.get("messages") or []:
        if excess > 0 and changeable(message):
            content, excess = unmarked(message["content"], excess)
            message = {**message, "content": content}
        messages.append(message)
    return {**body, "messages": messages}


def changeable(message: Any) -> bool:
    """A message with content blocks, unless it is an assistant message with thinking."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return False
    if message.get("role") != "assistant":
        return True
    return not any(
        isinstance(block, dict) and block.get("type") in THINKING_TYPES
        for block in message["content"]
    )


def unmarked(blocks: list[Any], excess: int) -> tuple[list[Any], int]:
    out = []
    for block in blocks:
        if excess > 0 and isinstance(block, dict):
            if isinstance(block.get("content"), list):
                inner, excess = unmarked(block["content"], excess)
                block = {**block, "content": inner}
            if excess > 0 and "cache_control" in block:
                block = {k: v for k, v in block.items() if k != "cache_control"}
                excess -= 1
        out.append(block)
    return out, excess
