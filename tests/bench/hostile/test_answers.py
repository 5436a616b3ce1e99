"""The hostile run's check of what a `/v1/responses` client gets (bench/hostile/answers.py)."""

from __future__ import annotations

import json
from typing import Any

from fakes.responses import (
    encode_response_events,
    function_call_item,
    message_item,
    response_body,
    response_events,
)

from bench.hostile.answers import answer_problem, stream_problem

PATH = "/v1/responses"
PROXY_CALL = function_call_item("read_context_artifact", '{"artifact_id": "a"}', call_id="r")


def stream(events: list[dict[str, Any]]) -> bytes:
    return b"".join(encode_response_events(events))


def test_a_sound_stream_and_answer_pass() -> None:
    raw = stream(response_events([message_item("hi")]))
    assert answer_problem(200, raw, True, PATH) is None
    assert answer_problem(200, json.dumps(response_body([message_item("x")])).encode(), False,
                          PATH) is None  # fmt: skip
    error = b'{"error": {"message": "m", "type": "t", "code": null, "param": null}}'
    assert answer_problem(400, error, False, PATH) is None


def test_each_broken_stream_is_named() -> None:
    events = response_events([message_item("hi")])
    assert stream_problem(stream(events[:-1])) == "the stream ends without a final event"
    error = {"type": "error", "code": "x", "message": "m", "param": None}
    assert stream_problem(stream([*events[:-1], error])) is None
    zero = b'event: error\ndata: {"type":"error","sequence_number":0}\n\n'
    renumbered = stream(events[:-1]) + zero
    assert stream_problem(renumbered) == f"error numbered 0, not {len(events) - 1}"
    assert stream_problem(stream([*events, error])) == "events after response.completed"
    leaked = response_events([PROXY_CALL])
    assert stream_problem(stream(leaked)) == "the proxy's call reached the client"
    skipped = [e for e in events if e.get("output_index") != 0 or "item" not in e]
    assert "never added" in str(stream_problem(stream(skipped)))
    final = {**events[-1], "response": {**events[-1]["response"], "output": []}}
    assert stream_problem(stream([*events[:-1], final])) == (
        "the final output is not the items the stream showed"
    )
    assert stream_problem(b"") == "an empty stream"


def test_junk_from_the_upstream_is_tolerated_but_not_leaks() -> None:
    events = response_events([message_item("hi")])
    junk = stream(events[:2]) + b"data: not json\n\n" + stream(events)[len(stream(events[:2])):]
    assert answer_problem(200, junk, True, PATH) is not None
    assert answer_problem(200, junk, True, PATH, junk_upstream=True) is None
    leaked = stream(response_events([PROXY_CALL]))
    assert answer_problem(200, leaked, True, PATH, junk_upstream=True) is not None


def test_errors_and_json_answers() -> None:
    assert answer_problem(400, b"<html>", False, PATH) == "an error answer that is no JSON object"
    assert answer_problem(400, b'{"error": "x"}', False, PATH) is not None
    assert answer_problem(400, b'{"error": {"message": "m", "type": "t"}}', False, PATH) == (
        "an error without code or param"
    )
    leaked = json.dumps(response_body([PROXY_CALL])).encode()
    assert answer_problem(200, leaked, False, PATH) == "the proxy's call reached the client"
    assert answer_problem(200, b"{}", False, PATH) == "a 200 answer without an output list"
    assert answer_problem(200, b"{}", False, "/v1/context/prepare") is None
