"""Typed accessors for the OpenAI Chat Completions wire: one place for each lenient read.

The wire is untrusted JSON: any field may be missing or of any type. Every accessor answers with
a typed value (or None / "" / {}) and never raises; nothing here changes its input.
"""

from __future__ import annotations

from typing import Any

from proxy.formats.common import int_value, str_field


def role_of(message: object) -> str | None:
    """The role when it is a string (a list or object role is never hashed or matched)."""
    role = message.get("role") if isinstance(message, dict) else None
    return role if isinstance(role, str) else None


def function_of(call: object) -> dict[str, Any]:
    """The `function` object of a tool call; {} when the call or its function is not one."""
    function = call.get("function") if isinstance(call, dict) else None
    return function if isinstance(function, dict) else {}


def content_text(message: object) -> str | None:
    """The content as one text: a string, or text parts joined; None when it is anything else
    (no content, an empty list, or any part that is not text)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        return None
    texts = []
    for part in content:
        if not (isinstance(part, dict) and part.get("type") == "text"):
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def parts_layout(message: object) -> list[dict[str, Any]] | None:
    """How `content_text` joined a content given as text parts, so that the list can be rebuilt
    from the joined text exactly: per part, its `span` `[start, end)` in the joined text and the
    `part` itself with `text` set to null (every other field, e.g. `cache_control`, and the key
    order kept). None when the content is not a list of text parts."""
    if content_text(message) is None or not isinstance(message, dict):
        return None
    content = message.get("content")
    if not isinstance(content, list):
        return None
    layout, start = [], 0
    for part in content:
        end = start + len(part["text"])
        layout.append({"span": [start, end], "part": {**part, "text": None}})
        start = end
    return layout


def parts_from_layout(text: str, layout: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The content parts `parts_layout` described, rebuilt from the joined `text`."""
    return [{**entry["part"], "text": text[slice(*entry["span"])]} for entry in layout]


def message_text(message: object) -> str:
    """Whatever text a message holds: its string content, or the string `text` of its parts
    joined (other parts skipped); "" when it has none."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "")
            for p in content
            if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def with_content(message: dict[str, Any], content: str) -> dict[str, Any]:
    """A copy that keeps every field (role, tool_call_id, name, unknown ones) but the content."""
    copy = dict(message)
    copy["content"] = content
    return copy


def request_model(body: dict[str, Any]) -> str:
    """The request's `model`, or "" when it is missing or not a string."""
    return str_field(body, "model") or ""


def request_stream(body: dict[str, Any]) -> bool:
    """True only for `"stream": true` (any other value is a non-streamed request)."""
    return body.get("stream") is True


def output_limit(body: dict[str, Any]) -> int | None:
    """`max_completion_tokens`, else `max_tokens`: the first that is an integer >= 0."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = int_value(body.get(key))
        if value is not None and value >= 0:
            return value
    return None
