"""The `tools` schema rendered as text the way OpenAI is believed to (as litellm counts it).

Function tools render as TypeScript types inside `namespace functions`. A *tool container* (a
Responses `namespace` tool, as Codex sends, or any tool holding a list of tools under `tools` or
`functions`) renders as a namespace of its own holding its parts, rendered the same way, so that
a tool counts alike inside a container and listed flat. What has no text form here (Anthropic
`input_schema` tools, built-in tools, a custom tool's grammar `format`, a container's own extra
fields) is left for the caller to count as JSON.
"""

from __future__ import annotations

from typing import Any

_CONTAINER_KEYS = ("tools", "functions")
_FUNCTION_FIELDS = frozenset({"type", "name", "description", "parameters", "strict", "function"})


def container_parts(tool: Any) -> list[Any] | None:
    """The tools a container holds (a list under `tools` or `functions`); None for a tool that
    is no container (an OpenAI `{type: function, function}` tool never is)."""
    if not isinstance(tool, dict) or isinstance(tool.get("function"), dict):
        return None
    for key in _CONTAINER_KEYS:
        parts = tool.get(key)
        if isinstance(parts, list):
            return parts
    return None


def split_tools(tools: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """OpenAI function tools (and bare `{name, parameters}` ones) vs everything else (tool
    containers included)."""
    functions: list[dict[str, Any]] = []
    others: list[Any] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            functions.append(function)
        elif (
            isinstance(tool, dict)
            and "name" in tool
            and "input_schema" not in tool
            and container_parts(tool) is None
        ):
            functions.append(tool)
        else:
            others.append(tool)
    return functions, others


def render_tools(tools: list[Any]) -> tuple[str, list[Any]]:
    """`(text, rest)`: the functions and containers of `tools` as text, and what the caller
    counts as JSON (tools with no text form, and the extra fields of functions and containers)."""
    functions, others = split_tools(tools)
    rest: list[Any] = []
    lines = ["namespace functions {", ""]
    lines += _function_lines(functions, rest)
    lines.append("} // namespace functions")
    for tool in others:
        if container_parts(tool) is None:
            rest.append(tool)
        else:
            lines += _container_lines(tool, rest)
    return "\n".join(lines), rest


def _container_lines(container: dict[str, Any], rest: list[Any]) -> list[str]:
    name = container.get("name")
    name = name if isinstance(name, str) and name else "tools"
    description = container.get("description")
    lines = [f"// {description}"] if isinstance(description, str) and description else []
    lines += [f"namespace {name} {{", ""]
    parts = container_parts(container) or []
    functions, others = split_tools(parts)
    lines += _function_lines(functions, rest)
    for tool in others:
        if container_parts(tool) is None:
            rest.append(tool)
        else:
            lines += _container_lines(tool, rest)
    lines.append(f"}} // namespace {name}")
    extra = {k: v for k, v in container.items() if k not in _CONTAINER_KEYS}
    rest += [value for key, value in extra.items() if _counted_extra(key, value)]
    return lines


def _function_lines(functions: list[dict[str, Any]], rest: list[Any]) -> list[str]:
    lines = format_functions(functions).split("\n")[2:-1]
    for function in functions:
        rest += [value for key, value in function.items() if _counted_extra(key, value)]
    return lines


def _counted_extra(key: str, value: Any) -> bool:
    """A field beside a tool's name, description and parameters that carries content (a custom
    tool's grammar `format`, ...): flags and numbers (`strict`, `defer_loading`) are not."""
    return key not in _FUNCTION_FIELDS and isinstance(value, str | dict | list) and bool(value)


def format_functions(functions: list[dict[str, Any]]) -> str:
    """Tool schemas rendered the way OpenAI is believed to render them (as litellm does)."""
    lines = ["namespace functions {", ""]
    for function in functions:
        name = function.get("name")
        if not name:
            continue
        description = function.get("description")
        if description:
            lines.append(f"// {description}")
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, dict) else None
        if isinstance(parameters, dict) and isinstance(properties, dict) and properties:
            lines += [f"type {name} = (_: {{", _format_object(parameters, 0), "}) => any;", ""]
        else:
            lines += [f"type {name} = () => any;", ""]
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _format_object(parameters: dict[str, Any], indent: int) -> str:
    properties = parameters.get("properties")
    if not isinstance(properties, dict) or not properties:
        return ""
    required = parameters.get("required")
    required = required if isinstance(required, list) else []
    lines = []
    for key, props in properties.items():
        description = props.get("description") if isinstance(props, dict) else None
        if description:
            lines.append(f"// {description}")
        optional = "" if key in required else "?"
        lines.append(f"{key}{optional}: {_format_type(props, indent)},")
    return "\n".join(" " * max(0, indent) + line for line in lines)


def _format_type(props: Any, indent: int) -> str:
    if not isinstance(props, dict):
        return "any"
    kind, enum = props.get("type"), props.get("enum")
    if kind in ("string", "integer", "number") and isinstance(enum, list):
        return " | ".join(f'"{item}"' for item in enum)
    if kind == "array":
        return f"{_format_type(props.get('items'), indent)}[]"
    if kind == "object":
        return f"{{\n{_format_object(props, indent + 2)}\n}}"
    simple = {"string": "string", "integer": "number", "number": "number"}
    simple |= {"boolean": "boolean", "null": "null"}
    return simple.get(kind, "any") if isinstance(kind, str) else "any"
