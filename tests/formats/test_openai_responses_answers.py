"""The Responses answer side: synthetic tools and calls, round items, usage, error events."""

from __future__ import annotations

import json
from typing import Any

from proxy.formats.openai_responses import OPENAI_RESPONSES as WIRE
from proxy.formats.openai_responses import answers
from proxy.synthetic.names import names_avoiding
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.registry import tool_specs
from proxy.synthetic.search import SEARCH_TOOL

CLIENT_TOOL = {"type": "function", "name": "grep", "parameters": {"type": "object"}}
OWN = WIRE.synthetic_tools(tool_specs(20_000))
REASONING = {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc", "summary": []}
MESSAGE = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "checking"}],
}


def fc(name: str, call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": '{"artifact_id": "art_1"}',
    }


def answer(*output: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "output": list(output),
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }


def test_tools_renamed_away_from_a_client_tool_of_the_same_name() -> None:
    body = {"tools": [CLIENT_TOOL, *OWN]}
    same, names = WIRE.with_unique_tool_names(body)
    assert same is body and not names.renamed
    clash = {"name": READ_TOOL, "type": "function", "parameters": {}}
    renamed, names = WIRE.with_unique_tool_names({"tools": [clash, *OWN]})
    assert names.renamed and renamed["tools"][0] == clash
    assert renamed["tools"][1]["name"] == names.own(READ_TOOL) != READ_TOOL
    assert READ_TOOL in renamed["tools"][1]["description"]


def test_without_synthetic_tools() -> None:
    names = names_avoiding(set())
    body = {"tools": [CLIENT_TOOL, *OWN], "tool_choice": {"type": "function", "name": READ_TOOL}}
    assert WIRE.without_synthetic_tools(body, names) == {"tools": [CLIENT_TOOL]}
    only = {"tools": OWN, "tool_choice": "auto", "parallel_tool_calls": True, "model": "m"}
    assert WIRE.without_synthetic_tools(only, names) == {"model": "m"}


def test_synthetic_only_returns_the_whole_output_and_its_calls() -> None:
    names = names_avoiding(set())
    payload = answer(REASONING, MESSAGE, fc(READ_TOOL, "r1"), fc(SEARCH_TOOL, "s1"))
    content, calls = WIRE.synthetic_only(payload, names) or (None, [])
    assert content == payload["output"] and [c["call_id"] for c in calls] == ["r1", "s1"]
    assert WIRE.synthetic_only(answer(MESSAGE), names) is None
    mixed = answer(fc("grep", "g1"), fc(READ_TOOL, "r1"))
    assert WIRE.synthetic_only(mixed, names) is None
    assert [c["call_id"] for c in WIRE.synthetic_calls(mixed, names)] == ["r1"]
    assert WIRE.synthetic_calls(answer(fc(READ_TOOL, "r1")), names) == []


def test_strip_removes_synthetic_calls_with_the_reasoning_before_them() -> None:
    names = names_avoiding(set())
    client_reasoning = {**REASONING, "id": "rs_client"}
    payload = answer(client_reasoning, fc("grep", "g1"), REASONING, fc(READ_TOOL, "r1"), MESSAGE)
    assert WIRE.strip_synthetic_calls(payload, names) is True
    assert payload["output"] == [client_reasoning, fc("grep", "g1"), MESSAGE]
    assert WIRE.strip_synthetic_calls(payload, names) is False


def test_round_items_keep_reasoning_and_use_the_unique_ids() -> None:
    output = [REASONING, fc(READ_TOOL, "r1")]
    renamed = {**fc(READ_TOOL, "r1"), "call_id": "call_ctxproxy_1_0"}
    items = WIRE.round_items(output, [renamed], ["page"])
    assert items == [
        REASONING,
        renamed,
        {"type": "function_call_output", "call_id": "call_ctxproxy_1_0", "output": "page"},
    ]
    assert WIRE.round_items(None, [renamed], ["p"])[0] == renamed


