"""Cold caches through the real server: the app's clock (injected, never slept on) says how long
ago a conversation's prompt went upstream. Past the upstream's cache lifetime a due cut is
planned afresh (the manifest and `x-ctxproxy-cache` say so), and the warm request after it keeps
the prompt it sent as its byte prefix. The dry run reads that state and never writes it; a
replica that sent nothing reads the same state from Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from fakes import FakeUpstream
from moving_ratio import requests_of
from pipeline_harness import agent_history, write_policy
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.jsonio import loads

POLICY = """
mode: compact
budget: {context_window: 6000, reserved_output: 500, safety_margin: 0, trigger: 0.9,
         target: 0.6}
steps:
  - {kind: offload_tool_results, threshold_chars: 4000}
  - {kind: clear_tool_results, keep_recent_exchanges: 1}
  - {kind: summarize, keep_recent_turns: 2}
"""
STEP_S = 10.0
PAUSE_S = 1000.0
REQUESTS = requests_of(agent_history(30, result_chars=1200, seed=3))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def proxy_on(
    fake: FakeUpstream, directory: Path, clock: Clock, store: dict[str, Any] | None = None
) -> RunningProxy:
    write_policy(directory, POLICY, name="default")
    settings = make_settings(
        fake.base_url, policies_dir=str(directory), store=store or {"secret": "test-secret"}
    )
    return await start_proxy(settings, clock=clock)


@pytest.fixture
async def clocked(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> AsyncIterator[tuple[RunningProxy, Clock]]:
    clock = Clock()
    running = await proxy_on(fake_upstream, tmp_path, clock)
    yield running, clock
    await running.stop()


async def send(
    proxy: RunningProxy, clock: Clock, key: str, items: list[Any], wait_s: float = STEP_S
) -> tuple[str, str]:
    """One request through the `openai` SDK after `wait_s`: its cache and actions headers."""
    clock.now += wait_s
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key=key, max_retries=0) as sdk:
        answer = await sdk.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=items
        )
    return answer.headers["x-ctxproxy-cache"], answer.headers["x-ctxproxy-actions"]


async def dry_run(proxy: RunningProxy, key: str, items: list[Any]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.post(
        f"{proxy.base_url}/context/prepare", headers={"Authorization": f"Bearer {key}"},
        json={"model": "gpt-4o", "messages": items},
    ) as response:
        assert response.status == 200, await response.text()
        return loads(await response.read())["manifest"]  # type: ignore[no-any-return]


def messages_bytes(raw: bytes) -> bytes:
    """A prepared body's bytes up to the end of its last message (tools follow them)."""
    return raw[: raw.index(b'],"tools":[')]


async def test_past_the_lifetime_a_due_cut_goes_deeper_and_the_warm_follow_up_keeps_it(
    clocked: tuple[RunningProxy, Clock], fake_upstream: FakeUpstream
) -> None:
    proxy, clock = clocked
    # first, all warm: the first cut due over the summary's remembered cut keeps the prefix
    due, summarized = None, False
    for n, items in enumerate(REQUESTS):
        cache, actions = await send(proxy, clock, "warm-key", items)
        assert cache.startswith("cold:" if n == 0 else "warm:")  # the first: nothing sent yet
        if summarized and cache == "warm:keep_prefix":
            due = n
            break
        summarized = summarized or "summarize:" in actions
    assert due is not None
    # the same conversation under another credential (scope), paused before that request
    for items in REQUESTS[:due]:
        await send(proxy, clock, "cold-key", items)
    cache, _ = await send(proxy, clock, "cold-key", REQUESTS[due], PAUSE_S)
    assert cache == "cold:deeper_cut"
    cut = fake_upstream.last
    manifest = await dry_run(proxy, "cold-key", REQUESTS[due])  # the same clock: still cold
    assert manifest["cache"] == {
        "state": "cold", "age_seconds": PAUSE_S, "ttl_seconds": 300, "applied": "deeper_cut"
    }  # fmt: skip
    assert manifest["tokens_after"] <= manifest["target"]
    # the next request is warm, no cut is due: the prompt it sends starts with the cut one's
    cache, _ = await send(proxy, clock, "cold-key", REQUESTS[due + 1])
    assert cache == "warm:none"
    follow_up = fake_upstream.last
    assert follow_up.body.startswith(messages_bytes(cut.body))
    assert follow_up.json()["tools"] == cut.json()["tools"]


async def test_the_dry_run_reads_when_the_prompt_was_sent_and_never_writes_it(
    clocked: tuple[RunningProxy, Clock],
) -> None:
    proxy, clock = clocked
    for items in REQUESTS[:3]:
        await send(proxy, clock, "k", items)
    sent_at = clock.now
    clock.now += 5
    looked = await dry_run(proxy, "k", REQUESTS[3])
    assert looked["cache"]["state"] == "warm" and looked["cache"]["age_seconds"] == 5
    clock.now += 15  # request 4 follows the answer to request 3, which was never sent
    manifest = await dry_run(proxy, "k", REQUESTS[4])
    assert manifest["cache"]["age_seconds"] == clock.now - sent_at  # 20, not 15


async def test_a_replica_that_sent_nothing_knows_the_cache_is_warm(
    tmp_path: Path, fake_upstream: FakeUpstream, redis_store_settings: dict[str, Any]
) -> None:
    clock = Clock()
    one = await proxy_on(fake_upstream, tmp_path / "one", clock, redis_store_settings)
    two = await proxy_on(fake_upstream, tmp_path / "two", clock, redis_store_settings)
    try:
        for items in REQUESTS[:2]:
            await send(one, clock, "k", items)
        clock.now += 30
        manifest = await dry_run(two, "k", REQUESTS[2])
        assert manifest["cache"]["state"] == "warm"
        assert manifest["cache"]["age_seconds"] == 30
        clock.now += 300
        assert (await dry_run(two, "k", REQUESTS[2]))["cache"]["state"] == "cold"
    finally:
        await one.stop()
        await two.stop()


async def test_a_request_marked_for_an_hour_is_judged_by_the_hour(
    clocked: tuple[RunningProxy, Clock],
) -> None:
    proxy, _ = clocked
    mark = {"type": "ephemeral", "ttl": "1h"}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": mark}]},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "go on"},
    ]
    ttls = []
    for content in (messages, [messages[-1]]):
        async with aiohttp.ClientSession() as session, session.post(
            f"{proxy.base_url}/context/prepare?format=anthropic_messages",
            headers={"x-api-key": "k"},
            json={"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": content},
        ) as response:
            assert response.status == 200, await response.text()
            ttls.append(loads(await response.read())["manifest"]["cache"]["ttl_seconds"])
    assert ttls == [3600, 300]
