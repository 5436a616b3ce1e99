"""The `tools` schema rendered as text the way OpenAI is believed to (as litellm counts it)."""

from __future__ import annotations

from typing import Any


def split_tools(tools: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """OpenAI function tools (and bare `{name, parameters}` ones) vs everything else."""
    functions: list[dict[str, Any]] = []
    others: list[Any] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            functions.append(function)
        elif isinstance(tool, dict) and "name" in tool and "input_schema" not in tool:
            functions.append(tool)
        else:
            others.append(tool)
    return functions, others


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
