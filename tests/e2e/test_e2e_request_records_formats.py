"""Request records of every client format (chat, Responses, Messages), streamed and not, and of
the synthetic read rounds, through the real server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fakes import FakeUpstream, completion
from fakes.anthropic import fake_anthropic
from proxy_harness import RunningProxy
from records_harness import KEYS, get, post
from synthetic_harness import (
    READ,
    SEARCH,
    SyntheticProxies,
    call_spec,
    calling,
    conversation,
    read_call,
)

ROUTES = {
    "openai_chat": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "anthropic_messages": "/v1/messages",
}


def body_for(format_name: str, stream: bool) -> dict[str, Any]:
    if format_name == "openai_chat":
        body: dict[str, Any] = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}
        if stream:
            body["stream_options"] = {"include_usage": True}
    elif format_name == "openai_responses":
        body = {"model": "gpt-4o", "input": [{"role": "user", "content": "Hi"}], "store": False}
    else:
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "Hi"}],
        }
    return {**body, "stream": stream}


@pytest.fixture
async def two_upstreams(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> AsyncIterator[RunningProxy]:
    """OpenAI-format requests to the fake OpenAI upstream, Claude models to a fake Anthropic."""
    async with fake_anthropic() as claude:
        upstreams = [
            {"name": "fake", "base_url": fake_upstream.base_url},
            {"name": "claude", "kind": "anthropic", "base_url": claude.origin},
        ]
        routes = [{"model": "claude*", "upstream": "claude"}]
        yield await proxies.start(upstreams=upstreams, routes=routes, **KEYS)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("format_name", list(ROUTES))
async def test_every_format_is_recorded(
    two_upstreams: RunningProxy, format_name: str, stream: bool
) -> None:
    route = ROUTES[format_name]
    status, request_id, answer = await post(two_upstreams, route, body_for(format_name, stream))
    assert status == 200, answer
    assert (b"data:" in answer) is stream
    status, record = await get(two_upstreams, f"requests/{request_id}")
    assert status == 200
    assert record["route"] == route and record["format"] == format_name
    assert record["stream"] is stream and record["outcome"] == "ok" and record["status"] == 200
    assert record["model"] == body_for(format_name, stream)["model"]
    assert record["usage"] is not None and record["usage"]["input_tokens"] > 0
    assert record["usage"]["output_tokens"] > 0
    assert record["manifest"]["model"] == record["model"]
    assert record["headers"]["x-ctxproxy-tokens-before"] == str(record["tokens_before"])
    assert record["upstream_ms"] is not None and record["latency_ms"] >= record["upstream_ms"]
    status, page = await get(two_upstreams, f"requests?model={record['model']}")
    assert [item["request_id"] for item in page["data"]] == [request_id]


def search_call(artifact_id: str) -> dict[str, Any]:
    return call_spec(SEARCH, {"artifact_id": artifact_id, "pattern": "line 512:"})


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_synthetic_read_round_is_recorded(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream, stream: bool
) -> None:
    proxy = await proxies.start(**KEYS)
    fake_upstream.enqueue_many(
        calling(read_call(0, 100), search_call, stream=stream),
        completion("line 512 holds 7"),
    )
    status, request_id, _ = await post(proxy, "/v1/chat/completions", conversation(stream=stream))
    assert status == 200 and len(fake_upstream.received) == 2
    status, record = await get(proxy, f"requests/{request_id}")
    assert status == 200 and record["synthetic_rounds"] == 1
    [offload] = record["manifest"]["actions"]
    [artifact_id] = offload["artifact_ids"]
    call, searched = record["rounds"]
    assert call["round"] == 1 and call["tool"] == READ and call["artifact_id"] == artifact_id
    assert call["arguments"] == {"artifact_id": artifact_id, "offset": 0, "max_chars": 100}
    assert call["result_chars"] > 100
    assert searched["round"] == 1 and searched["tool"] == SEARCH
    assert searched["artifact_id"] == artifact_id and searched["result_chars"] > 0
    assert searched["arguments"]["pattern"] == "line 512:"
    assert record["actions"] == ["offload_tool_results"]
    assert record["tokens_after"] < record["tokens_before"]
    if not stream:  # a stream's headers went out before its rounds ran
        assert record["headers"]["x-ctxproxy-synthetic-rounds"] == "1"
