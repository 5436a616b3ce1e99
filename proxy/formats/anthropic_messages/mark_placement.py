"""Where the proxy puts Anthropic prompt-cache breakpoints (the policy's `cache_marks`).

Anthropic caches a prompt only at its `cache_control` breakpoints (at most four; tools, then
system, then messages), so a client that places none gets no caching at all. Under `auto`, a
request that carries no breakpoint gets them at stable points, the same block across turns while
that block stays:
1. the end of tools + system: the last system block (the last tool when there is no system);
2. the end of the proxy's own stable content: its last notice or summary of dropped turns;
3. the end of the previous request: the message before the last assistant message, which the
   previous request ended with and wrote to the cache (so this one reads it, however far back);
4. the end of the last message, which the next request reads (Anthropic's incremental pattern).
A breakpoint never goes on or inside a `thinking` or `redacted_thinking` block, and an assistant
message holding thinking is never changed (it goes byte-identical): the nearest message before
(else after) takes the breakpoint instead. A message whose content is a string is written as its
one text block, every such message, so its bytes stay the same whether it carries a breakpoint
in this request or not. A request with breakpoints of its own keeps them (`keep`, and `auto`);
`off` removes every one the proxy may change. The client's objects are never changed: what gains
or loses a breakpoint is a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.engine.wire import CacheMarks, CacheMarksMode
from proxy.formats.anthropic_messages.cache_marks import (
    THINKING_TYPES,
    changeable,
    count_marks,
    marked_blocks,
    unmarked,
)
from proxy.formats.anthropic_messages.items import join, split

EPHEMERAL = {"type": "ephemeral"}
MARKABLE_TYPES = frozenset(
    {"text", "image", "document", "tool_use", "tool_result", "search_result", "server_tool_use"}
)
"""Block types that may carry a breakpoint (a text block only when its text is not empty)."""
_ALL = 1 << 30


def cache_marks(body: dict[str, Any], mode: CacheMarksMode, stable_items: int) -> CacheMarks:
    """The request's breakpoints under `mode` (see the module docstring)."""
    client = count_marks(body)
    if mode == "off":
        if not client:
            return CacheMarks(None)
        stripped = without_marks(body)
        removed = client - count_marks(stripped)
        return CacheMarks(stripped, client=client, removed=removed, through_items=through(stripped))
    if mode == "keep" or client:
        return CacheMarks(None, client=client, through_items=through(body))
    marked, placed = with_marks(body, stable_items)
    if not placed:
        return CacheMarks(None)
    return CacheMarks(marked, placed=tuple(placed), through_items=through(marked))


def through(body: dict[str, Any]) -> int | None:
    """The items through the last message holding a breakpoint (0: only tools or system hold
    one; None: none does)."""
    messages = _listed(body.get("messages"))
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, dict) and marked_blocks(message.get("content")):
            return len(split(messages[: index + 1]))
    head = marked_blocks(body.get("tools")) or marked_blocks(body.get("system"))
    return 0 if head else None


def without_marks(body: dict[str, Any]) -> dict[str, Any]:
    """A copy of `body` without breakpoints, but in assistant messages holding thinking."""
    out = dict(body)
    for key in ("tools", "system"):
        if isinstance(body.get(key), list):
            out[key] = unmarked(body[key], _ALL)[0]
    messages = []
    for message in _listed(body.get("messages")):
        if changeable(message):
            message = {**message, "content": unmarked(message["content"], _ALL)[0]}
        messages.append(message)
    if "messages" in body:
        out["messages"] = messages
    return out


def with_marks(body: dict[str, Any], stable_items: int) -> tuple[dict[str, Any], list[str]]:
    """A copy of `body` (which holds no breakpoint) with them at the stable points."""
    out = dict(body)
    placed = _head_mark(out)
    messages = [_as_blocks(m) for m in _listed(body.get("messages"))]
    done: set[int] = set()
    for target in _targets(messages, stable_items):
        index = _nearest_markable(messages, target)
        if index is None or index in done:
            continue
        done.add(index)
        content = list(messages[index]["content"])
        at = _last_markable(content)
        assert at is not None  # _nearest_markable found one
        content[at] = {**content[at], "cache_control": dict(EPHEMERAL)}
        messages[index] = {**messages[index], "content": content}
        placed.append(f"messages[{index}].content[{at}]")
    if "messages" in body:
        out["messages"] = messages
    return out, placed


def _head_mark(out: dict[str, Any]) -> list[str]:
    """Mark the end of tools + system in `out` (in place: `out` is the caller's copy)."""
    system = out.get("system")
    if isinstance(system, str) and system:
        out["system"] = [{"type": "text", "text": system, "cache_control": dict(EPHEMERAL)}]
        return ["system[0]"]
    if isinstance(system, list) and (at := _last_markable(system)) is not None:
        out["system"] = [*system[:at], {**system[at], "cache_control": dict(EPHEMERAL)},
                         *system[at + 1 :]]  # fmt: skip
        return [f"system[{at}]"]
    tools = _listed(out.get("tools"))
    for at in range(len(tools) - 1, -1, -1):
        if isinstance(tools[at], dict):
            out["tools"] = [*tools[:at], {**tools[at], "cache_control": dict(EPHEMERAL)},
                            *tools[at + 1 :]]  # fmt: skip
            return [f"tools[{at}]"]
    return []


def _targets(messages: Sequence[Any], stable_items: int) -> list[int]:
    """The message indices meant to end with a breakpoint, in order (see the docstring)."""
    targets: list[int] = []
    if stable_items > 0:
        targets.append(len(join(split(messages)[:stable_items])) - 1)
    answers = [i for i, m in enumerate(messages) if _role(m) == "assistant"]
    if answers and answers[-1] > 0:
        targets.append(answers[-1] - 1)
    if messages:
        targets.append(len(messages) - 1)
    return sorted(set(targets))


def _nearest_markable(messages: Sequence[Any], target: int) -> int | None:
    """`target`, or the nearest message before it (else after it) that may take a breakpoint."""
    order = [*range(target, -1, -1), *range(target + 1, len(messages))]
    for index in order:
        message = messages[index]
        if changeable(message) and _last_markable(message["content"]) is not None:
            return int(index)
    return None


def _last_markable(blocks: Sequence[Any]) -> int | None:
    for at in range(len(blocks) - 1, -1, -1):
        block = blocks[at]
        if not isinstance(block, dict) or block.get("type") in THINKING_TYPES:
            continue
        kind = block.get("type")
        if kind in MARKABLE_TYPES and (kind != "text" or block.get("text")):
            return at
    return None


def _as_blocks(message: Any) -> Any:
    """A message whose content is a non-empty string as one text block (the same meaning)."""
    if isinstance(message, dict) and isinstance(message.get("content"), str) and message["content"]:
        return {**message, "content": [{"type": "text", "text": message["content"]}]}
    return message


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
