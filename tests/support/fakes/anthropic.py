"""A fake Anthropic Messages provider: the same real loopback server (`FakeUpstream`), with
Anthropic's answers.

async with fake_anthropic() as fake:
    fake.enqueue(anthropic_message([text_block("Hi")]))
    client = anthropic.AsyncAnthropic(base_url=fake.origin, api_key="test")

Answers: whole messages (`anthropic_message`), event streams built from the same blocks
(`anthropic_stream`: text, tool_use with `input_json_delta`, thinking with `signature_delta`),
Anthropic's error envelope (`anthropic_error`, `prompt_too_long`), and by default an echo of the
last user text (streamed when the request streams). Every request is recorded as it arrived.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .records import Recorded
from .replies import JsonReply, Reply, SSEReply
from .upstream import FakeUpstream

MESSAGES_PATH = "/v1/messages"
COUNT_PATH = "/v1/messages/count_tokens"
DEFAULT_MESSAGE_ID = "msg_fake0001"
DEFAULT_CLAUDE = "claude-sonnet-4-5"


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(id: str, name: str, input: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": dict(input)}


def thinking_block(thinking: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def usage(input_tokens: int = 10, output_tokens: int = 5, **more: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, **more}


def message_body(
    content: Sequence[Mapping[str, Any]],
    *,
    stop_reason: str | None = None,
    model: str = DEFAULT_CLAUDE,
    id: str = DEFAULT_MESSAGE_ID,
    usage_: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole `message` answer (stop_reason None: `tool_use` when a block is one, else
    `end_turn`)."""
    if stop_reason is None:
        tools = any(block.get("type") == "tool_use" for block in content)
        stop_reason = "tool_use" if tools else "end_turn"
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [dict(block) for block in content],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": dict(usage_ or usage()),
    }


def anthropic_message(content: Sequence[Mapping[str, Any]], **kwargs: Any) -> JsonReply:
    return JsonReply(message_body(content, **kwargs))


def sse_event(name: str, payload: Mapping[str, Any]) -> bytes:
    """One event as Anthropic writes it: `event: <name>`, `data: <json>`, a blank line."""
    return f"event: {name}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


def stream_events(body: Mapping[str, Any], *, arg_chunk: int = 8) -> list[bytes]:
    """The event stream of a whole message (`message_body`), block by block."""
    start_usage = {**body["usage"], "output_tokens": 1}
    message = {**body, "content": [], "stop_reason": None, "usage": start_usage}
    events = [sse_event("message_start", {"type": "message_start", "message": message})]
    for index, block in enumerate(body["content"]):
        events += _block_events(index, block, arg_chunk)
        if index == 0:
            events.append(sse_event("ping", {"type": "ping"}))
    delta = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    final_usage = {"output_tokens": body["usage"]["output_tokens"]}
    events.append(
        sse_event("message_delta", {"type": "message_delta", "delta": delta, "usage": final_usage})
    )
    events.append(sse_event("message_stop", {"type": "message_stop"}))
    return events


def _block_events(index: int, block: Mapping[str, Any], arg_chunk: int) -> list[bytes]:
    kind = block["type"]
    if kind == "tool_use":
        start = {**block, "input": {}}
        text = json.dumps(block["input"])
        deltas = [
            {"type": "input_json_delta", "partial_json": text[i : i + arg_chunk]}
            for i in range(0, len(text), arg_chunk)
        ]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": block["thinking"]},
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    elif kind == "text":
        start = {"type": "text", "text": ""}
        words = block["text"].split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        deltas = [{"type": "text_delta", "text": piece} for piece in pieces if piece]
    else:  # redacted_thinking and the like arrive whole in their start event
        start, deltas = dict(block), []
    events = [sse_event("content_block_start", _start(index, start))]
    events += [
        sse_event(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}
        )
        for d in deltas
    ]
    events.append(sse_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _start(index: int, block: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": dict(block)}


def anthropic_stream(content: Sequence[Mapping[str, Any]], **kwargs: Any) -> SSEReply:
    """The event stream of `message_body(content, **kwargs)` (no `[DONE]`: Anthropic has none)."""
    return SSEReply(stream_events(message_body(content, **kwargs)), done=False)


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def anthropic_error(status: int, error_type: str, message: str) -> JsonReply:
    return JsonReply(error_body(error_type, message), status=status)


def prompt_too_long(tokens: int, maximum: int) -> JsonReply:
    """Anthropic's overflow answer: 400, "prompt is too long: N tokens > M maximum"."""
    message = f"prompt is too long: {tokens} tokens > {maximum} maximum"
    return anthropic_error(400, "invalid_request_error", message)


def last_user_text(body: Any) -> str:
    """The text of the last user message (text blocks joined), "" when there is none."""
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in reversed(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if isinstance(b, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return ""


def default_anthropic_for(record: Recorded) -> Reply:
    """Messages: `echo: <last user text[:50]>` (streamed when asked); count_tokens: the body's
    length / 4; anything else: 404 in Anthropic's envelope."""
    try:
        body = record.json()
    except ValueError:
        return anthropic_error(400, "invalid_request_error", "the body is not JSON")
    if record.path == COUNT_PATH:
        return JsonReply({"input_tokens": len(record.body) // 4})
    if record.path != MESSAGES_PATH:
        return anthropic_error(404, "not_found_error", f"no route {record.path}")
    model = body.get("model") if isinstance(body.get("model"), str) else DEFAULT_CLAUDE
    content = [text_block(f"echo: {last_user_text(body)[:50]}")]
    if body.get("stream") is True:
        return anthropic_stream(content, model=model)
    return anthropic_message(content, model=model)


def fake_anthropic() -> FakeUpstream:
    """A fake upstream answering like Anthropic's Messages API (base URL: `fake.origin`)."""
    return FakeUpstream(default=default_anthropic_for)
