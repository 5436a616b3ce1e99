"""The fixture of 120 MCP tool definitions (GitHub, filesystem, browser, Slack, databases and a
few small servers, in the shapes the public servers publish: `{name, description, inputSchema}`)
and the (query, expected tool) pairs the `find_tools` ranking is measured on
(`tests/fixtures/tools/mcp_tools.json`); each wire format's tool shape of them."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tools" / "mcp_tools.json"


@cache
def _fixture() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(FIXTURE.read_text())
    return value


def mcp_tools(count: int = 120) -> list[dict[str, Any]]:
    """The first `count` tools, as an MCP server lists them (fresh copies)."""
    return json.loads(json.dumps(_fixture()["tools"][:count]))


def queries() -> list[tuple[str, str]]:
    """(what a model asks for, the tool it needs)."""
    return [(q["query"], q["expected"]) for q in _fixture()["queries"]]


def chat_tools(count: int = 120) -> list[dict[str, Any]]:
    """OpenAI Chat Completions tools, as agents convert MCP tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t["description"],
                "parameters": t["inputSchema"],
            },
        }
        for t in mcp_tools(count)
    ]


def responses_tools(count: int = 120) -> list[dict[str, Any]]:
    """OpenAI Responses function tools."""
    return [
        {
            "type": "function",
            "name": t["name"],
            "description": t["description"],
            "parameters": t["inputSchema"],
            "strict": False,
        }
        for t in mcp_tools(count)
    ]


def anthropic_tools(count: int = 120) -> list[dict[str, Any]]:
    """Anthropic Messages tools."""
    return [
        {"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]}
        for t in mcp_tools(count)
    ]
