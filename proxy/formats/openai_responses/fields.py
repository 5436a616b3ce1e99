"""Typed, lenient accessors of the OpenAI Responses wire: one place for each read of an item.

An `input` item is a dict with a `type`; an item without one but with a `role` is a message (the
API's "easy input message"). Nothing here changes an item; `with_*` return copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from proxy.formats.common import int_value, str_field

PAIRED_CALLS: Mapping[str, str] = MappingProxyType(
    {
        "function_call": "function_call_output",
        "custom_tool_call": "custom_tool_call_output",
        "computer_call": "computer_call_output",
        "local_shell_call": "local_shell_call_output",
        "shell_call": "shell_call_output",
        "apply_patch_call": "apply_patch_call_output",
    }
)
"""A call item type -> the type of the item that answers it by `call_id` (one unit together)."""
OUTPUTS = frozenset(PAIRED_CALLS.values())
_BUILTIN_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "computer_call": "computer",
        "local_shell_call": "local_shell",
        "shell_call": "shell",
        "apply_patch_call": "apply_patch",
    }
)
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
PREFIX_ROLES = frozenset({"system", "developer"})


def item_type(item: object) -> str | None:
    """The item's `type`; `message` for a typeless item with a `role`; None for a non-object."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    return "message" if "role" in item else None


def role_of(item: object) -> str | None:
    """A message's role when it is a string (None for other items)."""
    if item_type(item) != "message":
        return None
    assert isinstance(item, dict)
    role = item.get("role")
    return role if isinstance(role, str) else None


def gives_instructions(item: object) -> bool:
    """An item in the `system` or `developer` role, whatever its type: a message, or the
    `additional_tools` item by which Codex sends its tool definitions; or a `compaction` item,
    the provider's own (encrypted) compaction of the conversation before it (from
    `/v1/responses/compact`): it stands for all of that history, so it is kept where it is,
    byte for byte, like an instruction."""
    if not isinstance(item, dict):
        return False
    role = item.get("role")
    return (isinstance(role, str) and role in PREFIX_ROLES) or item.get("type") == COMPACTION


COMPACTION = "compaction"


def call_id_of(item: object) -> str | None:
    """The `call_id` of a call or an output (a local shell output may carry it as `id`)."""
    call_id = str_field(item, "call_id")
    if call_id is None and item_type(item) == "local_shell_call_output":
        call_id = str_field(item, "id")
    return call_id


def is_call(item: object) -> bool:
    """A call item answered by an output item of its own (`PAIRED_CALLS`)."""
    return item_type(item) in PAIRED_CALLS


def is_output(item: object) -> bool:
    return item_type(item) in OUTPUTS


def is_builtin_call(item: object) -> bool:
    """A hosted tool call that holds its own result (`web_search_call`, `file_search_call`,
    `mcp_call`, ...): one item, kept whole."""
    kind = item_type(item)
    return kind is not None and kind not in PAIRED_CALLS and kind.endswith("_call")


def is_model_item(item: object) -> bool:
    """An item of the model's run: reasoning, an assistant message, a call of any kind."""
    kind = item_type(item)
    if kind == "message":
        return role_of(item) == "assistant"
    return kind == "reasoning" or is_call(item) or is_builtin_call(item)


def call_name(item: object) -> str | None:
    """The called tool's name: a function's or custom tool's `name`, else the built-in tool."""
    name = str_field(item, "name")
    if name is not None:
        return name
    kind = item_type(item)
    return _BUILTIN_NAMES.get(kind) if kind is not None else None


def parts_text(parts: object) -> str | None:
    """The text of a content list whose parts are all text parts (None otherwise)."""
    if not isinstance(parts, list):
        return None
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        kind = part.get("type") if isinstance(part, dict) else None
        text = part.get("text") if isinstance(part, dict) else None
        if not isinstance(kind, str) or kind not in _TEXT_PARTS or not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def output_text(item: object) -> str | None:
    """An output item's text: its `output` string, or its text parts joined."""
    output = item.get("output") if isinstance(item, dict) else None
    return output if isinstance(output, str) else parts_text(output)


def with_output(item: dict[str, Any], text: str) -> dict[str, Any]:
    """A copy of an output item whose `output` is `text` (every other field kept)."""
    return {**item, "output": text}


def content_text(item: object) -> str | None:
    """A message's text (a string content, or its text parts joined); an output's text."""
    if is_output(item):
        return output_text(item)
    if item_type(item) != "message":
        return None
    assert isinstance(item, dict)
    content = item.get("content")
    return content if isinstance(content, str) else parts_text(content)


def with_content(item: dict[str, Any], text: str) -> dict[str, Any]:
    """A copy of a message (or output) with `text` as its content."""
    if is_output(item):
        return with_output(item, text)
    return {**item, "content": text}


def any_text(item: object) -> str:
    """Every text an item shows (for pin rules): content, output, summaries, arguments."""
    text = content_text(item)
    if text is not None:
        return text
    kind = item_type(item)
    if kind == "reasoning":
        summary = item.get("summary") if isinstance(item, dict) else None
        return parts_text(summary) or ""
    return str_field(item, "arguments") or str_field(item, "input") or ""


def request_model(body: dict[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) else ""


def request_stream(body: dict[str, Any]) -> bool:
    return body.get("stream") is True


def output_limit(body: dict[str, Any]) -> int | None:
    """`max_output_tokens` when it is a non-negative integer."""
    value = int_value(body.get("max_output_tokens"))
    return value if value is not None and value >= 0 else None


def provider_history(body: dict[str, Any]) -> str | None:
    """The field naming history the provider holds (`previous_response_id`, `conversation`), if
    the request uses one: the proxy cannot see that history, so it does not prepare it."""
    for key in ("previous_response_id", "conversation"):
        if body.get(key) not in (None, ""):
            return key
    return None
