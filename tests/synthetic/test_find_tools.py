"""proxy/synthetic/find_tools.py: the search tool's spec, its calls, and loading what it found."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from mcp_tools import chat_tools

from proxy.artifacts.store import MemoryStore
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.tool_defs import chat_tool_entry
from proxy.synthetic.base import CallContext, CallStatus, RoundBudget, SearchWorker
from proxy.synthetic.catalog import ToolCatalog
from proxy.synthetic.find_tools import (
    DEFAULT_MATCHES,
    FIND_TOOLS,
    INLINE_TOOLS,
    FindTools,
    find_tools_spec,
    found_names,
    loaded_names,
    loaded_tools,
)
from proxy.synthetic.fit import shortened
from proxy.synthetic.registry import execute

CATALOG = ToolCatalog(tuple(e for t in chat_tools() if (e := chat_tool_entry(t))))


def context(catalog: ToolCatalog | None = CATALOG) -> CallContext:
    return CallContext(MemoryStore(b"s" * 32), "scope", 20_000, RoundBudget(), None, catalog)


async def test_a_search_returns_and_loads_the_best_matches() -> None:
    result = await execute(FIND_TOOLS, {"query": "post a message to a slack channel"}, context())
    assert result.status == CallStatus.found
    value = json.loads(result.text)
    assert value["loaded"][0] == "slack_post_message"
    assert len(value["tools"]) == DEFAULT_MATCHES == len(found_names(result))
    assert value["tools"][0] == {
        "name": "slack_post_message",
        "description": "Post a new message to a Slack channel",
    }
    assert loaded_names(result.text) == value["loaded"]


async def test_bad_calls_are_results_the_model_reads() -> None:
    for arguments in ({}, {"query": ""}, {"query": "x" * 1001}, {"query": 3}, "not json"):
        result = await execute(FIND_TOOLS, arguments, context())
        assert result.status == CallStatus.invalid_arguments, arguments
        assert found_names(result) == []
    nothing = await execute(FIND_TOOLS, {"query": "slack"}, context(None))
    assert nothing.status == CallStatus.invalid_arguments


async def test_max_results_is_capped_and_no_match_says_so() -> None:
    many = await execute(FIND_TOOLS, {"query": "github", "max_results": 500}, context())
    assert len(found_names(many)) == 10
    none = await execute(FIND_TOOLS, {"query": "zzzqqq"}, context())
    value = json.loads(none.text)
    assert value["loaded"] == [] and "No deferred tool" in value["note"]


async def test_a_result_is_never_shortened() -> None:
    arguments = {"query": "github pull request", "max_results": 5}
    result = await execute(FIND_TOOLS, arguments, context())
    assert shortened(result, 0) is result  # what it loaded is in the follow-up's tools already


def test_the_spec_names_the_groups_deferred() -> None:
    spec = find_tools_spec("search_tools", CATALOG)
    assert spec.name == "search_tools"
    assert "github_*" in spec.description and "slack_*" in spec.description
    assert spec.parameters["required"] == ["query"]
    assert FindTools().spec(1).name == FIND_TOOLS


def test_loading_appends_before_the_proxy_tools_once() -> None:
    find = {"type": "function", "function": {"name": FIND_TOOLS, "parameters": {}}}
    kept = chat_tools(1)
    body: dict[str, Any] = {"tools": [*kept, find]}
    names = ["slack_post_message", "unknown_tool", "slack_post_message", "git_status"]
    loaded = loaded_tools(OPENAI_CHAT, body, CATALOG, names, 1)
    got = [t["function"]["name"] for t in loaded["tools"]]
    assert got == [kept[0]["function"]["name"], "slack_post_message", "git_status", FIND_TOOLS]
    again = loaded_tools(OPENAI_CHAT, loaded, CATALOG, ["git_status"], 1)
    assert again is loaded  # already offered: nothing added


async def test_a_large_catalog_is_ranked_off_the_event_loop() -> None:
    entries = CATALOG.entries * 6  # 720 entries: over INLINE_TOOLS
    large = ToolCatalog(entries)
    assert len(large) > INLINE_TOOLS
    worker = SearchWorker()
    try:
        for ctx in (context(large), replace(context(large), worker=worker)):
            result = await execute(FIND_TOOLS, {"query": "slack reaction emoji"}, ctx)
            assert found_names(result)[0] == "slack_add_reaction"
    finally:
        worker.close()
