"""The real proxy on a Redis Cluster (3 masters + 3 replicas, started by each test) while the
cluster changes under it: the master that holds the tenant's slot is killed and its replica takes
over; the slot moves to another master (ASK half-way, MOVED after); the cluster is not up yet
when the proxy starts.

Guarantees checked: every request is answered, either reduced with ids the store confirmed or
with the typed refusal `artifact_store_unavailable` (503), never a 500; a request that fits
without offloading goes through (its content inline when the store does not confirm the write);
what was confirmed stays readable through the artifact endpoint afterwards (before a failover
the test waits for the replica to acknowledge: Redis replicates asynchronously); `/readyz` is
503 while the store cannot answer and 200 again once it can; nothing is logged as an error. The
cluster tests FAIL (never skip) without redis-server and redis-cli.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from fakes import FakeUpstream
from pipeline_harness import agent_history, write_policy
from proxy_harness import RunningProxy, make_settings, start_proxy
from redis_cluster import FAILOVER_NODE_TIMEOUT_MS, LocalCluster, require_cluster_binaries
from shared_redis import scope_keys

POLICY = """
budget: {context_window: 8000, reserved_output: 1000, safety_margin: 0, trigger: 0.9}
steps:
  - {kind: offload_tool_results, threshold_chars: 3000}
  - {kind: clear_tool_results}
  - {kind: drop_turns}
"""
HANG_S = 60.0
log = logging.getLogger("tests.cluster_failover")
ART_ID = re.compile(rb"art_[0-9a-f]{32}")
AUTH = {"Authorization": "Bearer k"}
SMALL = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello there."}]}


def big(run: int, turns: int = 4, result_chars: int = 6000) -> dict[str, Any]:
    """A request that fits only with its tool results offloaded; new content for each `run`
    (so that it needs new writes, not refreshes of what is stored)."""
    messages = agent_history(turns, result_chars=result_chars, seed=run)
    for message in messages:
        if message["role"] == "tool":
            message["content"] = f"run {run}\n{message['content']}"
    return {"model": "gpt-4o", "messages": messages}


def mid(run: int) -> dict[str, Any]:
    """Over the policy's trigger but within the window: offloaded when the store confirms,
    else forwarded with its content inline."""
    return big(run, turns=2, result_chars=8000)


@dataclass
class Rig:
    proxy: RunningProxy
    upstream: FakeUpstream
    cluster: LocalCluster
    session: aiohttp.ClientSession
    scope: str
    confirmed: dict[str, str] = field(default_factory=dict)
    """Every id the upstream saw -> the original it stands for."""

    async def post(self, body: dict[str, Any]) -> tuple[int, Any]:
        before = len(self.upstream.received)
        async with self.session.post(
            f"{self.proxy.base_url}/chat/completions",
            json=body,
            headers=AUTH,
            timeout=aiohttp.ClientTimeout(total=HANG_S),
        ) as response:
            status, data = response.status, await response.read()
        sent = self.upstream.received[before:]
        store = self.proxy.services.started_store()
        originals = {
            store.artifact_id(self.scope, m["content"]): m["content"]
            for m in body["messages"]
            if m["role"] == "tool"
        }
        for request in sent:
            for match in set(ART_ID.findall(request.body)):
                self.confirmed[match.decode()] = originals[match.decode()]
        if status != 200:
            assert not sent, "a refused request must not reach the upstream"
        return status, orjson.loads(data)

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.session.get(
            f"{self.proxy.url}{path}", headers=AUTH, timeout=aiohttp.ClientTimeout(total=HANG_S)
        ) as response:
            return response.status, await response.json()


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    """A cluster of the test's own: it kills a master, or moves a slot."""
    started = LocalCluster(*require_cluster_binaries(), node_timeout_ms=FAILOVER_NODE_TIMEOUT_MS)
    try:
        started.start()
        yield started
    finally:
        started.cleanup()


@pytest.fixture
async def rig(
    tmp_path: Path, fake_upstream: FakeUpstream, cluster: LocalCluster
) -> AsyncIterator[Rig]:
    write_policy(tmp_path, POLICY, name="default")
    store = {
        "kind": "redis-cluster",
        "url": cluster.url,
        "secret": "test-secret",
        "socket_timeout_s": 0.5,
    }
    settings = make_settings(fake_upstream.base_url, policies_dir=str(tmp_path), store=store)
    running = await start_proxy(settings)
    try:
        async with aiohttp.ClientSession() as session:
            scope = running.services.tenants.resolve(AUTH).scope
            yield Rig(running, fake_upstream, cluster, session, scope)
    finally:
        await running.stop()


def expect_answered(status: int, body: Any, *, needs_store: bool) -> None:
    """Reduced (200) or refused with the store's typed error (503); never anything else."""
    if status == 200:
        assert body["object"] == "chat.completion"
        return
    assert needs_store, f"a request that needs no store got {status}: {body}"
    assert status == 503, body
    assert body["error"]["code"] == "artifact_store_unavailable"


