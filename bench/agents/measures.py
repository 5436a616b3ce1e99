"""Measures of one request body: tool-definition tokens, cache-mark positions, prompt items.

Counting uses the proxy's own counter (`proxy.tokens.counters.TokenCounters`), so the shares are
in the same tokens as the manifest's `tokens_before`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench.agents.fake_common import without_cache_control
from proxy.tokens.counters import TokenCounter, TokenCounters

_COUNTERS = TokenCounters()


def counter_for(model: str) -> TokenCounter:
    return _COUNTERS.for_model(model or "unknown")


def tool_definitions(body: dict[str, Any]) -> list[Any]:
    """`tools`, plus the tools Codex sends inside `additional_tools` input items."""
    tools = list(body.get("tools") or [])
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools.extend(item.get("tools") or [])
    return tools


def tool_names(tools: list[Any]) -> list[str]:
    """Names of the tools, containers as `namespace/child` (one level is what agents send)."""
    names = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        name = str(tool.get("name") or tool.get("type"))
        if isinstance(tool.get("tools"), list):
            names += [f"{name}/{n}" for n in tool_names(tool["tools"])]
        else:
            names.append(name)
    return names


def tool_tokens(body: dict[str, Any]) -> int:
    tools = tool_definitions(body)
    if not tools:
        return 0
    return counter_for(str(body.get("model", ""))).count_tools(tools, body.get("tool_choice"))


def cache_marks(value: Any, path: str = "") -> Iterator[str]:
    """Paths of the objects that carry `cache_control` (e.g. `system[1]`,
    `messages[3].content[0]`)."""
    if isinstance(value, dict):
        if "cache_control" in value and path:
            yield path
        for key, child in value.items():
            if key != "cache_control":
                yield from cache_marks(child, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from cache_marks(child, f"{path}[{index}]")


def _as_blocks(message: Any) -> Any:
    """An Anthropic message with string content as its one text block: the same prompt (Claude
    Code sends the newest user message as blocks, to mark it, and later as a string)."""
    if isinstance(message, dict) and isinstance(message.get("content"), str):
        return {**message, "content": [{"type": "text", "text": message["content"]}]}
    return message


def prompt_items(body: dict[str, Any]) -> list[str]:
    """The prompt in the order a provider renders it, one canonical JSON text per item (tools,
    then system blocks or instructions, then messages or input items), `cache_control` left out:
    the markers move from request to request while the prompt they mark stays."""
    parts: list[Any] = [["tool", t] for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, list):
        parts += [["system", s] for s in system]
    elif system:
        parts.append(["system", {"type": "text", "text": system}])
    if body.get("instructions"):
        parts.append(["instructions", body["instructions"]])
    messages = body.get("messages")
    if isinstance(messages, list):
        parts += [["messages", _as_blocks(m)] for m in messages]
    items = body.get("input")
    if isinstance(items, list):
        parts += [["input", item] for item in items]
    elif items:
        parts.append(["input", items])
    return [json.dumps(without_cache_control(p), ensure_ascii=False) for p in parts]


@dataclass(frozen=True)
class PrefixKept:
    kept_items: int
    previous_items: int
    kept_tokens: int
    previous_tokens: int

    def label(self) -> str:
        share = self.kept_tokens / self.previous_tokens if self.previous_tokens else 0.0
        return f"{self.kept_items}/{self.previous_items} ({share:.0%})"

    def as_dict(self) -> dict[str, Any]:
        share = self.kept_tokens / self.previous_tokens if self.previous_tokens else None
        return {
            "kept_items": self.kept_items,
            "previous_items": self.previous_items,
            "kept_tokens": self.kept_tokens,
            "previous_tokens": self.previous_tokens,
            "token_share": None if share is None else round(share, 4),
        }


def prefix_kept(previous: dict[str, Any], current: dict[str, Any]) -> PrefixKept:
    """How much of `previous`'s prompt `current` starts with unchanged (items, tokens)."""
    before, after = prompt_items(previous), prompt_items(current)
    kept = 0
    while kept < min(len(before), len(after)) and before[kept] == after[kept]:
        kept += 1
    count = counter_for(str(previous.get("model", ""))).count_text
    sizes = [count(item) for item in before]
    return PrefixKept(kept, len(before), sum(sizes[:kept]), sum(sizes))
