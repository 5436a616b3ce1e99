"""The hostile run's Responses checker (bench/hostile/responses.py): it must notice every broken
call/output pair and every reasoning item changed or moved away from its call, and nothing in
a sound input; the generated sound requests pass it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hostile_responses import responses_requests
from hypothesis import HealthCheck, given, settings
from hypothesis_profiles import examples

from bench.hostile.responses import (
    Integrity,
    body_problems,
    item_pair_problems,
    long_history,
    tiny_items,
    well_formed,
)

USER = {"role": "user", "content": "q"}
ANSWER = {"type": "message", "role": "assistant", "content": "a"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}


def call(call_id: Any, kind: str = "function_call") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "name": "f", "arguments": "{}"}


def out(call_id: Any, kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "output": "r"}


def test_sound_inputs_pass() -> None:
    local = {"type": "local_shell_call_output", "id": "l", "output": "x"}
    items = [
        USER, REASONING, call("a"), call("b"), out("b"), out("a"), ANSWER, USER,
        {"type": "web_search_call", "id": "ws"}, call("c", "custom_tool_call"),
        out("c", "custom_tool_call_output"), call("l", "local_shell_call"), local,
    ]  # fmt: skip
    assert item_pair_problems(items) == []
    assert item_pair_problems(tiny_items(400)) == [] == item_pair_problems(long_history(3))


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([USER, out("a")], "input[1]: orphan function_call_output ('a')"),
        ([USER, call("a"), USER], "input[1]: call 'a' has no output"),
        ([USER, call("a"), out("a"), out("a")], "input[3]: second output for 'a'"),
        ([USER, call("a"), out("b")], "input[2]: orphan function_call_output ('b')"),
        ([USER, call("a"), ANSWER, USER, out("a")], "input[4]: orphan"),
        ([USER, call("a"), out("a"), call("a"), out("a")], "input[3]: call id 'a' twice"),
        ([USER, call(None), out(None)], "input[1]: function_call has no call_id"),
        ([USER, call(""), out("")], "input[1]: function_call has no call_id"),
        ([USER, call("a"), out("a", "custom_tool_call_output")], "answers a function_call"),
        ([USER, call("a"), 5, out("a")], "input[1]: call 'a' has no output"),
        ([USER, call("a"), out({"x": 1})], "input[2]: orphan"),
        ({"role": "user"}, "input is not a list"),
    ],
)
def test_each_kind_of_broken_pair_is_named(items: Any, expected: str) -> None:
    problems = item_pair_problems(items)
    assert any(expected in p for p in problems), problems


def body(*items: Any) -> bytes:
    return json.dumps({"model": "m", "input": list(items)}).encode()


def test_reasoning_must_stay_byte_identical_and_before_its_call() -> None:
    original = body(USER, REASONING, call("a"), out("a"))
    integrity = Integrity(original)
    assert body_problems(original, integrity) == []
    reordered = {"id": "rs_1", **{k: v for k, v in REASONING.items() if k != "id"}}
    assert "reasoning item changed" in body_problems(body(reordered, call("a"), out("a")),
                                                     integrity)[0]  # fmt: skip
    moved = body_problems(body(call("a"), out("a"), REASONING, ANSWER), integrity)
    assert any("lost its reasoning" in p for p in moved), moved
    assert any("no longer before" in p for p in moved), moved
    stranger = {**REASONING, "id": "rs_2"}
    assert "neither the client's" in body_problems(body(stranger, ANSWER), integrity)[0]
    assert body_problems(body(call("a"), out("a")), integrity) == ["input[0]: call 'a' lost its "
                                                                   "reasoning"]  # fmt: skip


def test_upstream_reasoning_counts_once_added_and_ids_may_be_renamed() -> None:
    integrity = Integrity(body(USER))
    round_item = {"type": "reasoning", "encrypted_content": "e2", "summary": []}
    integrity.add([round_item, call("", "function_call")])
    renamed = {**call("", "function_call"), "call_id": "call_ctxproxy_1"}
    assert body_problems(body(USER, round_item, renamed, out("call_ctxproxy_1")), integrity) == []
    assert body_problems(b'{"input": "text"}', integrity) == []
    assert body_problems(b"[]", integrity) is None and body_problems(b"{", integrity) is None


def test_well_formed_is_about_the_clients_own_input() -> None:
    assert well_formed(b'{"input": "hi"}') and well_formed(body(USER, call("a"), out("a")))
    assert not well_formed(body(USER, call("a"))) and not well_formed(b"{")
    assert not well_formed(body(USER, REASONING, ANSWER, USER, REASONING, ANSWER))
    assert not well_formed(b'{"input": 5}') and not well_formed(b"[]")


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(request=responses_requests())
def test_generated_sound_requests_pass(request: dict[str, Any]) -> None:
    raw = json.dumps(request).encode()
    assert well_formed(raw)
    assert body_problems(raw, Integrity(raw)) == []
