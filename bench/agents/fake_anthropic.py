"""The fake's Anthropic Messages side: POST /v1/messages (JSON or SSE) and count_tokens.

A request offering Claude Code's `Bash` tool is the agent loop: without a tool result in its
last message the fake calls `Bash` with the turn's command; with one it answers the final text
(or first searches the offloaded artifact once, when the script asks and the proxy offers
`search_context_artifact`). Any other request (titles, summaries, quota checks) gets short
plain text, or a JSON object when it asks for structured output.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from bench.agents.fake_common import (
    SIDE_TEXT,
    FakeLog,
    Script,
    approx_tokens,
    canonical_prompt,
    search_arguments,
    tool_output_text,
)
from bench.agents.schema_sample import sample_for_schema

SHELL_TOOL = "Bash"
SEARCH_TOOL = "search_context_artifact"
_ids = itertools.count(1)


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)}


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _tool_use_names(messages: list[Any]) -> dict[str, str]:
    return {
        b.get("id", ""): b.get("name", "")
        for m in messages
        for b in _blocks(m)
        if b.get("type") == "tool_use"
    }


def _last_results(messages: list[Any]) -> list[dict[str, Any]]:
    last = messages[-1] if messages else {}
    if not isinstance(last, dict) or last.get("role") != "user":
        return []
    return [b for b in _blocks(last) if b.get("type") == "tool_result"]


def _last_shell_output(messages: list[Any], names: dict[str, str]) -> str:
    for message in reversed(messages):
        for block in _blocks(message):
            if block.get("type") == "tool_result" and names.get(block.get("tool_use_id", "")) == (
                SHELL_TOOL
            ):
                return tool_output_text(block.get("content"))
    return ""


def _tool_use(name: str, arguments: dict[str, Any], turn: int) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f"toolu_bench_{turn:02d}_{next(_ids):04d}",
        "name": name,
        "input": arguments,
    }


def _side_answer(body: dict[str, Any]) -> list[dict[str, Any]]:
    fmt = body.get("output_format") or (body.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and isinstance(fmt.get("schema"), dict):
        return [{"type": "text", "text": json.dumps(sample_for_schema(fmt["schema"]))}]
    return [{"type": "text", "text": SIDE_TEXT}]


def plan(body: dict[str, Any], script: Script) -> tuple[str, list[dict[str, Any]]]:
    """How the fake answers this body: (kind, content blocks)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    tools = _tool_names(body)
    if SHELL_TOOL not in tools:
        return "side", _side_answer(body)
    results = _last_results(messages)
    if not results:
        description = "Run the command the task asks for"
        command = {"command": script.command(), "description": description}
        return "tool_call", [_tool_use(SHELL_TOOL, command, script.turn)]
    names = _tool_use_names(messages)
    output = _last_shell_output(messages, names)
    answered = {names.get(b.get("tool_use_id", ""), "") for b in results}
    if script.exercise_search and SEARCH_TOOL in tools and SEARCH_TOOL not in answered:
        arguments = search_arguments(output)
        if arguments is not None:
            return "search_call", [_tool_use(SEARCH_TOOL, arguments, script.turn)]
    return "final", [{"type": "text", "text": script.final_text(len(output))}]


def usage(body: dict[str, Any], raw: bytes, log: FakeLog, output_tokens: int) -> dict[str, int]:
    prompt = canonical_prompt(body.get("tools"), body.get("system"), body.get("messages"))
    total = approx_tokens(len(prompt))
    cached = min(total, approx_tokens(log.cache.hit_chars(prompt)))
    marked = b'"cache_control"' in raw
    fresh = 3 if marked else total - cached
    return {
        "input_tokens": fresh,
        "cache_creation_input_tokens": max(0, total - cached - fresh) if marked else 0,
        "cache_read_input_tokens": cached,
        "output_tokens": output_tokens,
    }


def _message(
    body: dict[str, Any], blocks: list[dict[str, Any]], use: dict[str, int]
) -> dict[str, Any]:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": f"msg_bench{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": use,
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _block_events(index: int, block: dict[str, Any]) -> Iterator[bytes]:
    start: dict[str, Any]
    if block["type"] == "text":
        start, text = {"type": "text", "text": ""}, block["text"]
        deltas = [{"type": "text_delta", "text": text[i : i + 24]} for i in range(0, len(text), 24)]
    else:
        start = {**block, "input": {}}
        raw = json.dumps(block["input"])
        deltas = [
            {"type": "input_json_delta", "partial_json": raw[i : i + 16]}
            for i in range(0, len(raw), 16)
        ]
    yield _event(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    for delta in deltas:
        yield _event(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
    yield _event("content_block_stop", {"type": "content_block_stop", "index": index})


def sse_events(message: dict[str, Any]) -> Iterator[bytes]:
    use = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**use, "output_tokens": 1}}
    yield _event("message_start", {"type": "message_start", "message": start})
    yield _event("ping", {"type": "ping"})
    for index, block in enumerate(message["content"]):
        yield from _block_events(index, block)
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield _event("message_delta", {"type": "message_delta", "delta": delta, "usage": use})
    yield _event("message_stop", {"type": "message_stop"})


async def messages(
    request: web.Request, body: dict[str, Any], raw: bytes, log: FakeLog, script: Script
) -> tuple[str, web.StreamResponse]:
    kind, blocks = plan(body, script)
    message = _message(body, blocks, usage(body, raw, log, 12 * len(blocks) + 5))
    if not body.get("stream"):
        return kind, web.json_response(message)
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for chunk in sse_events(message):
        await response.write(chunk)
    await response.write_eof()
    return kind, response


def count_tokens(body: dict[str, Any]) -> web.Response:
    prompt = canonical_prompt(body.get("tools"), body.get("system"), body.get("messages"))
    return web.json_response({"input_tokens": approx_tokens(len(prompt))})
