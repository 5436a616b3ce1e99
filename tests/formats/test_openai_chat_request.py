"""Tests for proxy.formats.openai_chat.request: the Chat Completions `WireFormat` adapter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from shared_tokens import counter_for

from proxy.engine.conversation import Unit
from proxy.engine.wire import PinFacts, WireFormat
from proxy.errors import ErrorCode, ProxyError
from proxy.formats import FORMATS
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.synthetic.read import HARD_MAX_PAGE_CHARS, READ_TOOL
from proxy.synthetic.registry import tool_specs
from proxy.synthetic.search import SEARCH_TOOL
from proxy.tokens.counters import REPLY_PRIMER

COUNTER = counter_for("gpt-4o")


def tool_definitions(max_page_chars: int) -> list[Any]:
    return OPENAI_CHAT.synthetic_tools(tool_specs(max_page_chars))


def call(call_id: str, name: Any = "read_file") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_registered_under_its_name() -> None:
    wire: WireFormat = OPENAI_CHAT  # type-checked against the engine's Protocol
    assert FORMATS["openai_chat"] is wire
    assert wire.name == "openai_chat" and wire.items_param == "messages"


# -- request facts -----------------------------------------------------------------------------


def test_items_are_the_messages_list_itself() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert OPENAI_CHAT.items({"messages": messages}) is messages


@pytest.mark.parametrize("body", [{}, {"messages": []}, {"messages": {"role": "user"}}])
def test_items_missing_or_empty_is_an_invalid_request(body: dict[str, Any]) -> None:
    with pytest.raises(ProxyError) as caught:
        OPENAI_CHAT.items(body)
    assert caught.value.code == ErrorCode.invalid_request
    assert caught.value.message == "'messages' must be a non-empty array"
    assert caught.value.param == "messages"


def test_invalid_error_names_the_first_problem_and_lists_all() -> None:
    messages = [{"role": "user"}, {"role": "tool", "tool_call_id": "x"}, 5]
    problems = parse_conversation(messages).problems
    error = OPENAI_CHAT.invalid_error(problems)
    assert error.code == ErrorCode.invalid_messages
    assert error.message == problems[0].reason
    assert error.param == "messages[1]"
    assert error.details == {
        "problems": [
            {
                "index": 1,
                "tool_call_id": "x",
                "reason": "messages[1]: tool result for 'x' does not follow an assistant "
                "message with tool_calls",
            },
            {"index": 2, "tool_call_id": None, "reason": "messages[2]: message is not an object"},
        ]
    }


# -- items -------------------------------------------------------------------------------------


def test_a_tool_or_legacy_function_message_is_a_tool_result() -> None:
    assert OPENAI_CHAT.is_tool_result({"role": "tool", "tool_call_id": "c1", "content": "x"})
    assert OPENAI_CHAT.is_tool_result({"role": "function", "name": "f", "content": "x"})
    for item in ({"role": "user", "content": "x"}, {"role": "assistant"}, {"role": "FUNCTION"}):
        assert not OPENAI_CHAT.is_tool_result(item)
    assert not OPENAI_CHAT.is_tool_result("function")


def test_result_meta_is_the_tool_call_id() -> None:
    assert OPENAI_CHAT.result_meta({"role": "tool", "tool_call_id": "c1"}) == {"tool_call_id": "c1"}
    assert OPENAI_CHAT.result_meta({"role": "function", "name": "f"}) == {"tool_call_id": None}


def test_result_meta_keeps_the_layout_of_content_parts() -> None:
    parts = [
        {"type": "text", "text": "first part, "},
        {"text": "second", "type": "text", "cache_control": {"type": "ephemeral"}},
    ]
    meta = OPENAI_CHAT.result_meta({"role": "tool", "tool_call_id": "c1", "content": parts})
    assert meta == {
        "tool_call_id": "c1",
        "content_parts": [
            {"span": [0, 12], "part": {"type": "text", "text": None}},
            {
                "span": [12, 18],
                "part": {"text": None, "type": "text", "cache_control": {"type": "ephemeral"}},
            },
        ],
    }


def test_tool_names_resolve_within_the_exchange() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [call("a", "read_file"), call("b", None)]},
        {"role": "tool", "tool_call_id": "b", "content": "x"},
        {"role": "tool", "tool_call_id": "a", "content": "y", "name": "ignored"},
        {"role": "assistant", "tool_calls": [call("a", "grep"), {"id": "z", "function": 3}]},
        {"role": "tool", "tool_call_id": "a", "content": "z"},
        {"role": "tool", "tool_call_id": "z", "content": "z", "name": "own_name"},
    ]
    units = parse_conversation(messages).units
    # a null name is stringified (as it always was); a result's own name never overrides a call's
    assert OPENAI_CHAT.tool_names(messages, units[1:2]) == {2: "None", 3: "read_file"}
    assert OPENAI_CHAT.tool_names(messages, units[2:]) == {5: "grep", 6: "own_name"}
    assert OPENAI_CHAT.tool_names(messages, units[:1]) == {}
    assert OPENAI_CHAT.tool_names(messages, units) == {
        2: "None",
        3: "read_file",
        5: "grep",
        6: "own_name",
    }


def test_tool_names_of_a_legacy_function_result_is_its_name() -> None:
    messages = [
        {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "42"},
    ]
    unit = Unit(0, 2, "tool_exchange")
    assert OPENAI_CHAT.tool_names(messages, [unit]) == {1: "f"}


def test_a_legacy_function_result_with_an_odd_tool_call_id_is_named_by_its_name() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "42", "tool_call_id": ["not", "a", "str"]},
    ]
    parsed = parse_conversation(messages)
    assert parsed.problems == ()
    assert OPENAI_CHAT.tool_names(messages, parsed.units) == {2: "f"}


@pytest.mark.parametrize(
    ("message", "facts"),
    [
        ({"role": "user", "content": "hi"}, ("user", None, "hi", False)),
        (
            {"role": "tool", "tool_call_id": "a", "name": "f", "content": "[ctxproxy: x]"},
            ("tool", "f", "[ctxproxy: x]", True),
        ),
        # a legacy function result is not told apart (as before the adapter existed)
        ({"role": "function", "name": "f", "content": "r"}, ("function", "f", "r", False)),
        ({"role": ["user"], "name": 5, "content": None}, (None, None, "", False)),
        # an item that is not an object is never a tool result
        ("not a message", (None, None, "", False)),
    ],
)
def test_pin_facts(message: Any, facts: PinFacts) -> None:
    assert OPENAI_CHAT.pin_facts(message) == facts


def test_notice_item() -> None:
    assert OPENAI_CHAT.notice_item("developer", "text") == {"role": "developer", "content": "text"}


# -- tools, counting, rendering ----------------------------------------------------------------


def test_synthetic_tools_are_function_tools_with_caps() -> None:
    tools = tool_definitions(5000)
    assert [t["function"]["name"] for t in tools] == [READ_TOOL, SEARCH_TOOL]
    for tool in tools:
        assert tool["type"] == "function"
        fn = tool["function"]
        assert "untrusted" in fn["description"].lower()
        assert fn["parameters"]["type"] == "object"
        assert "artifact_id" in fn["parameters"]["required"]
    read_props = tools[0]["function"]["parameters"]["properties"]
    assert read_props["max_chars"]["maximum"] == 5000
    assert read_props["offset"]["minimum"] == 0
    assert (
        tool_definitions(10**6)[0]["function"]["parameters"]["properties"]["max_chars"]["maximum"]
        == HARD_MAX_PAGE_CHARS
    )
    assert tools[1]["function"]["parameters"]["required"] == ["artifact_id", "pattern"]
    json.dumps(tools)  # plain JSON
    assert tools[0]["function"]["name"] == READ_TOOL  # keys in the order OpenAI documents
    assert list(tools[0]) == ["type", "function"]
    assert list(tools[0]["function"]) == ["name", "description", "parameters"]


TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def test_overhead_tokens_count_tools_choice_and_primer() -> None:
    body = {"messages": [], "tools": TOOLS, "tool_choice": "auto"}
    assert OPENAI_CHAT.overhead_tokens({}, COUNTER) == REPLY_PRIMER
    assert OPENAI_CHAT.overhead_tokens(body, COUNTER) == (
        COUNTER.count_tools(TOOLS, "auto") + REPLY_PRIMER
    )
    added = tool_definitions(1000)
    assert OPENAI_CHAT.overhead_tokens(body, COUNTER, added) == (
        COUNTER.count_tools(TOOLS + added, "auto") + REPLY_PRIMER
    )


@pytest.mark.parametrize(
    "tool_choice",
    [{"type": "function", "function": {"name": "f"}}, "none"],
)
def test_a_named_or_none_tool_choice_adds_to_the_overhead(tool_choice: Any) -> None:
    body = {"messages": [], "tools": TOOLS, "tool_choice": tool_choice}
    assert OPENAI_CHAT.overhead_tokens(body, COUNTER) == (
        COUNTER.count_tools(TOOLS, tool_choice) + REPLY_PRIMER
    )
    assert OPENAI_CHAT.overhead_tokens(body, COUNTER) > OPENAI_CHAT.overhead_tokens(
        {"messages": [], "tools": TOOLS}, COUNTER
    )
    # with no tools at all, the choice alone is still counted
    assert OPENAI_CHAT.overhead_tokens({"tool_choice": tool_choice}, COUNTER) > REPLY_PRIMER


def test_overhead_with_added_tools_counts_a_non_list_tools_as_none() -> None:
    body = {"tools": "not a list"}
    assert OPENAI_CHAT.overhead_tokens(body, COUNTER) > REPLY_PRIMER
    assert OPENAI_CHAT.overhead_tokens(body, COUNTER, []) == REPLY_PRIMER


def test_render_replaces_messages_and_appends_tools_keeping_every_field() -> None:
    body = {"model": "m", "messages": [{"role": "user"}], "tools": TOOLS, "x_vendor": [1]}
    snapshot = json.dumps(body)
    new_messages = [{"role": "user", "content": "new"}]
    added = tool_definitions(1000)
    rendered = OPENAI_CHAT.render(body, new_messages, added)
    assert rendered == {**body, "messages": new_messages, "tools": TOOLS + added}
    assert list(rendered) == list(body)
    assert json.dumps(body) == snapshot  # the input is not changed
    plain = OPENAI_CHAT.render(body, new_messages, [])
    assert plain["tools"] is TOOLS
    odd = OPENAI_CHAT.render({"tools": {"x": 1}}, [], added)
    assert odd["tools"] == added
    assert "tools" not in OPENAI_CHAT.render({}, [], [])


def test_encode_is_compact_json() -> None:
    assert OPENAI_CHAT.encode({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()



def test_extended_prompt_cache_retention_asks_for_a_day() -> None:
    base = {"model": "gpt-5.1", "messages": [{"role": "user", "content": "hi"}]}
    assert OPENAI_CHAT.cache_ttl(base) is None
    assert OPENAI_CHAT.cache_ttl({**base, "prompt_cache_retention": "in_memory"}) is None
    assert OPENAI_CHAT.cache_ttl({**base, "prompt_cache_retention": "24h"}) == 24 * 3600
