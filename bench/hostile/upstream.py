"""The scripted upstream of `bench/hostile/run.py`: the fake OpenAI upstream of the tests
(`tests/support/fakes`), answering each request as its `x-hostile-script` header says.

The proxy forwards client headers upstream, so each generated request carries its number
(`x-hostile-request`) and its script; every body the upstream receives (the client's round and
the proxy's synthetic rounds alike) is handed to `on_body(number, body)` before it is answered.

Scripts (they call the proxy's tools only while the proxy offers them and names an artifact):
  echo      the fake's default answer (echo of the last user text; streamed when asked)
  read      one `read_context_artifact` call
  search    8 `search_context_artifact` calls, pattern "A"*999 + "b"
  bad_ids   read calls whose ids are missing, null, empty or duplicated
  bad_args  read or search calls with hostile arguments (a 5,000-digit offset, 1e400, NaN, null,
            not JSON, wrong types, an unknown artifact, an empty or 2,000-character pattern)
  mixed     one call of the proxy's read tool and one of the client's tool of the same name
  n2        two choices: one calling the read tool, one answering in text
  odd       a read call in an odd answer: arguments as an object, text beside it, junk beside it
            in `tool_calls`, a string `index`, usage of the wrong types; streamed: tool-call
            deltas without an `index` or with a gap, junk chunks in between
  fault_*   502, 503, a reset connection, a cut-off JSON body (errors made on purpose)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fakes import (
    Recorded,
    Reply,
    completion_body,
    error_reply,
    invalid_json_reply,
    json_reply,
    reset_reply,
    sse_reply,
    stream_chunks,
)
from fakes.defaults import default_for

from bench.hostile.upstream_base import (
    ARTIFACT_ID,
    BAD_ARGUMENTS,
    READ,
    REQUEST_HEADER,
    SCRIPT_HEADER,
    SEARCH,
    SEARCH_PATTERN,
)
from bench.hostile.upstream_responses import responses_answer

FAULTS: dict[str, Callable[[], Reply]] = {
    "fault_502": lambda: error_reply(502),
    "fault_503": lambda: error_reply(503, retry_after=None),
    "fault_reset": reset_reply,
    "fault_badjson": invalid_json_reply,
}
"""Upstream failures on purpose: the proxy's 5xx answer to them is no fault of its own."""

BodySink = Callable[[int, str, bytes], None]
"""(request number, path, body) of each request the upstream receives."""


def scripted(
    on_body: BodySink, on_output: Callable[[int, list[Any]], None] | None = None
) -> Callable[[Recorded], Reply]:
    """The fake upstream's default reply: hand the body over, then answer as scripted (on
    `/v1/responses` by `upstream_responses`, which hands its output items to `on_output`)."""

    def choose(record: Recorded) -> Reply:
        number = int(record.headers.get(REQUEST_HEADER, "-1"))
        on_body(number, record.path, record.body)
        script = record.headers.get(SCRIPT_HEADER, "echo")
        if script in FAULTS:
            return FAULTS[script]()
        try:
            body = json.loads(record.body)
        except ValueError:
            body = None
        except RecursionError:  # the fake's own echo would fail (a 500 that is nobody's fault)
            return error_reply(400)
        if record.path.endswith("/responses"):
            return responses_answer(script, number, body, record, on_output or _ignore)
        calls = _calls(script, number, body) if isinstance(body, dict) else None
        if not calls:
            return default_for(record)
        if script == "odd":
            return _odd_answer(calls[0], number, record.is_stream)
        return _answer(calls, record.is_stream, n2=script == "n2")

    return choose


def _ignore(number: int, items: list[Any]) -> None:
    return None


def proxy_tool(body: dict[str, Any], canonical: str) -> str | None:
    """The proxy's tool of that kind in this body (the last one so named whose parameters take
    an `artifact_id`), as renamed away from a client's tool (`read_context_artifact_ctxproxy`)."""
    mine = [n for n, t in _tools(body) if n.startswith(canonical) and "artifact_id" in str(t)]
    return mine[-1] if mine else None


def _tools(body: dict[str, Any]) -> list[tuple[str, Any]]:
    tools = body.get("tools")
    named = [(_tool_name(t), t) for t in tools] if isinstance(tools, list) else []
    return [(n, t) for n, t in named if isinstance(n, str)]


def _tool_name(tool: Any) -> Any:
    function = tool.get("function") if isinstance(tool, dict) else None
    return function.get("name") if isinstance(function, dict) else None


