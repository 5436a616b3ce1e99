"""The hostile run's next turn of a Responses client (bench/hostile/next_turn.py)."""

from __future__ import annotations

import json

from fakes.responses import (
    encode_response_events,
    function_call_item,
    message_item,
    reasoning_item,
    response_body,
    response_events,
)

from bench.hostile.next_turn import final_output, next_turn

FIRST = json.dumps({"model": "m", "input": [{"role": "user", "content": "q"}]}).encode()
OUTPUT = [reasoning_item("rs_1", "enc"), function_call_item("f", "{}", call_id="c1"),
          message_item("hi")]  # fmt: skip


def test_the_output_comes_back_with_the_clients_results_and_a_question() -> None:
    answer = json.dumps(response_body(OUTPUT)).encode()
    turn = json.loads(next_turn(0)(FIRST, answer, False) or b"")["input"]
    assert turn[1:4] == OUTPUT
    assert turn[4] == {"type": "function_call_output", "call_id": "c1",
                       "output": "the client's own result"}  # fmt: skip
    assert turn[-1]["role"] == "user" and len(turn) == 6
    streamed = b"".join(encode_response_events(response_events(OUTPUT)))
    assert final_output(streamed, True) == OUTPUT


def test_each_kind_of_client() -> None:
    answer = json.dumps(response_body(OUTPUT)).encode()
    dropped = json.loads(next_turn(1)(FIRST, answer, False) or b"")["input"]
    assert [i.get("type") for i in dropped[1:3]] == ["function_call", "message"]
    sdk = json.loads(next_turn(2)(FIRST, answer, False) or b"")["input"]
    assert "id" not in sdk[1] and list(sdk[2]) == list(reversed([k for k in OUTPUT[1]
                                                                if k not in ("id", "status")]))
    twice = json.loads(next_turn(3)(FIRST, answer, False) or b"")["input"]
    assert twice[1:5] == twice[5:9]
    assert next_turn(0)(FIRST, b"not json", False) is None
    assert next_turn(0)(b"{", answer, False) is None
