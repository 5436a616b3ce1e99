"""`POST /v1/responses` through the real server with the real `openai` SDK (`responses.create`,
JSON and streaming) against the fake Responses upstream: reduced with every call paired and every
reasoning item intact, a read round executed by the proxy and invisible to the client, the
refusal as the SDK's `BadRequestError`, history held by the provider forwarded unchanged."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from fakes import (
    FakeUpstream,
    Recorded,
    dynamic_reply,
    function_call_item,
    message_item,
    reasoning_item,
    replay_file,
    response_json,
    response_stream,
    responses_usage,
)
from fakes.replies import Reply
from fakes.wire import wire_file
from proxy_harness import RunningProxy
from synthetic_harness import BIG, READ, SyntheticProxies

RESPONSES = "/v1/responses"
RECORDED = "openai-responses-stream-reasoning-call.sse"
ARTIFACT_ID = re.compile(r"art_[0-9a-f]{32}")
ENCRYPTED = "gAAAAB" + "x9" * 300
TOOL = {"type": "function", "name": "dump", "description": "Dump the data",
        "parameters": {"type": "object", "properties": {}}}


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


@pytest.fixture
async def proxy(fake_upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[RunningProxy]:
    proxies = SyntheticProxies(fake_upstream, tmp_path)
    yield await proxies.start()
    await proxies.stop_all()


@pytest.fixture
async def sdk(proxy: RunningProxy) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key="k", max_retries=0, timeout=10.0
    ) as client:
        yield client


async def post_raw(url: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as session, session.post(
        url, data=raw, headers={"Content-Type": "application/json"}
    ) as response:
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
    continuation = {"model": "gpt-5", "previous_response_id": "resp_earlier", "input": [
        {"type": "function_call_output", "call_id": "call_at_provider", "output": BIG}]}
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


async def test_read_round_is_executed_by_the_proxy_and_invisible(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    fake_upstream.enqueue_many(read_then_answer(False), read_then_answer(False))
    answer = await sdk.responses.create(**history())
    assert answer.output_text == "Line 512 holds 3649."
    assert [item.type for item in answer.output] == ["message"]
    assert answer.usage is not None
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (300, 10)
    second = fake_upstream.requests(RESPONSES)[-1].json()
    kept = second["input"][-3:]  # the round goes back upstream with its reasoning
    assert [i["type"] for i in kept] == ["reasoning", "function_call", "function_call_output"]
    assert kept[0]["encrypted_content"] == "enc-read"
    page = json.loads(kept[2]["output"])
    assert page["content"] == BIG[:300] and page["next_offset"] == 300
    assert_paired_and_reasoning_intact(second)


async def test_stream_continues_across_rounds_without_the_read(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    fake_upstream.enqueue_many(read_then_answer(True), read_then_answer(True))
    stream = await sdk.responses.create(**history(), stream=True)
    events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds.count("response.created") == 1
    assert kinds[-1] == "response.completed" and kinds.count("response.completed") == 1
    assert "response.function_call_arguments.delta" not in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Line 512 holds 3649."
    final = events[-1].response
    assert final.created_at == events[0].response.created_at
    assert [item.type for item in final.output] == ["message"]
    assert final.usage is not None and final.usage.input_tokens == 300
    assert len(fake_upstream.requests(RESPONSES)) == 2


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
    async with aiohttp.ClientSession() as session, session.get(
        proxy.base_url + "/responses/resp_123/input_items?limit=2"
    ) as response:
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
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": f"step {turn}"}]},
            reasoning_item(f"rs_{turn}", f"enc-{turn}-" + "z" * 40),
            function_call_item("shell", json.dumps({"cmd": f"cat f{turn}"}), call_id=f"c{turn}"),
            {"type": "function_call_output", "call_id": f"c{turn}",
             "output": f"file {turn}\n" + "data " * 300},
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
    notices = [i for i in sent if i.get("type") == "message" and "[ctxproxy#" in str(i)
               and i.get("role") != "assistant" and "step" not in str(i)]
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


async def test_the_read_round_is_kept_for_the_next_request(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    fake_upstream.enqueue_many(read_then_answer(False), read_then_answer(False))
    first = history()
    answer = await sdk.responses.create(**first)
    follow_up = history()
    follow_up["input"] += [item.model_dump(exclude_none=True) for item in answer.output]
    follow_up["input"].append({"role": "user", "content": "And line 513?"})
    await sdk.responses.create(**follow_up)
    sent = fake_upstream.last.json()["input"]
    kinds = [(i.get("type"), i.get("call_id"), i.get("role")) for i in sent[-5:]]
    assert kinds == [  # the round executed last time goes back just before the answer it led to
        ("reasoning", None, None),
        ("function_call", "call_read", None),
        ("function_call_output", "call_read", None),
        ("message", None, "assistant"),
        (None, None, "user"),
    ]
    assert sent[-5]["encrypted_content"] == "enc-read"
    assert sent[:4] == history()["input"][:4]


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


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_mixed_answer_gives_the_client_its_call_only(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI, stream: bool
) -> None:
    def mixed(record: Recorded) -> Reply:
        output = [reasoning_item("rs_c", "e1"), function_call_item("dump", "{}", call_id="c9"),
                  reasoning_item("rs_o", "e2"), read_call(record)]
        usage = responses_usage(50, 5)
        return response_stream(output, usage=usage) if stream else response_json(output,
                                                                                 usage=usage)

    fake_upstream.enqueue(dynamic_reply(mixed))
    if stream:
        events = [e async for e in await sdk.responses.create(**history(), stream=True)]
        final = events[-1].response
        assert all(getattr(e, "item_id", None) != "fc_call_read" for e in events)
    else:
        final = await sdk.responses.create(**history())
    assert [(i.type, getattr(i, "id", None)) for i in final.output] == [
        ("reasoning", "rs_c"), ("function_call", "fc_c9")
    ]
    assert len(fake_upstream.requests(RESPONSES)) == 1  # the read ran, no second call


async def test_items_the_client_saw_from_a_read_round_are_not_repeated_next_time(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    def rounds(record: Recorded) -> Reply:
        if any(i.get("call_id") == "call_read" for i in record.json()["input"]):
            return response_stream([message_item("Done.", id="msg_done")])
        output = [reasoning_item("rs_seen", "enc-seen"), message_item("Reading.", id="msg_seen"),
                  read_call(record)]
        return response_stream(output)

    fake_upstream.enqueue_many(dynamic_reply(rounds), dynamic_reply(rounds))
    events = [e async for e in await sdk.responses.create(**history(), stream=True)]
    seen = events[-1].response.output
    assert [i.id for i in seen] == ["rs_seen", "msg_seen", "msg_done"]
    follow_up = history()
    follow_up["input"] += [item.model_dump(exclude_none=True) for item in seen]
    follow_up["input"].append({"role": "user", "content": "thanks"})
    await sdk.responses.create(**follow_up)
    sent = fake_upstream.last.json()["input"]
    ids = [i.get("id") or i.get("call_id") for i in sent[5:]]
    assert ids == ["rs_seen", "msg_seen", "fc_call_read", "call_read", "msg_done", None]


async def test_a_codex_shaped_request_streams_through(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    patch_tool = {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
                  "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
    shell_tool = {"type": "function", "name": "shell", "strict": False,
                  "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}}
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "<permissions>...</permissions>"}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "fix the failing test"}]},
        {"type": "reasoning", "summary": [], "content": None, "encrypted_content": ENCRYPTED},
        {"type": "function_call", "name": "shell", "call_id": "call_1",
         "arguments": '{"command":["pytest","-x"]}'},
        {"type": "function_call_output", "call_id": "call_1", "output": BIG},
        {"type": "reasoning", "summary": [], "content": None, "encrypted_content": ENCRYPTED},
        {"type": "custom_tool_call", "status": "completed", "call_id": "call_2",
         "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
    ]
    body = {"model": "gpt-5", "instructions": "You are Codex.", "input": items,
            "tools": [shell_tool, patch_tool], "tool_choice": "auto",
            "parallel_tool_calls": False, "reasoning": {"effort": "medium", "summary": "auto"},
            "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "0199-session"}
    stream = await sdk.responses.create(**body)
    text = "".join([e.delta async for e in stream if e.type == "response.output_text.delta"])
    assert text.startswith("echo: ")
    sent = fake_upstream.last.json()
    assert [t["name"] for t in sent["tools"]] == [
        "shell", "apply_patch", READ, "search_context_artifact"]
    assert sent["tools"][1] == patch_tool
    assert sent["input"][4]["output"].startswith("[ctxproxy#")
    assert [sent["input"][i] for i in (0, 1, 2, 3, 5, 6, 7)] == [
        items[i] for i in (0, 1, 2, 3, 5, 6, 7)]
    assert {k: v for k, v in sent.items() if k not in ("input", "tools")} == {
        k: v for k, v in body.items() if k not in ("input", "tools")}
