"""Hostile Messages input through the real server to the fake Anthropic server (what the hostile
run of bench/hostile/run_messages.py found): never a 500, errors in Anthropic's envelope, broken
input refused or forwarded untouched, thinking messages byte-identical upstream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from anthropic_harness import BIG, MODEL, anthropic_proxy, long_conversation, reading_then
from fakes.anthropic import message_body, sse_event, stream_events, text_block
from fakes.replies import JsonReply, SSEReply

MESSAGES = "/v1/messages"
REJECT = "extends: default\non_invalid: reject\n"
KEY = {"x-api-key": "k"}
"""A client's credential: nothing is stored for a request without one."""


async def post(url: str, body: Any) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=body, headers={"x-api-key": "k"}) as response,
    ):
        return response.status, json.loads(await response.read())


@pytest.mark.parametrize("path", [MESSAGES, f"{MESSAGES}/count_tokens"])
async def test_blocks_whose_type_is_an_object_are_no_500(tmp_path: Path, path: str) -> None:
    odd = [{"type": {"a": 1}}, {"type": ["image"]}, {"type": "text", "text": "hi"}]
    messages = [*long_conversation(2), {"role": "user", "content": odd}]
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        status, answer = await post(proxy.url + path, {"model": MODEL, "max_tokens": 100,
                                                       "messages": messages})  # fmt: skip
        assert status == 200, answer
        if path.endswith("count_tokens"):  # the proxy's own count
            assert answer["input_tokens"] > 0
            return
        sent = json.loads(fake.requests(path)[0].body)
        # kept as they came; the last text block ends the request: the proxy's breakpoint
        marked = {**odd[2], "cache_control": {"type": "ephemeral"}}
        assert sent["messages"][-1]["content"] == [*odd[:2], marked]


async def test_a_stream_event_whose_type_is_an_object_reaches_the_client(tmp_path: Path) -> None:
    events = stream_events(message_body([text_block("fine")]))
    odd = sse_event("mystery", {"type": {"nested": True}, "index": 0})
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        fake.enqueue(SSEReply([events[0], odd, *events[1:]], done=False))
        body = {"model": MODEL, "max_tokens": 100, "stream": True,
                "messages": long_conversation(2)}  # fmt: skip
        async with (
            aiohttp.ClientSession() as session,
            session.post(proxy.url + MESSAGES, json=body, headers=KEY) as response,
        ):
            data = await response.read()
        assert response.status == 200
        assert odd in data and b"message_stop" in data and b"event: error" not in data
        assert "read_context_artifact" in fake.requests(MESSAGES)[0].body.decode()


@pytest.mark.parametrize(
    ("role", "block", "reason"),
    [
        ("assistant", {"type": "tool_result", "tool_use_id": "toolu_0", "content": "x"},
         "messages[1]: a tool_result block in an assistant message"),
        ("user", {"type": "tool_use", "id": "toolu_z", "name": "dump", "input": {}},
         "messages[2]: a tool_use block in a user message"),
    ],
)  # fmt: skip
async def test_a_misplaced_tool_block_is_refused_or_forwarded_untouched(
    tmp_path: Path, role: str, block: dict[str, Any], reason: str
) -> None:
    messages = long_conversation(2)
    target = next(m for m in messages if m["role"] == role and isinstance(m["content"], list))
    target["content"].append(block)
    body = {"model": MODEL, "max_tokens": 100, "messages": messages}
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "reject.yaml").write_text(REJECT)
    tenants = [{"name": "default", "policy": "reject"}]
    async with anthropic_proxy(tmp_path, tenants=tenants) as (fake, proxy):
        status, answer = await post(proxy.url + MESSAGES, body)
        assert status == 400 and answer["type"] == "error"
        assert answer["error"]["type"] == "invalid_request_error"
        assert answer["error"]["message"] == reason
        assert fake.requests(MESSAGES) == []
    (tmp_path / "forward").mkdir()
    async with (
        anthropic_proxy(tmp_path / "forward") as (fake, proxy),  # on_invalid: forward
        aiohttp.ClientSession() as session,
    ):
        async with session.post(proxy.url + MESSAGES, json=body, headers=KEY) as response:
            assert response.status == 200
            # never hidden in a dry run only: the headers, the access line, the metric say so
            assert response.headers["x-ctxproxy-outcome"] == "invalid_forwarded"
            assert response.headers["x-ctxproxy-notes"] == "invalid_forwarded"
        assert json.loads(fake.requests(MESSAGES)[0].body) == body  # untouched, BIG kept
        async with session.get(proxy.url + "/metrics") as response:
            metrics = await response.text()
        assert 'outcome="invalid_forwarded",policy="small"} 1.0' in metrics or (
            'policy="small",outcome="invalid_forwarded"} 1.0' in metrics
        )


