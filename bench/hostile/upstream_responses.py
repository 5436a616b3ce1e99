"""The scripted upstream of `bench/hostile/run.py` on `/v1/responses`: the fake's Responses API
(`tests/support/fakes/responses.py`) answering as the request's `x-hostile-script` says.

Each answer that carries the proxy's tool calls puts a reasoning item (an id and
`encrypted_content`, or neither) before them, as a reasoning model does; every output the fake
answers with is handed to `on_output(number, items)` so that the run can check that the proxy
sends those reasoning items back byte for byte, each before its call.

Scripts (the proxy's tools are called only while the proxy offers them and names an artifact):
  echo        the fake's default answer (`echo: ...`, streamed when asked)
  read        reasoning + one `read_context_artifact` call
  search      reasoning + 8 `search_context_artifact` calls, pattern "A"*999 + "b"
  bad_ids     read calls whose `call_id` is missing, null, empty or duplicated
  bad_args    a read or search call with hostile arguments (`upstream_base.BAD_ARGUMENTS`)
  mixed       the proxy's read call and a call of the client's own `read_context_artifact`
  odd         a read call in an odd answer: arguments as an object, a message and junk beside
              it, reasoning without an id, usage of the wrong types; streamed: events without an
              `output_index`, for unknown indices, not JSON, of unknown types
  r_failed    streamed: the second round ends `response.failed` (JSON: a `failed` response)
  r_error     streamed: an `error` event after the read call's first events
  r_cut       streamed: the connection breaks in the middle of the second round
  r_eof       streamed: the first round (reasoning + the read call) ends cleanly without its
              final event (JSON: a read answer whose `output` is missing)
  r_eof_later streamed: the second round ends cleanly without its final event
  slow        as `read`, the events 50 ms apart (for a client that goes away mid-stream)
  r_break     any streamed answer without the proxy's calls breaks after 4 events (a stream the
              proxy relays as it is)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fakes import (
    Reply,
    error_reply,
    function_call_item,
    json_reply,
    message_item,
    reasoning_item,
    reset_reply,
    response_body,
    response_json,
    responses_usage,
)
from fakes.replies import SSEReply
from fakes.responses import default_responses_reply, encode_response_events, response_events

from bench.hostile.upstream_base import ARTIFACT_ID, BAD_ARGUMENTS, READ, SEARCH, SEARCH_PATTERN

OutputSink = Callable[[int, list[Any]], None]
RESPONSES_FAULTS = frozenset({"r_failed", "r_error", "r_cut", "r_eof", "r_eof_later", "r_break"})
"""Failures on purpose (on a later round): the proxy's error for them is no fault of its own."""


