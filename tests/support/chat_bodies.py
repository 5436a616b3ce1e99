"""Chat-completion request bodies and tool calls shared by the completion and adapter tests."""

from __future__ import annotations

import copy
from typing import Any

from proxy.artifacts.tool_specs import tool_specs
from proxy.formats.openai_chat.request import OPENAI_CHAT

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
