"""Through the real server: what the model read in one turn is put back, byte for byte and in
place, in the next turn's upstream body (issue 12 item 2), for JSON and streams, on memory and
Redis; a mixed answer's synthetic calls are executed and kept too."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from fakes import FakeUpstream, completion, stream_completion
from synthetic_harness import (
    BIG,
    CHAT,
    READ,
    SEARCH,
    SyntheticProxies,
    call_spec,
    calling,
    conversation,
    read_call,
    sse_chunks,
    streamed_text,
    tool_names,
)

ANSWER = "Line 512 holds the value 5003."


async def post(url: str, body: dict[str, Any], key: str = "sk-ws") -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        aiohttp.ClientSession(headers=headers) as session,
        session.post(f"{url}/chat/completions", json=body) as response,
    ):
        assert response.status == 200
        raw = await response.read()
    if body.get("stream"):
        chunks = sse_chunks(raw)
        return {"role": "assistant", "content": streamed_text(chunks)}
    message: dict[str, Any] = json.loads(raw)["choices"][0]["message"]
    return message


def next_turn(first: dict[str, Any], answer: dict[str, Any], question: str) -> dict[str, Any]:
    # as an SDK echoes the answer back: with fields of its own
    echoed = {**answer, "refusal": None, "annotations": []}
    messages = [*first["messages"], echoed, {"role": "user", "content": question}]
    return {**first, "messages": messages}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_read_in_one_turn_is_in_place_byte_for_byte_in_the_next(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, stream: bool
) -> None:
    proxy = await proxies.start()
    reply = stream_completion([ANSWER]) if stream else completion(ANSWER)
    fake_upstream.enqueue_many(calling(read_call(100, 300), stream=stream), reply)
    turn = conversation(stream=stream)
    answer = await post(proxy.base_url, turn)
    assert answer["content"] == ANSWER
    fake_upstream.enqueue(stream_completion(["5004"]) if stream else completion("5004"))
    await post(proxy.base_url, next_turn(turn, answer, "And line 513?"))
    _, last_round, later = fake_upstream.requests(CHAT)
    sent_then = last_round.json()["messages"]
    sent_now = later.json()["messages"]
    assert sent_now[: len(sent_then)] == sent_then  # the next prompt starts where the last ended
    assert [m["role"] for m in sent_now] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    page = json.loads(sent_now[4]["content"])
    assert page["content"] == BIG[100:400]
    assert sent_now[3]["tool_calls"][0]["function"]["name"] == READ
    assert sent_now[5]["content"] == ANSWER
    assert tool_names(later) == ["dump", READ, SEARCH]
    raw_then, raw_now = last_round.body.decode(), later.body.decode()
    page_bytes = json.dumps(sent_then[4]["content"])[1:-1]
    assert page_bytes in raw_then and page_bytes in raw_now


async def test_a_mixed_answers_synthetic_calls_are_executed_and_kept(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue(
        calling(
            lambda aid: call_spec("dump", {}, "call_client"),
            lambda aid: call_spec(
                READ, {"artifact_id": aid, "offset": 0, "max_chars": 120}, "c_own"
            ),
        )
    )
    turn = conversation()
    answer = await post(proxy.base_url, turn)
    assert [c["id"] for c in answer["tool_calls"]] == ["call_client"]
    fake_upstream.enqueue(completion("done"))
    body = next_turn(turn, answer, "thanks")
    body["messages"].insert(-1, {"role": "tool", "tool_call_id": "call_client", "content": "ok"})
    await post(proxy.base_url, body)
    _, later = fake_upstream.requests(CHAT)
    roles = [m["role"] for m in later.json()["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "user"]
    kept_call, kept_result = later.json()["messages"][3:5]
    assert [c["id"] for c in kept_call["tool_calls"]] == ["c_own"]
    assert json.loads(kept_result["content"])["content"] == BIG[:120]
    assert kept_result["tool_call_id"] == "c_own"


async def test_another_credential_or_another_history_gets_nothing_back(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue_many(calling(read_call(0, 200)), completion(ANSWER))
    turn = conversation()
    answer = await post(proxy.base_url, turn)
    fake_upstream.enqueue_many(completion("a"), completion("b"))
    await post(proxy.base_url, next_turn(turn, answer, "again"), key="sk-other")
    changed = next_turn(turn, answer, "again")
    changed["messages"][0] = {"role": "user", "content": "What is the value on line 511?"}
    await post(proxy.base_url, changed)
    for record in fake_upstream.requests(CHAT)[2:]:
        roles = [m["role"] for m in record.json()["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant", "user"]


async def test_a_policy_can_turn_the_working_set_off(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(working_set=False)
    fake_upstream.enqueue_many(calling(read_call(0, 200)), completion(ANSWER))
    turn = conversation()
    answer = await post(proxy.base_url, turn)
    fake_upstream.enqueue(completion("b"))
    await post(proxy.base_url, next_turn(turn, answer, "again"))
    roles = [m["role"] for m in fake_upstream.requests(CHAT)[2].json()["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
