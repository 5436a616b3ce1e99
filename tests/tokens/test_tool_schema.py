"""Tool schemas rendered as text (litellm's rendering of OpenAI's format) and split by kind."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.tokens.tool_schema import container_parts, format_functions, render_tools, split_tools

WEATHER: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"},
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number", "description": "Latitude"}},
                "required": ["lat"],
            },
            "exact": {"type": "boolean"},
            "nothing": {"type": "null"},
            "anything": {},
            "either": {"type": ["string", "null"]},
        },
        "required": ["city", "where"],
    },
}

WEATHER_TEXT = """namespace functions {

// Current weather for a city
type get_weather = (_: {
// City name
city: string,
unit?: "celsius" | "fahrenheit",
days?: number,
level?: "1" | "2" | "3",
tags?: string[],
where: {
  // Latitude
  lat: number,
},
exact?: boolean,
nothing?: null,
anything?: any,
either?: any,
}) => any;

} // namespace functions"""


def test_format_a_full_schema() -> None:
    assert format_functions([WEATHER]) == WEATHER_TEXT


def test_format_no_functions() -> None:
    assert format_functions([]) == "namespace functions {\n\n} // namespace functions"


@pytest.mark.parametrize(
    "function",
    [
        {"name": "ping"},
        {"name": "ping", "parameters": None},
        {"name": "ping", "parameters": "not an object"},
        {"name": "ping", "parameters": {"type": "object", "properties": {}}},
        {"name": "ping", "parameters": {"type": "object", "properties": []}},
    ],
)
def test_functions_without_properties_take_no_arguments(function: dict[str, Any]) -> None:
    expected = "namespace functions {\n\ntype ping = () => any;\n\n} // namespace functions"
    assert format_functions([function]) == expected


def test_nameless_functions_are_skipped_with_their_description() -> None:
    functions = [
        {"description": "lost", "parameters": {}},
        {"name": "", "description": "lost too"},
        {"name": "a", "description": "first"},
        {"name": "b"},
    ]
    assert format_functions(functions) == (
        "namespace functions {\n\n"
        "// first\ntype a = () => any;\n\n"
        "type b = () => any;\n\n"
        "} // namespace functions"
    )


def body(function: dict[str, Any]) -> str:
    """The lines between `(_: {` and `}) => any;`."""
    text = format_functions([function])
    start = text.index("(_: {\n") + len("(_: {\n")
    return text[start : text.index("\n}) => any;")]


def test_nested_objects_and_arrays() -> None:
    function = {
        "name": "f",
        "parameters": {
            "properties": {
                "outer": {
                    "type": "object",
                    "properties": {
                        "inner": {"type": "object", "properties": {"x": {"type": "number"}}},
                        "list": {
                            "type": "array",
                            "items": {"type": "object", "properties": {"y": {"type": "string"}}},
                        },
                    },
                },
                "matrix": {
                    "type": "array",
                    "items": {"type": "array", "items": {"type": "integer"}},
                },
                "loose": {"type": "array"},
            },
            "required": "not a list",  # ignored: everything optional
        },
    }
    assert body(function) == (
        "outer?: {\n"
        "  inner?: {\n"
        "    x?: number,\n"
        "},\n"  # litellm's rendering: a nested closing brace is not indented
        "  list?: {\n"
        "    y?: string,\n"
        "}[],\n"
        "},\n"
        "matrix?: number[][],\n"
        "loose?: any[],"
    )


def test_odd_property_schemas_render_as_any() -> None:
    function = {
        "name": "f",
        "parameters": {
            "properties": {
                "bare": "string",
                "listed": ["x"],
                "enum_not_list": {"type": "string", "enum": "abc"},
                "bool_enum": {"type": "boolean", "enum": [True]},
                "object_without_properties": {"type": "object"},
                "description_only": {"description": "free form"},
            },
            "required": ["bare"],
        },
    }
    assert body(function) == (
        "bare: any,\n"
        "listed?: any,\n"
        "enum_not_list?: string,\n"
        "bool_enum?: boolean,\n"
        "object_without_properties?: {\n\n},\n"
        "// free form\n"
        "description_only?: any,"
    )


def test_several_functions_in_order() -> None:
    text = format_functions([{"name": "a"}, WEATHER, {"name": "z", "description": "last"}])
    assert text.startswith("namespace functions {\n\ntype a = () => any;\n\n// Current weather")
    assert text.endswith("}) => any;\n\n// last\ntype z = () => any;\n\n} // namespace functions")


def test_split_tools() -> None:
    openai = {"type": "function", "function": WEATHER}
    bare = {"name": "lookup", "parameters": {}}
    anthropic = {"name": "search", "input_schema": {"type": "object"}}
    builtin = {"type": "web_search_preview"}
    broken_function = {"type": "function", "function": "get_weather"}
    tools: list[Any] = [openai, bare, anthropic, builtin, broken_function, "junk", None, 3]
    functions, others = split_tools(tools)
    assert functions == [WEATHER, bare]
    assert functions[0] is WEATHER
    assert others == [anthropic, builtin, broken_function, "junk", None, 3]


def test_split_tools_empty() -> None:
    assert split_tools([]) == ([], [])


NAMESPACE: dict[str, Any] = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Tools to work with sub-agents.",
    "tools": [
        {"type": "function", **WEATHER},
        {"type": "custom", "name": "apply_patch", "description": "Edit files.",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: hunk+"}},
    ],
}  # fmt: skip


def test_a_namespace_renders_its_tools_in_a_namespace_of_its_own() -> None:
    text, rest = render_tools([{"type": "function", "name": "ls"}, NAMESPACE])
    functions_block, container = text.split("} // namespace functions\n")
    assert functions_block == "namespace functions {\n\ntype ls = () => any;\n\n"
    weather = WEATHER_TEXT.split("\n", 2)[2].rsplit("\n", 1)[0]  # without the namespace lines
    assert container == (
        "// Tools to work with sub-agents.\nnamespace multi_agent_v1 {\n\n"
        f"{weather}\n// Edit files.\ntype apply_patch = () => any;\n\n"
        "} // namespace multi_agent_v1"
    )
    assert rest == [NAMESPACE["tools"][1]["format"]]  # the grammar is counted as JSON


def test_containers_nest_and_what_has_no_text_form_is_left_as_json() -> None:
    anthropic = {"name": "search", "input_schema": {"type": "object"}}
    inner = {"type": "namespace", "name": "inner", "tools": [{"name": "a"}, anthropic]}
    outer = {"name": "outer", "functions": [inner], "server_label": "srv", "strict": True}
    text, rest = render_tools([outer, {"type": "web_search"}])
    assert "namespace outer {\n\nnamespace inner {\n\ntype a = () => any;\n\n" in text
    assert text.endswith("} // namespace inner\n} // namespace outer")
    assert rest == [anthropic, "srv", {"type": "web_search"}]


def test_a_function_tool_is_no_container_whatever_it_holds() -> None:
    odd = {"type": "function", "function": {"name": "f"}, "tools": [{"name": "g"}]}
    assert container_parts(odd) is None
    assert container_parts({"name": "n", "tools": "not a list"}) is None
    assert split_tools([odd, {"name": "n", "tools": []}]) == ([odd["function"]], [
        {"name": "n", "tools": []}
    ])  # fmt: skip
