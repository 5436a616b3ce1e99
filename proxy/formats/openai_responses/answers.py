"""The Responses answer as the synthetic-tool loop sees it: the tools it offers (`function` tools
after the client's), the calls a response makes (`function_call` output items), and the items a
round of executed calls adds to `input`.

A round's "content" (`AnswerFormat.round_items`) is the answer's whole `output` list: its
`reasoning` items (encrypted content and ids untouched) and messages go back to the upstream with
the calls they came with, in order, so a reasoning model keeps its chain of thought between rounds.
When a synthetic call is removed from what the client sees, the reasoning items directly before it
go with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.errors import ProxyError
from proxy.formats.common import str_field
from proxy.formats.openai_responses.fields import is_call, is_model_item, item_type
from proxy.jsonio import loads
from proxy.synthetic.names import ToolNames, given_names, names_avoiding
from proxy.synthetic.registry import ARTIFACT_TOOLS

DEFAULT_NAMES = ToolNames()


def conversation(body: dict[str, Any]) -> list[Any]:
    """A copy of the request's `input` items (a string input is one user message)."""
    items = body.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return list(items) if isinstance(items, list) else []


def with_unique_tool_names(
    body: dict[str, Any],
    offered: Sequence[str] = ARTIFACT_TOOLS,
    given: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], ToolNames]:
    """The prepared body, its synthetic tools (the `offered`
    ones, the last of `tools`) renamed when a client tool
    has one of their names."""
    tools = body.get("tools")
    count = len(offered)
    if not isinstance(tools, list) or len(tools) < count:
        return body, names_avoiding((), offered, given)
    client, own = tools[:-count], tools[-count:]
    if sorted(str(str_field(tool, "name")) for tool in own) != sorted(given_names(offered, given)):
        return body, names_avoiding((), offered, given)
    taken = {name for t in client if (name := str_field(t, "name")) is not None}
    names = names_avoiding(taken, offered, given)
    if not names.renamed:
        return body, names
    return {**body, "tools": client + [_renamed(tool, names) for tool in own]}, names


def _renamed(tool: dict[str, Any], names: ToolNames) -> dict[str, Any]:
    canonical = str(tool.get("name"))
    renamed = {**tool, "name": names.own(canonical)}
    if renamed["name"] != canonical:
        renamed["description"] = (
            f"{tool.get('description', '')} Notices in this conversation call this tool "
            f"{canonical}; the tool of that name here is another one."
        ).strip()
    return renamed


def without_synthetic_tools(
    body: dict[str, Any], names: ToolNames = DEFAULT_NAMES
) -> dict[str, Any]:
    """A copy without the synthetic tools (nor a `tool_choice` naming one; no empty `tools`)."""
    out = dict(body)
    tools = out.get("tools")
    if not isinstance(tools, list):
        return out
    kept = [t for t in tools if not _is_synthetic_tool(t, names)]
    if kept:
        out["tools"] = kept
        if str_field(out.get("tool_choice"), "name") in names:
            del out["tool_choice"]
        return out
    for key in ("tools", "tool_choice", "parallel_tool_calls"):
        out.pop(key, None)
    return out


def _is_synthetic_tool(tool: Any, names: ToolNames) -> bool:
    return str_field(tool, "type") == "function" and str_field(tool, "name") in names


def is_synthetic_call(item: Any, names: ToolNames = DEFAULT_NAMES) -> bool:
    return item_type(item) == "function_call" and str_field(item, "name") in names


def _output(payload: dict[str, Any]) -> list[Any]:
    output = payload.get("output")
    return output if isinstance(output, list) else []


def synthetic_only(
    payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES
) -> tuple[list[Any], list[Any]] | None:
    """(the whole output, its calls) when every call of the answer is synthetic."""
    output = _output(payload)
    calls = [item for item in output if is_call(item)]
    if not calls or not all(is_synthetic_call(call, names) for call in calls):
        return None
    return list(output), calls


def synthetic_calls(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> list[Any]:
    """The synthetic calls of an answer that also makes client calls."""
    calls = [item for item in _output(payload) if is_call(item)]
    own = [call for call in calls if is_synthetic_call(call, names)]
    return own if 0 < len(own) < len(calls) else []


def mixed_content(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> list[Any]:
    """The synthetic calls of a mixed answer with the reasoning items directly before each (what
    `strip_synthetic_calls` takes from the client's answer): they go back upstream together, as
    the API wants a call with the reasoning item it came with."""
    return synthetic_items(_output(payload), names)


def synthetic_items(output: list[Any], names: ToolNames) -> list[Any]:
    """The synthetic calls of `output` and the reasoning items directly before each, in order
    (what `without_synthetic_items` leaves out)."""
    taken: list[Any] = []
    held: list[Any] = []
    for item in output:
        if item_type(item) == "reasoning":
            held.append(item)
        elif is_synthetic_call(item, names):
            taken += [*held, item]
            held = []
        else:
            held = []
    return taken


def strip_synthetic_calls(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> bool:
    """Remove the synthetic calls (and the reasoning items directly before each) in place."""
    output = payload.get("output")
    if not isinstance(output, list):
        return False
    kept = without_synthetic_items(output, names)
    if len(kept) == len(output):
        return False
    payload["output"] = kept
    return True


def without_synthetic_items(output: list[Any], names: ToolNames) -> list[Any]:
    kept: list[Any] = []
    held: list[Any] = []  # reasoning items, until the item they precede shows whose they are
    for item in output:
        if item_type(item) == "reasoning":
            held.append(item)
        elif is_synthetic_call(item, names):
            held = []
        else:
            kept += [*held, item]
            held = []
    return kept + held


def call_id(call: Any) -> str | None:
    return str_field(call, "call_id")


def call_name(call: Any) -> str:
    return str(call.get("name")) if isinstance(call, dict) else "None"


def call_arguments(call: Any) -> str | dict[str, Any]:
    arguments = call.get("arguments") if isinstance(call, dict) else None
    return arguments if isinstance(arguments, str | dict) else ""


def with_call_id(call: dict[str, Any], new_id: str) -> dict[str, Any]:
    return {**call, "call_id": new_id}


def round_items(content: Any, calls: Sequence[dict[str, Any]], results: Sequence[str]) -> list[Any]:
    """The answer's output items (`content`, when it is the output list: the k-th call in it
    replaced by `calls[k]`, whose id may have been made unique), else the calls alone; then one
    `function_call_output` per call, directly after the model's run (reasoning, messages, calls)
    so that each output follows its call. Other output items go after the outputs, in order;
    what is no item at all (not an object, neither `type` nor `role`) is not sent back."""
    items: list[Any] = []
    after: list[Any] = []
    pending = list(calls)
    for item in content if isinstance(content, list) else []:
        if is_call(item):
            if pending:
                items.append(pending.pop(0))
        elif is_model_item(item):
            items.append(item)
        elif item_type(item) is not None:
            after.append(item)
    items += pending
    items += [
        {"type": "function_call_output", "call_id": call["call_id"], "output": result}
        for call, result in zip(calls, results, strict=True)
    ]
    return items + after


def call_ids(items: Sequence[Any]) -> set[str]:
    """Every call id the conversation uses already (calls and outputs)."""
    return {value for item in items if (value := str_field(item, "call_id")) is not None}


def error_payload(body: bytes) -> dict[str, Any] | None:
    """The `error` object of an upstream's error answer in the OpenAI envelope."""
    try:
        payload = loads(body)
    except ProxyError:
        return None
    error = payload.get("error") if isinstance(payload, dict) else None
    return error if isinstance(error, dict) else None
