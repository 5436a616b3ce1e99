"""Tool definitions within a budget: the proxy defers most of the client's tools behind its
`find_tools`, runs the searches itself and loads what the model finds; the client sees only calls
of its own tools (OpenAI Chat Completions through the `openai` SDK, JSON and streams)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from fakes import FakeUpstream
from mcp_tools import chat_tools
from synthetic_harness import CLIENT_KEY, SyntheticProxies
from tool_search_harness import (
    FIND,
    KEPT,
    NEEDED,
    RESULT,
    chat_replies,
    offered,
    tools_policy,
)

USER = {"role": "user", "content": "Tell the team on Slack that the deploy is done."}


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
    sent = follow_up.json()["tools"]
    assert turn_two["tools"][: len(sent)] == sent  # loaded still: the same tool-list prefix
    kept = [m for m in turn_two["messages"] if m.get("role") == "tool"]
    assert NEEDED in json.loads(kept[0]["content"])["loaded"]  # the search came back in place


def _result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": RESULT}
