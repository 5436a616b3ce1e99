"""Two replicas: two `ctxproxy serve` processes with the same config on one shared store (the
test Redis under a key prefix of the test's own, and a private Redis Cluster), behind no load
balancer: each request goes to the replica the test picks.

What one replica did, the other uses: an artifact offloaded through A is read through B (the
artifact endpoint and the synthetic read tool); the working set A wrote comes back in place in
B's next prompt; the summary A had written is reused by B byte for byte without a summarizer
call; a policy file edited on disk is reloaded by both.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio
from fakes import FakeUpstream, completion
from fakes.replies import Reply
from pipeline_harness import agent_history
from redis.asyncio.cluster import RedisCluster
from redis_cluster import LocalCluster
from served_proxy import ServedProxy
from shared_redis import delete_prefix, require_shared_redis, unique_prefix
from synthetic_harness import (
    BIG,
    CHAT,
    READ,
    artifact_id_in,
    call_spec,
    calling,
    conversation,
    read_call,
    small_policy,
    tool_results,
)

COMPACT = """
mode: compact
budget: {context_window: 6000, reserved_output: 1000, safety_margin: 0}
steps:
  - {kind: offload_tool_results, threshold_chars: 3000}
  - {kind: clear_tool_results}
  - kind: summarize
    roll_up_after: 0
    roll_up_turns: 0
    summarizer: {kind: llm, upstream: summ, model: tiny-sum, max_summary_tokens: 400,
                 timeout_s: 60, on_error: extract}
"""
SUMMARY = {
    "facts": [{"name": "file 3 value at line 2", "value": "15843"}],
    "decisions": ["audit every file in src/"],
    "open_questions": [],
    "resources": ["src/f0.py"],
    "errors": [],
}
TOOLS, WORKING_SET, COMPACTING = "sk-tools", "sk-ws", "sk-acme"
"""One tenant per part of the test, so that their scopes (and what is stored) stay apart."""
ANSWER = "Line 512 holds the value 5003."
HANG_S = 60.0


@dataclass
class Replicas:
    a: ServedProxy
    b: ServedProxy
    main: FakeUpstream
    summ: FakeUpstream
    policies: Path

    async def chat(
        self, replica: ServedProxy, key: str, body: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HANG_S)) as session,
            session.post(
                f"{replica.base_url}/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            ) as response,
        ):
            data = await response.read()
            assert response.status == 200, data[:500]
            return json.loads(data), dict(response.headers)

    async def get(self, replica: ServedProxy, key: str, path: str) -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HANG_S)) as session,
            session.get(f"{replica.url}{path}", headers={"Authorization": f"Bearer {key}"}) as r,
        ):
            return r.status, await r.json()

    async def dry_run_changes(self, replica: ServedProxy, key: str, body: dict[str, Any]) -> bool:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HANG_S)) as session,
            session.post(
                f"{replica.url}/v1/context/prepare",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            ) as response,
        ):
            assert response.status == 200
            return bool((await response.json())["changed"])


@pytest.fixture
async def summ() -> AsyncIterator[FakeUpstream]:
    def answer(_: Any) -> Reply:
        return completion(json.dumps(SUMMARY), model="tiny-sum-0001")

    async with FakeUpstream(default=answer) as fake:
        yield fake


@pytest.fixture(params=["redis", "redis-cluster"])
async def shared_store(request: pytest.FixtureRequest) -> AsyncIterator[dict[str, Any]]:
    """The replicas' `store` settings: the test Redis, or the session's Redis Cluster, under a
    key prefix of this test's own (deleted afterwards)."""
    prefix = unique_prefix()
    client: redis.asyncio.Redis | RedisCluster
    if request.param == "redis-cluster":
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        url, client = cluster.url, RedisCluster.from_url(cluster.url)
    else:
        url = require_shared_redis()
        client = redis.asyncio.Redis.from_url(url)
    try:
        yield {"kind": request.param, "url": url, "key_prefix": prefix, "secret": "test-secret"}
    finally:
        await delete_prefix(client, prefix)
        await client.aclose()


@pytest.fixture
async def replicas(
    tmp_path: Path, fake_upstream: FakeUpstream, summ: FakeUpstream, shared_store: dict[str, Any]
) -> AsyncIterator[Replicas]:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "small.yaml").write_text(small_policy())
    (policies / "compact.yaml").write_text(COMPACT)
    config = {  # JSON is YAML
        "server": {"log_format": "text"},
        "store": shared_store,
        "upstreams": [
            {"name": "main", "base_url": fake_upstream.base_url},
            {"name": "summ", "base_url": summ.base_url, "api_key": "summ-key"},
        ],
        "policies_dir": str(policies),
        "auth": {"mode": "keys"},
        "tenants": [
            {"name": "tools", "keys": [TOOLS], "policy": "small"},
            {"name": "ws", "keys": [WORKING_SET], "policy": "small"},
            {"name": "acme", "keys": [COMPACTING], "policy": "compact"},
        ],
    }
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    a, b = ServedProxy(path, tmp_path / "a.log"), ServedProxy(path, tmp_path / "b.log")
    try:
        await asyncio.gather(a.start(), b.start())
        yield Replicas(a, b, fake_upstream, summ, policies)
    finally:
        await asyncio.gather(a.stop(), b.stop())
    for replica in (a, b):
        assert "Traceback" not in replica.output(), replica.output()


