"""Tool definitions within a budget: the proxy defers most of the client's tools behind its
`find_tools`, runs the searches itself and loads what the model finds; the client sees only calls
of its own tools (OpenAI Chat Completions through the `openai` SDK, JSON and streams)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest
from fakes import FakeUpstream, completion
from mcp_tools import chat_tools
from synthetic_harness import CLIENT_KEY, READ, SEARCH, SyntheticProxies, conversation
from tool_search_harness import (
    FIND,
    KEPT,
    NEEDED,
    QUERY,
    RESULT,
    chat_call,
    chat_replies,
    offered,
    tools_policy,
)

USER = {"role": "user", "content": "Tell the team on Slack that the deploy is done."}


def _tool(name: str, description: str = "d") -> dict[str, Any]:
    function = {"name": name, "description": description, "parameters": {"type": "object"}}
    return {"type": "function", "function": function}


def offered_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def sdk(base_url: str) -> openai.AsyncOpenAI:
    key = CLIENT_KEY["Authorization"].removeprefix("Bearer ")
    return openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)


async def _start(proxies: SyntheticProxies) -> str:
    proxy = await proxies.start(
        policies={"tools": tools_policy()}, tenants=[{"name": "default", "policy": "tools"}]
    )
    return proxy.base_url


async def _first_turn(client: openai.AsyncOpenAI, stream: bool) -> dict[str, Any]:
    """The client's first request; returns the assistant message it received."""
    request = {"model": "gpt-4o", "messages": [USER], "tools": chat_tools()}
    if not stream:
        reply = await client.chat.completions.create(**request)
        return reply.choices[0].message.model_dump(exclude_none=True)
    calls: dict[int, dict[str, Any]] = {}
    async with await client.chat.completions.create(**request, stream=True) as chunks:
        async for chunk in chunks:
            for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                call = calls.setdefault(delta.index, {"arguments": ""})
                call["id"] = delta.id or call.get("id")
                if delta.function and delta.function.name:
                    call["name"] = delta.function.name
                if delta.function and delta.function.arguments:
                    call["arguments"] += delta.function.arguments
    tool_calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for c in calls.values()
    ]
    return {"role": "assistant", "tool_calls": tool_calls}


@pytest.mark.parametrize("stream", [False, True])
async def test_the_model_finds_a_deferred_tool_and_the_client_gets_its_call(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, stream: bool
) -> None:
    base_url = await _start(proxies)
    fake_upstream.enqueue_many(*chat_replies(3))
    async with sdk(base_url) as client:
        message = await _first_turn(client, stream)
        calls = message["tool_calls"]
        assert [c["function"]["name"] for c in calls] == [NEEDED]  # never find_tools
        assert json.loads(calls[0]["function"]["arguments"])["channel_id"] == "C1"
        search, follow_up = fake_upstream.requests()
        assert offered(search)[0] == KEPT and offered(search)[-1] == FIND
        assert NEEDED not in offered(search) and len(offered(search)) == 2
        result = json.loads(follow_up.json()["messages"][-1]["content"])
        assert result["loaded"][0] == NEEDED and len(result["loaded"]) == 3
        assert offered(follow_up) == [KEPT, *result["loaded"], FIND]  # appended, in order

        history = [USER, message, _result(calls[0]["id"])]
        await client.chat.completions.create(model="gpt-4o", messages=history, tools=chat_tools())
    turn_two = fake_upstream.requests()[-1].json()
    assert turn_two["tools"] == follow_up.json()["tools"]  # loaded still: the same tool list
    kept = [m for m in turn_two["messages"] if m.get("role") == "tool"]
    assert NEEDED in json.loads(kept[0]["content"])["loaded"]  # the search came back in place


def _result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": RESULT}


