"""proxy/formats/tool_defs.py: which tool definitions may be deferred, read in each format."""

from __future__ import annotations

from typing import Any

from mcp_tools import anthropic_tools, chat_tools, responses_tools

from proxy.formats.tool_defs import (
    MAX_PARAMETER_NAMES,
    anthropic_tool_entry,
    chat_tool_entry,
    forced_tool,
    parameter_names,
    responses_tool_entry,
    slim_anthropic_tool,
    slim_chat_tool,
    slim_responses_tool,
    tool_list,
    with_tool_list,
)


def test_each_format_reads_the_same_fixture_alike() -> None:
    for tools, read in (
        (chat_tools(), chat_tool_entry),
        (responses_tools(), responses_tool_entry),
        (anthropic_tools(), anthropic_tool_entry),
    ):
        entries = [read(t) for t in tools]
        assert all(e is not None for e in entries)
        first = entries[0]
        assert first is not None and first.name == "github_create_issue"
        assert first.parameters[:3] == ("owner", "repo", "title")
        assert first.tool is tools[0]


def test_a_messages_tool_is_loaded_without_the_clients_breakpoint() -> None:
    tool = {**anthropic_tools()[0], "cache_control": {"type": "ephemeral"}}
    entry = anthropic_tool_entry(tool)
    assert entry is not None
    assert entry.tool == {key: value for key, value in tool.items() if key != "cache_control"}
    assert tool["cache_control"] == {"type": "ephemeral"}  # the client's object untouched


def test_built_in_tools_are_never_deferrable() -> None:
    assert chat_tool_entry({"type": "custom", "custom": {"name": "x"}}) is None
    assert responses_tool_entry({"type": "web_search"}) is None
    assert responses_tool_entry({"type": "function", "description": "no name"}) is None
    assert anthropic_tool_entry({"type": "web_search_20250305", "name": "web_search"}) is None
    assert anthropic_tool_entry({"name": "no_schema"}) is None
    assert chat_tool_entry("junk") is None


def test_a_codex_namespace_is_one_entry_answering_to_its_tools() -> None:
    namespace: dict[str, Any] = {
        "type": "namespace",
        "name": "mcp__github",
        "description": "GitHub tools",
        "tools": responses_tools(3),
    }
    entry = responses_tool_entry(namespace)
    assert entry is not None and entry.name == "mcp__github"
    assert entry.answers_to("github_get_issue") and not entry.answers_to("slack_post_message")
    assert "Create a new issue" in entry.description
    assert responses_tool_entry({**namespace, "tools": []}) is None
    assert responses_tool_entry({"type": "custom", "name": "apply_patch"}) is not None


def test_forced_tool_in_each_shape() -> None:
    assert forced_tool({"tool_choice": {"type": "function", "function": {"name": "a"}}}) == "a"
    assert forced_tool({"tool_choice": {"type": "tool", "name": "b"}}) == "b"
    assert forced_tool({"tool_choice": "auto"}) is None
    assert forced_tool({}) is None


def test_parameter_names_are_nested_and_capped() -> None:
    nested = {"items": {"properties": {"d": {}}}}
    schema = {"properties": {"a": {"properties": {"b": {}}}, "c": nested}}
    assert parameter_names(schema) == ["a", "c", "b", "d"]
    wide = {"properties": {f"p{i}": {} for i in range(500)}}
    assert len(parameter_names(wide)) == MAX_PARAMETER_NAMES
    assert parameter_names("junk") == []


def test_tool_lists() -> None:
    assert tool_list({"tools": "junk"}) == []
    body = {"tools": [1], "model": "m"}
    assert with_tool_list(body, [2]) == {"tools": [2], "model": "m"} and body["tools"] == [1]


def test_each_format_slims_its_own_schema_field() -> None:
    schema = {"type": "object", "properties": {"path": {"title": "Path", "type": "string"}}}
    slim = {"type": "object", "properties": {"path": {"type": "string"}}}
    chat = {"type": "function", "function": {"name": "read", "parameters": schema}}
    assert slim_chat_tool(chat)["function"]["parameters"] == slim
    responses = {"type": "function", "name": "read", "parameters": schema}
    assert slim_responses_tool(responses)["parameters"] == slim
    namespace = {"type": "namespace", "name": "fs", "tools": [responses]}
    assert slim_responses_tool(namespace)["tools"][0]["parameters"] == slim
    anthropic = {"name": "read", "input_schema": schema}
    assert slim_anthropic_tool(anthropic)["input_schema"] == slim
    assert schema["properties"]["path"]["title"] == "Path"  # the client's objects untouched
    custom = {"type": "custom", "name": "apply_patch"}
    assert slim_responses_tool(custom) is custom
    assert slim_chat_tool("junk") == "junk"
    plain = {"type": "function", "function": {"name": "x", "parameters": slim}}
    assert slim_chat_tool(plain) is plain