def responses_answer(
    script: str, number: int, body: Any, record: Any, on_output: OutputSink
) -> Reply:
    if not isinstance(body, dict):
        return default_responses_reply(record)
    stream = record.is_stream
    later = _rounds_done(body, number)
    if later and script in RESPONSES_FAULTS - {"r_eof"}:
        return _fault(script, stream)
    output = _output(script, number, body, later)
    if output is None and script == "r_break" and stream:
        events = response_events([message_item("cut short " * 20)])
        return SSEReply(encode_response_events(events), done=False, abort_after=4)
    if output is None:
        return default_responses_reply(record)
    if script == "odd":
        output = _odd_items(output, number, stream)
    on_output(number, [i for i in output if isinstance(i, dict)])
    usage = responses_usage(len(record.body) // 4 + 1, 9)
    if script == "odd":
        return _odd(output, number, stream)
    if not stream:
        if script == "r_eof":
            return json_reply({"id": f"resp_h{number}", "object": "response", "usage": usage})
        return response_json(output, usage=usage)
    events = response_events(output, usage=usage, id=f"resp_h{number}_{later}")
    if script == "r_eof":
        events = events[:-1]
    if script == "r_error":
        events.insert(3, {"type": "error", "code": "server_error", "message": "on purpose",
                          "param": None})  # fmt: skip
    return SSEReply(encode_response_events(events), 0.05 if script == "slow" else 0.0, done=False)


def proxy_tool(body: dict[str, Any], canonical: str) -> str | None:
    """The proxy's tool of that kind (the last function tool so named, perhaps renamed, whose
    parameters take an `artifact_id`)."""
    tools = body.get("tools")
    mine = [
        t["name"] for t in tools if isinstance(tools, list) for t in [t]
        if isinstance(t, dict) and isinstance(t.get("name"), str)
        and t["name"].startswith(canonical) and "artifact_id" in str(t.get("parameters"))
    ] if isinstance(tools, list) else []  # fmt: skip
    return mine[-1] if mine else None


def _rounds_done(body: dict[str, Any], number: int) -> int:
    """How many of this request's read rounds the input holds already."""
    return json.dumps(body.get("input")).count(f'"call_id": "call_h{number}_')


def _output(script: str, number: int, body: dict[str, Any], later: int) -> list[Any] | None:
    read, search = proxy_tool(body, READ), proxy_tool(body, SEARCH)
    ids = ARTIFACT_ID.findall(json.dumps(body.get("input")))
    tag = f"h{number}_{later}"
    reasoning = reasoning_item(f"rs_{tag}", f"gAAAAB-enc-{tag}", summary=[f"think {tag}"])
    if number % 3 == 1:
        reasoning = {"type": "reasoning", "summary": [], "encrypted_content": f"gAAAAB-{tag}"}
    if script == "mixed":
        calls = _mixed(body, read if ids else None, ids, tag)
        return [reasoning, *calls] if calls else None
    if read is None or search is None or not ids:
        return None
    read_args = json.dumps({"artifact_id": ids[0], "offset": 0, "max_chars": 2000})
    if script == "search":
        args = json.dumps({"artifact_id": ids[0], "pattern": SEARCH_PATTERN})
        return [reasoning] + [_call(search, args, f"call_{tag}_{k}") for k in range(8)]
    if script == "bad_ids":
        return [reasoning, *_bad_ids(number, read, read_args, tag)]
    if script == "bad_args":
        args = BAD_ARGUMENTS[number // 2 % len(BAD_ARGUMENTS)].replace("ART", ids[0])
        return [reasoning, _call(search if number % 2 else read, args, f"call_{tag}")]
    if script in ("read", "odd", "slow") or script in RESPONSES_FAULTS:
        return [reasoning, _call(read, read_args, f"call_{tag}")]
    return None


def _call(name: str, arguments: str, call_id: Any) -> dict[str, Any]:
    return function_call_item(name, arguments, call_id=call_id, id=f"fc_{call_id}")


def _mixed(body: dict[str, Any], read: str | None, ids: list[str], tag: str) -> list[Any]:
    calls = []
    if read is not None:
        args = json.dumps({"artifact_id": ids[0], "offset": 0, "max_chars": 500})
        calls.append(_call(read, args, f"call_{tag}_m"))
    tools = body.get("tools")
    clients = [t for t in tools if isinstance(t, dict) and t.get("name") == READ
               and "artifact_id" not in str(t)] if isinstance(tools, list) else []  # fmt: skip
    if clients:
        calls.append(_call(READ, '{"path": "x"}', f"call_{tag}_c"))
    return calls


def _bad_ids(number: int, read: str, args: str, tag: str) -> list[dict[str, Any]]:
    kind = number % 4
    calls = [_call(read, args, f"call_{tag}")]
    if kind == 0:
        del calls[0]["call_id"]
    elif kind == 1:
        calls[0]["call_id"] = None
    elif kind == 2:
        calls = [_call(read, args, ""), _call(read, args, "")]
    else:
        calls = [_call(read, args, f"call_{tag}"), _call(read, args, f"call_{tag}")]
    return calls


def _fault(script: str, stream: bool) -> Reply:
    output = [message_item("never seen")]
    if not stream:
        if script == "r_failed":
            failed = response_body(output, status="failed")
            failed["error"] = {"code": "server_error", "message": "failed on purpose"}
            return json_reply(failed)
        return error_reply(503, retry_after=None) if script == "r_error" else reset_reply()
    events = response_events(output)
    if script == "r_failed":
        events[-1] = {"type": "response.failed",
                      "response": {**events[-1]["response"], "status": "failed"}}  # fmt: skip
    if script == "r_eof_later":
        events = events[:-1]
    encoded = encode_response_events(events)
    return SSEReply(encoded, done=False, abort_after=4 if script == "r_cut" else None)


def _odd_items(output: list[Any], number: int, stream: bool) -> list[Any]:
    """Reasoning without a summary (nor an id, one time in four), a message before the call;
    in JSON, arguments as an object or junk items after the call."""
    kind = number % 4
    reasoning, call = output
    del reasoning["summary"]
    if kind == 0:
        reasoning.pop("id", None)
    if not stream and kind == 1:
        call = {**call, "arguments": json.loads(call["arguments"])}
    junk: list[Any] = [5, None, {}] if kind == 2 and not stream else []
    return [reasoning, message_item("text beside"), call, *junk]


def _odd(output: list[Any], number: int, stream: bool) -> Reply:
    if not stream:
        body = response_body([i for i in output if isinstance(i, dict)])
        body["output"] = output
        if number % 4 == 3:
            body["usage"] = {"input_tokens": "x", "output_tokens": 10**30}
        return json_reply(body)
    encoded = encode_response_events(response_events(output))
    junk = [
        b"data: not json\n\n", b'event: x\ndata: {"no_type": 1}\n\n',
        b'data: {"type": "response.output_text.delta", "output_index": 99, "delta": "z"}\n\n',
        b'data: {"type": "response.output_item.added", "item": {"type": "function_call"}}\n\n',
        b'data: {"type": "response.hologram", "output_index": "1"}\n\n', b": comment\n\n",
    ]  # fmt: skip
    return SSEReply(encoded[:3] + junk + encoded[3:], done=False)
