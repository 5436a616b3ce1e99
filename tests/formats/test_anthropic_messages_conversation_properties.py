"""Properties of the Anthropic parse over generated well-formed conversations: units cover the
items in order, every exchange holds exactly the results of its calls, one turn per user
message that answers no call, and a join of the items gives the messages back."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from proxy.formats.anthropic_messages.conversation import parse_conversation
from proxy.formats.anthropic_messages.items import is_result_part, join, result_block, split

exchange_shape = st.tuples(st.integers(1, 3), st.booleans(), st.randoms(use_true_random=False))
turn_shape = st.tuples(st.lists(exchange_shape, max_size=3), st.booleans())


def build(turns: list[tuple[list[Any], bool]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    counter = 0
    for t, (exchanges, closing_text) in enumerate(turns):
        messages.append({"role": "user", "content": f"turn {t}"})
        for calls, trailing_text, rnd in exchanges:
            ids = [f"toolu_{counter + j}" for j in range(calls)]
            counter += calls
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "t", "signature": "s"},
                        *({"type": "tool_use", "id": i, "name": "dump", "input": {}} for i in ids),
                    ],
                }
            )
            order = list(ids)
            rnd.shuffle(order)
            blocks: list[Any] = [
                {"type": "tool_result", "tool_use_id": i, "content": "r"} for i in order
            ]
            if trailing_text:
                blocks.append({"type": "text", "text": "and then"})
            messages.append({"role": "user", "content": blocks})
        if closing_text:
            messages.append({"role": "assistant", "content": "done"})
    return messages


@settings(max_examples=examples(60))
@given(st.lists(turn_shape, min_size=1, max_size=5))
def test_well_formed_conversations_parse_into_paired_units(
    turns: list[tuple[list[Any], bool]],
) -> None:
    messages = build(turns)
    items = split(messages)
    parsed = parse_conversation(items)
    assert parsed.ok
    assert len(parsed.turns) == len(turns)
    position = 0
    for unit in parsed.units:
        assert unit.start == position
        position = unit.end
        if unit.is_tool_exchange:
            answered = {
                result_block(items[i])["tool_use_id"]  # type: ignore[index]
                for i in unit.result_indices
            }
            assert answered == set(unit.tool_call_ids)
            assert all(is_result_part(items[i]) for i in unit.result_indices)
    assert position == len(items)
    assert join(items) == messages
