"""Tests for proxy.engine.conversation: the neutral model, built by hand (no wire format).

Parsing a format into it is tested with each adapter (tests/formats/test_openai_chat_*.py).
"""

from __future__ import annotations

from proxy.engine.conversation import Conversation, Problem, Turn, Unit


def test_unit_results_follow_its_call_items() -> None:
    assert Unit(2, 5, "tool_exchange", ("a", "b")).result_indices == range(3, 5)
    # Responses: reasoning + two function calls, then their two outputs
    responses = Unit(2, 7, "tool_exchange", ("a", "b"), call_items=3)
    assert responses.result_indices == range(5, 7)
    assert responses.size == 5 and responses.indices == range(2, 7)
    # a call without results (broken input, best effort) has none
    assert Unit(4, 5, "tool_exchange").result_indices == range(5, 5)
    assert Unit(4, 5, "tool_exchange", call_items=3).result_indices == range(5, 5)
    assert Unit(1, 2, "message").result_indices == range(0)
    assert not Unit(1, 2, "message").is_tool_exchange


def hand_made() -> Conversation:
    """items: 0 system, 1 greeting, 2 user, 3-5 exchange, 6 answer, 7 user."""
    lead = Turn(1, 2, (Unit(1, 2, "message"),), leading=True)
    first = Turn(
        2,
        7,
        (Unit(2, 3, "message"), Unit(3, 6, "tool_exchange", ("a", "b")), Unit(6, 7, "message")),
    )
    last = Turn(7, 8, (Unit(7, 8, "message"),))
    return Conversation(1, (lead, first, last), ())


def test_lookups_on_a_hand_made_conversation() -> None:
    conv = hand_made()
    assert conv.ok and conv.end == 8 and conv.system_indices == range(1)
    assert conv.leading_turn is conv.turns[0]
    assert conv.user_turns == conv.turns[1:] and conv.last_turn is conv.turns[2]
    assert len(conv.units) == 5 and conv.turns[1].has_tool_exchange
    assert conv.turn_index_of(0) is None and conv.turn_index_of(4) == 1
    assert conv.unit_of(5) == Unit(3, 6, "tool_exchange", ("a", "b"))
    assert conv.unit_of(8) is None
    assert conv.unit_by_message() == tuple(conv.unit_of(i) for i in range(8))
    assert conv.turns[2].first_message_index == 7


def test_problems_carry_the_formats_param() -> None:
    problems = tuple(Problem(i, None, f"input[{i}]: broken", f"input[{i}]") for i in range(3))
    conv = Conversation(0, (), problems)
    assert not conv.ok
    assert [p.param for p in conv.problems] == ["input[0]", "input[1]", "input[2]"]
    assert (
        conv.problem_summary(limit=2) == "input[0]: broken; input[1]: broken; and 1 more problem(s)"
    )


def test_problem_summary_names_five_reasons_then_counts_the_rest() -> None:
    def broken(count: int) -> Conversation:
        problems = (Problem(i, None, f"input[{i}]: broken", f"input[{i}]") for i in range(count))
        return Conversation(0, (), tuple(problems))

    five = "; ".join(f"input[{i}]: broken" for i in range(5))
    assert broken(5).problem_summary() == five  # all of them: nothing more to count
    assert broken(6).problem_summary() == f"{five}; and 1 more problem(s)"
    assert broken(2).problem_summary(limit=2) == "input[0]: broken; input[1]: broken"
