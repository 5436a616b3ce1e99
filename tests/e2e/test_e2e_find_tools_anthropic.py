"""Deferred tools on `POST /v1/messages` (the `anthropic` SDK against an `anthropic` upstream,
JSON and streams): the proxy runs the model's `find_tools` call, loads the tool it found, and the
client gets the `tool_use` of that tool only; the next turn offers the same tool list. The
upstream caches at breakpoints: `cache_marks: auto` ends tools + system on the last tool sent (the
search tool: no system here), never on a loaded tool, whose client breakpoint goes with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic_harness import MODEL, anthropic_proxy
from fakes import Recorded
from mcp_tools import anthropic_tools
from tool_search_harness import (
    FIND,
    KEPT,
    NEEDED,
    RESULT,
    anthropic_replies,
    offered,
    tools_policy,
)

USER = {"role": "user", "content": "Tell the team on Slack that the deploy is done."}


async def _answer(
    client: anthropic.AsyncAnthropic, stream: bool, messages: list[Any], marked: str = ""
) -> Any:
    """`marked`: a tool the client puts its one breakpoint on."""
    tools = [
        {**tool, "cache_control": {"type": "ephemeral"}} if tool["name"] == marked else tool
        for tool in anthropic_tools()
    ]
    request = {"model": MODEL, "max_tokens": 1024, "messages": messages, "tools": tools}
    if not stream:
        return await client.messages.create(**request)
    async with client.messages.stream(**request) as events:
        return await events.get_final_message()


def marked_tools(record: Recorded) -> list[str]:
    """The tools of a request that carry a breakpoint; every request holds at most four."""
    body = record.json()
    assert json.dumps(body).count("cache_control") <= 4
    return [tool["name"] for tool in body["tools"] if "cache_control" in tool]


@pytest.mark.parametrize(("stream", "marked"), [(False, ""), (True, ""), (False, NEEDED)])
async def test_the_model_finds_a_deferred_tool_and_the_client_gets_its_call(
    tmp_path: Path, stream: bool, marked: str
) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "tools.yaml").write_text(tools_policy())
    tenants = [{"name": "default", "policy": "tools"}]
    async with anthropic_proxy(tmp_path, tenants=tenants) as (fake, proxy):
        fake.enqueue_many(*anthropic_replies(3))
        client = anthropic.AsyncAnthropic(base_url=proxy.url, api_key="sk-ant-test")
        try:
            message = await _answer(client, stream, [USER], marked)
            uses = [b for b in message.content if b.type == "tool_use"]
            assert [b.name for b in uses] == [NEEDED]  # never find_tools
            search, follow_up = fake.requests()
            assert offered(search) == [KEPT, FIND]
            blocks = follow_up.json()["messages"][-1]["content"]
            result = json.loads(blocks[-1]["content"])
            assert result["loaded"][0] == NEEDED
            assert offered(follow_up) == [KEPT, *result["loaded"], FIND]
            assert marked_tools(search) == marked_tools(follow_up) == [FIND]

            content = [b.model_dump(exclude_none=True) for b in message.content]
            answer = {"type": "tool_result", "tool_use_id": uses[0].id, "content": RESULT}
            history = [USER, {"role": "assistant", "content": content}]
            await _answer(client, stream, [*history, {"role": "user", "content": [answer]}], marked)
        finally:
            await client.close()
        assert fake.requests()[-1].json()["tools"] == follow_up.json()["tools"]
        assert marked_tools(fake.requests()[-1]) == [FIND]
