"""The `defer_tools` step applied to a request's tool definitions (see `steps.defer_tools`).

Deterministic, so that the tool list stays the same from one request of a conversation to the
next: the upstream gets the client's kept tools in the client's order, then the tools the
conversation called or loaded (the most recent `recent_tools` of them, each where it first came:
a tool loaded later is appended, so the list's prefix stays), then the search tool, then the
proxy's other tools. What the conversation loaded is read back from its `find_tools` results,
which the working set returns with the history; what it called, from its tool results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from proxy.engine.manifest import Action, Manifest
from proxy.engine.steps.defer_tools import DeferTools, DeferToolsConfig
from proxy.engine.wire import WireFormat
from proxy.synthetic.catalog import ToolCatalog, ToolEntry
from proxy.synthetic.find_tools import find_tools_spec, loaded_names
from proxy.synthetic.names import names_avoiding
from proxy.synthetic.registry import is_proxy_tool_name
from proxy.tokens.counters import TokenCounter

DUPLICATE_NOTE = "defer_tools: the request names two tools alike; its tools are sent as they came"


@dataclass(frozen=True)
class Deferral:
    """What the step did to a request's tools."""

    body: dict[str, Any]
    catalog: ToolCatalog
    """The deferred tools (what the search tool searches)."""
    name: str
    """The search tool's name in this request."""
    action: Action


@dataclass(frozen=True)
class _Tools:
    client: list[Any]
    tail: list[Any]
    """The proxy's tools already after the client's (the working set's read tools)."""
    entries: list[ToolEntry | None]


def defer_tools(
    config: DeferToolsConfig,
    wire: WireFormat,
    body: dict[str, Any],
    items: Sequence[Any],
    tail: int,
    counter: TokenCounter,
    allowance: int,
    manifest: Manifest,
) -> Deferral | None:
    """The request with its tools deferred, or None when they fit the budget (or nothing can
    be deferred). `tail`: how many of the last tools are the proxy's own already."""
    every = wire.tool_list(body)
    split = max(len(every) - tail, 0)
    client = every[:split]
    before = counter.count_tools(client, None) if client else 0
    limit = config.limit(allowance)
    if before <= limit:
        return None
    if config.slim_schemas:
        client = [wire.slim_tool(t) for t in client]
    tools = _Tools(client, every[split:], [wire.tool_entry(t) for t in client])
    names = [e.name for e in tools.entries if e is not None]
    if len(set(names)) != len(names):
        manifest.notes.append(DUPLICATE_NOTE)
        return None
    taken = names + [c for e in tools.entries if e for c in e.calls]
    search_name = names_avoiding(taken, [config.search_tool]).own(config.search_tool)
    kept = [i for i, e in enumerate(tools.entries) if e is None or _kept(e.name, config)]
    events = _history_events(wire, items, search_name)
    loaded = _loaded(tools.entries, set(kept), events, config.recent_tools, wire.forced_tool(body))
    sent_at = {*kept, *loaded}
    deferred = [i for i in range(len(client)) if i not in sent_at]
    if not deferred:
        return None
    catalog = ToolCatalog(tuple(e for i in deferred if (e := tools.entries[i]) is not None))
    kept_at = set(kept)
    deferrable = [e for i, e in enumerate(tools.entries) if e is not None and i not in kept_at]
    spec = wire.synthetic_tools([find_tools_spec(search_name, ToolCatalog(tuple(deferrable)))])
    sent = [client[i] for i in kept] + [_tool(tools.entries[i]) for i in loaded] + spec
    after = counter.count_tools(sent, None)
    names_loaded = [_name(tools.entries[i]) for i in loaded]
    action = _action(search_name, limit, (before, after), catalog, names_loaded)
    return Deferral(wire.with_tool_list(body, sent + tools.tail), catalog, search_name, action)


def _action(
    search_name: str, limit: int, tokens: tuple[int, int], catalog: ToolCatalog, loaded: list[str]
) -> Action:
    """The manifest's account of a deferral (`tokens`: the tool tokens before and after)."""
    before, after = tokens
    return Action(
        step=DeferTools.name,
        reason=f"tool definitions over {limit} tokens: {len(catalog)} deferred behind "
        f"{search_name}",
        message_indices=[],
        tokens_freed=max(before - after, 0),
        count=len(catalog),
        unit=DeferTools.counts or "",
        detail={
            "search_tool": search_name,
            "tool_tokens_before": before,
            "tool_tokens_after": after,
            "loaded": loaded,
            "deferred": [e.name for e in catalog.entries],
        },
    )


def _name(entry: ToolEntry | None) -> str:
    return entry.name if entry is not None else ""


def _tool(entry: ToolEntry | None) -> Any:
    """A loaded tool's definition: the one its follow-up calls load too (the same bytes)."""
    assert entry is not None  # only deferrable tools are loaded
    return entry.tool


def _kept(name: str, config: DeferToolsConfig) -> bool:
    """Kept by the policy, or named like one of the proxy's tools: such a tool is always sent,
    so that the proxy's own go by other names (a loaded one could not take its name back)."""
    return is_proxy_tool_name(name) or any(fnmatchcase(name, p) for p in config.keep)


def _history_events(wire: WireFormat, items: Sequence[Any], search_name: str) -> list[str]:
    """The tools the conversation called or loaded, in the order it did (with repeats)."""
    conversation = wire.parse(items)
    events: list[str] = []
    for index, name in sorted(wire.tool_names(items, conversation.units).items()):
        if name != search_name:
            events.append(name)
            continue
        text = wire.result_text(items[index])
        events.extend(loaded_names(text) if text else [])
    return events


def _loaded(
    entries: list[ToolEntry | None],
    kept: set[int],
    events: list[str],
    most: int,
    forced: str | None,
) -> list[int]:
    """The deferrable tools the conversation used: the `most` recent ones (the forced one
    always), each in the order it was first used."""
    index: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if entry is not None and i not in kept:
            index.update({call: i for call in (entry.name, *entry.calls)})
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for position, name in enumerate([*events, *([forced] if forced else [])]):
        at = index.get(name)
        if at is not None:
            first.setdefault(at, position)
            last[at] = position
    recent = sorted(last, key=lambda i: -last[i])[:most]
    forced_at = index.get(forced) if forced else None
    if forced_at is not None and forced_at not in recent:
        recent.append(forced_at)
    return sorted(recent, key=lambda i: first[i])
