"""`proxy.formats.openai_chat.answers`: the tools a round offers and how answers are filtered."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.artifacts.read_tool import READ_TOOL, SEARCH_TOOL, tool_specs
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.answers import (
    strip_synthetic_calls,
    synthetic_only,
    without_synthetic_tools,
)

SCOPE = "tenant-a"
CLIENT_TOOL = {
    "type": "function",
    "function": {"name": "run_shell", "parameters": {"type": "object", "properties": {}}},
}
MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "what was in the log?"},
]


def choice_of(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def body_with(client_tools: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "messages": copy.deepcopy(MESSAGES),
        "tools": [*copy.deepcopy(client_tools), *OPENAI_CHAT.synthetic_tools(tool_specs(4000))],
        **extra,
    }


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def call(call_id: str, name: str, arguments: Any = "{}") -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


# -- without_synthetic_tools -------------------------------------------------------------------


@pytest.mark.parametrize("choice", [choice_of(READ_TOOL), choice_of(SEARCH_TOOL)])
def test_a_tool_choice_naming_a_synthetic_tool_goes_with_it(choice: dict[str, Any]) -> None:
    body = body_with([CLIENT_TOOL], tool_choice=choice, parallel_tool_calls=False)
    before = copy.deepcopy(body)
    out = without_synthetic_tools(body)
    assert tool_names(out) == ["run_shell"]
    assert "tool_choice" not in out
    assert out["parallel_tool_calls"] is False
    assert out["messages"] == MESSAGES
    assert body == before  # a copy: the prepared body is not changed


@pytest.mark.parametrize("choice", ["auto", "required", "none", choice_of("run_shell")])
def test_a_client_tool_choice_is_kept(choice: Any) -> None:
    out = without_synthetic_tools(body_with([CLIENT_TOOL], tool_choice=choice))
    assert tool_names(out) == ["run_shell"]
    assert out["tool_choice"] == choice


@pytest.mark.parametrize("choice", ["auto", "required", choice_of(READ_TOOL), None])
def test_no_client_tool_left_removes_tools_choice_and_parallel_calls(choice: Any) -> None:
    extra = {"parallel_tool_calls": True} | ({} if choice is None else {"tool_choice": choice})
    out = without_synthetic_tools(body_with([], **extra))
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(out)
    assert out == {"model": "gpt-4o", "messages": MESSAGES}


def test_a_body_without_a_tools_list_is_left_alone() -> None:
    body = {"model": "m", "messages": [], "tool_choice": "auto", "parallel_tool_calls": True}
    assert without_synthetic_tools(body) == body
    assert without_synthetic_tools({**body, "tools": None})["tool_choice"] == "auto"


# -- answers -----------------------------------------------------------------------------------


def answer(*messages: dict[str, Any], finish: str = "tool_calls") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": i, "message": m, "finish_reason": finish} for i, m in enumerate(messages)
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def message(content: Any, *calls: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = list(calls)
    return out


READ = call("s1", READ_TOOL, '{"artifact_id": "art_x"}')
SEARCH = call("s2", SEARCH_TOOL, '{"artifact_id": "art_x", "pattern": "p"}')
SHELL = call("k1", "run_shell", "{}")


def test_synthetic_only_on_a_synthetic_only_answer() -> None:
    assert synthetic_only(answer(message("checking", READ, SEARCH))) == (
        "checking",
        [READ, SEARCH],
    )
    assert synthetic_only(answer(message(None, READ))) == (None, [READ])
    assert synthetic_only(answer(message([{"type": "text", "text": "x"}], READ))) == (None, [READ])


@pytest.mark.parametrize(
    "payload",
    [
        answer(message("mixed", READ, SHELL)),
        answer(message(None, SHELL)),
        answer(message("plain text"), finish="stop"),
        answer(message(None, READ), message(None, READ)),  # n > 1
        answer(),
        {"error": {"message": "x"}},
        {"choices": [{"message": {"tool_calls": []}}]},
        {"choices": [{"message": {"tool_calls": [READ, "junk"]}}]},
        {"choices": ["junk"]},
        {"choices": [{"message": "junk"}]},
    ],
)
def test_synthetic_only_is_none_otherwise(payload: dict[str, Any]) -> None:
    assert synthetic_only(payload) is None


def test_strip_keeps_client_calls_of_a_mixed_answer() -> None:
    payload = answer(message("both", READ, SHELL, SEARCH))
    assert strip_synthetic_calls(payload) is True
    choice = payload["choices"][0]
    assert choice["message"] == message("both", SHELL)
    assert choice["finish_reason"] == "tool_calls"
    assert payload["usage"]["total_tokens"] == 2


def test_strip_on_several_choices_treats_each_one() -> None:
    payload = answer(
        message(None, READ),
        message("client only", SHELL),
        message("mixed", SEARCH, SHELL),
        message("text"),
    )
    payload["choices"][3]["finish_reason"] = "length"
    assert strip_synthetic_calls(payload) is True
    first, second, third, fourth = payload["choices"]
    assert first["message"] == {"role": "assistant", "content": None}
    assert first["finish_reason"] == "stop"
    assert second["message"] == message("client only", SHELL)
    assert second["finish_reason"] == "tool_calls"
    assert third["message"] == message("mixed", SHELL)
    assert third["finish_reason"] == "tool_calls"
    assert fourth["message"] == message("text") and fourth["finish_reason"] == "length"


@pytest.mark.parametrize(
    "payload",
    [
        answer(message("client", SHELL)),
        answer(message("text"), finish="stop"),
        {"choices": None},
        {"choices": ["junk", {"message": None}, {"message": {"tool_calls": "junk"}}]},
        {},
    ],
)
def test_strip_without_synthetic_calls_changes_nothing(payload: dict[str, Any]) -> None:
    before = copy.deepcopy(payload)
    assert strip_synthetic_calls(payload) is False
    assert payload == before
