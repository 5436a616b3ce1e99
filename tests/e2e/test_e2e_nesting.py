"""Deeply nested bodies on every route: a typed 400 past the stated depth (`jsonio.MAX_DEPTH`), a
prepared or forwarded request up to it, never a 500. Nesting goes where each format's code
recurses: Anthropic `tool_result` blocks inside `tool_result` blocks, chat and Responses content
parts, tool schemas, and unknown fields."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import pytest
from fakes import FakeUpstream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.jsonio import MAX_DEPTH

Nest = Callable[[int], dict[str, Any]]
TIMEOUT = aiohttp.ClientTimeout(total=60)


def nested(depth: int, leaf: Any, wrap: Callable[[Any], Any]) -> Any:
    value = leaf
    for _ in range(depth):
        value = wrap(value)
    return value


def schema(depth: int) -> dict[str, Any]:
    """A tool's parameters nested as objects of objects (two JSON levels each)."""
    leaf = {"type": "string"}
    return nested(depth // 2, leaf, lambda v: {"type": "object", "properties": {"a": v}})


def anthropic_body(depth: int) -> dict[str, Any]:
    result = nested(
        depth // 2,
        {"type": "text", "text": "x"},
        lambda v: {"type": "tool_result", "tool_use_id": "toolu_1", "content": [v]},
    )
    call = {"type": "tool_use", "id": "toolu_1", "name": "dump", "input": {}}
    tool = {"name": "dump", "input_schema": schema(depth)}
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result if depth > 1 else {**result, "tool_use_id": "x"}]},
    ]
    return {"model": "claude-x", "max_tokens": 10, "messages": messages, "tools": [tool]}


def chat_body(depth: int) -> dict[str, Any]:
    part = {"type": "odd", "data": nested(depth, 1, lambda v: [v])}
    tool = {"type": "function", "function": {"name": "f", "parameters": schema(depth)}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}]
    return {"model": "gpt-4o", "messages": messages, "tools": [tool]}


def responses_body(depth: int) -> dict[str, Any]:
    odd = {"type": "odd_item", "payload": nested(depth, {}, lambda v: {"k": v})}
    return {"model": "gpt-4o", "input": [{"role": "user", "content": "hi"}, odd]}


ROUTES: dict[str, tuple[str, Nest]] = {
    "messages": ("/v1/messages", anthropic_body),
    "count_tokens": ("/v1/messages/count_tokens", anthropic_body),
    "chat": ("/v1/chat/completions", chat_body),
    "responses": ("/v1/responses", responses_body),
    "dry_run": ("/v1/context/prepare?format=anthropic_messages", anthropic_body),
}


@pytest.fixture(scope="module")
def proxy() -> Iterator[tuple[asyncio.AbstractEventLoop, RunningProxy]]:
    loop = asyncio.new_event_loop()
    fake = FakeUpstream()
    loop.run_until_complete(fake.start())
    running = loop.run_until_complete(start_proxy(make_settings(fake.base_url)))
    yield loop, running
    loop.run_until_complete(running.stop())
    loop.run_until_complete(fake.stop())
    loop.close()


async def post(proxy: RunningProxy, path: str, body: Any) -> tuple[int, Any]:
    raw = json.dumps(body).encode() if not isinstance(body, bytes) else body
    headers = {"Content-Type": "application/json", "x-api-key": "k"}
    async with (
        aiohttp.ClientSession(timeout=TIMEOUT) as session,
        session.post(proxy.url + path, data=raw, headers=headers) as response,
    ):
        return response.status, await response.read()


def container_depth(value: Any) -> int:
    """How deep arrays and objects nest in `value` (a scalar: 0), level by level."""
    depth, level = 0, [value]
    while True:
        containers = [item for item in level if isinstance(item, dict | list)]
        if not containers:
            return depth
        depth += 1
        level = [
            child
            for item in containers
            for child in (item.values() if isinstance(item, dict) else item)
        ]


def deepest(make: Nest) -> int:
    """The largest nesting `make` takes whose body stays within `MAX_DEPTH`."""
    n = 1
    while container_depth(make(n + 1)) <= MAX_DEPTH:
        n += 1
    return n


def deep_bytes(body: dict[str, Any], depth: int) -> bytes:
    """`body` with one more field nested `depth` levels, written as text (no recursion)."""
    text = json.dumps(body)
    return (text[:-1] + ', "x_deep": ' + "[" * depth + "1" + "]" * depth + "}").encode()


@pytest.mark.parametrize("route", sorted(ROUTES))
@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(depth=st.one_of(st.integers(1, MAX_DEPTH + 8), st.integers(MAX_DEPTH, 10_000)))
def test_nesting_is_served_or_refused_never_a_500(
    proxy: tuple[asyncio.AbstractEventLoop, RunningProxy], route: str, depth: int
) -> None:
    loop, running = proxy
    path, make = ROUTES[route]
    body = make(min(depth, deepest(make)))
    assert container_depth(body) <= MAX_DEPTH
    status, answer = loop.run_until_complete(post(running, path, deep_bytes(body, depth)))
    assert status < 500, (status, answer[:300])
    refused = depth + 1 > MAX_DEPTH  # the extra field's arrays sit one level inside the body
    assert (status == 400 and b"nested too deeply" in answer) is refused, (status, answer[:300])


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_the_deepest_accepted_body_is_served(
    proxy: tuple[asyncio.AbstractEventLoop, RunningProxy], route: str
) -> None:
    loop, running = proxy
    path, make = ROUTES[route]
    body = make(deepest(make))
    assert container_depth(body) >= MAX_DEPTH - 1  # as deep as `make` nests within the limit
    status, answer = loop.run_until_complete(post(running, path, body))
    assert status == 200, answer[:300]