async def test_a_deferred_tool_the_model_calls_directly_goes_to_the_client(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    base_url = await _start(proxies)
    fake_upstream.enqueue(chat_call(False, NEEDED, {"channel_id": "C9", "text": "hi"}))
    async with sdk(base_url) as client:
        reply = await client.chat.completions.create(
            model="gpt-4o", messages=[USER], tools=chat_tools()
        )
    calls = reply.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == [NEEDED]  # passed on, not broken or dropped
    assert NEEDED not in offered(fake_upstream.last)
    assert len(fake_upstream.requests()) == 1


async def test_a_search_beside_a_client_call_is_run_and_kept_for_the_next_turn(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    base_url = await _start(proxies)
    both = [
        {"id": "call_find", "name": FIND, "arguments": json.dumps({"query": QUERY})},
        {"id": "call_read", "name": KEPT, "arguments": json.dumps({"path": "/notes.md"})},
    ]
    fake_upstream.enqueue_many(completion(None, tool_calls=both), completion("Done."))
    async with sdk(base_url) as client:
        reply = await client.chat.completions.create(
            model="gpt-4o", messages=[USER], tools=chat_tools()
        )
        message = reply.choices[0].message.model_dump(exclude_none=True)
        assert [c["function"]["name"] for c in message["tool_calls"]] == [KEPT]
        assert len(fake_upstream.requests()) == 1  # the client's call ends the request
        history = [USER, message, _result("call_read")]
        await client.chat.completions.create(model="gpt-4o", messages=history, tools=chat_tools())
    turn_two = fake_upstream.last.json()
    assert NEEDED in offered(fake_upstream.last)  # loaded by the search of the turn before
    assert [m.get("tool_call_id") for m in turn_two["messages"] if m["role"] == "tool"] == [
        "call_find",
        "call_read",
    ]  # the search is back in place, paired with its call


async def test_the_dry_run_lists_deferred_and_loaded_tools(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    base_url = await _start(proxies)
    forced = {"type": "function", "function": {"name": NEEDED}}
    body = {"model": "gpt-4o", "messages": [USER], "tools": chat_tools(), "tool_choice": forced}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{base_url}/context/prepare", json=body, headers=CLIENT_KEY) as response,
    ):
        assert response.status == 200
        answer = await response.json()
    detail = answer["manifest"]["actions"][0]["detail"]
    assert detail["loaded"] == [NEEDED]  # the forced tool is loaded
    assert len(detail["deferred"]) == 118 and NEEDED not in detail["deferred"]
    assert offered_names(answer["body"]) == [KEPT, NEEDED, FIND]
    assert fake_upstream.requests() == []


@pytest.mark.parametrize(
    ("tools", "deferred"),
    [
        pytest.param([_tool(f"t{i}") for i in range(10_000)], True, id="10000-tools"),
        pytest.param([_tool("big", "x " * 500_000), *chat_tools()], True, id="1MB-description"),
        pytest.param([*chat_tools(), *chat_tools(2)], False, id="duplicate-names"),
        pytest.param(
            [_tool(FIND), _tool("read_context_artifact"), *chat_tools()], True, id="collisions"
        ),
    ],
)
async def test_hostile_tool_lists_are_deferred_or_forwarded_as_they_came(
    proxies: SyntheticProxies,
    fake_upstream: FakeUpstream,
    tools: list[dict[str, Any]],
    deferred: bool,
) -> None:
    base_url = await _start(proxies)
    fake_upstream.enqueue(completion("fine"))
    async with sdk(base_url) as client:
        reply = await client.chat.completions.create(model="gpt-4o", messages=[USER], tools=tools)
    assert reply.choices[0].message.content == "fine"
    sent = offered(fake_upstream.last)
    if not deferred:
        assert sent == offered_names({"tools": tools})
        return
    assert len(sent) == len(set(sent)) < 20
    assert sent[-1] in (FIND, f"{FIND}_ctxproxy")
    clients = offered_names({"tools": tools})
    assert (sent[-1] == FIND) == (FIND not in clients)
    named_like_ours = [n for n in clients if n in (FIND, "read_context_artifact")]
    assert sent[: len(named_like_ours)] == named_like_ours  # always sent, under their names


async def test_when_even_the_kept_tools_cannot_fit_the_refusal_is_typed(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    tight = (
        "extends: default\nbudget: {context_window: 3000, default_reserved_output: 200}\n"
        "steps: [{kind: defer_tools, budget: 0.1, keep: ['*']}, {kind: drop_turns}]\n"
    )
    proxy = await proxies.start(
        policies={"tight": tight}, tenants=[{"name": "default", "policy": "tight"}]
    )
    async with sdk(proxy.base_url) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="gpt-4o", messages=[USER], tools=chat_tools()
            )
    assert refused.value.code == "context_length_exceeded"
    assert fake_upstream.requests() == []


async def test_parallel_searches_are_answered_each_and_load_once(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    base_url = await _start(proxies)
    searches = [
        {"id": "call_1", "name": FIND, "arguments": json.dumps({"query": QUERY})},
        {"id": "call_2", "name": FIND, "arguments": json.dumps({"query": "slack message post"})},
    ]
    fake_upstream.enqueue_many(completion(None, tool_calls=searches), completion("Done."))
    async with sdk(base_url) as client:
        reply = await client.chat.completions.create(
            model="gpt-4o", messages=[USER], tools=chat_tools()
        )
    assert reply.choices[0].message.content == "Done."
    follow_up = fake_upstream.last.json()
    results = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["call_1", "call_2"]  # a result per call
    loaded = [name for m in results for name in json.loads(m["content"])["loaded"]]
    sent = offered_names(follow_up)
    assert sent[0] == KEPT and sent[-1] == FIND
    assert sent[1:-1] == list(dict.fromkeys(loaded))  # each found tool once, in order


async def test_a_search_beside_the_read_tools_loads_before_them(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    """A request that defers tools and offloads a result offers both: the loaded tools go in
    after the ones sent and before all of the proxy's."""
    policy = tools_policy().replace(
        "{kind: offload_tool_results}", "{kind: offload_tool_results, threshold_chars: 2000}"
    )
    proxy = await proxies.start(
        policies={"tools": policy}, tenants=[{"name": "default", "policy": "tools"}]
    )
    fake_upstream.enqueue_many(*chat_replies(2))
    request = conversation(tools=chat_tools())  # its tool result (BIG) is offloaded
    request["messages"][0] = USER
    async with sdk(proxy.base_url) as client:
        reply = await client.chat.completions.create(**request)
    calls = reply.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == [NEEDED]
    search, follow_up = fake_upstream.requests()
    assert offered(search) == [KEPT, FIND, READ, SEARCH]
    loaded = json.loads(follow_up.json()["messages"][-1]["content"])["loaded"]
    assert offered(follow_up) == [KEPT, *loaded, FIND, READ, SEARCH]