async def test_a_master_killed_mid_run_fails_over_and_loses_nothing_confirmed(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy")
    for run in range(3):
        status, body = await rig.post(big(run))
        assert status == 200, body
    before_kill = dict(rig.confirmed)
    assert len(before_kill) >= 3 * 3, "the requests were not offloaded"
    status, body = await rig.get("/readyz")
    assert (status, body["store"]) == (200, True)

    slot = rig.cluster.slot_of(scope_keys("ctxproxy:", rig.scope))
    victim = rig.cluster.master_of_slot(slot)
    await asyncio.to_thread(rig.cluster.wait_replicated)
    victim.kill()
    failover = asyncio.create_task(
        asyncio.to_thread(rig.cluster.wait_failed_over, victim, slot)
    )
    answers: list[int] = []
    run = 100
    async with asyncio.timeout(HANG_S * 2):  # a hang fails here, saying where it waited
        while not failover.done():
            run += 1
            status, body = await rig.post(big(run))
            expect_answered(status, body, needs_store=True)
            answers.append(status)
            for body in (mid(run), SMALL):
                status, body = await rig.post(body)
                expect_answered(status, body, needs_store=False)
        successor = await failover
    assert successor is not victim and answers  # requests were answered during the failover
    log.info("during the failover: %d answers, %d refused", len(answers), answers.count(503))

    async with asyncio.timeout(HANG_S):  # the client finds the new master on its next call
        while (await rig.get("/readyz"))[0] != 200:
            await asyncio.sleep(0.05)
    status, body = await rig.post(big(run + 1))
    assert status == 200, body
    await read_back_everything_confirmed(rig)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


async def test_a_cluster_that_is_not_up_at_start_is_not_ready_until_it_is(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> None:
    """The proxy starts while no node answers: `/readyz` says the store is not ready (503) and
    `/healthz` is 200, requests are answered (forwarded, or refused with the typed 503 when they
    need the store); once the cluster is up, the same proxy is ready and offloads."""
    unstarted = LocalCluster(*require_cluster_binaries())
    write_policy(tmp_path, POLICY, name="default")
    store = {"kind": "redis-cluster", "url": unstarted.url, "secret": "test-secret"}
    settings = make_settings(fake_upstream.base_url, policies_dir=str(tmp_path), store=store)
    running = await start_proxy(settings)
    try:
        async with aiohttp.ClientSession() as session:
            scope = running.services.tenants.resolve(AUTH).scope
            rig = Rig(running, fake_upstream, unstarted, session, scope)
            status, body = await rig.get("/readyz")
            assert (status, body["store"], body["policies"]) == (503, False, True)
            assert (await rig.get("/healthz"))[0] == 200
            status, body = await rig.post(SMALL)
            expect_answered(status, body, needs_store=False)
            assert status == 200
            status, body = await rig.post(big(1))
            assert (status, body["error"]["code"]) == (503, "artifact_store_unavailable")

            await asyncio.to_thread(unstarted.start)
            async with asyncio.timeout(HANG_S):
                while (await rig.get("/readyz"))[0] != 200:
                    await asyncio.sleep(0.05)
            status, body = await rig.post(big(2))
            assert status == 200 and rig.confirmed, body
    finally:
        await running.stop()
        unstarted.cleanup()


async def read_back_everything_confirmed(rig: Rig) -> None:
    for artifact_id, original in rig.confirmed.items():
        status, page = await rig.get(f"/v1/context/artifacts/{artifact_id}?max_chars=20000")
        assert (status, page.get("content")) == (200, original), artifact_id


async def test_a_slot_moved_mid_run_is_followed_through_ask_and_moved(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """The tenant's slot moves to another master while requests run (as a resharding does):
    half-way, the old owner answers ASK for what already moved and TRYAGAIN for a script on
    keys on both sides; afterwards it answers MOVED. Everything confirmed stays readable, and
    every request is answered (reduced, or the typed refusal for one that needs the store)."""
    caplog.set_level(logging.INFO, logger="ctxproxy")
    for run in range(3):
        status, body = await rig.post(big(run))
        assert status == 200, body
    slot = rig.cluster.slot_of(scope_keys("ctxproxy:", rig.scope))
    source = rig.cluster.master_of_slot(slot)
    target = next(m for m in rig.cluster.masters() if m is not source)
    await asyncio.to_thread(rig.cluster.begin_moving, slot, source, target)
    assert await asyncio.to_thread(rig.cluster.move_keys, slot, source, target, 5) == 5

    await read_back_everything_confirmed(rig)  # the moved ones through ASK
    status, body = await rig.post(big(10))
    expect_answered(status, body, needs_store=True)
    for body in (mid(10), SMALL):
        status, body = await rig.post(body)
        expect_answered(status, body, needs_store=False)

    while await asyncio.to_thread(rig.cluster.move_keys, slot, source, target, 100):
        pass
    await asyncio.to_thread(rig.cluster.end_moving, slot, target)
    assert rig.cluster.master_of_slot(slot) is target
    await read_back_everything_confirmed(rig)  # through MOVED, then the refreshed slot map
    status, body = await rig.post(big(11))
    assert status == 200, body
    await read_back_everything_confirmed(rig)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
