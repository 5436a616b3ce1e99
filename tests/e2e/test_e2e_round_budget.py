"""Through the real server: no upstream call of a request exceeds its allowance, the proxy's own
read rounds included (issue 12 item 1)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from fakes import FakeUpstream, Recorded, completion, dynamic_reply, stream_completion
from fakes.replies import Reply
from shared_tokens import counter_for
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
    tool_results,
)


async def post(
    url: str, body: dict[str, Any], path: str = "/chat/completions"
) -> tuple[int, bytes]:
    headers = {"Authorization": "Bearer sk-reader"}
    async with (
        aiohttp.ClientSession(headers=headers) as session,
        session.post(f"{url}{path}", json=body) as response,
    ):
        return response.status, await response.read()


ANSWER = "Line 512: 5003."


def read_happy(reads: int, stream: bool) -> Any:
    """Reads `reads` pages whenever the read tool is offered, else answers."""
    pages = calling(*(read_call((i * 331) % len(BIG), 20_000) for i in range(reads)), stream=stream)
    final = stream_completion([ANSWER]) if stream else completion(ANSWER)

    def choose(record: Recorded) -> Reply:
        offered = READ in [t["function"]["name"] for t in record.json().get("tools", [])]
        return pages.choose(record) if offered else final

    return dynamic_reply(choose)


@pytest.mark.parametrize(("reads", "stream"), [(50, False), (50, True), (6, False), (6, True)])
async def test_reading_pages_for_four_rounds_never_exceeds_the_allowance(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, reads: int, stream: bool
) -> None:
    proxy = await proxies.start(max_rounds=4)
    status, dry = await post(proxy.base_url, conversation(), "/context/prepare")
    assert status == 200
    allowance = json.loads(dry)["manifest"]["allowance"]
    fake_upstream.enqueue_many(*(read_happy(reads, stream) for _ in range(5)))
    status, raw = await post(proxy.base_url, conversation(stream=stream))
    assert status == 200
    chunks = sse_chunks(raw) if stream else []
    text = streamed_text(chunks) if stream else json.loads(raw)["choices"][0]["message"]["content"]
    assert text == ANSWER
    sent = [record.json() for record in fake_upstream.requests(CHAT)]
    counter = counter_for("gpt-4o")
    counts = [counter.count_request(body) for body in sent]
    assert len(sent) >= 2 and max(counts) <= allowance, (counts, allowance)
    if reads == 6:  # six pages do not fit whole, but shortened ones do
        pages = [r for body in sent[1:] for r in tool_results_of(body) if "content" in r]
        assert pages and all(p["shortened"] for p in pages)
        assert all(BIG[p["offset"] :].startswith(p["content"]) for p in pages)
        assert any(p["content"] for p in pages)


def tool_results_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for message in body["messages"][3:]:
        if message["role"] == "tool":
            try:
                result = json.loads(message["content"])
            except ValueError:
                continue  # a result the policy cleared or offloaded
            if isinstance(result, dict):
                out.append(result)
    return out


async def test_a_round_that_fits_goes_up_whole(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start()
    fake_upstream.enqueue_many(calling(read_call(100, 300)), completion("5003"))
    status, _ = await post(proxy.base_url, conversation())
    assert status == 200
    first, second = fake_upstream.requests(CHAT)
    page = tool_results(second)[0]
    assert page["content"] == BIG[100:400] and "shortened" not in page
    assert second.json()["messages"][:3] == first.json()["messages"]  # the prefix is kept


async def test_when_no_page_fits_the_last_call_goes_without_the_tools(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(max_rounds=4)
    many = [
        lambda aid, i=i: call_spec(READ, {"artifact_id": aid, "offset": i}, f"c{i}")
        for i in range(30)
    ]
    fake_upstream.enqueue_many(calling(*many), completion("answer without reading"))
    status, raw = await post(proxy.base_url, conversation())
    assert status == 200
    assert json.loads(raw)["choices"][0]["message"]["content"] == "answer without reading"
    first, second = fake_upstream.requests(CHAT)
    assert tool_names(first) == ["dump", READ, SEARCH]
    assert tool_names(second) == ["dump"]
    assert second.json()["messages"] == first.json()["messages"]
