"""Tests for proxy.formats.openai_chat.conversation: `messages` -> system prefix, turns, units and
structural problems (worded `messages[i]: ...`).
Generated inputs: test_openai_chat_conversation_properties.py."""

from __future__ import annotations

import copy
from typing import Any

from proxy.engine.conversation import Conversation, Problem, Turn, Unit
from proxy.formats.openai_chat.conversation import parse_conversation


def sys_(text: str = "be brief") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": text}


def asst(text: str = "ok") -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calls(*ids: Any) -> dict[str, Any]:
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": tool_calls}


def result(call_id: Any, content: str = "r") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def pairs(conv: Conversation) -> list[tuple[int, str | None]]:
    return [(p.index, p.tool_call_id) for p in conv.problems]


# ---------------------------------------------------------------- structure


def test_empty_list() -> None:
    conv = parse_conversation([])
    assert conv == Conversation(0, (), ())
    assert conv.ok and conv.end == 0 and conv.units == () and conv.last_turn is None


def test_system_prefix_is_leading_system_and_developer_messages() -> None:
    msgs = [sys_(), {"role": "developer", "content": "d"}, user(), sys_("late"), asst()]
    conv = parse_conversation(msgs)
    assert conv.system_end == 2
    assert conv.system_indices == range(2)
    # a later system message is an instruction unit of its turn (it opens no turn)
    late = Unit(3, 4, "message", instruction=True)
    assert conv.turns == (Turn(2, 5, (Unit(2, 3, "message"), late, Unit(4, 5, "message"))),)


def test_a_late_developer_message_is_an_instruction_and_a_user_one_is_not() -> None:
    msgs = [user(), {"role": "developer", "content": "d"}, asst(), user("next")]
    units = parse_conversation(msgs).units
    assert [u.instruction for u in units] == [False, True, False, False]


def test_only_system_messages() -> None:
    conv = parse_conversation([sys_(), sys_()])
    assert conv.system_end == 2 and conv.turns == () and conv.end == 2 and conv.ok


def test_turns_start_at_each_user_message() -> None:
    msgs = [sys_(), user("a"), asst(), user("b"), user("c"), asst(), asst()]
    conv = parse_conversation(msgs)
    assert [(t.start, t.end) for t in conv.turns] == [(1, 3), (3, 4), (4, 7)]
    assert all(not t.leading for t in conv.turns)
    assert conv.leading_turn is None
    assert [t.first_message_index for t in conv.turns] == [1, 3, 4]
    assert conv.turns[2].size == 3 and len(conv.turns[2].units) == 3


def test_messages_before_first_user_form_a_leading_turn() -> None:
    msgs = [sys_(), asst("Hello! How can I help?"), calls("c1"), result("c1"), user(), asst()]
    conv = parse_conversation(msgs)
    assert conv.ok
    lead = conv.turns[0]
    assert lead == Turn(
        1, 4, (Unit(1, 2, "message"), Unit(2, 4, "tool_exchange", ("c1",))), leading=True
    )
    assert conv.leading_turn is lead
    assert conv.user_turns == (conv.turns[1],)
    assert conv.turns[1] == Turn(4, 6, (Unit(4, 5, "message"), Unit(5, 6, "message")))


def test_parallel_tool_results_in_any_order_form_one_exchange() -> None:
    msgs = [user(), calls("a", "b", "c"), result("c"), result("a"), result("b"), asst("done")]
    conv = parse_conversation(msgs)
    assert conv.ok
    assert conv.units == (
        Unit(0, 1, "message"),
        Unit(1, 5, "tool_exchange", ("a", "b", "c")),
        Unit(5, 6, "message"),
    )
    exchange = conv.units[1]
    assert exchange.size == 4 and exchange.is_tool_exchange
    assert exchange.result_indices == range(2, 5)
    assert conv.units[0].result_indices == range(0)


def test_consecutive_exchanges_are_separate_units() -> None:
    msgs = [user(), calls("a"), result("a"), calls("b", "c"), result("b"), result("c")]
    conv = parse_conversation(msgs)
    assert conv.ok
    assert [(u.start, u.end, u.tool_call_ids) for u in conv.units] == [
        (0, 1, ()),
        (1, 3, ("a",)),
        (3, 6, ("b", "c")),
    ]


def test_assistant_with_content_and_tool_calls_and_extra_fields() -> None:
    call = calls("a")
    call["content"] = "let me look"
    call["x_custom"] = {"k": 1}
    call["tool_calls"][0]["x_meta"] = [1]
    msgs = [user(), call, {**result("a"), "name": "f", "x_custom": None}]
    before = copy.deepcopy(msgs)
    conv = parse_conversation(msgs)
    assert conv.ok and conv.units[1] == Unit(1, 3, "tool_exchange", ("a",))
    assert msgs == before  # parsing never changes its input


def test_empty_tool_calls_list_is_a_plain_message() -> None:
    msgs = [user(), {"role": "assistant", "content": "x", "tool_calls": []}, asst()]
    conv = parse_conversation(msgs)
    assert conv.ok and [u.kind for u in conv.units] == ["message"] * 3


