"""Deferred tools on `POST /v1/responses` (the `openai` SDK, JSON and streams): the proxy runs
the model's `find_tools` call, loads the tool it found, and the client gets the call of that tool
only; the next turn offers the same tool list."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from fakes import FakeUpstream
from mcp_tools import responses_tools
from synthetic_harness import CLIENT_KEY, SyntheticProxies
from tool_search_harness import (
    FIND,
    KEPT,
    NEEDED,
    RESULT,
    offered,
    responses_replies,
    tools_policy,
)

USER = {"role": "user", "content": "Tell the team on Slack that the deploy is done."}


def sdk(base_url: str) -> openai.AsyncOpenAI:
    key = CLIENT_KEY["Authorization"].removeprefix("Bearer ")
    return openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)


async def _output(client: openai.AsyncOpenAI, stream: bool, items: list[Any]) -> list[Any]:
    request = {"model": "gpt-5", "input": items, "tools": responses_tools(), "store": False}
    if not stream:
        answer = await client.responses.create(**request)
        return [item.model_dump(exclude_none=True) for item in answer.output]
    completed = None
    async for event in await client.responses.create(**request, stream=True):
        if event.type == "response.completed":
            completed = event.response
    assert completed is not None
    return [item.model_dump(exclude_none=True) for item in completed.output]


@pytest.mark.parametrize("stream", [False, True])
async def test_the_model_finds_a_deferred_tool_and_the_client_gets_its_call(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, stream: bool
) -> None:
    proxy = await proxies.start(
        policies={"tools": tools_policy()}, tenants=[{"name": "default", "policy": "tools"}]
    )
    fake_upstream.enqueue_many(*responses_replies(3))
    async with sdk(proxy.base_url) as client:
        output = await _output(client, stream, [USER])
        calls = [item for item in output if item["type"] == "function_call"]
        assert [c["name"] for c in calls] == [NEEDED]  # never find_tools
        search, follow_up = fake_upstream.requests()
        assert offered(search) == [KEPT, FIND]
        result = json.loads(follow_up.json()["input"][-1]["output"])
        assert result["loaded"][0] == NEEDED
        assert offered(follow_up) == [KEPT, *result["loaded"], FIND]

        answer = {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": RESULT}
        await _output(client, stream, [USER, *output, answer])
    assert fake_upstream.requests()[-1].json()["tools"] == follow_up.json()["tools"]
