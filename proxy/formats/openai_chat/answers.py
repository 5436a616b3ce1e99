"""The OpenAI chat answer as the synthetic-tool loop sees it: the tools it offers, the calls an
answer makes, and the messages a round of executed calls adds to the conversation.

The proxy's tools go after the client's in `tools` (`Prepared.synthetic`); a call is synthetic
when its `function.name` is one of this request's names for them (`ToolNames`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.errors import ProxyError
from proxy.formats.openai_chat.fields import function_of
from proxy.formats.sse import encode_data
from proxy.jsonio import dumps, loads
from proxy.synthetic.names import ToolNames, given_names, names_avoiding
from proxy.synthetic.registry import ARTIFACT_TOOLS

DEFAULT_NAMES = ToolNames()


def multiple_choices(body: dict[str, Any]) -> bool:
    """Whether the request asks for several choices (`n` > 1)."""
    n = body.get("n")
    return isinstance(n, int | float) and not isinstance(n, bool) and n > 1


def conversation(body: dict[str, Any]) -> list[Any]:
    """A copy of the request's `messages` ([] when there is no list)."""
    messages = body.get("messages")
    return list(messages) if isinstance(messages, list) else []


def with_unique_tool_names(
    body: dict[str, Any],
    offered: Sequence[str] = ARTIFACT_TOOLS,
    given: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], ToolNames]:
    """The prepared body, its synthetic tools renamed when a client tool has one of their names.

    The preparer appends the proxy's tools after the client's (`Prepared.synthetic`): they are
    the last entries of `tools`, and every entry before them is the client's.
    """
    tools = body.get("tools")
    count = len(offered)
    if not isinstance(tools, list) or len(tools) < count:
        return body, names_avoiding((), offered, given)
    client, own = tools[:-count], tools[-count:]
    if sorted(str(_tool_name(tool)) for tool in own) != sorted(given_names(offered, given)):
        return body, names_avoiding((), offered, given)
    taken = {name for t in client if isinstance(name := _tool_name(t), str)}
    names = names_avoiding(taken, offered, given)
    if not names.renamed:
        return body, names
    return {**body, "tools": client + [_renamed(tool, names) for tool in own]}, names


def _renamed(tool: dict[str, Any], names: ToolNames) -> dict[str, Any]:
    function = dict(function_of(tool))
    canonical = str(function.get("name"))
    function["name"] = names.own(canonical)
    if function["name"] != canonical:
        function["description"] = (
            f"{function.get('description', '')} Notices in this conversation call this tool "
            f"{canonical}; the tool of that name here is another one."
        ).strip()
    return {**tool, "function": function}


def without_synthetic_tools(
    body: dict[str, Any], names: ToolNames = DEFAULT_NAMES
) -> dict[str, Any]:
    """A copy without the synthetic tools (nor a `tool_choice` naming one; no empty `tools`)."""
    out = dict(body)
    tools = out.get("tools")
    if not isinstance(tools, list):
        return out
    kept = [t for t in tools if _tool_name(t) not in names]
    if kept:
        out["tools"] = kept
        if _tool_name(out.get("tool_choice")) in names:
            del out["tool_choice"]
        return out
    for key in ("tools", "tool_choice", "parallel_tool_calls"):
        out.pop(key, None)
    return out


def is_synthetic_call(call: Any, names: ToolNames = DEFAULT_NAMES) -> bool:
    return function_of(call).get("name") in names


def synthetic_only(
    payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES
) -> tuple[str | None, list[dict[str, Any]]] | None:
    """(content, calls) when the only choice asks for synthetic calls and nothing else."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list) or not calls:
        return None
    if not all(isinstance(c, dict) and is_synthetic_call(c, names) for c in calls):
        return None
    content = message.get("content") if isinstance(message, dict) else None
    return (content if isinstance(content, str) else None), calls


def mixed_content(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> None:
    """None: the synthetic calls of a mixed answer go back alone (no assistant text)."""
    return None


def synthetic_calls(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> list[Any]:
    """The synthetic calls of the only choice when it makes client calls too."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return []
    message = choices[0].get("message")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list):
        return []
    own = [c for c in calls if isinstance(c, dict) and is_synthetic_call(c, names)]
    return own if 0 < len(own) < len(calls) else []


def strip_synthetic_calls(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> bool:
    """Remove synthetic calls from every choice in place; True when any was removed.

    A choice left with no call at all finishes with "stop" (it asked for nothing the client can do).
    """
    choices = payload.get("choices")
    removed = False
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(calls, list):
            continue
        kept = [c for c in calls if not is_synthetic_call(c, names)]
        if len(kept) == len(calls):
            continue
        removed = True
        if kept:
            message["tool_calls"] = kept
        else:
            del message["tool_calls"]
            choice["finish_reason"] = "stop"
    return removed


def call_id(call: Any) -> str | None:
    """The call's `id` when it is a string."""
    value = call.get("id") if isinstance(call, dict) else None
    return value if isinstance(value, str) else None


def call_name(call: Any) -> str:
    """The called function's name, as text."""
    return str(function_of(call).get("name"))


def call_arguments(call: Any) -> str | dict[str, Any]:
    """The call's arguments: its JSON text (or an object some servers send); "" otherwise."""
    arguments = function_of(call).get("arguments")
    return arguments if isinstance(arguments, str | dict) else ""


def with_call_id(call: dict[str, Any], new_id: str) -> dict[str, Any]:
    return {**call, "id": new_id}


def round_items(
    content: str | None, calls: Sequence[dict[str, Any]], results: Sequence[str]
) -> list[dict[str, Any]]:
    """The assistant message making `calls` (each with its id), then one `tool` message per call."""
    items: list[dict[str, Any]] = [
        {"role": "assistant", "content": content, "tool_calls": list(calls)}
    ]
    items.extend(
        {"role": "tool", "tool_call_id": call["id"], "content": result}
        for call, result in zip(calls, results, strict=True)
    )
    return items


def call_ids(messages: Sequence[Any]) -> set[str]:
    """Every tool-call id the conversation uses already (calls and results)."""
    ids: set[str] = set()
    for message in messages:
        if not isinstance(message, dict):
            continue
        if isinstance(message.get("tool_call_id"), str):
            ids.add(message["tool_call_id"])
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                ids.add(call["id"])
    return ids


def upstream_error_event(body: bytes) -> bytes | None:
    """An upstream's error answer as one SSE event, when it is in the OpenAI error envelope."""
    try:
        payload = loads(body)
    except ProxyError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        return encode_data(dumps(payload))
    return None


def _tool_name(tool: Any) -> Any:
    return function_of(tool).get("name")
