"""`find_tools`: search the tool definitions the policy deferred, and load the best matches.

The model gets the matches' names and one-line descriptions; the proxy puts their full
definitions in the follow-up call (after the tools already sent, so the prompt's prefix stays)
and the conversation keeps them loaded (`engine.steps.defer_tools` reads the `loaded` names back
from this exchange when the working set returns it). Its budget rule: none, a result is never
shortened (see `FindTools`).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Protocol

from proxy.synthetic.arguments import int_arg, parse_arguments, str_arg
from proxy.synthetic.base import (
    ArgumentError,
    CallContext,
    CallStatus,
    SyntheticTool,
    ToolResult,
    ToolSpec,
)
from proxy.synthetic.catalog import ToolCatalog, ToolEntry, one_line

FIND_TOOLS = "find_tools"
DEFAULT_MATCHES = 3
MAX_MATCHES = 10
MAX_QUERY_CHARS = 1_000
INLINE_TOOLS = 500
"""Larger catalogs are ranked on the app's search thread (10,000 tools take ~0.15 s): the event
loop keeps serving meanwhile, and the searches of all requests queue on one thread."""


def find_tools_spec(name: str, catalog: ToolCatalog) -> ToolSpec:
    """The spec offered to a request (the tool named `name` there) whose deferrable tools are
    `catalog`: the ones deferred and the ones loaded alike, so that the spec stays the same bytes
    as tools get loaded."""
    groups = catalog.prefixes()
    more = ", and others" if len(groups) < len({e.name for e in catalog.entries}) else ""
    listed = f" (from {', '.join(groups)}{more})" if groups else ""
    return ToolSpec(
        name=name,
        description=f"More tools are available than are listed here{listed}: search them by "
        "what you need, in a few words. The best matches are loaded and can be called right "
        "after this call.",
        parameters=_parameters(),
    )


def _parameters() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_MATCHES,
                "default": DEFAULT_MATCHES,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }


class FindTools(SyntheticTool):
    """Its results are never shortened (`result_chars` stays 0): one holds at most ten one-line
    descriptions, and what it loaded is in the follow-up's tools already; a result naming fewer
    tools would leave the next turn with another tool list than the follow-up had."""

    name = FIND_TOOLS

    def spec(self, max_page_chars: int) -> ToolSpec:
        return find_tools_spec(FIND_TOOLS, ToolCatalog(()))

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        query = str_arg(args, "query").strip()
        if not query or len(query) > MAX_QUERY_CHARS:
            raise ArgumentError(f"`query` must hold 1 to {MAX_QUERY_CHARS} characters")
        limit = min(int_arg(args, "max_results", DEFAULT_MATCHES, minimum=1), MAX_MATCHES)
        catalog = call.catalog
        if catalog is None or not len(catalog):
            return self.error(CallStatus.invalid_arguments, "No tools are deferred here.")
        search = functools.partial(_matches, catalog, query, limit)
        if len(catalog) <= INLINE_TOOLS:
            return self.found(search())
        if call.worker is None:
            return self.found(await asyncio.to_thread(search))
        return self.found(await call.worker.run(search))


def _matches(catalog: ToolCatalog, query: str, limit: int) -> dict[str, Any]:
    matches = catalog.ranked(query, limit)
    found = [{"name": e.name, "description": one_line(e.description)} for e in matches]
    note = "These tools are loaded: call them directly."
    return {
        "query": query,
        "tools": found,
        "loaded": [e.name for e in matches],
        "note": note if found else "No deferred tool matches; try other words.",
    }


def loaded_names(result_text: str) -> list[str]:
    """The tools a `find_tools` result loaded (none when it is not one of its results)."""
    try:
        value = parse_arguments(result_text)
    except ArgumentError:
        return []
    loaded = value.get("loaded")
    if not isinstance(loaded, list):
        return []
    return [name for name in loaded if isinstance(name, str)]


def found_names(result: ToolResult) -> list[str]:
    """The tools a found `find_tools` result loads."""
    if result.status != CallStatus.found or result.payload is None:
        return []
    loaded = result.payload.get("loaded")
    return [n for n in loaded if isinstance(n, str)] if isinstance(loaded, list) else []


def loaded_tools(
    wire: ToolLists, body: dict[str, Any], catalog: ToolCatalog, names: list[str], own: int
) -> dict[str, Any]:
    """`body` with the definitions of the catalog's tools `names` added after its tools and
    before its last `own` ones (the proxy's); a tool it offers already is not added again."""
    tools = wire.tool_list(body)
    split = max(len(tools) - own, 0)
    present = {entry.name for t in tools if (entry := wire.tool_entry(t)) is not None}
    added: list[Any] = []
    for name in names:
        entry = catalog.find(name)
        if entry is not None and entry.name not in present:
            present.add(entry.name)
            added.append(entry.tool)
    if not added:
        return body
    return wire.with_tool_list(body, tools[:split] + added + tools[split:])


class ToolLists(Protocol):
    """What loading needs of a wire format (`engine.wire.WireFormat` has it)."""

    def tool_list(self, body: dict[str, Any]) -> list[Any]: ...

    def with_tool_list(self, body: dict[str, Any], tools: list[Any]) -> dict[str, Any]: ...

    def tool_entry(self, tool: Any) -> ToolEntry | None: ...