async def test_capping_cache_marks_keeps_thinking_messages_byte_identical(tmp_path: Path) -> None:
    messages = long_conversation(3)
    mark = {"type": "ephemeral"}
    for message in messages:
        if isinstance(message["content"], list):
            for block in message["content"]:
                block["cache_control"] = mark
    body = {"model": MODEL, "max_tokens": 100, "messages": messages}
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        status, _ = await post(proxy.url + MESSAGES, body)
        assert status == 200
        sent = json.loads(fake.requests(MESSAGES)[0].body)["messages"]
        mine = [m for m in messages if m["role"] == "assistant"]
        theirs = [m for m in sent if m["role"] == "assistant"]
        assert theirs and all(m in mine for m in theirs)
        assert BIG not in json.dumps(sent)  # it was reduced (and so rendered)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_upstream_usage_of_400_digits_is_no_500(
    tmp_path: Path, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    huge = {"input_tokens": 10**400, "output_tokens": 5, "cache_read_input_tokens": 10**400}
    content = [text_block("fine")]
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        whole = message_body(content, usage_=huge)
        fake.enqueue(SSEReply(stream_events(whole), done=False) if stream else JsonReply(whole))
        body = {"model": MODEL, "max_tokens": 100, "stream": stream,
                "messages": long_conversation(2)}  # fmt: skip
        async with (
            aiohttp.ClientSession() as session,
            session.post(proxy.url + MESSAGES, json=body, headers=KEY) as response,
        ):
            data = await response.read()
        assert response.status == 200, data
        assert b"fine" in data
        assert len(response.headers.get("x-ctxproxy-cached-tokens", "")) <= 12
        async with aiohttp.ClientSession() as session, session.get(proxy.url + "/metrics") as got:
            assert got.status == 200
    assert "Traceback" not in caplog.text and "failed" not in caplog.text


@pytest.mark.parametrize("after_a_read", [False, True])
async def test_a_stream_cut_before_message_stop_ends_with_an_error(
    tmp_path: Path, after_a_read: bool
) -> None:
    """The upstream's (last) round stopped before `message_stop`: the client's stream ends with
    an error event, not with a message_delta/message_stop the proxy made up for a cut message."""
    cut = SSEReply(stream_events(message_body([text_block("half an ans")]))[:-1], done=False)
    async with anthropic_proxy(tmp_path) as (fake, proxy):
        fake.enqueue_many(*([reading_then("unused", stream=True)[0]] if after_a_read else []), cut)
        body = {"model": MODEL, "max_tokens": 100, "stream": True,
                "messages": long_conversation(2)}  # fmt: skip
        async with (
            aiohttp.ClientSession() as session,
            session.post(proxy.url + MESSAGES, json=body, headers=KEY) as response,
        ):
            data = await response.read()
        assert response.status == 200
        events = [line for line in data.split(b"\n") if line.startswith(b"event: ")]
        assert events[-1] == b"event: error" and b"event: message_stop" not in events
        error = json.loads(data.rsplit(b"data: ", 1)[1])["error"]
        assert error["type"] == "api_error"
        assert error["ctxproxy"]["code"] == "upstream_invalid_response"
        assert len(fake.requests(MESSAGES)) == (2 if after_a_read else 1)
