"""The hostile run's tool-pair checker (bench/hostile/cases.py): it must notice every broken pair
the proxy could send upstream, and nothing in a sound conversation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis_profiles import examples
from strategies import broken_conversations, conversations

from bench.hostile.cases import body_problems, pair_problems, tiny_messages


def call(call_id: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def asks(*ids: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def result(call_id: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "r"}


USER = {"role": "user", "content": "q"}
ANSWER = {"role": "assistant", "content": "a"}


def test_sound_pairs_parallel_results_in_any_order_and_plain_messages() -> None:
    messages = [
        {"role": "system", "content": "s"}, USER, asks("a", "b"), result("b"), result("a"),
        ANSWER, USER, {"role": "assistant", "content": "x", "tool_calls": []}, asks("c"),
        result("c"),
    ]  # fmt: skip
    assert pair_problems(messages) == []
    assert pair_problems(tiny_messages(300)) == []


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([USER, result("a")], "messages[1]: orphan tool message ('a')"),
        ([USER, asks("a"), USER], "messages[1]: call 'a' has no result"),
        ([USER, asks("a"), result("a"), result("a")], "messages[3]: second result for 'a'"),
        ([USER, asks("a"), result("b")], "messages[2]: result 'b' answers no call of messages[1]"),
        ([USER, asks("a"), result(None)], "messages[2]: result None answers no call"),
        ([USER, asks("a"), ANSWER, result("a")], "messages[3]: orphan tool message ('a')"),
        ([USER, asks("a"), "not a message", result("a")], "messages[3]: orphan tool message"),
        ([USER, asks(None), result(None)], "messages[1]: tool_calls[0] has no id"),
        ([USER, asks(""), result("")], "messages[1]: tool_calls[0] has no id"),
        ([USER, {"role": "assistant", "tool_calls": [{"type": "function"}]}], "has no id"),
        ([USER, asks("d", "d"), result("d")], "messages[1]: call id 'd' twice"),
        ([USER, {"role": "assistant", "tool_calls": {"id": "a"}}], "tool_calls is not a list"),
        ({"role": "user"}, "messages is not a list"),
    ],
)
def test_each_kind_of_broken_pair_is_named(messages: Any, expected: str) -> None:
    problems = pair_problems(messages)
    assert any(expected in p for p in problems), problems


@settings(max_examples=examples(60), deadline=None)
@given(messages=conversations())
def test_generated_sound_conversations_pass(messages: list[dict[str, Any]]) -> None:
    assert pair_problems(messages) == []


@settings(max_examples=examples(60), deadline=None)
@given(broken=broken_conversations())
def test_every_generated_breakage_is_caught(broken: Any) -> None:
    problems = pair_problems(broken.messages)
    assert problems
    for index, _ in broken.expected:
        assert any(p.startswith(f"messages[{index}]") for p in problems), (broken, problems)


def test_body_problems_reads_wire_bytes() -> None:
    sound = {"model": "m", "messages": [USER, asks("a"), result("a")]}
    assert body_problems(json.dumps(sound).encode()) == []
    broken = {"model": "m", "messages": [USER, asks("a")]}
    assert body_problems(json.dumps(broken).encode()) == ["messages[1]: call 'a' has no result"]
    for not_a_chat_body in (b"{", b"[]", b'{"messages": {}}', b"[" * 100_000):
        assert body_problems(not_a_chat_body) is None
