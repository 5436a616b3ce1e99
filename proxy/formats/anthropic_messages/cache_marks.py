"""`cache_control` markers: Anthropic accepts at most four per request (tools, system and
messages together). Preparation never adds one, so a body keeps the client's own; when a client
sent more, the earliest ones in the messages go first (the latest breakpoints cache the most).
An assistant message holding a `thinking` or `redacted_thinking` block is never changed (it goes
upstream byte-identical): its markers stay, even when that leaves more than four."""

from __future__ import annotations

from typing import Any

MAX_CACHE_BREAKPOINTS = 4
THINKING_TYPES = ("thinking", "redacted_thinking")


def _marked(blocks: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict):
            if "cache_control" in block:
                out.append(block)
            if isinstance(block.get("content"), list):
                out.extend(_marked(block["content"]))
    return out


def count_marks(body: dict[str, Any]) -> int:
    total = len(_marked(body.get("tools"))) + len(_marked(body.get("system")))
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            total += len(_marked(message.get("content")))
    return total


def capped_cache_marks(body: dict[str, Any]) -> dict[str, Any]:
    """`body`, or a copy without the earliest message markers beyond the limit (the client's
    objects are never changed: a marked block that loses its marker is a copy)."""
    excess = count_marks(body) - MAX_CACHE_BREAKPOINTS
    if excess <= 0:
        return body
    messages = []
    for message in body.get("messages") or []:
        if excess > 0 and _changeable(message):
            content, excess = _unmarked(message["content"], excess)
            message = {**message, "content": content}
        messages.append(message)
    return {**body, "messages": messages}


def _changeable(message: Any) -> bool:
    """A message with content blocks, unless it is an assistant message with thinking."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return False
    if message.get("role") != "assistant":
        return True
    return not any(
        isinstance(block, dict) and block.get("type") in THINKING_TYPES
        for block in message["content"]
    )


def _unmarked(blocks: list[Any], excess: int) -> tuple[list[Any], int]:
    out = []
    for block in blocks:
        if excess > 0 and isinstance(block, dict):
            if isinstance(block.get("content"), list):
                inner, excess = _unmarked(block["content"], excess)
                block = {**block, "content": inner}
            if excess > 0 and "cache_control" in block:
                block = {k: v for k, v in block.items() if k != "cache_control"}
                excess -= 1
        out.append(block)
    return out, excess
