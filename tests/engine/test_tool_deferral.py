"""The `defer_tools` step through the Preparer: which tools go upstream, in which order, what the
manifest says, and what happens at the edges (tools that fit, no room even for the kept ones,
hostile tool lists)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from mcp_tools import anthropic_tools, chat_tools, responses_tools
from pipeline_harness import TENANT, Harness, client_bytes, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.engine.manifest import Prepared
from proxy.engine.prepare_request import FIRST_CALL, FOLLOW_UP
from proxy.engine.tool_deferral import DUPLICATE_NOTE
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_responses import OPENAI_RESPONSES
from proxy.synthetic.find_tools import FIND_TOOLS

USER = {"role": "user", "content": "Post the release notes to Slack."}


def policy(step: str = "{kind: defer_tools, budget: 2000, keep: [filesystem_*]}") -> str:
    return (
        "extends: default\n"
        "budget: {context_window: 128000}\n"
        f"steps: [{step}, {{kind: offload_tool_results}}, {{kind: drop_turns}}]\n"
    )


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    write_policy(tmp_path, policy())
    return make_harness(tmp_path, shared_counters())


def request(messages: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": messages or [USER], "tools": chat_tools(), **extra}


def names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def call(call_id: str, name: str) -> dict[str, Any]:
    function = {"name": name, "arguments": "{}"}
    calls = [{"id": call_id, "type": "function", "function": function}]
    return {"role": "assistant", "tool_calls": calls}


def result(call_id: str, content: str = "done") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


async def test_over_the_budget_the_kept_tools_and_the_search_tool_go(harness: Harness) -> None:
    prepared = await harness.prepare(request())
    sent = names(prepared.parsed)
    kept = [n for n in names(request()) if n.startswith("filesystem_")]
    assert sent == [*kept, FIND_TOOLS]
    assert orjson.loads(prepared.body) == prepared.parsed and prepared.changed
    assert prepared.synthetic is not None and prepared.synthetic.names == (FIND_TOOLS,)
    assert prepared.synthetic.catalog is not None and len(prepared.synthetic.catalog) == 120 - 14
    action = prepared.manifest.actions[0]
    assert (action.step, action.unit, action.count) == ("defer_tools", "tool_definitions", 106)
    assert action.detail is not None and action.detail["loaded"] == []
    assert "slack_post_message" in action.detail["deferred"]
    assert action.detail["tool_tokens_after"] < 2000 < action.detail["tool_tokens_before"]
    manifest = prepared.manifest
    assert manifest.tokens_after == manifest.tokens_before - action.tokens_freed
    assert prepared.headers()["x-ctxproxy-actions"] == "defer_tools:106"


async def test_tools_within_the_budget_go_as_the_client_sent_them(harness: Harness) -> None:
    body = request(tools=chat_tools(5))
    prepared = await harness.prepare(body)
    assert prepared.body == client_bytes(body) and not prepared.changed
    assert prepared.synthetic is None


async def test_used_and_forced_tools_stay_in_the_order_they_came(harness: Harness) -> None:
    history = [USER, call("a", "slack_get_users"), result("a"), call("b", "git_status")]
    history.append(result("b"))
    forced = {"type": "function", "function": {"name": "time_get_current_time"}}
    prepared = await harness.prepare(request(history, tool_choice=forced))
    sent = names(prepared.parsed)
    assert sent[-4:] == ["slack_get_users", "git_status", "time_get_current_time", FIND_TOOLS]
    detail = prepared.manifest.actions[0].detail
    assert detail is not None and detail["loaded"] == sent[-4:-1]


async def test_only_the_most_recent_used_tools_stay(tmp_path: Path) -> None:
    write_policy(tmp_path, policy("{kind: defer_tools, budget: 2000, recent_tools: 1}"))
    harness = make_harness(tmp_path, shared_counters())
    history = [USER, call("a", "slack_get_users"), result("a"), call("b", "git_status")]
    history.append(result("b"))
    prepared = await harness.prepare(request(history))
    assert names(prepared.parsed) == ["git_status", FIND_TOOLS]


async def test_tools_a_search_loaded_come_back_from_its_result(harness: Harness) -> None:
    found = json.dumps({"loaded": ["slack_post_message", "nonexistent"], "tools": []})
    history = [USER, call("s", FIND_TOOLS), result("s", found), call("p", "slack_post_message")]
    history.append(result("p"))
    prepared = await harness.prepare(request(history))
    assert names(prepared.parsed)[-2:] == ["slack_post_message", FIND_TOOLS]


async def test_a_client_tool_named_like_the_search_tool_keeps_its_name(harness: Harness) -> None:
    own = {"type": "function", "function": {"name": FIND_TOOLS, "description": "client's own"}}
    prepared = await harness.prepare(request(tools=[own, *chat_tools()]))
    sent = names(prepared.parsed)
    assert sent[0] == FIND_TOOLS  # the client's own, always sent
    assert sent[-1] == f"{FIND_TOOLS}_ctxproxy"
    assert prepared.synthetic is not None
    assert dict(prepared.synthetic.given) == {FIND_TOOLS: f"{FIND_TOOLS}_ctxproxy"}


async def test_duplicate_tool_names_go_as_they_came(harness: Harness) -> None:
    body = request(tools=[*chat_tools(), *chat_tools(3)])
    prepared = await harness.prepare(body)
    assert names(prepared.parsed) == names(body)
    assert DUPLICATE_NOTE in prepared.manifest.notes


async def test_kept_tools_that_cannot_fit_are_a_typed_refusal(tmp_path: Path) -> None:
    write_policy(
        tmp_path,
        "extends: default\nbudget: {context_window: 3000, default_reserved_output: 200}\n"
        "steps: [{kind: defer_tools, budget: 0.1, keep: ['*']}]\n",
    )
    harness = make_harness(tmp_path, shared_counters())
    with pytest.raises(ProxyError) as refused:
        await harness.prepare(request())
    assert refused.value.code == ErrorCode.context_length_exceeded


async def test_deferring_makes_a_request_fit_that_would_not(tmp_path: Path) -> None:
    write_policy(
        tmp_path,
        "extends: default\nbudget: {context_window: 6000, default_reserved_output: 200}\n"
        "steps: [{kind: defer_tools, budget: 0.2}]\n",
    )
    harness = make_harness(tmp_path, shared_counters())
    prepared = await harness.prepare(request())
    assert prepared.manifest.tokens_before > 6000 > prepared.manifest.tokens_after


async def test_ten_thousand_tools_with_huge_descriptions_are_deferred(harness: Harness) -> None:
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "description": "d", "parameters": {}}}
        for i in range(10_000)
    ]
    tools[5]["function"]["description"] = "x " * 500_000  # a 1 MB description
    prepared = await harness.prepare(request(tools=tools))
    assert names(prepared.parsed) == [FIND_TOOLS]
    assert prepared.synthetic is not None and prepared.synthetic.catalog is not None
    assert len(prepared.synthetic.catalog) == 10_000


async def test_a_follow_up_call_is_not_deferred_again(harness: Harness) -> None:
    """A follow-up call of the loop carries the tools it was given (none deferred again)."""
    body = request()
    prepared = await harness.preparer.prepare(
        body, client_bytes(body), TENANT, OPENAI_CHAT, call=FOLLOW_UP
    )
    assert names(prepared.parsed) == names(body)


async def test_slimmed_schemas_are_sent_and_loaded(tmp_path: Path) -> None:
    step = "{kind: defer_tools, budget: 2000, keep: [titled], slim_schemas: true}"
    write_policy(tmp_path, policy(step))
    harness = make_harness(tmp_path, shared_counters())
    parameters = {"type": "object", "properties": {"channel_id": {"title": "Channel Id"}}}
    titled = {"type": "function", "function": {"name": "titled", "parameters": parameters}}
    prepared = await harness.prepare(request(tools=[titled, *chat_tools()]))
    sent = prepared.parsed["tools"][0]["function"]["parameters"]
    assert sent == {"type": "object", "properties": {"channel_id": {}}}
    assert prepared.synthetic is not None and prepared.synthetic.catalog is not None
    assert titled["function"]["parameters"] == parameters  # the client's object untouched


async def test_the_search_tool_reads_the_same_once_its_only_tool_of_a_group_is_loaded(
    harness: Harness,
) -> None:
    before = await harness.prepare(request())
    history = [USER, call("f", "fetch_fetch"), result("f")]  # `fetch_*` has one tool
    after = await harness.prepare(request(history))
    assert names(after.parsed)[-2:] == ["fetch_fetch", FIND_TOOLS]
    assert after.parsed["tools"][-1] == before.parsed["tools"][-1]
    assert "fetch_*" in after.parsed["tools"][-1]["function"]["description"]  # still listed


async def test_codex_namespaces_are_deferred_and_loaded_whole(harness: Harness) -> None:
    tools = responses_tools()
    github = {"type": "namespace", "name": "mcp__github", "description": "G", "tools": tools[:36]}
    slack = {"type": "namespace", "name": "mcp__slack", "description": "S", "tools": tools[74:90]}
    call = {"type": "function_call", "call_id": "c1", "name": "slack_post_message"}
    used = [
        {**call, "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "posted"},
    ]
    body = {"model": "gpt-5", "input": [USER, *used], "tools": [github, slack]}
    prepared = await harness.preparer.prepare(body, client_bytes(body), TENANT, OPENAI_RESPONSES)
    sent = [tool.get("name") for tool in prepared.parsed["tools"]]
    assert sent == ["mcp__slack", FIND_TOOLS]  # the namespace a call used, whole
    assert prepared.parsed["tools"][0] is slack
    catalog = prepared.synthetic.catalog if prepared.synthetic else None
    assert catalog is not None and catalog.find("github_create_issue") is not None


async def test_hostile_tool_lists_on_messages_and_responses(harness: Harness) -> None:
    tools = [
        {"name": f"t{i}", "description": "d", "input_schema": {"type": "object"}}
        for i in range(10_000)
    ]
    tools[3]["description"] = "x " * 500_000  # a 1 MB description
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [USER], "tools": tools}
    prepared = await harness.preparer.prepare(body, client_bytes(body), TENANT, ANTHROPIC_MESSAGES)
    assert [tool["name"] for tool in prepared.parsed["tools"]] == [FIND_TOOLS]
    functions = [
        {"type": "function", "name": f"t{i}", "description": "d", "parameters": {}}
        for i in range(10_000)
    ]
    body = {"model": "gpt-5", "input": "hi", "tools": [*functions, functions[0]]}
    prepared = await harness.preparer.prepare(body, client_bytes(body), TENANT, OPENAI_RESPONSES)
    assert prepared.body == client_bytes(body)  # duplicates: as they came
    assert DUPLICATE_NOTE in prepared.manifest.notes


def messages_request(system: str | None, marked: list[str]) -> dict[str, Any]:
    """A Messages request that used `slack_get_users` before, its tools in `marked` carrying
    the client's breakpoint."""
    tools = [
        {**tool, "cache_control": {"type": "ephemeral"}} if tool["name"] in marked else tool
        for tool in anthropic_tools()
    ]
    use = {"type": "tool_use", "id": "u1", "name": "slack_get_users", "input": {}}
    answer = {"type": "tool_result", "tool_use_id": "u1", "content": "alice, bob"}
    messages = [
        USER,
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [answer]},
    ]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages, "tools": tools}
    return body if system is None else {**body, "system": system}


