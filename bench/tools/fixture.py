"""The 120 MCP tool definitions and the (query, expected tool) pairs of the tests' support."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))

from mcp_tools import anthropic_tools, chat_tools, queries, responses_tools

TOOLS_BY_FORMAT = {
    "openai_chat": chat_tools,
    "openai_responses": responses_tools,
    "anthropic_messages": anthropic_tools,
}
SIZES = (20, 60, 120)

__all__ = ["SIZES", "TOOLS_BY_FORMAT", "queries"]
