"""Tests for proxy.formats.openai_chat.fields: the typed accessors of the Chat Completions wire."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.formats.common import int_value, str_field
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.fields import (
    content_text,
    function_of,
    message_text,
    output_limit,
    parts_from_layout,
    parts_layout,
    request_model,
    request_stream,
    role_of,
    with_content,
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "tool", "content": "plain"}, "plain"),
        ({"role": "tool", "content": ""}, ""),
        (
            {
                "role": "tool",
                "content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "cd"}],
            },
            "abcd",
        ),
        ({"role": "tool", "content": [{"type": "text", "text": ""}]}, ""),
        ({"role": "tool", "content": []}, None),
        ({"role": "tool", "content": None}, None),
        ({"role": "tool"}, None),
        ({"role": "tool", "content": 42}, None),
        ({"role": "tool", "content": {"type": "text", "text": "x"}}, None),
        # any non-text part makes the whole result non-text (it is never rewritten)
        (
            {
                "role": "tool",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "image_url", "image_url": {"url": "data:"}},
                ],
            },
            None,
        ),
        ({"role": "tool", "content": [{"type": "text", "text": 3}]}, None),
        ({"role": "tool", "content": [{"type": "text"}]}, None),
        ({"role": "tool", "content": ["bare string part"]}, None),
        ("not a message", None),
        (None, None),
    ],
)
def test_content_text(message: Any, expected: str | None) -> None:
    assert content_text(message) == expected
    assert OPENAI_CHAT.result_text(message) == expected


def test_with_content_copies_every_field_but_content() -> None:
    original = {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "read_file",
        "content": [{"type": "text", "text": "old"}],
        "x_vendor": {"nested": [1, 2]},
    }
    snapshot = {**original}
    copy = with_content(original, "new")
    assert OPENAI_CHAT.with_result_text(original, "new") == copy
    assert copy == {**snapshot, "content": "new"}
    assert list(copy) == list(original)  # key order kept
    assert original == snapshot  # the input is not changed
    assert copy is not original


def test_with_content_adds_missing_content() -> None:
    assert with_content({"role": "tool", "tool_call_id": "c"}, "x") == {
        "role": "tool",
        "tool_call_id": "c",
        "content": "x",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0),
        (7, 7),
        (-3, -3),
        (10**30, 10**30),
        (True, None),
        (False, None),
        (1.0, None),
        ("5", None),
        (None, None),
        ([1], None),
    ],
)
def test_int_value_is_an_int_but_not_a_bool(value: Any, expected: int | None) -> None:
    assert int_value(value) == expected


def test_str_field_and_role_of() -> None:
    assert str_field({"k": "v"}, "k") == "v"
    assert str_field({"k": 1}, "k") is None
    assert str_field({"k": "v"}, "other") is None
    assert str_field(["k"], "k") is None
    assert role_of({"role": "tool"}) == "tool"
    assert role_of({"role": ["system"]}) is None  # never hashed or matched
    assert role_of({"content": "x"}) is None
    assert role_of("user") is None


def test_function_of() -> None:
    function = {"name": "f", "arguments": "{}"}
    assert function_of({"id": "a", "function": function}) is function
    assert function_of({"id": "a", "function": "f"}) == {}
    assert function_of({"id": "a"}) == {}
    assert function_of(None) == {}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"content": "plain"}, "plain"),
        ({"content": [{"type": "text", "text": "a"}, {"text": "b"}, {"type": "x"}, "c"]}, "ab"),
        ({"content": [{"type": "image_url", "image_url": {}}, {"text": 3}]}, ""),
        ({"content": None}, ""),
        ({"content": 42}, ""),
        ({}, ""),
        ("not a message", ""),
    ],
)
def test_message_text_is_lenient(message: Any, expected: str) -> None:
    assert message_text(message) == expected
    assert OPENAI_CHAT.pin_facts(message)[2] == expected  # (role, name, text, result_item)


def test_request_model() -> None:
    assert request_model({"model": "gpt-4o"}) == "gpt-4o"
    assert request_model({"model": ""}) == ""
    assert request_model({"model": 7}) == ""
    assert request_model({}) == ""
    assert OPENAI_CHAT.model({"model": "m"}) == "m"


def test_request_stream_only_for_true() -> None:
    assert request_stream({"stream": True})
    for value in (False, None, "true", 1, {"x": 1}):
        assert not request_stream({"stream": value})
    assert not request_stream({})
    assert OPENAI_CHAT.stream({"stream": True}) and not OPENAI_CHAT.stream({})


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"max_completion_tokens": 500, "max_tokens": 900}, 500),
        ({"max_tokens": 900}, 900),
        ({"max_completion_tokens": -1, "max_tokens": 900}, 900),  # the first usable one
        ({"max_completion_tokens": True, "max_tokens": 5}, 5),
        ({"max_tokens": 0}, 0),
        ({"max_tokens": -3}, None),
        ({"max_tokens": "100"}, None),
        ({"max_tokens": 100.0}, None),
        ({"max_tokens": None}, None),
        ({}, None),
    ],
)
def test_output_limit(body: dict[str, Any], expected: int | None) -> None:
    assert output_limit(body) == expected
    assert OPENAI_CHAT.output_limit(body) == expected


@pytest.mark.parametrize(
    "parts",
    [
        [{"type": "text", "text": "a"}],
        [{"type": "text", "text": ""}, {"type": "text", "text": "é✓ \ud800", "x": [1, None]}],
        [
            {"text": "head ", "type": "text"},
            {"type": "text", "text": "middle", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": " tail"},
        ],
    ],
)
def test_content_parts_rebuild_exactly_from_joined_text_and_layout(
    parts: list[dict[str, Any]],
) -> None:
    message = {"role": "tool", "content": parts}
    layout = parts_layout(message)
    text = content_text(message)
    assert layout is not None and text is not None
    rebuilt = parts_from_layout(text, layout)
    assert rebuilt == parts
    assert [list(p) for p in rebuilt] == [list(p) for p in parts]  # key order too


@pytest.mark.parametrize(
    "content", ["plain", None, [], [{"type": "image_url", "image_url": {}}], [{"type": "text"}]]
)
def test_no_layout_for_anything_but_text_parts(content: Any) -> None:
    assert parts_layout({"role": "tool", "content": content}) is None
    assert parts_layout("not a message") is None