def test_null_tool_calls_is_a_plain_message() -> None:
    conv = parse_conversation([user(), {"role": "assistant", "content": "x", "tool_calls": None}])
    assert conv.ok and conv.units[1] == Unit(1, 2, "message")


def test_legacy_function_call_and_result_form_one_exchange() -> None:
    fc = {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}
    msgs = [user(), fc, {"role": "function", "name": "f", "content": "42"}, asst()]
    conv = parse_conversation(msgs)
    assert conv.ok
    assert conv.units[1] == Unit(1, 3, "tool_exchange", ())


def test_unknown_role_is_a_plain_message_without_problem() -> None:
    conv = parse_conversation([user(), {"role": "critic", "content": "hm"}])
    assert conv.ok and conv.units[1] == Unit(1, 2, "message")


# ---------------------------------------------------------------- problems


def test_orphan_result_in_run_names_index_and_id() -> None:
    msgs = [sys_(), user(), calls("a"), result("a"), result("call_abc")]
    conv = parse_conversation(msgs)
    assert conv.problems == (
        Problem(
            4,
            "call_abc",
            "messages[4]: tool result for 'call_abc' has no matching tool call in the preceding "
            "assistant message",
            "messages[4]",
        ),
    )
    assert conv.problems[0].param == "messages[4]"
    # best effort: the orphan stays inside the run of the exchange it follows
    assert conv.units[1] == Unit(2, 5, "tool_exchange", ("a",))


def test_tool_result_without_preceding_tool_calls() -> None:
    msgs = [user(), asst(), result("x"), result("y")]
    conv = parse_conversation(msgs)
    assert pairs(conv) == [(2, "x"), (3, "y")]
    assert "does not follow an assistant message with tool_calls" in conv.problems[0].reason
    assert conv.units[2:] == (Unit(2, 3, "message"), Unit(3, 4, "message"))


def test_tool_result_first_after_system_prefix() -> None:
    conv = parse_conversation([sys_(), result("x"), user()])
    assert pairs(conv) == [(1, "x")]
    assert conv.turns[0].leading and conv.turns[0].units == (Unit(1, 2, "message"),)


def test_missing_result_before_next_message() -> None:
    msgs = [user(), calls("a", "b"), result("b"), user("next")]
    conv = parse_conversation(msgs)
    assert conv.problems == (
        Problem(
            1, "a", "messages[1]: tool call 'a' has no result before messages[3]", "messages[1]"
        ),
    )
    assert conv.units[1] == Unit(1, 3, "tool_exchange", ("a", "b"))


def test_missing_results_at_end_of_messages_is_a_problem() -> None:
    conv = parse_conversation([user(), calls("a", "b")])
    assert conv.problems == (
        Problem(
            1,
            "a",
            "messages[1]: tool call 'a' has no result before the end of the messages",
            "messages[1]",
        ),
        Problem(
            1,
            "b",
            "messages[1]: tool call 'b' has no result before the end of the messages",
            "messages[1]",
        ),
    )
    assert conv.units[1] == Unit(1, 2, "tool_exchange", ("a", "b"))


def test_duplicate_call_id_within_one_assistant_message() -> None:
    conv = parse_conversation([user(), calls("a", "a"), result("a")])
    assert pairs(conv) == [(1, "a")]
    assert "appears more than once" in conv.problems[0].reason
    assert conv.units[1].tool_call_ids == ("a",)


def test_result_answering_an_id_twice() -> None:
    conv = parse_conversation([user(), calls("a", "b"), result("a"), result("b"), result("a")])
    assert pairs(conv) == [(4, "a")]
    assert conv.problems[0].reason == (
        "messages[4]: tool result for 'a' answers a tool call that already has a result"
    )


def test_result_moved_before_its_call() -> None:
    conv = parse_conversation([user(), result("a"), calls("a"), asst()])
    assert pairs(conv) == [(1, "a"), (2, "a")]


def test_tool_calls_not_a_list() -> None:
    msg = {"role": "assistant", "content": None, "tool_calls": {"id": "a"}}
    conv = parse_conversation([user(), msg, result("a")])
    assert conv.problems[0] == Problem(
        1, None, "messages[1]: 'tool_calls' is not a list", "messages[1]"
    )
    assert pairs(conv) == [(1, None), (2, "a")]
    assert conv.units[1] == Unit(1, 3, "tool_exchange", ())


def test_tool_call_entries_without_string_id() -> None:
    msg = calls("a", 7, "")
    msg["tool_calls"].append("not a call")
    msg["tool_calls"].append({"type": "function"})
    conv = parse_conversation([user(), msg, result("a")])
    assert [p.reason for p in conv.problems] == [
        "messages[1]: tool_calls[1] has no string 'id'",
        "messages[1]: tool_calls[2] has no string 'id'",
        "messages[1]: tool_calls[3] is not an object",
        "messages[1]: tool_calls[4] has no string 'id'",
    ]
    assert conv.units[1].tool_call_ids == ("a",)