def test_round_items_put_each_output_right_after_the_model_run_of_its_call() -> None:
    """Hostile run: junk in an upstream output (`5`, `null`, `{}`, an item of another kind)
    between or after the calls went back between the call and its output, and the next body
    had a call without its output."""
    unknown = {"type": "mcp_list_tools", "id": "mcpl_1", "tools": []}
    first, second = fc(READ_TOOL, "r1"), fc(READ_TOOL, "r2")
    output = [REASONING, first, 5, unknown, None, {}, MESSAGE, second, "x", {"role": "user"}]
    items = WIRE.round_items(output, [first, second], ["p1", "p2"])
    assert items == [
        REASONING, first, MESSAGE, second,
        {"type": "function_call_output", "call_id": "r1", "output": "p1"},
        {"type": "function_call_output", "call_id": "r2", "output": "p2"},
        unknown, {"role": "user"},
    ]  # fmt: skip
    assert WIRE.parse(items[:-2]).problems == ()


def test_mixed_content_is_the_synthetic_calls_with_the_reasoning_before_each() -> None:
    names = names_avoiding(set())
    own = {**REASONING, "id": "rs_own"}
    payload = answer(REASONING, fc("grep", "c1"), own, fc(READ_TOOL, "r1"), MESSAGE,
                     fc(SEARCH_TOOL, "s1"))  # fmt: skip
    assert WIRE.mixed_content(payload, names) == [own, fc(READ_TOOL, "r1"), fc(SEARCH_TOOL, "s1")]
    items = WIRE.round_items(WIRE.mixed_content(payload, names), [fc(READ_TOOL, "r1"),
                             fc(SEARCH_TOOL, "s1")], ["p1", "p2"])  # fmt: skip
    assert [i["type"] for i in items] == ["reasoning", "function_call", "function_call",
                                          "function_call_output", "function_call_output"]
    assert WIRE.mixed_content({"output": 5}, names) == []


def test_call_accessors_and_ids_in_use() -> None:
    call = fc(READ_TOOL, "r1")
    assert (WIRE.call_id(call), WIRE.call_name(call)) == ("r1", READ_TOOL)
    assert json.loads(str(WIRE.call_arguments(call))) == {"artifact_id": "art_1"}
    assert WIRE.call_arguments({"arguments": 3}) == ""
    assert WIRE.with_call_id(call, "x")["call_id"] == "x" and call["call_id"] == "r1"
    items = [call, {"type": "function_call_output", "call_id": "r0", "output": ""}]
    assert WIRE.call_ids(items) == {"r1", "r0"}


def test_usage_summed_and_prompt_tokens() -> None:
    total = WIRE.add_usage(
        None, {"input_tokens": 5, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 1}}
    )
    total = WIRE.add_usage(
        total, {"input_tokens": 7, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 0}}
    )
    assert total == {
        "input_tokens": 12,
        "output_tokens": 5,
        "input_tokens_details": {"cached_tokens": 1},
    }
    assert WIRE.prompt_tokens(total) == 12 and WIRE.prompt_tokens({"input_tokens": -1}) is None
    payload = answer()
    WIRE.with_usage(payload, total)
    assert WIRE.answer_usage(payload) == total
    assert WIRE.multiple_choices({"n": 3}) is False


def test_a_background_response_is_never_continued_by_the_proxy() -> None:
    """Hostile review: with `background: true` the provider finishes the response on its own,
    so a read call in it would reach the client that polls for it."""
    assert WIRE.multiple_choices({"background": True}) is True
    assert WIRE.multiple_choices({"background": False}) is False
    assert WIRE.multiple_choices({"background": "true"}) is False


def test_conversation_copies_the_input() -> None:
    items = [MESSAGE]
    assert answers.conversation({"input": items}) == items
    assert answers.conversation({"input": items}) is not items
    assert answers.conversation({"input": "q"}) == [{"role": "user", "content": "q"}]
