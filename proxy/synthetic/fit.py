"""Shortening a synthetic call's result so that the next upstream call still fits its window.

Each tool says how (`SyntheticTool.shortened`): a page keeps its first characters and says where
to read on, a search keeps its first matches. Either way the result says it was shortened and
why, so the model can ask for the rest in a later round or a smaller piece. Error results are
short already and stay as they are.
"""

from __future__ import annotations

from proxy.synthetic.base import ToolResult, encode_result
from proxy.synthetic.registry import SYNTHETIC_TOOLS

SHORTENED_NOTE = (
    "shortened by the proxy to fit the context window; ask for less (a smaller max_chars or "
    "max_results) or read on from next_offset"
)


def result_chars(result: ToolResult) -> int:
    """The characters of artifact text the result carries (what shortening can take away)."""
    tool = SYNTHETIC_TOOLS.get(result.tool)
    if result.payload is None or tool is None:
        return 0
    return tool.result_chars(result.payload)


def shortened(result: ToolResult, max_chars: int) -> ToolResult:
    """`result` carrying at most `max_chars` characters of artifact text (itself if it does)."""
    tool = SYNTHETIC_TOOLS.get(result.tool)
    if result.payload is None or tool is None or result_chars(result) <= max_chars:
        return result
    value = tool.shortened(result.payload, max(max_chars, 0))
    value["shortened"] = SHORTENED_NOTE
    return ToolResult(result.tool, result.status, encode_result(value), value)
