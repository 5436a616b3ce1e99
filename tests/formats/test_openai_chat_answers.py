"""`proxy.formats.openai_chat.answers`: the tools a round offers and how answers are filtered."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from chat_bodies import (
    CLIENT_TOOL,
    MESSAGES,
    READ,
    SEARCH,
    SHELL,
    answer,
    body_with,
    call,
    choice_of,
    message,
    tool_names,
)

from proxy.formats import FORMATS
from proxy.formats.base import ClientFormat
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.answers import (
    call_arguments,
    call_id,
    call_ids,
    call_name,
    conversation,
    mixed_content,
    multiple_choices,
    round_items,
    strip_synthetic_calls,
    synthetic_calls,
    synthetic_only,
    upstream_error_event,
    with_call_id,
    with_unique_tool_names,
    without_synthetic_tools,
)
from proxy.synthetic.names import ToolNames
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL

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
    assert mixed_content(payload) is None  # the proxy's calls go back upstream alone
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


def test_a_plain_text_choice_does_not_stop_the_strip_of_later_choices() -> None:
    payload = answer(message("text"), message("mixed", READ, SHELL))
    assert strip_synthetic_calls(payload) is True
    assert payload["choices"][0]["message"] == message("text")
    assert payload["choices"][1]["message"] == message("mixed", SHELL)


def test_a_mixed_answer_gives_the_proxys_calls_to_execute() -> None:
    assert synthetic_calls(answer(message("both", READ, SHELL, SEARCH))) == [READ, SEARCH]


def test_a_mixed_answer_with_renamed_tools_gives_only_the_renamed_calls() -> None:
    names = ToolNames({READ_TOOL: f"{READ_TOOL}_ctxproxy", SEARCH_TOOL: SEARCH_TOOL})
    own = call("s1", names.own("read_context_artifact"), '{"artifact_id": "art_x"}')
    client = call("k1", READ_TOOL, "{}")  # the client's own tool of that name
    assert synthetic_calls(answer(message(None, client, own)), names) == [own]


@pytest.mark.parametrize(
    "payload",
    [
        answer(message(None, READ, SEARCH)),  # synthetic only: a round of its own, not mixed
        answer(message(None, SHELL)),
        answer(message("plain text"), finish="stop"),
        answer(message(None, READ, SHELL), message(None, READ, SHELL)),  # n > 1
        {"choices": [{"message": "junk"}]},
        {"choices": [{"finish_reason": "stop"}]},
        {"choices": [{"message": {"tool_calls": "junk"}}]},
        {"error": {"message": "x"}},
    ],
)
def test_synthetic_calls_are_none_unless_one_choice_mixes_both(payload: dict[str, Any]) -> None:
    assert synthetic_calls(payload) == []


# -- the format object -------------------------------------------------------------------------


def test_the_openai_chat_adapter_is_a_chat_format_in_the_registry() -> None:
    wire: ClientFormat = OPENAI_CHAT  # mypy checks it in `FORMATS` and the handlers
    assert FORMATS["openai_chat"] is wire
    assert OPENAI_CHAT.synthetic_only is synthetic_only
    assert OPENAI_CHAT.round_items is round_items


# -- the request's tools and choices -----------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "several"),
    [(2, True), (2.5, True), (1, False), (True, False), ("3", False), (None, False)],
)
def test_multiple_choices(n: Any, several: bool) -> None:
    assert multiple_choices({"n": n}) is several


def test_conversation_is_a_copy_of_the_messages() -> None:
    body = body_with([])
    items = conversation(body)
    assert items == MESSAGES and items is not body["messages"]
    assert conversation({"messages": "junk"}) == [] and conversation({}) == []


def test_the_proxys_tools_keep_their_names_without_a_collision() -> None:
    body = body_with([CLIENT_TOOL])
    out, names = with_unique_tool_names(body)
    assert out is body and names == ToolNames()


def test_the_proxys_tools_are_renamed_away_from_a_client_tool() -> None:
    client = {"type": "function", "function": {"name": READ_TOOL, "description": "mine"}}
    body = body_with([client])
    out, names = with_unique_tool_names(body)
    assert names.renamed and names.own(READ_TOOL) == f"{READ_TOOL}_ctxproxy"
    assert names.own(SEARCH_TOOL) == SEARCH_TOOL
    assert tool_names(out) == [READ_TOOL, names.own(READ_TOOL), SEARCH_TOOL]
    renamed = out["tools"][1]["function"]
    assert renamed["description"].endswith(
        f"Notices in this conversation call this tool {READ_TOOL}; the tool of that name here is "
        "another one."
    )
    assert tool_names(body) == [READ_TOOL, READ_TOOL, SEARCH_TOOL]  # the input is not changed


def test_a_renamed_proxy_tool_keeps_its_own_description_before_the_notice() -> None:
    body = body_with([{"type": "function", "function": {"name": SEARCH_TOOL}}])
    own = body["tools"][-1]["function"]["description"]
    out, names = with_unique_tool_names(body)
    assert out["tools"][-1]["function"] == {
        **body["tools"][-1]["function"],
        "name": names.own("search_context_artifact"),
        "description": f"{own} Notices in this conversation call this tool {SEARCH_TOOL}; the "
        "tool of that name here is another one.",
    }


def test_tools_not_ending_with_the_proxys_are_left_alone() -> None:
    body = {"tools": [CLIENT_TOOL, CLIENT_TOOL]}
    assert with_unique_tool_names(body) == (body, ToolNames())
    assert with_unique_tool_names({"tools": None})[1] == ToolNames()


# -- calls and the items of a round ------------------------------------------------------------


def test_call_accessors() -> None:
    made = call("c1", READ_TOOL, '{"artifact_id": "a"}')
    assert (call_id(made), call_name(made), call_arguments(made)) == (
        "c1",
        READ_TOOL,
        '{"artifact_id": "a"}',
    )
    assert call_arguments(call("c2", READ_TOOL, {"artifact_id": "a"})) == {"artifact_id": "a"}
    assert call_arguments(call("c3", READ_TOOL, 7)) == ""
    assert call_id({"id": 5}) is None and call_id("junk") is None
    assert call_name({}) == "None"  # as text, like the loop always read it
    renamed = with_call_id(made, "c9")
    assert renamed == {**made, "id": "c9"} and made["id"] == "c1"


def test_round_items_are_the_assistant_calls_then_one_tool_message_per_call() -> None:
    calls = [call("a", READ_TOOL), call("b", SEARCH_TOOL)]
    assert round_items("checking", calls, ['{"x":1}', '{"y":2}']) == [
        {"role": "assistant", "content": "checking", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "a", "content": '{"x":1}'},
        {"role": "tool", "tool_call_id": "b", "content": '{"y":2}'},
    ]
    with pytest.raises(ValueError):
        round_items(None, calls, ["only one"])


def test_call_ids_of_calls_and_results() -> None:
    messages: list[Any] = [
        {"role": "assistant", "tool_calls": [call("a", "x"), {"id": 3}, "junk"]},
        {"role": "tool", "tool_call_id": "b", "content": ""},
        {"role": "tool", "tool_call_id": None},
        "junk",
        {"role": "assistant", "tool_calls": "junk"},
    ]
    assert call_ids(messages) == {"a", "b"}


def test_call_ids_after_a_message_that_is_not_an_object_are_still_found() -> None:
    messages: list[Any] = ["junk", {"role": "tool", "tool_call_id": "b", "content": ""}]
    assert call_ids(messages) == {"b"}


# -- an upstream's error answer inside a stream ------------------------------------------------


def test_an_upstream_error_envelope_becomes_one_event_as_it_came() -> None:
    body = b'{"error": {"message": "over quota", "code": "429"}}'
    assert upstream_error_event(body) == (
        b'data: {"error":{"message":"over quota","code":"429"}}\n\n'
    )


@pytest.mark.parametrize("body", [b"", b"not json", b'{"error": "text"}', b"[1]", b'{"ok": 1}'])
def test_anything_else_is_not_an_upstream_error_event(body: bytes) -> None:
    assert upstream_error_event(body) is None
