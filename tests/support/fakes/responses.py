"""The fake upstream's OpenAI Responses API (`POST /v1/responses`): bodies, events and replies.

A response is built from its output items (`message_item`, `function_call_item`,
`reasoning_item`); `response_json` answers it whole, `response_stream` as the Responses event
stream (`event: <type>` + `data: <json>` per event, `sequence_number` counting up, no `[DONE]`):
response.created, response.in_progress, per item output_item.added, its deltas (text, function
call arguments, reasoning summary), output_item.done, then response.completed with the whole
response and its usage.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .records import Recorded
from .replies import JsonReply, SSEReply

RESPONSES_PATH = "/v1/responses"
RESPONSE_ID = "resp_fake0001"
CREATED_AT = 1_764_547_200
ECHO_PREFIX = "echo: "


def message_item(text: str, *, id: str = "msg_fake0001") -> dict[str, Any]:
    """An assistant `message` output item with one `output_text` part."""
    return {
        "id": id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": text}],
    }


def function_call_item(
    name: str, arguments: str, *, call_id: str, id: str | None = None
) -> dict[str, Any]:
    """A `function_call` output item."""
    return {
        "id": id or f"fc_{call_id}",
        "type": "function_call",
        "status": "completed",
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def reasoning_item(
    id: str, encrypted_content: str | None = None, summary: Sequence[str] = ()
) -> dict[str, Any]:
    """A `reasoning` output item (summary texts; `encrypted_content` when given)."""
    item: dict[str, Any] = {
        "id": id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if encrypted_content is not None:
        item["encrypted_content"] = encrypted_content
    return item


def responses_usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def response_body(
    output: Sequence[Mapping[str, Any]],
    *,
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-5-fake",
    id: str = RESPONSE_ID,
    status: str = "completed",
    created_at: int = CREATED_AT,
) -> dict[str, Any]:
    """A whole `response` object (usage None: 10 in, 5 out)."""
    return {
        "id": id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": [dict(item) for item in output],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": dict(usage) if usage is not None else responses_usage(10, 5),
    }


def response_json(
    output: Sequence[Mapping[str, Any]],
    *,
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-5-fake",
    id: str = RESPONSE_ID,
) -> JsonReply:
    """A non-streaming Responses answer."""
    return JsonReply(response_body(output, usage=usage, model=model, id=id))


def response_events(
    output: Sequence[Mapping[str, Any]],
    *,
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-5-fake",
    id: str = RESPONSE_ID,
    arg_chunk: int = 6,
    created_at: int = CREATED_AT,
) -> list[dict[str, Any]]:
    """The events of a streamed response, in order, without their sequence numbers."""
    final = response_body(output, usage=usage, model=model, id=id, created_at=created_at)
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(final["output"]):
        events += _item_events(index, item, arg_chunk)
    events.append({"type": "response.completed", "response": final})
    return events


def _item_events(index: int, item: dict[str, Any], arg_chunk: int) -> list[dict[str, Any]]:
    kind, item_id = item.get("type"), item.get("id")
    where = {"item_id": item_id, "output_index": index}
    events: list[dict[str, Any]] = []
    if kind == "message":
        opened = {**item, "status": "in_progress", "content": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": opened})
        for part_index, part in enumerate(item.get("content") or []):
            at = {**where, "content_index": part_index}
            text = part.get("text", "")
            events.append(
                {"type": "response.content_part.added", **at, "part": {**part, "text": ""}}
            )
            for piece in _words(text):
                events.append({"type": "response.output_text.delta", **at, "delta": piece})
            events.append({"type": "response.output_text.done", **at, "text": text})
            events.append({"type": "response.content_part.done", **at, "part": part})
    elif kind == "function_call":
        opened = {**item, "status": "in_progress", "arguments": ""}
        events.append({"type": "response.output_item.added", "output_index": index, "item": opened})
        arguments = item.get("arguments", "")
        for start in range(0, len(arguments), arg_chunk):
            delta = arguments[start : start + arg_chunk]
            events.append(
                {"type": "response.function_call_arguments.delta", **where, "delta": delta}
            )
        events.append(
            {"type": "response.function_call_arguments.done", **where, "arguments": arguments}
        )
    else:  # reasoning and anything else: added, then done
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def encode_response_events(events: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """`event: <type>\\ndata: <json>\\n\\n` per event, numbered from 0."""
    out = []
    for number, event in enumerate(events):
        payload = {
            "type": event["type"],
            "sequence_number": number,
            **{k: v for k, v in event.items() if k != "type"},
        }
        data = json.dumps(payload, separators=(",", ":"))
        out.append(f"event: {event['type']}\ndata: {data}\n\n".encode())
    return out


def response_stream(
    output: Sequence[Mapping[str, Any]],
    *,
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-5-fake",
    id: str = RESPONSE_ID,
    delay_s: float = 0.0,
    abort_after: int | None = None,
) -> SSEReply:
    """A streamed Responses answer (no `[DONE]`: the Responses API sends none)."""
    events = encode_response_events(response_events(output, usage=usage, model=model, id=id))
    return SSEReply(list(events), delay_s, 200, False, abort_after)


def responses_error(
    status: int, message: str, *, code: str | None = None, type: str = "invalid_request_error"
) -> JsonReply:
    """An error answer in the OpenAI envelope (what `/v1/responses` answers too)."""
    error = {"message": message, "type": type, "param": None, "code": code}
    return JsonReply({"error": error}, status)


def default_responses_reply(record: Recorded) -> JsonReply | SSEReply:
    """`"echo: <last user text[:50]>"` as one message, streamed when the request streams; usage
    input = body bytes / 4."""
    try:
        body = record.json()
    except ValueError:
        return responses_error(400, "We could not parse the JSON body of your request.")
    output = [message_item(ECHO_PREFIX + last_user_text(body)[:50])]
    usage = responses_usage(max(1, len(record.body) // 4), 5)
    model = body.get("model") if isinstance(body.get("model"), str) else "gpt-5-fake"
    if record.is_stream:
        return response_stream(output, usage=usage, model=model)
    return response_json(output, usage=usage, model=model)


def last_user_text(body: Any) -> str:
    """The text of the last user input (a string `input` is one)."""
    items = body.get("input") if isinstance(body, dict) else None
    if isinstance(items, str):
        return items
    last = ""
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                last = content
            elif isinstance(content, list):
                last = "".join(
                    p.get("text", "")
                    for p in content
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                )
    return last


def _words(text: str) -> list[str]:
    pieces: list[str] = []
    for word in text.split(" "):
        pieces.append(word if not pieces else " " + word)
    return [p for p in pieces if p] or [text]
