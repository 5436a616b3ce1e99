"""The synthetic tools, registered once: a tool is one file and one line in `_TOOLS`.

`ARTIFACT_TOOLS` are offered whenever a prepared request names an artifact (in this order, after
the client's tools); `find_tools` whenever the policy deferred tool definitions (before them);
`execute` runs a call of any registered tool.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from proxy.synthetic.arguments import parse_arguments
from proxy.synthetic.base import (
    ArgumentError,
    CallContext,
    CallStatus,
    SyntheticTool,
    ToolResult,
    ToolSpec,
    error_result,
)
from proxy.synthetic.find_tools import FindTools
from proxy.synthetic.read import READ_TOOL, ReadArtifact
from proxy.synthetic.search import SEARCH_TOOL, SearchArtifact

_TOOLS: tuple[SyntheticTool, ...] = (ReadArtifact(), SearchArtifact(), FindTools())
SYNTHETIC_TOOLS: Mapping[str, SyntheticTool] = MappingProxyType({t.name: t for t in _TOOLS})
ARTIFACT_TOOLS = (READ_TOOL, SEARCH_TOOL)
"""The tools that read what preparation removed, offered together."""

_PROXY_TOOL_NAME = re.compile(
    "(?:" + "|".join(map(re.escape, SYNTHETIC_TOOLS)) + r")(?:_ctxproxy\d*)?"
)


def is_synthetic(name: object) -> bool:
    """True for the proxy's own tools (never forwarded to the client)."""
    return isinstance(name, str) and name in SYNTHETIC_TOOLS


def is_proxy_tool_name(name: object) -> bool:
    """The proxy's tools under any name a request may give them (`names.names_avoiding`)."""
    return isinstance(name, str) and _PROXY_TOOL_NAME.fullmatch(name) is not None


_ARTIFACT_TOOL_NAME = re.compile(
    "(?:" + "|".join(map(re.escape, ARTIFACT_TOOLS)) + r")(?:_ctxproxy\d*)?"
)


def is_artifact_tool_name(name: object) -> bool:
    """The read tools under any name a request may give them."""
    return isinstance(name, str) and _ARTIFACT_TOOL_NAME.fullmatch(name) is not None


def tool_specs(max_page_chars: int, names: tuple[str, ...] = ARTIFACT_TOOLS) -> list[ToolSpec]:
    """The specs of `names` (fresh objects on every call)."""
    return [SYNTHETIC_TOOLS[name].spec(max_page_chars) for name in names]


async def execute(name: str, arguments: str | dict[str, Any], call: CallContext) -> ToolResult:
    """Run one call of the tool called `name` (canonical) for `call.scope`; never raises."""
    if not call.budget.take_call():
        return error_result(
            name,
            CallStatus.too_many_calls,
            "This round already made as many calls as one round may; make this one in the next "
            "round.",
        )
    tool = SYNTHETIC_TOOLS.get(name)
    if tool is None:
        return error_result(
            name, CallStatus.invalid_arguments, f"unknown synthetic tool {name!r}"
        )
    try:
        return await tool.run(parse_arguments(arguments), call)
    except ArgumentError as exc:
        return tool.error(CallStatus.invalid_arguments, str(exc))
