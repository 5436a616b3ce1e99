"""The Anthropic answer as the synthetic-tool loop sees it: the tools it offers, the `tool_use`
blocks an answer makes, and the items a round of executed calls adds to the conversation.

The proxy's tools go after the client's in `tools` (`{name, description, input_schema}`); a call
is synthetic when its `tool_use` block names one of this request's names for them (`ToolNames`).
A round's assistant message keeps the answer's other blocks (its `thinking` with the signature,
its text) before the calls, as Anthropic requires when thinking is on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.errors import ProxyError
from proxy.formats.anthropic_messages.fields import (
    TOOL_RESULT,
    TOOL_USE,
    blocks_of,
    tool_use_blocks,
)
from proxy.formats.anthropic_messages.items import make_part, split
from proxy.formats.common import str_field
from proxy.jsonio import loads
from proxy.synthetic.names import ToolNames, given_names, names_avoiding
from proxy.synthetic.registry import ARTIFACT_TOOLS

DEFAULT_NAMES = ToolNames()


def multiple_choices(body: dict[str, Any]) -> bool:
    """Never: a Messages request asks for one answer."""
    return False


def conversation(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages")
    return split(messages) if isinstance(messages, list) else []


def with_unique_tool_names(
    body: dict[str, Any],
    offered: Sequence[str] = ARTIFACT_TOOLS,
    given: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], ToolNames]:
    """The prepared body, its synthetic tools (the `offered`
    ones, the last of `tools`) renamed when a client
    tool has one of their names."""
    tools = body.get("tools")
    count = len(offered)
    if not isinstance(tools, list) or len(tools) < count:
        return body, names_avoiding((), offered, given)
    client, own = tools[:-count], tools[-count:]
    if sorted(str(str_field(tool, "name")) for tool in own) != sorted(given_names(offered, given)):
        return body, names_avoiding((), offered, given)
    taken = {name for t in client if (name := str_field(t, "name"))}
    names = names_avoiding(taken, offered, given)
    if not names.renamed:
        return body, names
    renamed = [{**tool, "name": names.own(str(tool["name"]))} for tool in own]
    return {**body, "tools": client + renamed}, names


def without_synthetic_tools(
    body: dict[str, Any], names: ToolNames = DEFAULT_NAMES
) -> dict[str, Any]:
    """A copy that offers no synthetic tool: without them (nor a `tool_choice` naming one) when
    client tools remain; else with them but `tool_choice: none`, since Anthropic refuses a
    request whose messages hold `tool_use`/`tool_result` blocks (the rounds so far) without any
    `tools`."""
    out = dict(body)
    tools = out.get("tools")
    if not isinstance(tools, list):
        return out
    kept = [t for t in tools if str_field(t, "name") not in names]
    if len(kept) == len(tools):
        return out
    if kept:
        out["tools"] = kept
        if str_field(out.get("tool_choice"), "name") in names:
            del out["tool_choice"]
        return out
    out["tool_choice"] = {"type": "none"}
    return out


def is_synthetic_call(block: Any, names: ToolNames = DEFAULT_NAMES) -> bool:
    return str_field(block, "name") in names


def _split_calls(
    payload: dict[str, Any], names: ToolNames
) -> tuple[list[Any], list[Any], list[Any]]:
    """(other blocks, synthetic calls, client calls) of an answer."""
    others: list[Any] = []
    own: list[Any] = []
    client: list[Any] = []
    for block in blocks_of(payload):
        if isinstance(block, dict) and block.get("type") == TOOL_USE:
            (own if is_synthetic_call(block, names) else client).append(block)
        else:
            others.append(block)
    return others, own, client


def synthetic_only(
    payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES
) -> tuple[list[Any], list[Any]] | None:
    """(the answer's other blocks, its calls) when every `tool_use` block is synthetic."""
    others, own, client = _split_calls(payload, names)
    return (others, own) if own and not client else None


def synthetic_calls(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> list[Any]:
    """The synthetic calls of an answer that makes client calls too; [] otherwise."""
    _, own, client = _split_calls(payload, names)
    return own if own and client else []


def mixed_content(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> None:
    """None: the synthetic calls of a mixed answer go back upstream alone (as before)."""
    return None


def strip_synthetic_calls(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> bool:
    """Remove the synthetic `tool_use` blocks in place; True when any was removed. An answer
    left without any call ends its turn (`stop_reason: end_turn`)."""
    content = payload.get("content")
    if not isinstance(content, list):
        return False
    kept = [b for b in content if not (_is_call(b) and is_synthetic_call(b, names))]
    if len(kept) == len(content):
        return False
    payload["content"] = kept
    if not any(_is_call(b) for b in kept) and payload.get("stop_reason") == "tool_use":
        payload["stop_reason"] = "end_turn"
    return True


def _is_call(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == TOOL_USE


def call_id(call: Any) -> str | None:
    return str_field(call, "id")


def call_name(call: Any) -> str:
    return str(call.get("name")) if isinstance(call, dict) else "None"


def call_arguments(call: Any) -> str | dict[str, Any]:
    """The `input` object (or the JSON text a stream assembled); "" when it is neither."""
    value = call.get("input") if isinstance(call, dict) else None
    return value if isinstance(value, str | dict) else ""


def with_call_id(call: dict[str, Any], new_id: str) -> dict[str, Any]:
    return {**call, "id": new_id}


def round_items(content: Any, calls: Sequence[Any], results: Sequence[str]) -> list[Any]:
    """The assistant message (the answer's other blocks, then the calls) and one result part per
    call (the parts of one user message)."""
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    if isinstance(content, str) and content:
        blocks = [{"type": "text", "text": content}]
    assistant = {"role": "assistant", "content": blocks + [_as_block(c) for c in calls]}
    user = {"role": "user", "content": []}
    parts = [
        make_part(user, [{"type": TOOL_RESULT, "tool_use_id": call["id"], "content": result}], i)
        for i, (call, result) in enumerate(zip(calls, results, strict=True))
    ]
    return [assistant, *parts]


def _as_block(call: dict[str, Any]) -> dict[str, Any]:
    """A call as a `tool_use` block whose `input` is an object (a stream gives JSON text)."""
    value = call.get("input")
    if not isinstance(value, str):
        return call
    try:
        parsed = loads(value.encode()) if value else {}
    except ProxyError:
        parsed = {}
    return {**call, "input": parsed if isinstance(parsed, dict) else {}}


def call_ids(items: Sequence[Any]) -> set[str]:
    """Every `tool_use` id the conversation uses already (calls and results)."""
    ids: set[str] = set()
    for item in items:
        for block in tool_use_blocks(item):
            if isinstance(block.get("id"), str):
                ids.add(block["id"])
        for block in blocks_of(item):
            tool_use_id = str_field(block, "tool_use_id")
            if tool_use_id:
                ids.add(tool_use_id)
    return ids
