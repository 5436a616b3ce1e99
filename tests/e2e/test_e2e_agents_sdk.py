"""The OpenAI Agents SDK's default model (`OpenAIResponsesModel`, `POST /v1/responses`) through
the proxy: a tool-calling agent whose tool returns a large output, against the fake Responses
upstream. The upstream sees the output offloaded with every call paired and every reasoning item
intact; the proxy's read round is executed by the proxy and never reaches the agent; an
unfittable request is the SDK's `BadRequestError` with code `context_length_exceeded`."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool
from fakes import (
    FakeUpstream,
    Recorded,
    dynamic_reply,
    function_call_item,
    message_item,
    reasoning_item,
    response_json,
    response_stream,
    responses_usage,
)
from fakes.replies import Reply
from synthetic_harness import BIG, READ, SyntheticProxies

RESPONSES = "/v1/responses"
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
ENCRYPTED = "gAAAAB" + "k7" * 200
ANSWER = "Line 512 holds 3649."
NO_TRACING = RunConfig(tracing_disabled=True)


@function_tool
def dump_table() -> str:
    """Dump the whole data table."""
    return BIG


def outputs(body: dict[str, Any]) -> dict[str, str]:
    return {
        item["call_id"]: item["output"]
        for item in body["input"]
        if item.get("type") == "function_call_output"
    }


def agent_script(stream: bool) -> Reply:
    """The model: call the agent's tool; then read the offloaded output; then answer."""

    def choose(record: Recorded) -> Reply:
        body = record.json()
        done = outputs(body)
        if "call_read" in done:
            output: list[dict[str, Any]] = [message_item(ANSWER)]
        elif "call_dump" in done:
            found = ARTIFACT_ID.search(done["call_dump"])
            assert found is not None, "the tool's output was not offloaded"
            arguments = json.dumps({"artifact_id": found.group(0), "offset": 0, "max_chars": 400})
            output = [
                reasoning_item("rs_2", ENCRYPTED + "2"),
                function_call_item(READ, arguments, call_id="call_read"),
            ]
        else:
            output = [
                reasoning_item("rs_1", ENCRYPTED, summary=["Dump the table first."]),
                function_call_item("dump_table", "{}", call_id="call_dump"),
            ]
        usage = responses_usage(max(1, len(record.body) // 4), 20)
        if stream:
            return response_stream(output, usage=usage, model="gpt-5")
        return response_json(output, usage=usage, model="gpt-5")

    return dynamic_reply(choose)


@pytest.fixture
async def client(fake_upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[openai.AsyncOpenAI]:
    proxies = SyntheticProxies(fake_upstream, tmp_path)
    proxy = await proxies.start()
    async with openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key="k", max_retries=0, timeout=10.0
    ) as sdk:
        yield sdk
    await proxies.stop_all()


def analyst(client: openai.AsyncOpenAI) -> Agent[Any]:
    return Agent(
        name="analyst",
        instructions="Answer questions about the data table; use your tool.",
        tools=[dump_table],
        model=OpenAIResponsesModel("gpt-5", client),
    )


def assert_upstream_saw_a_reduced_paired_history(fake: FakeUpstream) -> None:
    bodies = [record.json() for record in fake.requests(RESPONSES)]
    assert len(bodies) == 3
    second, third = bodies[1], bodies[2]
    assert outputs(second)["call_dump"].startswith("[ctxproxy#")  # offloaded, with its preview
    assert len(json.dumps(second)) < len(BIG) // 2
    for body in (second, third):
        items = body["input"]
        calls = sorted(i["call_id"] for i in items if i.get("type") == "function_call")
        assert calls == sorted(outputs(body))  # every call paired
        reasoning = {i["id"]: i for i in items if i.get("type") == "reasoning"}
        assert reasoning["rs_1"]["encrypted_content"] == ENCRYPTED
        assert reasoning["rs_1"]["summary"] == [
            {"type": "summary_text", "text": "Dump the table first."}
        ]
        position = items.index(reasoning["rs_1"])
        assert items[position + 1]["call_id"] == "call_dump"  # still before its call
    page = json.loads(outputs(third)["call_read"])
    assert page["content"] == BIG[:400]
    assert third["input"][-3]["id"] == "rs_2"  # the read round went back with its reasoning


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_agent_with_a_large_tool_output(
    fake_upstream: FakeUpstream, client: openai.AsyncOpenAI, stream: bool
) -> None:
    fake_upstream.enqueue_many(*[agent_script(stream)] * 3)
    question = "What is the value on line 512?"
    if stream:
        run = Runner.run_streamed(analyst(client), question, run_config=NO_TRACING)
        seen = [event async for event in run.stream_events()]
        assert seen
        result: Any = run
    else:
        result = await Runner.run(analyst(client), question, run_config=NO_TRACING)
    assert result.final_output == ANSWER
    assert_upstream_saw_a_reduced_paired_history(fake_upstream)
    items = json.dumps([item.to_input_item() for item in result.new_items], default=str)
    assert READ not in items and "call_read" not in items  # the proxy's round stayed hidden
    assert "call_dump" in items


async def test_unfittable_request_is_the_sdks_bad_request(
    fake_upstream: FakeUpstream, client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await Runner.run(analyst(client), "word " * 20_000, run_config=NO_TRACING)
    assert caught.value.code == "context_length_exceeded"
    assert fake_upstream.requests(RESPONSES) == []
