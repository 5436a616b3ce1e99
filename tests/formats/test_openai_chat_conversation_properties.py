"""Properties of proxy.formats.openai_chat.conversation over generated conversations: the parse
partitions any input, turn rules hold, valid exchanges stay whole, breakage is reported exactly."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from strategies import BREAKAGE_KINDS, Broken, broken_conversations, conversations, requests

from proxy.engine.conversation import Conversation, Unit
from proxy.formats.openai_chat.conversation import parse_conversation

PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_partition(messages: list[Any], conv: Conversation) -> None:
    """Every index is in the system prefix or in exactly one unit; turns tile the rest."""
    assert 0 <= conv.system_end <= len(messages)
    assert conv.end == len(messages)
    pos = conv.system_end
    for turn in conv.turns:
        assert turn.start == pos and turn.end > turn.start and turn.units
        for unit in turn.units:
            assert unit.start == pos and unit.end > unit.start
            pos = unit.end
        assert pos == turn.end
    assert pos == len(messages)
    owners = [conv.unit_of(i) for i in range(len(messages))]
    assert tuple(owners) == conv.unit_by_message()
    assert all(o is None for o in owners[: conv.system_end])
    assert all(
        o is not None and i in o.indices for i, o in enumerate(owners) if i >= conv.system_end
    )


def role(m: Any) -> Any:
    return m.get("role") if isinstance(m, dict) else None


def assert_turn_rules(messages: list[Any], conv: Conversation) -> None:
    starts = {t.start for t in conv.turns}
    for i in range(conv.system_end, len(messages)):
        if role(messages[i]) == "user":
            assert i in starts  # a user message always opens a turn
    for k, turn in enumerate(conv.turns):
        assert turn.leading == (role(messages[turn.start]) != "user")
        assert not turn.leading or k == 0


def assert_exchanges_whole(messages: list[dict[str, Any]], conv: Conversation) -> None:
    """In a valid conversation each call's unit holds the call and all of its results."""
    for i, m in enumerate(messages):
        if m.get("tool_calls"):
            unit = conv.unit_of(i)
            assert unit is not None and unit.start == i and unit.kind == "tool_exchange"
            ids = tuple(c["id"] for c in m["tool_calls"])
            assert unit.tool_call_ids == ids
            answered = sorted(messages[j]["tool_call_id"] for j in unit.result_indices)
            assert answered == sorted(ids)
        elif m["role"] == "tool":
            unit = conv.unit_of(i)
            assert unit is not None and unit.kind == "tool_exchange" and unit.start < i
            assert m["tool_call_id"] in unit.tool_call_ids
        elif m["role"] != "function" and i >= conv.system_end:
            assert conv.unit_of(i) == Unit(i, i + 1, "message") or m.get("function_call")


@PROPERTY
@given(conversations(legacy_functions=True))
def test_valid_conversations_parse_without_problems(messages: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(messages)
    conv = parse_conversation(messages)
    assert conv.problems == ()
    assert messages == before
    assert_partition(messages, conv)
    assert_turn_rules(messages, conv)
    assert_exchanges_whole(messages, conv)
    expected_prefix = 0
    while role(messages[expected_prefix]) in ("system", "developer"):
        expected_prefix += 1
        if expected_prefix == len(messages):
            break
    assert conv.system_end == expected_prefix


@PROPERTY
@given(requests(max_turns=3))
def test_request_bodies_parse_without_problems(body: dict[str, Any]) -> None:
    assert isinstance(body["model"], str)
    conv = parse_conversation(body["messages"])
    assert conv.ok
    assert_partition(body["messages"], conv)


@PROPERTY
@given(broken_conversations())
def test_broken_conversations_report_exactly_the_breakage(broken: Broken) -> None:
    conv = parse_conversation(broken.messages)
    assert {(p.index, p.tool_call_id) for p in conv.problems} == broken.expected, broken.kind
    assert len(conv.problems) == len(broken.expected)
    for p in conv.problems:
        assert p.reason.startswith(f"messages[{p.index}]: ")
        assert p.param == f"messages[{p.index}]"
        assert p.tool_call_id is None or f"'{p.tool_call_id}'" in p.reason
    assert_partition(broken.messages, conv)
    assert_turn_rules(broken.messages, conv)


@settings(max_examples=examples(20), deadline=None)
@given(st.sampled_from(BREAKAGE_KINDS).flatmap(lambda k: broken_conversations(kinds=(k,))))
def test_every_breakage_kind_is_generated(broken: Broken) -> None:
    assert broken.kind in BREAKAGE_KINDS and broken.expected


_junk_message = st.one_of(
    st.none(),
    st.integers(),
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system", "function", 3, None])},
        optional={
            "tool_call_id": st.sampled_from(["a", "b", None, 1]),
            "tool_calls": st.one_of(
                st.none(),
                st.just("x"),
                st.lists(
                    st.one_of(
                        st.fixed_dictionaries({"id": st.sampled_from(["a", "b", 2])}), st.none()
                    ),
                    max_size=3,
                ),
            ),
            "function_call": st.just({"name": "f"}),
        },
    ),
)


@PROPERTY
@given(st.lists(_junk_message, max_size=12))
def test_arbitrary_input_never_raises_and_still_partitions(messages: list[Any]) -> None:
    conv = parse_conversation(messages)
    assert_partition(messages, conv)
    assert_turn_rules(messages, conv)
    for p in conv.problems:
        assert 0 <= p.index < len(messages) and p.reason.startswith(f"messages[{p.index}]: ")
        assert p.param == f"messages[{p.index}]"
    assert list(conv.problems) == sorted(conv.problems, key=lambda p: p.index)
