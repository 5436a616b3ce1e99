"""Responses `input` items -> system prefix, turns, units (reasoning with its calls), problems."""

from __future__ import annotations

from typing import Any

from proxy.formats.openai_responses.conversation import canonical_item, parse_conversation


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reasoning(rid: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": rid, "encrypted_content": "enc", "summary": []}


def call(call_id: str, kind: str = "function_call") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "name": "f", "arguments": "{}"}


def output(call_id: str, kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "output": "result"}


def spans(items: list[Any]) -> list[tuple[int, int, str, tuple[str, ...], int]]:
    conversation = parse_conversation(items)
    assert conversation.ok, conversation.problems
    return [(u.start, u.end, u.kind, u.tool_call_ids, u.call_items) for u in conversation.units]


def test_prefix_turns_and_a_reasoning_call_output_unit() -> None:
    items = [
        {"type": "message", "role": "developer", "content": "be brief"},
        {"role": "system", "content": "rules"},
        user("q"),
        reasoning("rs_1"),
        call("c1"),
        output("c1"),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        user("q2"),
    ]
    conversation = parse_conversation(items)
    assert conversation.system_end == 2
    assert [(t.start, t.end) for t in conversation.turns] == [(2, 7), (7, 8)]
    assert spans(items) == [
        (2, 3, "message", (), 1),
        (3, 6, "tool_exchange", ("c1",), 2),
        (6, 7, "message", (), 1),
        (7, 8, "message", (), 1),
    ]
    assert list(conversation.units[1].result_indices) == [5]


def test_parallel_calls_with_reasoning_and_a_message_are_one_unit() -> None:
    items = [
        user("q"),
        reasoning("rs_1"),
        {"type": "message", "role": "assistant", "content": "checking"},
        call("a"),
        reasoning("rs_2"),
        call("b"),
        output("b"),
        output("a"),
    ]
    assert spans(items) == [(0, 1, "message", (), 1), (1, 8, "tool_exchange", ("a", "b"), 5)]


def test_every_paired_call_kind_and_builtin_calls_kept_whole() -> None:
    items = [
        user("q"),
        call("c", "custom_tool_call"),
        output("c", "custom_tool_call_output"),
        call("k", "computer_call"),
        output("k", "computer_call_output"),
        {"type": "local_shell_call", "call_id": "s", "action": {"command": ["ls"]}},
        {"type": "local_shell_call_output", "id": "s", "output": "a.txt"},
        reasoning("rs_web"),
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "file_search_call", "id": "fs_1", "queries": ["x"], "status": "completed"},
    ]
    assert spans(items) == [
        (0, 1, "message", (), 1),
        (1, 3, "tool_exchange", ("c",), 1),
        (3, 5, "tool_exchange", ("k",), 1),
        (5, 7, "tool_exchange", ("s",), 1),
        (7, 9, "message", (), 1),  # reasoning stays with the item it precedes
        (9, 10, "message", (), 1),
    ]


def test_a_string_of_model_items_before_the_first_user_is_a_leading_turn() -> None:
    items = [{"role": "assistant", "content": "hello"}, user("q")]
    conversation = parse_conversation(items)
    assert [t.leading for t in conversation.turns] == [True, False]


def test_trailing_reasoning_is_a_unit_of_its_own() -> None:
    assert spans([user("q"), reasoning("r1"), reasoning("r2")]) == [
        (0, 1, "message", (), 1),
        (1, 3, "message", (), 1),
    ]


def test_problems_are_named_by_input_index() -> None:
    items = [user("q"), output("x"), call("a"), call("a"), output("z"), "junk", {"foo": 1}]
    reasons = [p.reason for p in parse_conversation(items).problems]
    assert reasons == [
        "input[1]: function_call_output for 'x' does not follow its call",
        "input[2]: call 'a' has no output before input[5]",
        "input[3]: call id 'a' appears more than once",
        "input[4]: output for 'z' has no matching call before it",
        "input[5]: item is not an object",
        "input[6]: item has no 'type' nor 'role'",
    ]
    assert parse_conversation(items).problems[0].param == "input[1]"


def test_an_output_answering_twice_and_one_without_call_id() -> None:
    items = [user("q"), call("a"), output("a"), output("a"), {"type": "function_call_output"}]
    reasons = [p.reason for p in parse_conversation(items).problems]
    assert reasons == [
        "input[3]: output for 'a' answers a call twice",
        "input[4]: function_call_output has no string 'call_id'",
    ]


def test_canonical_ignores_ids_statuses_and_the_typeless_message_form() -> None:
    typed = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": "hi"}],
    }
    assert canonical_item(typed) == canonical_item({"role": "assistant", "content": "hi"})
    assert canonical_item(output("a")) != canonical_item(output("b"))
    other = {**reasoning("r"), "encrypted_content": "x"}
    assert canonical_item(reasoning("r")) != canonical_item(other)


def test_a_developer_or_system_message_after_the_prefix_is_an_instruction_unit() -> None:
    items = [
        user("q"),
        {"type": "message", "role": "developer", "content": "<environment_context/>"},
        call("c1"),
        output("c1"),
        {"role": "system", "content": [{"type": "input_text", "text": "now in review mode"}]},
        {"type": "item_reference", "id": "msg_1"},
    ]
    conversation = parse_conversation(items)
    assert conversation.ok and conversation.system_end == 0
    assert [(u.start, u.instruction) for u in conversation.units] == [
        (0, False), (1, True), (2, False), (4, True), (5, False),
    ]  # fmt: skip


def test_codex_additional_tools_and_developer_messages_are_the_prefix() -> None:
    """Codex 0.171 sends its tool definitions as an `additional_tools` item in the developer
    role, before its developer messages: all of them are the protected prefix, and one that
    comes later is an instruction unit."""
    tools = {"type": "additional_tools", "role": "developer", "tools": [{"type": "namespace"}]}
    items = [
        tools,
        {"type": "message", "role": "developer", "content": "You are Codex."},
        user("q"),
        {**tools, "tools": []},
    ]
    conversation = parse_conversation(items)
    assert conversation.ok and conversation.system_end == 2
    assert [(u.start, u.instruction) for u in conversation.units] == [(2, False), (3, True)]
    assert canonical_item(tools) != canonical_item({**tools, "tools": []})


def test_the_providers_compaction_item_is_kept_as_the_prefix_or_an_instruction() -> None:
    """`/v1/responses/compact` answers with a `compaction` item (encrypted) that stands for the
    whole conversation before it: leading, it is part of the protected prefix; later, an
    instruction unit; never a unit a step may drop or summarise."""
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB" + "x" * 80}
    leading = parse_conversation([compaction, user("q"), call("c1"), output("c1")])
    assert leading.ok and leading.system_end == 1
    later = parse_conversation([user("q"), call("c1"), output("c1"), compaction, user("more")])
    assert later.ok
    assert [(u.start, u.instruction) for u in later.units] == [
        (0, False), (1, False), (3, True), (4, False),
    ]  # fmt: skip
