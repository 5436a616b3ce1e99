"""`formats.anthropic_messages.items`: messages split into items and joined back."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proxy.formats.anthropic_messages.items import (
    PART_KEY,
    is_result_part,
    join,
    part_index,
    result_block,
    split,
)


def result(call_id: str, content: Any = "out") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def test_a_user_message_with_results_becomes_one_part_per_result_and_one_per_run() -> None:
    text = {"type": "text", "text": "go on"}
    message = {"role": "user", "content": [result("a"), result("b"), text], "x": 1}
    items = split([message])
    assert [part_index(i) for i in items] == [0, 1, 2]
    assert [is_result_part(i) for i in items] == [True, True, False]
    assert result_block(items[1]) == result("b")
    assert all(i["x"] == 1 and i["role"] == "user" for i in items)
    assert join(items) == [message]
    assert PART_KEY not in message  # the client's object is untouched


def test_other_messages_are_their_own_items_as_the_very_objects() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "yo"}]},
        "not a message",
    ]
    items = split(messages)
    assert all(a is b for a, b in zip(items, messages, strict=True))
    assert join(items) == messages


def test_two_result_messages_in_a_row_stay_two_messages() -> None:
    first = {"role": "user", "content": [result("a")]}
    second = {"role": "user", "content": [result("b"), result("c")]}
    assert join(split([first, second])) == [first, second]


def test_a_part_continues_only_the_message_before_it() -> None:
    items = split([{"role": "user", "content": [result("a"), result("b")]}])
    notice = {"role": "user", "content": "notice"}
    assert join([notice, items[1]]) == [notice, {"role": "user", "content": [result("b")]}]


blocks = st.lists(
    st.one_of(
        st.builds(result, st.sampled_from(["a", "b", "c"])),
        st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=5)),
        st.just({"type": "image", "source": {"type": "base64", "data": "AAAA"}}),
    ),
    max_size=6,
)


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), blocks), max_size=6))
def test_join_undoes_split(spec: list[tuple[str, list[Any]]]) -> None:
    messages = [{"role": role, "content": content} for role, content in spec]
    assert join(split(messages)) == messages
