"""The scripted fake Anthropic server of `bench/hostile/run_messages.py`
(`tests/support/fakes/anthropic.py`), answering each request as its `x-hostile-script` header
says, in JSON or as an event stream (as the request asks).

Scripts (calls of the proxy's tools only while the proxy offers them and an artifact is named):
  echo       the fake's default answer
  read       thinking, then one `read_context_artifact` call of the first artifact named
  bad_args   read calls with hostile input: a huge offset, negative/float/string values, an
             unknown artifact, no artifact, duplicate and empty ids
  mixed      a call of the proxy's read tool and one of the client's tool of the same name
  odd        a read call beside text and an unknown block, usage of odd values (400 digits,
             strings, negatives, floats); streamed: junk events in between
  weird      a read call beside malformed ones (no id, null id, input not an object, a name
             or a type that is an object; in JSON a loose string block too)
  fault_*    529 overloaded, 500 api_error, a reset connection, a cut-off JSON body, an SSE
             `error` event mid-stream, 400 prompt too long (errors made on purpose)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from fakes import Recorded, Reply, invalid_json_reply, reset_reply
from fakes.anthropic import (
    anthropic_error,
    default_anthropic_for,
    message_body,
    prompt_too_long,
    sse_event,
    stream_events,
    text_block,
    thinking_block,
    tool_use_block,
)
from fakes.replies import JsonReply, SSEReply

from bench.hostile.upstream_base import REQUEST_HEADER, SCRIPT_HEADER

ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
READ = "read_context_artifact"
FAULTS = ("fault_529", "fault_500", "fault_reset", "fault_badjson", "fault_sse_error")
"""Upstream failures on purpose: a 5xx or an error event answering them is no proxy fault."""

BodySink = Callable[[int, str, bytes, list[Any]], None]
"""(request number, path, body, the assistant contents this upstream answered for it)."""


def _fault(script: str, stream: bool) -> Reply | None:
    if script == "fault_529":
        return anthropic_error(529, "overloaded_error", "Overloaded")
    if script == "fault_500":
        return anthropic_error(500, "api_error", "Internal server error")
    if script == "fault_reset":
        return reset_reply()
    if script == "fault_badjson":
        return invalid_json_reply()
    if script == "fault_too_long":
        return prompt_too_long(300_000, 200_000)
    if script == "fault_sse_error" and stream:
        events = stream_events(message_body([text_block("partial answer")]))[:3]
        events.append(
            sse_event(
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            )
        )
        return SSEReply(events, done=False)
    return None


def proxy_read_tool(body: dict[str, Any]) -> str | None:
    """The proxy's read tool in this body (its input schema takes an `artifact_id`)."""
    tools = body.get("tools")
    for tool in reversed(tools if isinstance(tools, list) else []):
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str) and name.startswith(READ) and "artifact_id" in json.dumps(tool):
            return name
    return None


def _read_blocks(script: str, number: int, name: str, artifact: str) -> list[dict[str, Any]]:
    read = tool_use_block(
        f"toolu_r{number}", name, {"artifact_id": artifact, "offset": 0, "max_chars": 400}
    )
    thinking = thinking_block(f"I should read {artifact}", f"sig{number}==")
    if script == "bad_args":
        inputs: tuple[dict[str, Any], ...] = (
            {"artifact_id": artifact, "offset": 10**4000 if number % 2 else -5},
            {"artifact_id": artifact, "max_chars": 1.5, "offset": "12"},
            {"artifact_id": "art_" + "0" * 32},
            {},
            {"artifact_id": None},
        )
        ids = (f"toolu_b{number}", f"toolu_b{number}", "", f"toolu_c{number}", f"toolu_d{number}")
        return [thinking] + [tool_use_block(i, name, x) for i, x in zip(ids, inputs, strict=True)]
    if script == "mixed":
        client = tool_use_block(f"toolu_m{number}", READ, {"path": "/tmp/x"})
        return [thinking, read, client] if name != READ else [thinking, read]
    if script == "odd":
        return [text_block("Let me look."), read, {"type": "mystery", "x": 1}]
    if script == "weird":  # malformed calls of the read tool beside a sound one
        return [
            thinking,
            read,
            {"type": "tool_use", "name": name, "input": "not an object"},
            {"type": "tool_use", "id": None, "name": name, "input": [artifact]},
            {"type": "tool_use", "id": f"toolu_w{number}", "name": {"n": name}, "input": {}},
            {"type": {"t": 1}, "id": "x"},
        ]
    return [thinking, read]


ODD_USAGES: tuple[dict[str, Any], ...] = (
    {"input_tokens": 10**400, "output_tokens": 5, "cache_read_input_tokens": 10**400},
    {"input_tokens": "12", "output_tokens": None, "cache_creation_input_tokens": [1]},
    {"input_tokens": -5, "output_tokens": -1, "cache_read_input_tokens": 2**64},
    {"input_tokens": 1.5, "output_tokens": True, "server_tool_use": {"web_search_requests": "x"}},
)


def _usage(script: str, number: int) -> dict[str, Any] | None:
    """Usage of odd values and types in the `odd` script's answers (else the fake's own)."""
    return ODD_USAGES[number % len(ODD_USAGES)] if script == "odd" else None


def scripted(on_body: BodySink) -> Callable[[Recorded], Reply]:
    """The fake's default reply: hand the body over, then answer as scripted."""
    answered: dict[int, list[Any]] = {}

    def choose(record: Recorded) -> Reply:
        number = int(record.headers.get(REQUEST_HEADER, "-1"))
        script = record.headers.get(SCRIPT_HEADER, "echo")
        mine = answered.setdefault(number, [])
        on_body(number, record.path, record.body, mine)
        try:
            body = json.loads(record.body)
        except (ValueError, RecursionError):
            return anthropic_error(400, "invalid_request_error", "not JSON")
        stream = isinstance(body, dict) and body.get("stream") is True
        fault = _fault(script, stream)
        if fault is not None:
            return fault
        name = proxy_read_tool(body) if isinstance(body, dict) else None
        found = ARTIFACT_ID.findall(json.dumps(body.get("messages"))) if name else []
        if not found or record.path.endswith("count_tokens"):
            return default_anthropic_for(record)
        content = _read_blocks(script, number * 100 + len(mine), name or READ, found[0])
        mine.append({"role": "assistant", "content": content})
        if not stream:
            whole = message_body(content, usage_=_usage(script, number))
            whole["content"] += ["a loose string"] if script == "weird" else []
            return JsonReply(whole)
        events = stream_events(message_body(content, usage_=_usage(script, number)))
        if script == "odd":
            events.insert(2, b"event: ping\ndata: {}\n\n")
            events.insert(4, b": a comment\n\n")
        return SSEReply(events, done=False)

    return choose
