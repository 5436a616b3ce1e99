"""`/v1/messages/count_tokens` counts what `messages.create` sends upstream for the same body, with
and without reduction; a body without `max_tokens` is counted under the policy's default reserve,
and the answer says so (the difference an outside run found: 6,044 counted for a create that sent
11,362 with `max_tokens: 1024`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from anthropic_harness import BIG, CLIENT_TOOL, MODEL, anthropic_proxy, exchange
from fakes import FakeUpstream
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from proxy_harness import RunningProxy

Servers = tuple[asyncio.AbstractEventLoop, FakeUpstream, RunningProxy]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The fake Anthropic server and a proxy on the small-window policy (6,000 tokens, a default
    reserve of 500)."""
    loop = asyncio.new_event_loop()
    context = anthropic_proxy(tmp_path_factory.mktemp("count"))
    fake, proxy = loop.run_until_complete(context.__aenter__())
    yield loop, fake, proxy
    loop.run_until_complete(context.__aexit__(None, None, None))
    loop.close()


async def post(proxy: RunningProxy, path: str, body: dict[str, Any]) -> tuple[int, Any, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.url + path, json=body, headers={"x-api-key": "k"}) as response,
    ):
        return response.status, response.headers, json.loads(await response.read())


conversations = st.builds(
    lambda sizes, question: [
        {"role": "user", "content": question},
        *(m for k, size in enumerate(sizes) for m in exchange(k, BIG[:size])),
    ],
    st.lists(st.sampled_from([200, 3000, 9000, len(BIG)]), max_size=5),
    st.sampled_from(["What is on line 512?", "Summarize the dumps."]),
)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(messages=conversations, max_tokens=st.sampled_from([64, 1024, 2500]))
def test_the_count_is_what_create_sends_for_the_same_body(
    servers: Servers, messages: list[dict[str, Any]], max_tokens: int
) -> None:
    loop, _, proxy = servers
    body = {"model": MODEL, "max_tokens": max_tokens, "messages": messages, "tools": [CLIENT_TOOL]}
    status, headers, _ = loop.run_until_complete(post(proxy, "/v1/messages", body))
    assert status == 200
    status, _, counted = loop.run_until_complete(post(proxy, "/v1/messages/count_tokens", body))
    assert status == 200
    assert counted["input_tokens"] == int(headers["x-ctxproxy-tokens-after"])
    details = counted["ctxproxy"]
    assert details["tokens_before"] == int(headers["x-ctxproxy-tokens-before"])
    assert details["outcome"] == headers["x-ctxproxy-outcome"]
    assert details["reserved_output"] == max_tokens
    assert details["reserved_output_from"] == "max_tokens"
    event(f"outcome: {details['outcome']}")  # reduced and not


def test_without_max_tokens_the_default_reserve_is_assumed_and_said(servers: Servers) -> None:
    loop, _, proxy = servers
    messages = [{"role": "user", "content": "q"}, *exchange(0, BIG), *exchange(1, BIG)]
    body = {"model": MODEL, "messages": messages, "tools": [CLIENT_TOOL]}
    status, _, counted = loop.run_until_complete(post(proxy, "/v1/messages/count_tokens", body))
    assert status == 200
    details = counted["ctxproxy"]
    assert (details["reserved_output"], details["reserved_output_from"]) == (500, "default")
    assert counted["input_tokens"] < details["tokens_before"]  # reduced, as create would be
