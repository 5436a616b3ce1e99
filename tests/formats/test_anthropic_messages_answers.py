"""`formats.anthropic_messages.answers`: the answer side of the synthetic-tool loop."""

from __future__ import annotations

from typing import Any

from proxy.formats.anthropic_messages import answers
from proxy.formats.anthropic_messages.items import join
from proxy.synthetic.names import ToolNames

THINK = {"type": "thinking", "thinking": "t", "signature": "s"}


def use(call_id: str, name: str, input: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": input or {}}


def answer(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "content": list(blocks), "stop_reason": "tool_use"}


def test_synthetic_only_gives_the_other_blocks_and_the_calls() -> None:
    payload = answer(THINK, use("a", "read_context_artifact"))
    assert answers.synthetic_only(payload) == ([THINK], [use("a", "read_context_artifact")])
    assert answers.synthetic_only(answer(THINK, use("b", "bash"))) is None
    mixed = answer(use("a", "read_context_artifact"), use("b", "bash"))
    assert answers.synthetic_only(mixed) is None
    assert answers.synthetic_calls(mixed) == [use("a", "read_context_artifact")]


def test_strip_removes_synthetic_calls_and_ends_the_turn_when_none_is_left() -> None:
    payload = answer({"type": "text", "text": "x"}, use("a", "read_context_artifact"))
    assert answers.strip_synthetic_calls(payload)
    assert payload == {
        "type": "message",
        "content": [{"type": "text", "text": "x"}],
        "stop_reason": "end_turn",
    }
    mixed = answer(use("a", "read_context_artifact"), use("b", "bash"))
    assert answers.strip_synthetic_calls(mixed)
    assert mixed["stop_reason"] == "tool_use" and mixed["content"] == [use("b", "bash")]


def test_round_items_keep_thinking_first_and_answer_every_call() -> None:
    calls = [
        use("a", "read_context_artifact"),
        {**use("b", "search_context_artifact"), "input": '{"pattern": "x"}'},
    ]
    items = answers.round_items([THINK], calls, ["page", "matches"])
    messages = join(items)
    assert messages[0] == {
        "role": "assistant",
        "content": [THINK, calls[0], {**calls[1], "input": {"pattern": "x"}}],
    }
    assert messages[1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "page"},
            {"type": "tool_result", "tool_use_id": "b", "content": "matches"},
        ],
    }
    assert answers.call_ids(items) == {"a", "b"}


def test_tools_are_renamed_away_from_client_tools_and_removed() -> None:
    body = {
        "tools": [
            {"name": "read_context_artifact", "input_schema": {}},
            {"name": "read_context_artifact", "description": "ours", "input_schema": {}},
            {"name": "search_context_artifact", "input_schema": {}},
        ],
        "tool_choice": {"type": "tool", "name": "read_context_artifact_ctxproxy"},
    }
    renamed, names = answers.with_unique_tool_names(body)
    assert names.renamed and names.own("read_context_artifact") == "read_context_artifact_ctxproxy"
    assert [t["name"] for t in renamed["tools"]] == [
        "read_context_artifact",
        "read_context_artifact_ctxproxy",
        "search_context_artifact",
    ]
    without = answers.without_synthetic_tools(renamed, names)
    assert [t["name"] for t in without["tools"]] == ["read_context_artifact"]
    assert "tool_choice" not in without
    only = answers.without_synthetic_tools(
        {"tools": renamed["tools"][1:], "tool_choice": {"type": "auto"}}, names
    )
    # no client tool left: the tools stay defined (the history holds tool blocks), none callable
    assert only["tools"] == renamed["tools"][1:]
    assert only["tool_choice"] == {"type": "none"}
    plain = {"tools": [{"name": "dump"}]}
    assert answers.without_synthetic_tools(plain, names) == plain


def test_call_accessors() -> None:
    call = use("a", "read_context_artifact", {"artifact_id": "x"})
    assert answers.call_id(call) == "a"
    assert answers.call_name(call) == "read_context_artifact"
    assert answers.call_arguments(call) == {"artifact_id": "x"}
    assert answers.with_call_id(call, "z")["id"] == "z" and call["id"] == "a"
    assert not answers.multiple_choices({"n": 3})
    assert answers.is_synthetic_call(call, ToolNames())