async def _marked(harness: Harness, body: dict[str, Any]) -> Prepared:
    call = dataclasses.replace(FIRST_CALL, cache_marks=True)  # an Anthropic upstream
    return await harness.preparer.prepare(
        body, client_bytes(body), TENANT, ANTHROPIC_MESSAGES, call=call
    )


def _marks_on_tools(body: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in body["tools"] if "cache_control" in tool]


async def test_auto_breakpoints_go_on_the_tools_actually_sent(harness: Harness) -> None:
    """No system: the end of tools is the last tool sent (the search tool); a client's
    breakpoint on a deferred or loaded tool goes with it (it would move with every load)."""
    body = messages_request(None, ["slack_get_users", "slack_post_message"])
    prepared = await _marked(harness, body)
    sent = [tool["name"] for tool in prepared.parsed["tools"]]
    assert sent[-2:] == ["slack_get_users", FIND_TOOLS]
    assert _marks_on_tools(prepared.parsed) == [FIND_TOOLS]
    marks = prepared.manifest.cache_marks
    assert marks is not None and marks["client_marks"] == 0
    assert marks["placed"][0] == f"tools[{len(sent) - 1}]"
    assert json.dumps(prepared.parsed).count("cache_control") == len(marks["placed"]) <= 4
    clients = {tool["name"]: tool for tool in body["tools"]}
    assert "cache_control" in clients["slack_get_users"]  # the client's objects untouched


async def test_auto_breakpoints_end_tools_and_system_on_the_system(harness: Harness) -> None:
    prepared = await _marked(harness, messages_request("You are terse.", ["slack_get_users"]))
    assert _marks_on_tools(prepared.parsed) == []
    marks = prepared.manifest.cache_marks
    assert marks is not None and marks["placed"][0] == "system[0]"
    assert prepared.parsed["system"][0]["cache_control"] == {"type": "ephemeral"}


async def test_a_kept_tools_breakpoint_stays_and_what_came_writes_every_tool(
    harness: Harness,
) -> None:
    prepared = await _marked(harness, messages_request(None, ["filesystem_read_file"]))
    assert _marks_on_tools(prepared.parsed) == ["filesystem_read_file"]
    marks = prepared.manifest.cache_marks
    assert marks is not None and marks["client_marks"] == 1 and marks["placed"] == []
    # What the request as it came writes is priced on the client's whole tool list.
    freed = prepared.manifest.actions[0].tokens_freed
    assert marks["written_tokens_unchanged"] - marks["written_tokens"] == freed > 0
