"""The client's next turn on `/v1/responses` after an answer of the hostile run: its input, the
output it got, an output for each call of its own in it, and a new question, as clients send it
(the proxy then puts its kept read rounds back in place: the working set).

Kinds of client (`next_turn(kind)`):
  0  sends the output back as it got it
  1  drops the reasoning items (a client without `include: reasoning.encrypted_content`)
  2  re-serialises the items: `id` and `status` dropped, keys in another order (an SDK)
  3  sends the output twice (a client that retried and kept both answers)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bench.hostile.answers import events

NextTurn = Callable[[bytes, bytes, bool], "bytes | None"]
CALLS = ("function_call", "custom_tool_call")


def final_output(answer: bytes, streamed: bool) -> list[Any] | None:
    """The output items of a JSON answer, or of a stream's final event."""
    if streamed:
        finals = [p for _, p in events(answer) if isinstance(p, dict)
                  and p.get("type") == "response.completed"]  # fmt: skip
        response = finals[-1].get("response") if finals else None
    else:
        try:
            response = json.loads(answer)
        except ValueError:
            return None
    output = response.get("output") if isinstance(response, dict) else None
    return output if isinstance(output, list) else None


def next_turn(kind: int) -> NextTurn:
    def build(first: bytes, answer: bytes, streamed: bool) -> bytes | None:
        try:
            body = json.loads(first)
        except ValueError:
            return None
        output = final_output(answer, streamed)
        if not isinstance(body, dict) or not isinstance(body.get("input"), list) or not output:
            return None
        got = [_as_client(item, kind) for item in output if isinstance(item, dict)]
        got = [item for item in got if item is not None]
        results = [{"type": f"{item['type']}_output", "call_id": item.get("call_id"),
                    "output": "the client's own result"}
                   for item in got if item.get("type") in CALLS]  # fmt: skip
        turn = [*got, *results]
        if kind == 3:
            turn = turn + turn
        question = {"role": "user", "content": "And then?"}
        return json.dumps({**body, "input": [*body["input"], *turn, question]}).encode()

    return build


def _as_client(item: dict[str, Any], kind: int) -> dict[str, Any] | None:
    if kind == 1 and item.get("type") == "reasoning":
        return None
    if kind == 2:
        kept = {k: v for k, v in item.items() if k not in ("id", "status")}
        return dict(reversed(list(kept.items())))
    return item
