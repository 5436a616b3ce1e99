"""Chat-completion request bodies and tool calls shared by the completion and adapter tests."""

from __future__ import annotations

import copy
from typing import Any

from proxy.formats.openai_chat.request import OPENAI_CHAT
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.registry import tool_specs
from proxy.synthetic.search import SEARCH_TOOL

CLIENT_TOOL = {
    "type": "function",
    "function": {"name": "run_shell", "parameters": {"type": "object", "properties": {}}},
}
MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "what was in the log?"},
]


def choice_of(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def body_with(client_tools: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A request whose `tools` are the client's followed by the proxy's two (as prepared)."""
    return {
        "model": "gpt-4o",
        "messages": copy.deepcopy(MESSAGES),
        "tools": [*copy.deepcopy(client_tools), *OPENAI_CHAT.synthetic_tools(tool_specs(4000))],
        **extra,
    }


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def call(call_id: str, name: str, arguments: Any = "{}") -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def answer(*messages: dict[str, Any], finish: str = "tool_calls") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": i, "message": m, "finish_reason": finish} for i, m in enumerate(messages)
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def message(content: Any, *calls: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = list(calls)
    return out


READ = call("s1", READ_TOOL, '{"artifact_id": "art_x"}')
SEARCH = call("s2", SEARCH_TOOL, '{"artifact_id": "art_x", "pattern": "p"}')
SHELL = call("k1", "run_shell", "{}")
