"""The Messages hostile run's checks (bench/hostile/messages.py): each notices what the proxy
could break upstream (pairs, thinking, cache markers) and nothing in a sound conversation; the
strategies draw sound histories and JSON-encodable hostile bodies."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hostile import encode
from hostile_messages import hostile_messages, messages_histories, tiny_messages
from hypothesis import HealthCheck, given, settings
from hypothesis_profiles import examples

from bench.hostile.messages import (
    count_marks,
    messages_case,
    pair_problems,
    sound,
    thinking_key,
    thinking_problems,
)

THINKING = {"type": "thinking", "thinking": "t", "signature": "s"}


def uses(*ids: Any, thinking: bool = False) -> dict[str, Any]:
    blocks = [{"type": "tool_use", "id": i, "name": "run", "input": {}} for i in ids]
    return {"role": "assistant", "content": ([THINKING] if thinking else []) + blocks}


def results(*ids: Any, text: bool = False) -> dict[str, Any]:
    blocks: list[Any] = [{"type": "tool_result", "tool_use_id": i, "content": "r"} for i in ids]
    return {"role": "user", "content": blocks + ([{"type": "text", "text": "x"}] if text else [])}


USER = {"role": "user", "content": "q"}


def test_sound_pairs_in_any_order_beside_text() -> None:
    messages = [USER, uses("a", "b"), results("b", "a", text=True), uses("c"), results("c")]
    assert pair_problems(messages) == []
    assert pair_problems(tiny_messages(301)) == []


@pytest.mark.parametrize(
    ("messages", "found"),
    [
        ([USER, uses("a", "b"), results("a")], "tool_use 'b' has no tool_result"),
        ([USER, uses("a"), results("a", "z")], "tool_result 'z' answers no tool_use"),
        ([USER, uses("a"), results("a", "a")], "second tool_result for 'a'"),
        ([USER, uses("a", "a"), results("a")], "tool_use id 'a' twice"),
        ([USER, uses(None), results(None)], "tool_use without an id"),
        ([USER, uses("a"), USER, results("a")], "tool_use 'a' has no tool_result"),
        ([USER, uses("a")], "tool_use without a next user message"),
        ([results("a")], "tool_result 'a' answers no tool_use"),
        ("not a list", "messages is not a list"),
    ],
)
def test_broken_pairs_are_found(messages: Any, found: str) -> None:
    assert any(found in p for p in pair_problems(messages))


def test_thinking_messages_must_equal_a_known_one_tool_use_ids_aside() -> None:
    sent = uses("a", thinking=True)
    renamed = uses("call_ctxproxy_1", thinking=True)
    assert thinking_problems([USER, renamed], [sent]) == []
    changed = {**sent, "content": [{**THINKING, "thinking": "other"}, *sent["content"][1:]]}
    assert len(thinking_problems([USER, changed], [sent])) == 1
    assert thinking_problems([USER, uses("a")], []) == []  # no thinking: nothing to compare


def test_a_thinking_message_answered_in_an_earlier_request_is_known() -> None:
    """The working set puts an earlier request's read round back: its thinking message is the
    upstream's own answer, byte for byte, though this request never got it."""
    earlier = uses("r1", thinking=True)
    assert len(thinking_problems([USER, earlier], [])) == 1
    assert thinking_problems([USER, earlier], [], {thinking_key(earlier)}) == []
    changed = {**earlier, "content": [{**THINKING, "thinking": "other"}, *earlier["content"][1:]]}
    assert len(thinking_problems([USER, changed], [], {thinking_key(earlier)})) == 1


def test_cache_marks_are_counted_anywhere_and_bound_soundness() -> None:
    mark = {"cache_control": {"type": "ephemeral"}}
    body = {
        "model": "m",
        "tools": [{"name": "t", **mark}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "x", **mark}] * 3},
            uses("a"),
            results("a"),
        ],
    }
    assert count_marks(body) == 4 and sound(json.dumps(body).encode())
    body["system"] = [{"type": "text", "text": "s", **mark}]
    assert count_marks(body) == 5 and not sound(json.dumps(body).encode())
    assert not sound(b"not json") and not sound(b"[]")


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(messages=messages_histories())
def test_drawn_histories_are_sound(messages: list[dict[str, Any]]) -> None:
    assert pair_problems(messages) == []
    assert messages[-1]["role"] == "user"


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(body=hostile_messages())
def test_hostile_bodies_encode_and_are_judged(body: dict[str, Any]) -> None:
    case = messages_case("fuzz", body)
    assert case.body == encode(body)
    assert case.well_formed == sound(case.body)
