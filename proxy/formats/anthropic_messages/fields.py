"""Typed accessors for the Anthropic Messages wire: one place for each lenient read.

The wire is untrusted JSON: any field may be missing or of any type. Every accessor answers with
a typed value (or None / "" / []) and never raises; nothing here changes its input.
"""

from __future__ import annotations

from typing import Any

from proxy.formats.common import int_value, str_field

TOOL_USE = "tool_use"
TOOL_RESULT = "tool_result"


def role_of(message: object) -> str | None:
    return str_field(message, "role")


def blocks_of(message: object) -> list[Any]:
    """The content blocks of a message ([] when its content is a string or not a list)."""
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def block_type(block: object) -> str | None:
    return str_field(block, "type")


def is_tool_result_block(block: object) -> bool:
    return block_type(block) == TOOL_RESULT


def tool_use_blocks(message: object) -> list[dict[str, Any]]:
    """The `tool_use` blocks of a message, in order."""
    return [b for b in blocks_of(message) if isinstance(b, dict) and b.get("type") == TOOL_USE]


def text_of(content: object) -> str | None:
    """A content as one text: a string, or text blocks joined; None when it is anything else
    (missing, an empty list, or any block that is not text)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        return None
    texts = []
    for block in content:
        text = block.get("text") if isinstance(block, dict) else None
        if block_type(block) != "text" or not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def any_text(content: object) -> str:
    """Whatever text a content holds (text blocks and string tool results joined)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == TOOL_RESULT:
            parts.append(any_text(block.get("content")))
    return "".join(parts)


def replaced_text(content: object, text: str) -> str | list[Any]:
    """`text` in the shape of `content`: a string for a string, else one text block that keeps
    the last block's `cache_control` (a cache breakpoint stays where it was)."""
    if not isinstance(content, list):
        return text
    block: dict[str, Any] = {"type": "text", "text": text}
    last = content[-1] if content else None
    if isinstance(last, dict) and "cache_control" in last:
        block["cache_control"] = last["cache_control"]
    return [block]


def request_model(body: dict[str, Any]) -> str:
    return str_field(body, "model") or ""


def request_stream(body: dict[str, Any]) -> bool:
    return body.get("stream") is True


def output_limit(body: dict[str, Any]) -> int | None:
    """`max_tokens` when it is an integer >= 0."""
    value = int_value(body.get("max_tokens"))
    return value if value is not None and value >= 0 else None
