"""The proxy's read rounds on `POST /v1/responses` (real server, real `openai` SDK, fake Responses
upstream): executed by the proxy with their reasoning, invisible to the client in JSON and
streams, usage summed; a mixed answer gives the client its own call; the round is kept for the
next request without repeating what the client already has."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest
from fakes import (
    FakeUpstream,
    Recorded,
    dynamic_reply,
    error_reply,
    function_call_item,
    message_item,
    reasoning_item,
    response_json,
    response_stream,
    responses_usage,
)
from fakes.replies import Reply, SSEReply
from proxy_harness import RunningProxy
from responses_harness import (
    RESPONSES,
    assert_paired_and_reasoning_intact,
    history,
    post_raw,
    read_call,
    read_then_answer,
    sdk_for,
    started_proxy,
)
from synthetic_harness import BIG


@pytest.fixture
async def proxy(fake_upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[RunningProxy]:
    async for running in started_proxy(fake_upstream, tmp_path):
        yield running


@pytest.fixture
async def sdk(proxy: RunningProxy) -> AsyncIterator[openai.AsyncOpenAI]:
    async for client in sdk_for(proxy):
        yield client


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


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_mixed_answer_gives_the_client_its_call_only(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI, stream: bool
) -> None:
    def mixed(record: Recorded) -> Reply:
        output = [
            reasoning_item("rs_c", "e1"),
            function_call_item("dump", "{}", call_id="c9"),
            reasoning_item("rs_o", "e2"),
            read_call(record),
        ]
        usage = responses_usage(50, 5)
        return (
            response_stream(output, usage=usage) if stream else response_json(output, usage=usage)
        )

    fake_upstream.enqueue(dynamic_reply(mixed))
    if stream:
        events = [e async for e in await sdk.responses.create(**history(), stream=True)]
        final = events[-1].response
        assert all(getattr(e, "item_id", None) != "fc_call_read" for e in events)
    else:
        final = await sdk.responses.create(**history())
    assert [(i.type, getattr(i, "id", None)) for i in final.output] == [
        ("reasoning", "rs_c"),
        ("function_call", "fc_c9"),
    ]
    assert len(fake_upstream.requests(RESPONSES)) == 1  # the read ran, no second call


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_the_read_call_of_a_mixed_answer_comes_back_next_turn_with_its_reasoning(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI, stream: bool
) -> None:
    """Hostile run: the kept read call of a mixed answer came back without the reasoning item
    before it (which the client never saw): the API refuses a call without its reasoning."""

    def mixed(record: Recorded) -> Reply:
        output = [reasoning_item("rs_o", "e2"), read_call(record),
                  function_call_item("dump", "{}", call_id="c9")]  # fmt: skip
        return response_stream(output) if stream else response_json(output)

    fake_upstream.enqueue_many(dynamic_reply(mixed), response_json([message_item("ok")]))
    if stream:
        events = [e async for e in await sdk.responses.create(**history(), stream=True)]
        seen = events[-1].response.output
    else:
        seen = (await sdk.responses.create(**history())).output
    assert [i.type for i in seen] == ["function_call"]
    follow_up = history()
    follow_up["input"] += [item.model_dump(exclude_none=True) for item in seen]
    follow_up["input"] += [{"type": "function_call_output", "call_id": "c9", "output": "{}"}]
    await sdk.responses.create(**follow_up)
    sent = fake_upstream.last.json()["input"]
    ids = [i.get("id") or i.get("call_id") for i in sent[5:]]
    assert ids == ["rs_o", "fc_call_read", "call_read", "fc_c9", "c9"]
    assert sent[5] == reasoning_item("rs_o", "e2")
    assert_paired_and_reasoning_intact(fake_upstream.last.json())


async def test_items_the_client_saw_from_a_read_round_are_not_repeated_next_time(
    fake_upstream: FakeUpstream, sdk: openai.AsyncOpenAI
) -> None:
    def rounds(record: Recorded) -> Reply:
        if any(i.get("call_id") == "call_read" for i in record.json()["input"]):
            return response_stream([message_item("Done.", id="msg_done")])
        output = [
            reasoning_item("rs_seen", "enc-seen"),
            message_item("Reading.", id="msg_seen"),
            read_call(record),
        ]
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


async def test_a_later_round_failing_ends_the_stream_with_an_error_numbered_next(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    """Hostile run: the error event after a read round had `sequence_number` 0."""
    fake_upstream.enqueue_many(read_then_answer(True), error_reply(503, retry_after=None))
    body = json.dumps({**history(), "stream": True}).encode()
    status, _, raw = await post_raw(proxy.base_url + "/responses", body)
    events = [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert status == 200 and events[-1]["type"] == "error"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and len(events) > 2


@pytest.mark.parametrize("later", [False, True])
async def test_a_round_ending_before_its_final_event_ends_the_stream_with_an_error(
    fake_upstream: FakeUpstream, proxy: RunningProxy, later: bool
) -> None:
    """Hostile run: the client's stream ended without any final or error event when the
    upstream's round (the read round, or the one after it) stopped before `response.completed`."""
    first = read_then_answer(True)

    def cut_short(record: Recorded) -> Reply:
        reply = first.choose(record)
        assert isinstance(reply, SSEReply)
        return SSEReply(reply.events[:-1], done=False)  # no response.completed

    fake_upstream.enqueue_many(*((first, dynamic_reply(cut_short)) if later else
                                 (dynamic_reply(cut_short),)))  # fmt: skip
    body = json.dumps({**history(), "stream": True}).encode()
    status, _, raw = await post_raw(proxy.base_url + "/responses", body)
    events = [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert status == 200 and events[-1]["type"] == "error"
    assert events[-1]["code"] == "upstream_invalid_response"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert not any(e["type"] == "response.completed" for e in events)


async def test_a_background_response_is_sent_without_the_read_tools(
    fake_upstream: FakeUpstream, proxy: RunningProxy
) -> None:
    """The provider runs a background response on its own: the proxy could never execute a
    read call in it, so its tools are not offered (the output is still offloaded)."""
    fake_upstream.enqueue(response_json([message_item("queued")]))
    body = json.dumps({**history(), "background": True}).encode()
    status, _, _ = await post_raw(proxy.base_url + "/responses", body)
    sent = fake_upstream.requests(RESPONSES)[-1].json()
    assert status == 200 and len(fake_upstream.requests(RESPONSES)) == 1
    assert [tool["name"] for tool in sent["tools"]] == ["dump"]
    assert "offloaded" in sent["input"][-1]["output"]
