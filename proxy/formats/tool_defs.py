"""Tool definitions as the `defer_tools` step sees them, in each format: the request's `tools`,
the tool a `tool_choice` forces, and one definition as a `ToolEntry` (its name, description and
parameter names) when it may be deferred.

Only function-like tools may be deferred: OpenAI `function` tools, Responses `function` and
`custom` tools and whole `namespace` containers (Codex's MCP servers: a namespace is deferred and
loaded as one, and a call of any of its tools counts as a use of it), Anthropic tools with an
`input_schema`. Built-in and server tools (web search, computer use, code execution, ...) are
always sent: the provider runs them and they cannot be described to `find_tools`.
"""

from __future__ import annotations

from typing import Any

from proxy.formats.common import str_field
from proxy.formats.schema_slim import slim_schema
from proxy.synthetic.catalog import ToolEntry
from proxy.tokens.tool_schema import container_parts

MAX_PARAMETER_NAMES = 64
"""Parameter names of one tool that are ranked (a hostile schema costs no more)."""
_MAX_DEPTH = 4


def tool_list(body: dict[str, Any]) -> list[Any]:
    tools = body.get("tools")
    return tools if isinstance(tools, list) else []


def with_tool_list(body: dict[str, Any], tools: list[Any]) -> dict[str, Any]:
    return {**body, "tools": tools}


def forced_tool(body: dict[str, Any]) -> str | None:
    """The tool a `tool_choice` names: `{type: function, function: {name}}` (chat),
    `{type: function | custom | tool, name}` (Responses, Messages)."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict):
        return None
    function = choice.get("function")
    return str_field(function, "name") if isinstance(function, dict) else str_field(choice, "name")


def chat_tool_entry(tool: Any) -> ToolEntry | None:
    """An OpenAI chat `{type: function, function: {name, description, parameters}}` tool."""
    function = tool.get("function") if isinstance(tool, dict) else None
    if str_field(tool, "type") != "function" or not isinstance(function, dict):
        return None
    return _entry(function, function.get("parameters"), tool)


def responses_tool_entry(tool: Any) -> ToolEntry | None:
    """A Responses `function` or `custom` tool, or a `namespace` of them as one entry."""
    kind = str_field(tool, "type")
    if kind in ("function", "custom"):
        return _entry(tool, tool.get("parameters"), tool)
    parts = container_parts(tool)
    if kind != "namespace" or parts is None:
        return None
    entries = [e for part in parts if (e := responses_tool_entry(part)) is not None]
    name = str_field(tool, "name")
    if not name or not entries:
        return None
    lines = [str_field(tool, "description") or ""]
    lines += [f"{e.name}: {e.description}" for e in entries]
    parameters = tuple(p for e in entries for p in e.parameters)[:MAX_PARAMETER_NAMES]
    calls = tuple(e.name for e in entries)
    return ToolEntry(name, "\n".join(lines).strip(), parameters, tool, calls)


def anthropic_tool_entry(tool: Any) -> ToolEntry | None:
    """A Messages client tool (`{name, description, input_schema}`, no server `type`)."""
    if not isinstance(tool, dict) or str_field(tool, "type") not in (None, "custom"):
        return None
    if not isinstance(tool.get("input_schema"), dict):
        return None
    return _entry(tool, tool.get("input_schema"), _without_breakpoint(tool))


def _without_breakpoint(tool: dict[str, Any]) -> dict[str, Any]:
    """The definition without the client's `cache_control`: a deferrable tool is sent (loaded)
    where the client did not put it, so a breakpoint on it would move with every load and could
    be a fifth one once the policy's `cache_marks` placed four."""
    if "cache_control" not in tool:
        return tool
    return {key: value for key, value in tool.items() if key != "cache_control"}


def _entry(fields: dict[str, Any], schema: Any, tool: Any) -> ToolEntry | None:
    name = str_field(fields, "name")
    if not name:
        return None
    description = str_field(fields, "description") or ""
    return ToolEntry(name, description, tuple(parameter_names(schema)), tool)


def parameter_names(schema: Any) -> list[str]:
    """The property names of a JSON schema, nested ones included (breadth first, capped)."""
    names: list[str] = []
    level = [schema]
    for _ in range(_MAX_DEPTH):
        deeper: list[Any] = []
        for node in level:
            properties = node.get("properties") if isinstance(node, dict) else None
            if not isinstance(properties, dict):
                continue
            for key, value in properties.items():
                if len(names) >= MAX_PARAMETER_NAMES:
                    return names
                names.append(str(key))
                deeper.append(value.get("items") if isinstance(value, dict) else None)
                deeper.append(value)
        level = deeper
    return names


def slim_chat_tool(tool: Any) -> Any:
    """A chat tool with its `function.parameters` slimmed (`formats.schema_slim`)."""
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(function, dict) or "parameters" not in function:
        return tool
    name = str_field(function, "name") or ""
    parameters = slim_schema(function["parameters"], name)
    if parameters is function["parameters"]:
        return tool
    return {**tool, "function": {**function, "parameters": parameters}}


def slim_responses_tool(tool: Any) -> Any:
    """A Responses function tool's `parameters` slimmed, or each tool of a namespace's."""
    parts = container_parts(tool)
    if parts is not None and str_field(tool, "type") == "namespace":
        slimmed = [slim_responses_tool(part) for part in parts]
        key = "tools" if isinstance(tool.get("tools"), list) else "functions"
        changed = any(a is not b for a, b in zip(slimmed, parts, strict=True))
        return {**tool, key: slimmed} if changed else tool
    return _slim_field(tool, "parameters") if str_field(tool, "type") == "function" else tool


def slim_anthropic_tool(tool: Any) -> Any:
    """A Messages tool's `input_schema` slimmed."""
    return _slim_field(tool, "input_schema") if anthropic_tool_entry(tool) is not None else tool


def _slim_field(tool: Any, key: str) -> Any:
    if not isinstance(tool, dict) or key not in tool:
        return tool
    schema = slim_schema(tool[key], str_field(tool, "name") or "")
    return tool if schema is tool[key] else {**tool, key: schema}
