"""`POST /v1/responses` through the real server with the real `openai` SDK (`responses.create`,
JSON and streaming) against the fake Responses upstream: passthrough when nothing changes,
reduced with every call paired and every reasoning item intact, the refusal as the SDK's
`BadRequestError`, history held by the provider forwarded unchanged, other routes forwarded, a
recorded event stream relayed byte for byte. The read rounds: `test_e2e_responses_rounds.py`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from fakes import (
    FakeUpstream,
    function_call_item,
    message_item,
    reasoning_item,
    replay_file,
    response_stream,
)
from fakes.wire import wire_file
from proxy_harness import RunningProxy
from responses_harness import (
    ENCRYPTED,
    RECORDED,
    RESPONSES,
    assert_paired_and_reasoning_intact,
    history,
    post_raw,
    sdk_for,
    started_proxy,
)
from synthetic_harness import BIG, READ


@pytest.fixture
async def proxy(fake_upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[RunningProxy]:
    async for running in started_proxy(fake_upstream, tmp_path):
        yield running


@pytest.fixture
async def sdk(proxy: RunningProxy) -> AsyncIterator[openai.AsyncOpenAI]:
    async for client in sdk_for(proxy):
        yield client


async def test_small_request_goes_upstream_byte_for_byte(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    raw = b'{"model": "gpt-5",  "input": [{"role": "user", "content": "hi"}], "store": false}'
    status, _, body = await post_raw(proxy.base_url + "/responses", raw)
    assert status == 200 and json.loads(body)["output"][0]["content"][0]["text"] == "echo: hi"
    assert fake_upstream.last.path == RESPONSES and fake_upstream.last.body == raw


async def test_history_held_by_the_provider_is_forwarded_unchanged(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    body = history(previous_response_id="resp_earlier")
    raw = json.dumps(body).encode()
    status, headers, _ = await post_raw(proxy.base_url + "/responses", raw)
    assert status == 200
    assert fake_upstream.last.body == raw  # far over the window, and still not touched
    assert "history_at_provider" in headers["x-ctxproxy-notes"]
    assert headers["x-ctxproxy-actions"] == "none"
    continuation = {
        "model": "gpt-5",
        "previous_response_id": "resp_earlier",
        "input": [{"type": "function_call_output", "call_id": "call_at_provider", "output": BIG}],
    }
    raw = json.dumps(continuation).encode()  # its call is in the provider's history only
    status, headers, _ = await post_raw(proxy.base_url + "/responses", raw)
    assert status == 200 and fake_upstream.last.body == raw
    assert headers["x-ctxproxy-notes"] == "history_at_provider"


async def test_reduced_body_keeps_calls_paired_and_reasoning_intact(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    answer = await sdk.responses.create(**history())
    assert answer.output_text.startswith("echo: ")
    sent = fake_upstream.last.json()
    assert_paired_and_reasoning_intact(sent)
    assert sent["input"][2] == history()["input"][2]  # the reasoning item, field for field
    assert len(fake_upstream.last.body) < len(json.dumps(history())) // 3
    output = sent["input"][4]["output"]
    assert output.startswith("[ctxproxy#") and "line 0:" in output
    assert sent["instructions"] == "You are a careful assistant."
    assert [t["name"] for t in sent["tools"]] == ["dump", READ, "search_context_artifact"]
    assert all(t["type"] == "function" for t in sent["tools"])


async def test_unfittable_request_is_the_sdks_context_length_error(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="gpt-5", input="word " * 20_000)
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.status_code == 400
    assert fake_upstream.requests(RESPONSES) == []


async def test_other_responses_routes_are_forwarded(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(proxy.base_url + "/responses/resp_123/input_items?limit=2") as response,
    ):
        assert response.status == 200
        echoed = await response.json()
    assert echoed["path"] == "/v1/responses/resp_123/input_items"
    assert echoed["query"] == "limit=2"


async def test_recorded_stream_reaches_the_client_byte_for_byte(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    fake_upstream.enqueue(replay_file(wire_file(RECORDED), chunk_size=61))
    raw = b'{"model": "gpt-5", "input": "weather in Edinburgh?", "stream": true}'
    status, headers, body = await post_raw(proxy.base_url + "/responses", raw)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert body == wire_file(RECORDED).read_bytes()


async def test_recorded_stream_through_the_read_loop_is_unchanged_when_nothing_is_read(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    fake_upstream.enqueue(replay_file(wire_file(RECORDED), chunk_size=61))
    stream = await sdk.responses.create(**history(), stream=True)
    kinds = [event.type async for event in stream]
    recorded = wire_file(RECORDED).read_bytes().split(b"\n")
    assert kinds == [line[7:].decode() for line in recorded if line.startswith(b"event: ")]
    assert "read_context_artifact" in fake_upstream.last.body.decode()  # the loop was on


def long_history(turns: int) -> list[dict[str, Any]]:
    """A Codex-like history: per turn a user message, reasoning, a call and a sizeable output,
    and the model's answer."""
    items: list[dict[str, Any]] = [{"type": "message", "role": "developer", "content": "rules"}]
    for turn in range(turns):
        items += [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"step {turn}"}],
            },
            reasoning_item(f"rs_{turn}", f"enc-{turn}-" + "z" * 40),
            function_call_item("shell", json.dumps({"cmd": f"cat f{turn}"}), call_id=f"c{turn}"),
            {
                "type": "function_call_output",
                "call_id": f"c{turn}",
                "output": f"file {turn}\n" + "data " * 300,
            },
            message_item(f"done {turn}", id=f"msg_{turn}"),
        ]
    return items