def test_tool_message_without_string_tool_call_id() -> None:
    conv = parse_conversation([user(), calls("a"), result("a"), {"role": "tool", "content": "x"}])
    assert conv.problems == (
        Problem(3, None, "messages[3]: tool message has no string 'tool_call_id'", "messages[3]"),
    )
    conv = parse_conversation([user(), result(None)])
    assert pairs(conv) == [(1, None)]


def test_message_not_an_object_and_bad_roles() -> None:
    msgs: list[Any] = [user(), "hello", None, {"content": "x"}, {"role": 3, "content": "x"}]
    conv = parse_conversation(msgs)
    assert [p.reason for p in conv.problems] == [
        "messages[1]: message is not an object",
        "messages[2]: message is not an object",
        "messages[3]: message has no 'role'",
        "messages[4]: 'role' is not a string",
    ]
    assert [(u.start, u.end) for u in conv.units] == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]


def test_non_object_first_message_ends_system_prefix() -> None:
    conv = parse_conversation([sys_(), 5, user()])
    assert conv.system_end == 1 and pairs(conv) == [(1, None)]
    assert conv.turns[0].leading and conv.turns[1].start == 2


def test_legacy_function_problems() -> None:
    fc = {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}
    conv = parse_conversation([user(), fc, user(), {"role": "function", "content": "x"}])
    assert [p.reason for p in conv.problems] == [
        "messages[1]: function_call has no function result in the next message",
        "messages[3]: function result does not directly follow an assistant message with a "
        "function_call",
    ]
    assert conv.units[1] == Unit(1, 2, "tool_exchange", ())


def test_problems_are_sorted_by_index() -> None:
    msgs = [user(), calls("a", "b"), result("z"), asst(), result("q")]
    conv = parse_conversation(msgs)
    assert pairs(conv) == [(1, "a"), (1, "b"), (2, "z"), (4, "q")]


def test_problem_summary() -> None:
    conv = parse_conversation([user(), result("a"), result("b"), result("c")])
    assert conv.problem_summary(limit=2) == (
        f"{conv.problems[0].reason}; {conv.problems[1].reason}; and 1 more problem(s)"
    )
    assert conv.problem_summary() == "; ".join(p.reason for p in conv.problems)


# ---------------------------------------------------------------- lookups and speed


def test_unit_of_and_turn_index_of() -> None:
    msgs = [sys_(), user(), calls("a", "b"), result("a"), result("b"), user(), asst()]
    conv = parse_conversation(msgs)
    assert conv.unit_of(0) is None and conv.turn_index_of(0) is None
    assert conv.unit_of(7) is None and conv.unit_of(-1) is None
    assert conv.unit_of(3) == Unit(2, 5, "tool_exchange", ("a", "b"))
    assert conv.unit_of(2) is conv.unit_of(4)
    assert conv.turn_index_of(4) == 0 and conv.turn_index_of(5) == 1
    assert conv.unit_of(6) == Unit(6, 7, "message")
    table = conv.unit_by_message()
    assert table == tuple(conv.unit_of(i) for i in range(len(msgs)))


def _long_conversation(n_turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [sys_()]
    for t in range(n_turns):
        msgs += [user(), calls(f"c{t}a", f"c{t}b"), result(f"c{t}b"), result(f"c{t}a"), asst()]
    return msgs


def test_a_long_conversation_parses_into_its_turns_and_exchanges() -> None:
    # its speed is measured in bench/overhead/prepare.py (~500 messages a request), not here
    msgs = _long_conversation(100)  # 501 messages
    conv = parse_conversation(msgs)
    assert conv.ok and len(conv.turns) == 100 and conv.end == 501
    assert len(conv.units) == 300  # each turn: the user, one exchange of two calls, the answer
    assert [u.kind for u in conv.turns[-1].units] == ["message", "tool_exchange", "message"]
    assert conv.turns[-1].units[1].tool_call_ids == ("c99a", "c99b")


def test_a_list_or_object_role_is_a_problem_not_a_crash() -> None:
    messages: list[Any] = [{"role": ["system"]}, {"role": {"r": 1}}, {"role": "user"}]
    conversation = parse_conversation(messages)
    assert conversation.system_end == 0
    assert [(p.index, p.reason) for p in conversation.problems] == [
        (0, "messages[0]: 'role' is not a string"),
        (1, "messages[1]: 'role' is not a string"),
    ]


def test_a_message_that_is_not_an_object_is_a_plain_message_unit() -> None:
    conv = parse_conversation([user(), "hello", asst()])
    assert conv.units == (Unit(0, 1, "message"), Unit(1, 2, "message"), Unit(2, 3, "message"))


def test_a_stray_tool_message_without_a_tool_call_id_says_so() -> None:
    conv = parse_conversation([user(), {"role": "tool", "content": "x"}])
    assert conv.problems == (
        Problem(1, None, "messages[1]: tool message has no string 'tool_call_id'", "messages[1]"),
    )
