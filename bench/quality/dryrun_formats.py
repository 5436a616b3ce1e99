"""The dry-run snapshot's requests in the other two client formats, so that a refactor is checked
on all three: each chat request of the set told as Anthropic Messages and as a Responses request
(the same conversation: system prompt, user and assistant turns, tool calls and their results),
plus the real agents' captured requests (`tests/fixtures/agents`).

Each request is (label, path with its `?format=`, body bytes). Deterministic; no proxy imports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.quality.dryrun_bodies import enc

MESSAGES = "/v1/context/prepare?format=anthropic_messages"
RESPONSES = "/v1/context/prepare?format=openai_responses"
FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "agents"


def other_formats(chat: list[tuple[str, bytes, str]]) -> list[tuple[str, str, bytes]]:
    """Every chat request that converts, as Messages and as Responses; then the fixtures."""
    out: list[tuple[str, str, bytes]] = []
    for label, raw, _ in chat:
        body = _chat_body(raw)
        if body is None:
            continue
        try:
            messages, responses = enc(as_messages(body)), enc(as_responses(body))
        except UnicodeEncodeError:  # lone surrogates: that case stays chat-only
            continue
        out.append((f"messages:{label}", MESSAGES, messages))
        out.append((f"responses:{label}", RESPONSES, responses))
    for path in sorted(FIXTURES.glob("*.json")):
        data = json.loads(path.read_text())
        where = MESSAGES if data["meta"]["cli"] == "claude" else RESPONSES
        out.append((f"agent:{path.stem}", where, enc(data["body"])))
    return out


def _chat_body(raw: bytes) -> dict[str, Any] | None:
    """A well-formed chat body of plain messages (the broken and odd ones stay chat-only)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        return None
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return None
    return body


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _arguments(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    arguments = function.get("arguments", "{}")
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def as_messages(body: dict[str, Any]) -> dict[str, Any]:
    """The conversation as a Messages request (results of one call run in one user message)."""
    system = [_text(m["content"]) for m in body["messages"] if m["role"] in ("system", "developer")]
    messages: list[dict[str, Any]] = []
    for message in body["messages"]:
        messages.extend(_anthropic(message, messages))
    out: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages}
    if system:
        out["system"] = "\n".join(system)
    return out


def _anthropic(message: dict[str, Any], before: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    role = message["role"]
    if role == "user":
        yield {"role": "user", "content": _text(message.get("content")) or "(empty)"}
    elif role == "assistant":
        blocks: list[dict[str, Any]] = []
        if _text(message.get("content")):
            blocks.append({"type": "text", "text": _text(message.get("content"))})
        for call in message.get("tool_calls") or []:
            arguments = json.loads(_arguments(call) or "{}")
            name = (call.get("function") or {}).get("name", "tool")
            blocks.append({"type": "tool_use", "id": call.get("id"), "name": name,
                           "input": arguments if isinstance(arguments, dict) else {}})  # fmt: skip
        yield {"role": "assistant", "content": blocks or "(empty)"}
    elif role in ("tool", "function"):
        block = {"type": "tool_result", "tool_use_id": message.get("tool_call_id"),
                 "content": _text(message.get("content"))}  # fmt: skip
        last = before[-1] if before else None
        if last is not None and last["role"] == "user" and isinstance(last["content"], list):
            last["content"].append(block)  # the next result of the same call's answer
        else:
            yield {"role": "user", "content": [block]}


def as_responses(body: dict[str, Any]) -> dict[str, Any]:
    """The conversation as a Responses request (`store: false`, the whole history as `input`)."""
    items: list[dict[str, Any]] = []
    for message in body["messages"]:
        role = message["role"]
        if role in ("system", "developer", "user"):
            kind = "developer" if role == "system" else role
            items.append({"type": "message", "role": kind, "content": _text(message["content"])})
        elif role == "assistant":
            if _text(message.get("content")):
                items.append({"type": "message", "role": "assistant",
                              "content": _text(message.get("content"))})  # fmt: skip
            for call in message.get("tool_calls") or []:
                name = (call.get("function") or {}).get("name", "tool")
                items.append({"type": "function_call", "call_id": call.get("id"), "name": name,
                              "arguments": _arguments(call)})  # fmt: skip
        elif role in ("tool", "function"):
            items.append({"type": "function_call_output", "call_id": message.get("tool_call_id"),
                          "output": _text(message.get("content"))})  # fmt: skip
    return {"model": body.get("model", "gpt-4o"), "input": items, "store": False}