def other_conversation() -> dict[str, Any]:
    """Another conversation of the same tenant, offloaded too (so the read tool is offered)."""
    body = conversation()
    body["messages"][0]["content"] = "What is on line 7?"
    body["messages"][2]["content"] = BIG.replace("value", "v")
    return body


def next_turn(first: dict[str, Any], answer: dict[str, Any], question: str) -> dict[str, Any]:
    messages = [*first["messages"], answer, {"role": "user", "content": question}]
    return {**first, "messages": messages}


async def an_artifact_offloaded_through_a_is_read_through_b(replicas: Replicas) -> None:
    main, a, b = replicas.main, replicas.a, replicas.b
    main.enqueue(completion("ok"), path=CHAT)
    await replicas.chat(a, TOOLS, conversation())
    artifact_id = artifact_id_in(main.last)

    path = f"/v1/context/artifacts/{artifact_id}?offset=100&max_chars=300"
    status, page = await replicas.get(b, TOOLS, path)
    assert (status, page["content"]) == (200, BIG[100:400])

    read = call_spec(READ, {"artifact_id": artifact_id, "offset": 100, "max_chars": 300}, "c_1")
    main.enqueue_many(completion(None, tool_calls=[read]), completion(ANSWER), path=CHAT)
    answer, _ = await replicas.chat(b, TOOLS, other_conversation())
    assert answer["choices"][0]["message"]["content"] == ANSWER
    [result] = tool_results(main.last)  # the round B ran itself, on what A stored
    assert result["content"] == BIG[100:400]


async def the_working_set_written_by_a_is_used_by_b(replicas: Replicas) -> None:
    main, a, b = replicas.main, replicas.a, replicas.b
    main.enqueue_many(calling(read_call(100, 300)), completion(ANSWER), path=CHAT)
    turn = conversation()
    answer, _ = await replicas.chat(a, WORKING_SET, turn)
    sent_then = main.last.json()["messages"]  # A's last round: the read exchange in it
    main.enqueue(completion("5004"), path=CHAT)
    await replicas.chat(b, WORKING_SET, next_turn(turn, answer["choices"][0]["message"], "513?"))
    sent_now = main.last.json()["messages"]
    assert sent_now[: len(sent_then)] == sent_then  # B's prompt starts where A's ended
    assert [m["role"] for m in sent_now] == [
        "user", "assistant", "tool", "assistant", "tool", "assistant", "user",
    ]  # fmt: skip
    assert sent_now[3]["tool_calls"][0]["function"]["name"] == READ
    assert json.loads(sent_now[4]["content"])["content"] == BIG[100:400]


async def the_summary_written_by_a_is_used_by_b(replicas: Replicas) -> None:
    main, summ, a, b = replicas.main, replicas.summ, replicas.a, replicas.b
    messages = {"model": "gpt-4o", "messages": agent_history(24, result_chars=1200)}
    _, headers = await replicas.chat(a, COMPACTING, messages)
    assert headers["x-ctxproxy-summary"] == "llm:fresh"
    first = main.last.body
    await summ.wait_idle()
    calls = len(summ.requests(CHAT))
    assert calls >= 1
    _, headers = await replicas.chat(b, COMPACTING, messages)
    assert headers["x-ctxproxy-summary"] == "llm:cache"
    assert main.last.body == first  # byte for byte: the provider's prompt cache still hits
    await summ.wait_idle()
    assert len(summ.requests(CHAT)) == calls  # from the store: no summarizer call


async def a_policy_edit_reaches_both(replicas: Replicas) -> None:
    body = conversation()
    for replica in (replicas.a, replicas.b):
        assert await replicas.dry_run_changes(replica, TOOLS, body)  # offloaded
    (replicas.policies / "small.yaml").write_text(small_policy() + "mode: inspect\n")
    async with asyncio.timeout(HANG_S):  # policies are checked every few seconds
        for replica in (replicas.a, replicas.b):
            while await replicas.dry_run_changes(replica, TOOLS, body):
                await asyncio.sleep(0.2)


async def test_two_replicas_share_what_they_must(replicas: Replicas) -> None:
    await an_artifact_offloaded_through_a_is_read_through_b(replicas)
    await the_working_set_written_by_a_is_used_by_b(replicas)
    await the_summary_written_by_a_is_used_by_b(replicas)
    await a_policy_edit_reaches_both(replicas)
