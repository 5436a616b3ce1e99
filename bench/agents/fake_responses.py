"""The fake's OpenAI Responses side: POST /v1/responses (SSE, or JSON when not streaming).

The shell tool is picked from what the request offers (top-level `tools` and the tools of
`additional_tools` input items, looking inside `namespace` containers): a function
`exec_command`, `shell_command` or `shell` (arguments per its parameter schema: `cmd`, or
`command` as a string or an argv list), else Codex's code-mode `exec` custom tool (JavaScript
calling `tools.exec_command`), else the built-in `local_shell`. After the turn's user message:
no call output yet -> call the shell; the shell's output -> (optionally one
`search_context_artifact` call) the final text.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
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

SHELL_NAMES = ("exec_command", "shell_command", "shell", "container.exec")
CODE_MODE_TOOL = "exec"
"""Codex's code mode: a freeform (`custom`) tool running JavaScript that reaches the shell as
`tools.exec_command(...)`; Codex 0.171 offers only this, inside an `additional_tools` input item."""
SEARCH_TOOL = "search_context_artifact"
MAX_OUTPUT_TOKENS = 20000
_ids = itertools.count(1)


@dataclass(frozen=True)
class Shell:
    kind: str
    """`function`, `code_mode` or `local_shell`."""
    tool: dict[str, Any]
    namespace: str | None = None


def offered_tools(body: dict[str, Any]) -> list[Any]:
    """`tools`, plus the tools of `additional_tools` input items (Codex's code mode)."""
    tools = list(body.get("tools") or [])
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools.extend(item.get("tools") or [])
    return tools


Leaf = tuple[str | None, dict[str, Any]]


def _leaf_tools(tools: Any, namespace: str | None = None) -> Iterator[Leaf]:
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("tools"), list):
            yield from _leaf_tools(tool["tools"], tool.get("name"))
        else:
            yield namespace, tool


def find_shell(tools: list[Any]) -> Shell | None:
    """The shell tool the request offers, by preference."""
    leaves = list(_leaf_tools(tools))
    functions = {t.get("name"): (ns, t) for ns, t in leaves if t.get("type") == "function"}
    for name in SHELL_NAMES:
        if name in functions:
            return Shell("function", functions[name][1], functions[name][0])
    for ns, tool in leaves:
        if tool.get("type") == "custom" and tool.get("name") == CODE_MODE_TOOL:
            return Shell("code_mode", tool, ns)
    if any(t.get("type") == "local_shell" for _, t in leaves):
        return Shell("local_shell", {"type": "local_shell", "name": "local_shell"})
    return None


def shell_arguments(tool: dict[str, Any], command: str) -> dict[str, Any]:
    properties = (tool.get("parameters") or {}).get("properties") or {}
    if "cmd" in properties:
        return {"cmd": command, "max_output_tokens": MAX_OUTPUT_TOKENS}
    spec = properties.get("command") or {}
    if spec.get("type") == "array":
        return {"command": ["bash", "-lc", command]}
    return {"command": command}


def code_mode_source(command: str) -> str:
    """The JavaScript a model would send to Codex's `exec` tool to run `command`."""
    args = json.dumps({"cmd": command, "max_output_tokens": MAX_OUTPUT_TOKENS})
    pragma = json.dumps({"yield_time_ms": 30000, "max_output_tokens": MAX_OUTPUT_TOKENS})
    return f"// @exec: {pragma}\nconst r = await tools.exec_command({args});\ntext(r.output);\n"


def _shell_call(shell: Shell, command: str) -> dict[str, Any]:
    n = next(_ids)
    ids = {"call_id": f"call_bench{n:06d}", "status": "completed"}
    if shell.kind == "local_shell":
        action = {"type": "exec", "command": ["bash", "-lc", command], "timeout_ms": 60000}
        return {"type": "local_shell_call", "id": f"lsh_bench{n:06d}", **ids, "action": action}
    if shell.kind == "code_mode":
        return {
            "type": "custom_tool_call",
            "id": f"ctc_bench{n:06d}",
            **ids,
            "name": shell.tool["name"],
            "input": code_mode_source(command),
        }
    return _function_call(shell.tool["name"], shell_arguments(shell.tool, command))


def _function_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    n = next(_ids)
    return {
        "type": "function_call",
        "id": f"fc_bench{n:06d}",
        "status": "completed",
        "arguments": json.dumps(arguments),
        "call_id": f"call_bench{n:06d}",
        "name": name,
    }


def _message_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_bench{next(_ids):06d}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _since_last_user(items: list[Any]) -> list[dict[str, Any]]:
    last = max(
        (i for i, it in enumerate(items) if isinstance(it, dict) and it.get("role") == "user"),
        default=-1,
    )
    return [it for it in items[last + 1 :] if isinstance(it, dict)]