async def test_long_history_cleared_and_dropped_keeps_units_whole(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    items = long_history(40)
    await sdk.responses.create(model="gpt-5", input=items, store=False)  # type: ignore[arg-type]
    sent = fake_upstream.last.json()["input"]
    assert len(fake_upstream.last.body) < 16_000
    assert sent[0] == items[0]
    notices = [
        i
        for i in sent
        if i.get("type") == "message"
        and "[ctxproxy#" in str(i)
        and i.get("role") != "assistant"
        and "step" not in str(i)
    ]
    assert notices, "no drop notice"
    originals = {i["id"]: i for i in items if i.get("type") == "reasoning"}
    calls = {i["call_id"] for i in sent if i.get("type") == "function_call"}
    outs = {i["call_id"] for i in sent if i.get("type") == "function_call_output"}
    assert calls == outs and calls
    for index, item in enumerate(sent):
        if item.get("type") == "reasoning":
            assert item == originals[item["id"]]
            assert sent[index + 1]["call_id"] == "c" + item["id"][3:]
    newest = [i for i in sent if i.get("call_id") == "c39" and "output" in i]
    assert newest and "data data" in newest[0]["output"]


async def test_a_dry_run_prepares_a_responses_body(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    raw = json.dumps(history()).encode()
    url = proxy.base_url + "/context/prepare?format=openai_responses"
    status, _, body = await post_raw(url, raw)
    assert status == 200
    answer = json.loads(body)
    assert answer["changed"] is True and answer["manifest"]["outcome"] == "reduced"
    assert_paired_and_reasoning_intact(answer["body"])
    assert fake_upstream.requests(RESPONSES) == []
    status, _, body = await post_raw(proxy.base_url + "/context/prepare?format=nope", raw)
    assert status == 400 and json.loads(body)["error"]["param"] == "format"


async def test_a_codex_shaped_request_streams_through(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    patch_tool = {
        "type": "custom",
        "name": "apply_patch",
        "description": "Apply a patch",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
    }
    shell_tool = {
        "type": "function",
        "name": "shell",
        "strict": False,
        "parameters": {"type": "object", "properties": {"command": {"type": "array"}}},
    }
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "<permissions>...</permissions>"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "fix the failing test"}],
        },
        {"type": "reasoning", "summary": [], "content": None, "encrypted_content": ENCRYPTED},
        {
            "type": "function_call",
            "name": "shell",
            "call_id": "call_1",
            "arguments": '{"command":["pytest","-x"]}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": BIG},
        {"type": "reasoning", "summary": [], "content": None, "encrypted_content": ENCRYPTED},
        {
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": "call_2",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** End Patch",
        },
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
    ]
    body = {
        "model": "gpt-5",
        "instructions": "You are Codex.",
        "input": items,
        "tools": [shell_tool, patch_tool],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199-session",
    }
    stream = await sdk.responses.create(**body)
    text = "".join([e.delta async for e in stream if e.type == "response.output_text.delta"])
    assert text.startswith("echo: ")
    sent = fake_upstream.last.json()
    assert [t["name"] for t in sent["tools"]] == [
        "shell",
        "apply_patch",
        READ,
        "search_context_artifact",
    ]
    assert sent["tools"][1] == patch_tool
    assert sent["input"][4]["output"].startswith("[ctxproxy#")
    assert [sent["input"][i] for i in (0, 1, 2, 3, 5, 6, 7)] == [
        items[i] for i in (0, 1, 2, 3, 5, 6, 7)
    ]
    assert {k: v for k, v in sent.items() if k not in ("input", "tools")} == {
        k: v for k, v in body.items() if k not in ("input", "tools")
    }


async def test_a_relayed_stream_that_breaks_ends_with_an_error_numbered_next(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    """A stream relayed as it is (nothing to read back) that the upstream breaks: the error
    event continues the event numbering (it was `sequence_number` 0)."""
    fake_upstream.enqueue(response_stream([message_item("a long answer")], abort_after=5))
    raw = b'{"model": "gpt-5", "input": "hi", "stream": true}'
    status, _, body = await post_raw(proxy.base_url + "/responses", raw)
    events = [json.loads(line[6:]) for line in body.split(b"\n") if line.startswith(b"data: ")]
    assert status == 200 and events[-1]["type"] == "error"
    assert [e["sequence_number"] for e in events] == list(range(6))
