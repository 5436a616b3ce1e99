"""A policy that defers tool definitions, and fake models that need one deferred tool: they call
the search tool while the tool they need is not offered, then call that tool, then answer."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fakes import (
    Recorded,
    completion,
    dynamic_reply,
    function_call_item,
    message_item,
    response_json,
    response_stream,
    stream_completion,
)
from fakes.anthropic import anthropic_message, anthropic_stream, text_block, tool_use_block
from fakes.replies import Reply

NEEDED = "slack_post_message"
"""The deferred tool the fake models need."""
KEPT = "filesystem_read_file"
QUERY = "post a message to a slack channel"
FIND = "find_tools"


def tools_policy(extra: str = "") -> str:
    return (
        "extends: default\n"
        "budget: {context_window: 128000}\n"
        f"steps: [{{kind: defer_tools, budget: 3000, keep: [{KEPT}]{extra}}},\n"
        "        {kind: offload_tool_results}, {kind: clear_tool_results}, {kind: drop_turns}]\n"
    )


def offered(record: Recorded) -> list[str]:
    """The names of the tools a request offered, whatever its format."""
    names = []
    for tool in record.json().get("tools", []):
        function = tool.get("function")
        names.append(function["name"] if isinstance(function, dict) else tool.get("name"))
    return names


RESULT = "message posted"
"""What the client's tool answers (once it is in a request, the model answers)."""

Answer = Callable[[bool, str], Reply]
Call = Callable[[bool, str, dict[str, Any]], Reply]


def needing_one_tool(answer: Answer, call: Call) -> Callable[[Recorded], Reply]:
    """The model's next move for a request: answer once the tool's result is in the request,
    call the tool when it is offered, else search for it (streamed when the request is)."""

    def choose(record: Recorded) -> Reply:
        names, stream = offered(record), record.is_stream
        if RESULT in record.body.decode():
            return answer(stream, "Posted.")
        if NEEDED in names:
            return call(stream, NEEDED, {"channel_id": "C1", "text": "deploy done"})
        search = next(n for n in names if n.startswith(FIND))
        return call(stream, search, {"query": QUERY})

    return choose


def chat_answer(stream: bool, text: str) -> Reply:
    return stream_completion([text]) if stream else completion(text)


def chat_call(stream: bool, name: str, arguments: dict[str, Any]) -> Reply:
    spec = {"name": name, "arguments": json.dumps(arguments), "id": f"call_{name}"}
    if stream:
        return stream_completion([], tool_calls=[spec])
    return completion(None, tool_calls=[spec])


def chat_replies(count: int) -> list[Reply]:
    return [dynamic_reply(needing_one_tool(chat_answer, chat_call)) for _ in range(count)]


def responses_answer(stream: bool, text: str) -> Reply:
    output = [message_item(text)]
    return response_stream(output) if stream else response_json(output)


def responses_call(stream: bool, name: str, arguments: dict[str, Any]) -> Reply:
    output = [function_call_item(name, json.dumps(arguments), call_id=f"call_{name}")]
    return response_stream(output) if stream else response_json(output)


def responses_replies(count: int) -> list[Reply]:
    model = needing_one_tool(responses_answer, responses_call)
    return [dynamic_reply(model) for _ in range(count)]


def anthropic_answer(stream: bool, text: str) -> Reply:
    content = [text_block(text)]
    return anthropic_stream(content) if stream else anthropic_message(content)


def anthropic_call(stream: bool, name: str, arguments: dict[str, Any]) -> Reply:
    content = [tool_use_block(f"toolu_{name}", name, arguments)]
    return anthropic_stream(content) if stream else anthropic_message(content)


def anthropic_replies(count: int) -> list[Reply]:
    model = needing_one_tool(anthropic_answer, anthropic_call)
    return [dynamic_reply(model) for _ in range(count)]