def _calls(script: str, number: int, body: dict[str, Any]) -> list[dict[str, Any]] | None:
    read, search = proxy_tool(body, READ), proxy_tool(body, SEARCH)
    ids = ARTIFACT_ID.findall(json.dumps(body.get("messages")))
    if script == "mixed":
        return _mixed_calls(number, body, read if ids else None, ids)
    if read is None or search is None or not ids:
        return None
    read_args = _read_args(ids)
    if script == "search":
        args = json.dumps({"artifact_id": ids[0], "pattern": SEARCH_PATTERN})
        return [_call(f"call_s{number}_{k}", search, args) for k in range(8)]
    if script == "bad_ids":
        return _bad_id_calls(number, read, read_args)
    if script == "bad_args":
        name = search if number % 2 else read
        args = BAD_ARGUMENTS[number // 2 % len(BAD_ARGUMENTS)].replace("ART", ids[0])
        return [_call(f"call_b{number}", name, args)]
    if script in ("read", "n2", "odd"):
        return [_call(f"call_r{number}", read, read_args)]
    return None


def _read_args(ids: list[str]) -> str:
    return json.dumps({"artifact_id": ids[0], "offset": 0, "max_chars": 2000})


def _mixed_calls(
    number: int, body: dict[str, Any], read: str | None, ids: list[str]
) -> list[dict[str, Any]] | None:
    """A call of the client's own `read_context_artifact` (when it has one), after one of the
    proxy's read tool (when offered)."""
    calls = []
    if read is not None:
        calls.append(_call(f"call_m{number}", read, _read_args(ids)))
    if any(name == READ and "artifact_id" not in str(t) for name, t in _tools(body)):
        calls.append(_call(f"call_c{number}", READ, "{}"))
    return calls or None


def _call(call_id: Any, name: str, arguments: str) -> dict[str, Any]:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is _MISSING:
        del call["id"]
    return call


_MISSING = object()


def _bad_id_calls(number: int, read: str, args: str) -> list[dict[str, Any]]:
    kind = number % 4
    if kind == 0:
        return [_call(_MISSING, read, args)]
    if kind == 1:
        return [_call(None, read, args)]
    if kind == 2:
        return [_call("", read, args), _call("", read, args)]
    return [_call("call_dup", read, args), _call("call_dup", read, args)]


def _answer(calls: list[dict[str, Any]], stream: bool, *, n2: bool) -> Reply:
    if stream:
        return sse_reply(_stream_events(calls, n2))
    body = completion_body(None, finish_reason="tool_calls")
    body["choices"][0]["message"]["tool_calls"] = calls
    if n2:
        text = {"role": "assistant", "content": "the second choice", "refusal": None}
        body["choices"].append(
            {"index": 1, "message": text, "logprobs": None, "finish_reason": "stop"}
        )
    return json_reply(body)


def _stream_events(calls: list[dict[str, Any]], n2: bool) -> list[dict[str, Any]]:
    """The fake's chunk stream for these calls, ids written as they are (even missing or null)."""
    named = [{**c, "id": f"call_tmp{k}"} for k, c in enumerate(calls)]
    chunks = stream_chunks([], tool_calls=named)
    for chunk in chunks:
        for choice in chunk["choices"]:
            for delta in choice["delta"].get("tool_calls") or ():
                if "id" in delta:
                    original = calls[delta["index"]]
                    if "id" in original:
                        delta["id"] = original["id"]
                    else:
                        del delta["id"]
    if n2:
        second = stream_chunks(["the second choice"])
        for chunk in second:
            chunk["choices"][0]["index"] = 1
        chunks = chunks[:-1] + second[1:] + chunks[-1:]
    return chunks


def _odd_answer(call: dict[str, Any], number: int, stream: bool) -> Reply:
    kind = number % 4
    if stream:
        chunks = stream_chunks(["text beside the call"], tool_calls=[call])
        for chunk in chunks:
            for delta in chunk["choices"][0]["delta"].get("tool_calls") or ():
                if kind == 0:
                    del delta["index"]
                else:
                    delta["index"] = (5, "a", 0)[kind - 1]
        junk: list[Any] = ["not json", {"choices": "x"}, {"choices": [{"index": 0, "delta": None}]}]
        return sse_reply(chunks[:2] + junk + chunks[2:])
    body = completion_body("text beside the call" if kind == 1 else None)
    message = body["choices"][0]["message"]
    function = call["function"]
    if kind == 0:
        call = {**call, "function": {**function, "arguments": json.loads(function["arguments"])}}
    message["tool_calls"] = [call, 5, None] if kind == 2 else [call]
    if kind == 3:
        body["choices"][0]["index"] = "zero"
        body["usage"] = {"prompt_tokens": "x", "completion_tokens": 10**30}
    return json_reply(body)
