"""Lenient accessors of Responses items."""

from __future__ import annotations

from proxy.formats.openai_responses.fields import (
    call_id_of,
    call_name,
    content_text,
    is_builtin_call,
    is_call,
    is_output,
    item_type,
    parts_text,
    role_of,
)


def test_item_type_and_role() -> None:
    assert item_type({"role": "user", "content": "x"}) == "message"
    assert item_type({"type": "reasoning"}) == "reasoning"
    assert item_type({"content": "x"}) is None and item_type("x") is None
    assert role_of({"type": "message", "role": "developer"}) == "developer"
    assert role_of({"type": "function_call", "role": "user"}) is None
    assert role_of({"role": 3}) is None


def test_calls_outputs_and_builtin_calls() -> None:
    assert is_call({"type": "custom_tool_call"}) and is_output({"type": "computer_call_output"})
    assert not is_call({"type": "web_search_call"}) and is_builtin_call({"type": "web_search_call"})
    assert is_builtin_call({"type": "mcp_call"}) and not is_builtin_call({"type": "function_call"})
    assert call_id_of({"type": "local_shell_call_output", "id": "s1"}) == "s1"
    assert call_id_of({"type": "function_call_output", "id": "fc_1"}) is None
    assert call_name({"type": "computer_call"}) == "computer"
    assert call_name({"type": "function_call", "name": "grep"}) == "grep"
    assert call_name({"type": "web_search_call"}) is None


def test_texts_of_parts() -> None:
    assert parts_text([{"type": "input_text", "text": "a"}, "b"]) == "ab"
    assert parts_text([{"type": "input_text", "text": "a"}, {"type": "input_file"}]) is None
    assert parts_text("no list") is None
    assert parts_text([{"type": {"a": 1}, "text": "x"}, {"type": ["input_text"]}]) is None
    assert content_text({"role": "user", "content": [{"type": "input_text", "text": "q"}]}) == "q"
    assert content_text({"type": "function_call_output", "output": "o"}) == "o"
    assert content_text({"type": "reasoning", "content": "x"}) is None
