"""`formats.anthropic_messages.conversation`: turns, units and problems of Messages items."""

from __future__ import annotations

from typing import Any

from proxy.formats.anthropic_messages.conversation import message_indices, parse_conversation
from proxy.formats.anthropic_messages.items import split


def call(call_id: str, name: str = "dump") -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {}}


def result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "out"}


THINKING = {"type": "thinking", "thinking": "hmm", "signature": "sig"}


def test_a_tool_use_and_its_results_are_one_unit_and_do_not_open_a_turn() -> None:
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [THINKING, call("a"), call("b")]},
        {"role": "user", "content": [result("b"), result("a"), {"type": "text", "text": "more"}]},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ]
    items = split(messages)
    parsed = parse_conversation(items)
    assert parsed.ok and parsed.system_end == 0
    assert [(t.start, t.end) for t in parsed.turns] == [(0, 6), (6, 7)]
    units = parsed.turns[0].units
    assert [(u.start, u.end, u.kind) for u in units] == [
        (0, 1, "message"),
        (1, 4, "tool_exchange"),
        (4, 5, "message"),
        (5, 6, "message"),
    ]
    assert units[1].tool_call_ids == ("a", "b")
    assert list(units[1].result_indices) == [2, 3]
    assert message_indices(items) == [0, 1, 2, 2, 2, 3, 4]


def test_a_missing_result_is_a_problem_naming_the_message() -> None:
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [call("a"), call("b")]},
        {"role": "user", "content": [result("a")]},
    ]
    parsed = parse_conversation(split(messages))
    assert [(p.index, p.tool_call_id, p.param) for p in parsed.problems] == [
        (1, "b", "messages[1]")
    ]
    assert parsed.problems[0].reason.startswith("messages[1]: tool_use 'b' has no tool_result")


def test_an_orphan_result_is_a_problem_naming_its_message_not_its_item() -> None:
    messages = [
        {"role": "user", "content": [result("x"), result("y")]},
        {"role": "assistant", "content": "ok"},
    ]
    parsed = parse_conversation(split(messages))
    assert [(p.index, p.param) for p in parsed.problems] == [(0, "messages[0]"), (1, "messages[0]")]


def test_a_result_for_another_call_is_a_problem() -> None:
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [call("a")]},
        {"role": "user", "content": [result("a"), result("zzz")]},
    ]
    parsed = parse_conversation(split(messages))
    assert [(p.index, p.tool_call_id) for p in parsed.problems] == [(3, "zzz")]


def test_a_tool_result_in_an_assistant_message_is_a_problem() -> None:
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [THINKING, call("a"), result("a")]},
        {"role": "user", "content": [result("a")]},
    ]
    parsed = parse_conversation(split(messages))
    assert [p.reason for p in parsed.problems] == [
        "messages[1]: a tool_result block in an assistant message"
    ]
    assert parsed.problems[0].param == "messages[1]"


def test_a_tool_use_in_a_user_message_is_a_problem() -> None:
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [call("a")]},
        {"role": "user", "content": [result("a"), {"type": "text", "text": "x"}, call("b")]},
    ]
    parsed = parse_conversation(split(messages))
    assert [p.reason for p in parsed.problems] == [
        "messages[2]: a tool_use block in a user message"
    ]


def test_a_leading_assistant_message_is_a_leading_turn() -> None:
    parsed = parse_conversation(
        split([{"role": "assistant", "content": "hi"}, {"role": "user", "content": "q"}])
    )
    assert [t.leading for t in parsed.turns] == [True, False]


def test_a_system_message_inside_messages_is_an_instruction_unit_that_opens_no_turn() -> None:
    """Claude Code's mid-conversation system message (beta `mid-conversation-system-…`)."""
    system = {"role": "system", "content": [{"type": "text", "text": "Env: cwd /w"}]}
    items = split([
        {"role": "user", "content": "task"}, system,
        {"role": "assistant", "content": [call("a")]},
        {"role": "user", "content": [result("a")]},
        {"role": "system", "content": "plan mode"},
        {"role": "user", "content": "next"},
    ])  # fmt: skip
    parsed = parse_conversation(items)
    assert parsed.problems == ()
    assert [(t.start, t.end) for t in parsed.turns] == [(0, 5), (5, 6)]
    assert [(u.start, u.end, u.instruction) for u in parsed.units] == [
        (0, 1, False), (1, 2, True), (2, 4, False), (4, 5, True), (5, 6, False),
    ]  # fmt: skip


def test_any_other_role_is_still_a_problem() -> None:
    parsed = parse_conversation([{"role": "developer", "content": "x"}])
    assert [p.reason for p in parsed.problems] == [
        "messages[0]: 'role' must be 'user', 'assistant' or 'system'"
    ]
    assert not parsed.units[0].instruction


def test_a_second_result_for_one_tool_use_is_a_problem_that_says_so() -> None:
    parsed = parse_conversation(split([
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [call("a")]},
        {"role": "user", "content": [result("a"), result("a")]},
    ]))  # fmt: skip
    assert [p.reason for p in parsed.problems] == [
        "messages[2]: tool_result for 'a' answers a tool_use that already has a result"
    ]
    assert parsed.problems[0].tool_call_id == "a"


COMPACTED = {"type": "compaction", "content": "Summary of the session so far: ..."}


def test_an_assistant_message_holding_the_providers_compaction_is_kept_as_an_instruction() -> None:
    """Server-side compaction: the client sends back the assistant message whose `compaction`
    block stands for the whole conversation before it; it must never be dropped or summarised."""
    items = split([
        {"role": "user", "content": "old task"},
        {"role": "assistant", "content": [COMPACTED, {"type": "text", "text": "Going on."}]},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": [COMPACTED, call("a")]},
        {"role": "user", "content": [result("a")]},
        {"role": "assistant", "content": [{"type": "text", "text": "no compaction here"}]},
    ])  # fmt: skip
    parsed = parse_conversation(items)
    assert parsed.problems == ()
    assert [(u.start, u.end, u.instruction) for u in parsed.units] == [
        (0, 1, False), (1, 2, True), (2, 3, False), (3, 5, True), (5, 6, False),
    ]  # fmt: skip
