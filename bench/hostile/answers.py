"""What a client of `/v1/responses` must get back, checked on every answer of the hostile run.

* An error (4xx/5xx) is the OpenAI envelope: `{"error": {"message": str, "type": str, "code",
  "param"}}`.
* A JSON answer (status 200, not a dry run) is a `response` object whose `output` is a list and
  holds none of the proxy's calls (no call whose arguments name an `artifact_id`).
* A stream is Responses events (`event: <type>` + `data: <json>` whose `type` is the same), their
  `sequence_number` 0, 1, 2, ... with no gap (the error event too), the output items' indices
  0, 1, 2, ... in the order they were added, none of the proxy's calls, and it ends with one
  final event (`response.completed` / `.incomplete` / `.failed`) or one `error` event, after
  which nothing comes; the final response's `output` is the items the stream showed.
"""

from __future__ import annotations

import json
from typing import Any

_FINAL = ("response.completed", "response.incomplete", "response.failed", "error")


def answer_problem(
    status: int, answer: bytes, streamed: bool, path: str, junk_upstream: bool = False
) -> str | None:
    """The first thing wrong with a `/v1/responses` (or its dry run's) answer, or None.
    `junk_upstream`: the upstream streamed junk on purpose (events not JSON, without a type or
    output index, for an index it never added): the proxy relays it as it is, so only the
    leaks and the end of the stream are checked."""
    if status >= 400:
        return _envelope_problem(answer)
    if status != 200 or "/context/prepare" in path:
        return None
    if streamed:
        return stream_problem(answer, junk_upstream)
    try:
        payload = json.loads(answer)
    except ValueError:
        return "a 200 answer that is not JSON"
    output = payload.get("output") if isinstance(payload, dict) else None
    if not isinstance(output, list):
        return None if junk_upstream else "a 200 answer without an output list"
    if any(_is_proxy_call(item) for item in output):
        return "the proxy's call reached the client"
    return None


def _envelope_problem(answer: bytes) -> str | None:
    try:
        error = json.loads(answer).get("error")
    except (ValueError, AttributeError):
        return "an error answer that is no JSON object"
    if not isinstance(error, dict):
        return "an error answer without an error object"
    if not isinstance(error.get("message"), str) or not isinstance(error.get("type"), str):
        return "an error without a message or type"
    if "code" not in error or "param" not in error:
        return "an error without code or param"
    return None


def _is_proxy_call(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.get("type") == "function_call"
        and "artifact_id" in str(item.get("arguments"))
    )


def events(answer: bytes) -> list[tuple[str | None, Any]]:
    """(the `event:` name, the parsed data) of each event of a stream."""
    out: list[tuple[str | None, Any]] = []
    for block in answer.replace(b"\r\n", b"\n").split(b"\n\n"):
        name, data = None, []
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode(errors="replace")
            elif line.startswith(b"data:"):
                data.append(line[5:].strip())
        if data:
            try:
                out.append((name, json.loads(b"\n".join(data))))
            except ValueError:
                out.append((name, b"\n".join(data)))
    return out


def stream_problem(answer: bytes, junk_upstream: bool = False) -> str | None:
    seen = events(answer)
    if junk_upstream:
        seen = [(n, p) for n, p in seen if isinstance(p, dict) and isinstance(p.get("type"), str)]
    if not seen:
        return "an empty stream"
    added: list[int] = []
    shown: list[Any] = []
    for k, (name, payload) in enumerate(seen):
        problem = _event_problem(k, name, payload, added, shown)
        if problem is not None and not (junk_upstream and "the proxy's call" not in problem):
            return problem
        if payload["type"] in _FINAL and k != len(seen) - 1:
            return f"events after {payload['type']}"
    final = seen[-1][1]
    if final["type"] not in _FINAL:
        return "the stream ends without a final event"
    response = final.get("response")
    if final["type"] != "error" and isinstance(response, dict) and response.get("output") != shown:
        return "the final output is not the items the stream showed"
    return None


def _event_problem(
    k: int, name: str | None, payload: Any, added: list[int], shown: list[Any]
) -> str | None:
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        return f"event {k} has no type"
    kind = payload["type"]
    if name is not None and name != kind:
        return f"event {k}: 'event: {name}' with a {kind} payload"
    if payload.get("sequence_number") != k:
        return f"{kind} numbered {payload.get('sequence_number')!r}, not {k}"
    index = payload.get("output_index")
    if kind == "response.output_item.added":
        if index != len(added):
            return f"item added at output_index {index!r}, not {len(added)}"
        added.append(index)
    elif isinstance(index, int) and index not in added:
        return f"{kind} for output_index {index} that was never added"
    if kind == "response.output_item.done":
        shown.append(payload.get("item"))
    item = payload.get("item")
    if _is_proxy_call(item) or (kind.startswith("response.function_call") and
                                 "artifact_id" in str(payload.get("delta"))):  # fmt: skip
        return "the proxy's call reached the client"
    return None