def _call_names(items: list[Any]) -> dict[str, str]:
    return {
        str(it.get("call_id", "")): str(it.get("name", it.get("type", "")))
        for it in items
        if isinstance(it, dict) and str(it.get("type", "")).endswith("call")
    }


def plan(body: dict[str, Any], script: Script) -> tuple[str, list[dict[str, Any]]]:
    """How the fake answers this body: (kind, output items)."""
    items = body.get("input")
    items = items if isinstance(items, list) else [{"role": "user", "content": items}]
    tools = offered_tools(body)
    shell = find_shell(tools)
    if shell is None:
        return "side", [_message_item(SIDE_TEXT)]
    names = _call_names(items)
    outputs = [it for it in _since_last_user(items) if str(it.get("type", "")).endswith("output")]
    if not outputs:
        return "tool_call", [_shell_call(shell, script.command())]
    shell_outputs = [o for o in outputs if names.get(o.get("call_id", "")) != SEARCH_TOOL]
    text = tool_output_text(shell_outputs[-1].get("output")) if shell_outputs else ""
    searched = names.get(outputs[-1].get("call_id", "")) == SEARCH_TOOL
    offered = {t.get("name") for _, t in _leaf_tools(tools)}
    if script.exercise_search and SEARCH_TOOL in offered and not searched:
        arguments = search_arguments(text)
        if arguments is not None:
            return "search_call", [_function_call(SEARCH_TOOL, arguments)]
    return "final", [_message_item(script.final_text(len(text)))]


def _usage(body: dict[str, Any], log: FakeLog, output_tokens: int) -> dict[str, Any]:
    prompt = canonical_prompt(body.get("tools"), body.get("instructions"), body.get("input"))
    total = approx_tokens(len(prompt))
    cached = min(total, approx_tokens(log.cache.hit_chars(prompt)))
    return {
        "input_tokens": total,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": total + output_tokens,
    }


def _response(body: dict[str, Any], status: str, output: list[Any], use: Any) -> dict[str, Any]:
    return {
        "id": "resp_bench",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": body.get("model", "gpt"),
        "output": output,
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "previous_response_id": None,
        "store": bool(body.get("store", False)),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": [],
        "usage": use,
    }


def _item_events(index: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if item["type"] == "message":
        text = item["content"][0]["text"]
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "status": "in_progress", "content": []},
        }
        part = {"type": "output_text", "text": "", "annotations": []}
        common = {"item_id": item["id"], "output_index": index, "content_index": 0}
        yield {"type": "response.content_part.added", **common, "part": part}
        for i in range(0, len(text), 24):
            yield {"type": "response.output_text.delta", **common, "delta": text[i : i + 24]}
        yield {"type": "response.output_text.done", **common, "text": text}
        yield {"type": "response.content_part.done", **common, "part": {**part, "text": text}}
    elif item["type"] == "function_call":
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "status": "in_progress", "arguments": ""},
        }
        args, common = item["arguments"], {"item_id": item["id"], "output_index": index}
        for i in range(0, len(args), 16):
            yield {
                "type": "response.function_call_arguments.delta",
                **common,
                "delta": args[i : i + 16],
            }
        yield {"type": "response.function_call_arguments.done", **common, "arguments": args}
    elif item["type"] == "custom_tool_call":
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "status": "in_progress", "input": ""},
        }
        source, common = item["input"], {"item_id": item["id"], "output_index": index}
        for i in range(0, len(source), 32):
            yield {
                "type": "response.custom_tool_call_input.delta",
                **common,
                "delta": source[i : i + 32],
            }
        yield {"type": "response.custom_tool_call_input.done", **common, "input": source}
    else:
        yield {"type": "response.output_item.added", "output_index": index, "item": item}
    yield {"type": "response.output_item.done", "output_index": index, "item": item}


def sse_events(body: dict[str, Any], output: list[dict[str, Any]], use: Any) -> Iterator[bytes]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(body, "in_progress", [], None)},
        {"type": "response.in_progress", "response": _response(body, "in_progress", [], None)},
    ]
    for index, item in enumerate(output):
        events.extend(_item_events(index, item))
    events.append(
        {"type": "response.completed", "response": _response(body, "completed", output, use)}
    )
    for number, event in enumerate(events):
        data = json.dumps({**event, "sequence_number": number})
        yield f"event: {event['type']}\ndata: {data}\n\n".encode()


async def responses(
    request: web.Request, body: dict[str, Any], log: FakeLog, script: Script
) -> tuple[str, web.StreamResponse]:
    kind, output = plan(body, script)
    use = _usage(body, log, 12 * len(output) + 5)
    if not body.get("stream"):
        return kind, web.json_response(_response(body, "completed", output, use))
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for chunk in sse_events(body, output, use):
        await response.write(chunk)
    await response.write_eof()
    return kind, response
