"""Shared pieces of the Responses API end-to-end tests: a Codex-like request whose call output is
too large for the small window (`synthetic_harness.small_policy`), the proxy's read call built
from the offloaded output, and the checks that every call kept its output and every reasoning
item stayed intact before its call."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
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
from proxy_harness import RunningProxy
from synthetic_harness import BIG, READ, SyntheticProxies

RESPONSES = "/v1/responses"
RECORDED = "openai-responses-stream-reasoning-call.sse"
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
ENCRYPTED = "gAAAAB" + "x9" * 300
TOOL = {
    "type": "function",
    "name": "dump",
    "description": "Dump the data",
    "parameters": {"type": "object", "properties": {}},
}


async def started_proxy(fake: FakeUpstream, tmp_path: Path) -> AsyncIterator[RunningProxy]:
    """A proxy with the small-window policy in front of `fake` (stopped afterwards)."""
    proxies = SyntheticProxies(fake, tmp_path)
    yield await proxies.start()
    await proxies.stop_all()


async def sdk_for(proxy: RunningProxy) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key="k", max_retries=0, timeout=10.0
    ) as client:
        yield client


def history(**extra: Any) -> dict[str, Any]:
    """A Codex-like request (store false, full input): a reasoning item before a call whose
    output (BIG) is too large for the small window."""
    return {
        "model": "gpt-5",
        "instructions": "You are a careful assistant.",
        "input": [
            {"type": "message", "role": "developer", "content": "Answer briefly."},
            {"role": "user", "content": "What is the value on line 512?"},
            reasoning_item("rs_1", ENCRYPTED, summary=["I should dump the data."]),
            function_call_item("dump", "{}", call_id="call_dump"),
            {"type": "function_call_output", "call_id": "call_dump", "output": BIG},
        ],
        "tools": [TOOL],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        **extra,
    }


JSON_WITH_KEY = {"Content-Type": "application/json", "Authorization": "Bearer sk-test-client"}
"""A client's credential too: nothing is stored for a request without one."""


async def post_raw(url: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=raw, headers=JSON_WITH_KEY) as response,
    ):
        return response.status, dict(response.headers), await response.read()


def artifact_id_in(record: Recorded) -> str:
    output = next(i for i in record.json()["input"] if i.get("type") == "function_call_output")
    found = ARTIFACT_ID.search(output["output"])
    assert found is not None, "the call output was not offloaded"
    return found.group(0)


def read_call(record: Recorded, call_id: str = "call_read") -> dict[str, Any]:
    arguments = json.dumps({"artifact_id": artifact_id_in(record), "offset": 0, "max_chars": 300})
    return function_call_item(READ, arguments, call_id=call_id)


def assert_paired_and_reasoning_intact(body: dict[str, Any]) -> None:
    items = body["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs) and len(set(calls)) == len(calls)
    reasoning = [i for i in items if i.get("type") == "reasoning"]
    assert reasoning[0] == history()["input"][2]  # the client's, field for field
    for index, item in enumerate(items):  # every reasoning item still precedes its call
        if item.get("type") == "reasoning":
            assert items[index + 1]["type"] == "function_call"


def read_then_answer(stream: bool) -> Reply:
    """Round 1: reasoning + the proxy's read call; round 2: the answer."""

    def choose(record: Recorded) -> Reply:
        if any(i.get("call_id") == "call_read" for i in record.json()["input"]):
            output = [message_item("Line 512 holds 3649.")]
            usage = responses_usage(200, 7)
        else:
            output = [reasoning_item("rs_read", "enc-read"), read_call(record)]
            usage = responses_usage(100, 3)
        if stream:
            return response_stream(output, usage=usage)
        return response_json(output, usage=usage)

    return dynamic_reply(choose)
