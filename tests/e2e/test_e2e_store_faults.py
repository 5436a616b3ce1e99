"""The real proxy on a private Redis that goes away, pauses and comes back.

Guarantees checked in every fault state: the proxy keeps serving; a request that needs no offload
and one that fits without it are forwarded byte for byte; one that cannot fit without offloading
is refused with 503 `artifact_store_unavailable` before any upstream call; `/readyz` says the store
is down while `/healthz` stays 200; no id is shown that the store did not confirm; the outage and
the recovery are logged once each; nothing leaks (upstream handlers, Redis connections).

Each test runs its own `redis-server` (tests/redis_process.py) on a free port; without the binary
these tests fail under CI and skip otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import redis
from artifacts_harness import keyed
from fakes import FakeUpstream, Recorded, completion, dynamic_reply
from fakes.replies import Reply
from pipeline_harness import agent_history, client_bytes, write_policy
from proxy_harness import RunningProxy, make_settings, start_proxy
from redis.asyncio.client import Pipeline
from redis_process import RedisProcess
from shared_redis import scope_keys
from shared_tokens import counter_for

from proxy.artifacts.redis_store import RedisStore
from proxy.artifacts.store import NewArtifact, StoreUnavailable

POLICY = """
budget: {context_window: 8000, reserved_output: 1000, safety_margin: 0, trigger: 0.9}
steps:
  - {kind: offload_tool_results, threshold_chars: 3000}
  - {kind: clear_tool_results}
  - {kind: drop_turns}
"""
ALLOWANCE, TRIGGER = 7000, 6300  # 8000 - 1000 - 0, and 90% of it
SOCKET_TIMEOUT_S = 0.25
POOL_SIZE = 4
HANG_S = 30.0
"""Bounds how long a test waits for an answer or for the pool to settle: a request that the
store's own timeouts (SOCKET_TIMEOUT_S) did not end is stuck, and only a broken proxy is."""
ART_ID = re.compile(rb"art_[0-9a-f]{32}")

SMALL = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello there, café ✓."}]}
MID = {"model": "gpt-4o", "messages": agent_history(2, result_chars=8000)}  # trigger < n <= allow
BIG = {"model": "gpt-4o", "messages": agent_history(4, result_chars=6000)}  # fits only offloaded


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]
    upstream_calls: int

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Rig:
    proxy: RunningProxy
    upstream: FakeUpstream
    redis: RedisProcess
    session: aiohttp.ClientSession
    scope: str

    @property
    def store(self) -> RedisStore:
        store = self.proxy.services.store
        assert isinstance(store, RedisStore)
        return store

    async def post(
        self, body: dict[str, Any], timeout: float = HANG_S, *, check_ids: bool = True
    ) -> Answer:
        before = len(self.upstream.received)
        async with self.session.post(
            f"{self.proxy.base_url}/chat/completions",
            data=client_bytes(body),  # unlike any re-serialisation by the proxy
            headers={"Content-Type": "application/json", "Authorization": "Bearer k"},
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            data = await response.read()
            headers = {str(k): v for k, v in response.headers.items()}
        answer = Answer(response.status, data, headers, len(self.upstream.received) - before)
        if check_ids:
            await self.assert_only_written_ids(answer)
        return answer

    async def get_json(self, path: str) -> tuple[int, Any]:
        async with self.session.get(
            f"{self.proxy.url}{path}",
            headers={"Authorization": "Bearer k"},
            timeout=aiohttp.ClientTimeout(total=HANG_S),
        ) as response:
            return response.status, await response.json()

    def stored_in_redis(self, artifact_id: str) -> bool:
        """Asked of the private server directly (not through the proxy's store)."""
        key = f"{scope_keys('ctxproxy:', self.scope)}a:{artifact_id}"  # the default key_prefix
        client = redis.Redis.from_url(self.redis.url, socket_timeout=HANG_S)
        try:
            return bool(client.exists(key))
        finally:
            client.close()

    async def assert_only_written_ids(self, answer: Answer) -> None:
        """Every id the client or the upstream saw for this request is readable right now."""
        seen = [answer.body, orjson.dumps(answer.headers)]
        seen += [
            r.body
            for r in self.upstream.received[len(self.upstream.received) - answer.upstream_calls :]
        ]
        for data in seen:
            for match in set(ART_ID.findall(data)):
                try:
                    artifact = await self.store.get(self.scope, match.decode())
                except StoreUnavailable:
                    pytest.fail(f"{match!r} was shown while the store was unreachable")
                assert artifact is not None, f"{match!r} was shown but is not in the store"


@pytest.fixture
async def rig(
    tmp_path: Path, fake_upstream: FakeUpstream, redis_server: RedisProcess
) -> AsyncIterator[Rig]:
    """The proxy on the private Redis (which each test starts, or not)."""
    write_policy(tmp_path, POLICY, name="default")
    store = {
        "kind": "redis",
        "url": redis_server.url,
        "secret": "test-secret",
        "socket_timeout_s": SOCKET_TIMEOUT_S,
        "pool_timeout_s": SOCKET_TIMEOUT_S,
        "pool_size": POOL_SIZE,
    }
    settings = make_settings(fake_upstream.base_url, policies_dir=str(tmp_path), store=store)
    running = await start_proxy(settings)
    try:
        async with aiohttp.ClientSession() as session:
            scope = running.services.tenants.resolve({"Authorization": "Bearer k"}).scope
            yield Rig(running, fake_upstream, redis_server, session, scope)
    finally:
        redis_server.cleanup()  # a paused server must not stall the proxy's shutdown
        await running.stop()


# -- expectations --------------------------------------------------------------------------


async def expect_ready(rig: Rig, ready: bool) -> None:
    status, body = await rig.get_json("/readyz")  # answered, even with the store paused
    assert (status, body["store"], body["policies"]) == (
        (200, True, True) if ready else (503, False, True)
    )
    status, _ = await rig.get_json("/healthz")
    assert status == 200


async def expect_forwarded_unchanged(rig: Rig, body: dict[str, Any]) -> Answer:
    answer = await rig.post(body)
    assert answer.status == 200, answer.body[:500]
    assert answer.upstream_calls == 1
    assert rig.upstream.last.body == client_bytes(body)  # the client's bytes, content kept
    assert not ART_ID.search(rig.upstream.last.body)
    return answer


async def expect_store_refusal(rig: Rig, body: dict[str, Any]) -> Answer:
    answer = await rig.post(body)
    assert answer.status == 503, answer.body[:500]
    error = answer.json()["error"]
    assert error["code"] == "artifact_store_unavailable"
    assert error["type"] == "api_error"
    assert error["ctxproxy"]["reason"] == "artifact_store_unavailable"
    assert error["ctxproxy"]["request_id"]
    assert answer.upstream_calls == 0
    assert not ART_ID.search(answer.body)
    return answer


async def expect_offloaded(rig: Rig, body: dict[str, Any]) -> None:
    """Reduced with previews whose ids are readable and hold the original tool results."""
    answer = await rig.post(body)
    assert answer.status == 200, answer.body[:500]
    assert answer.upstream_calls == 1
    ids = {m.decode() for m in ART_ID.findall(rig.upstream.last.body)}
    assert ids, "nothing was offloaded"
    originals = {m["content"] for m in body["messages"] if m["role"] == "tool"}
    for artifact_id in ids:
        artifact = await rig.store.get(rig.scope, artifact_id)
        assert artifact is not None and artifact.content in originals


async def expect_degraded(rig: Rig, rounds: int = 2) -> list[Answer]:
    """The guarantees while the store is down or stalled: every request answered while it
    stays so (how fast is bench's: the store's timeouts bound it)."""
    await expect_ready(rig, False)
    answers = []
    for _ in range(rounds):
        answers.append(await expect_forwarded_unchanged(rig, SMALL))
        answers.append(await expect_forwarded_unchanged(rig, MID))
        answers.append(await expect_store_refusal(rig, BIG))
    return answers


async def expect_recovered(rig: Rig) -> None:
    await expect_ready(rig, True)
    await expect_offloaded(rig, MID)
    await expect_offloaded(rig, BIG)


async def until_no_connection_is_in_use(rig: Rig) -> None:
    """Waits for every request the proxy is still working on to give its Redis connection back
    (redis-py's pool; fails after HANG_S: a connection leaked)."""
    pool = rig.store.client.connection_pool
    deadline = time.monotonic() + HANG_S
    while pool._in_use_connections and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert len(pool._in_use_connections) == 0


async def expect_no_leaks(rig: Rig) -> None:
    await rig.upstream.wait_idle()
    assert rig.upstream.errors == []
    await expect_forwarded_unchanged(rig, SMALL)  # the proxy still serves
    await until_no_connection_is_in_use(rig)
    pool = rig.store.client.connection_pool
    assert len(pool._available_connections) + len(pool._in_use_connections) <= POOL_SIZE


def store_log_counts(caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    """(outage warnings, recovery messages) logged by the store; no proxy error logs at all."""
    errors = [r for r in caplog.records if r.name.startswith("ctxproxy") and r.levelno >= 40]
    assert errors == [], [r.getMessage() for r in errors]
    messages = [r.getMessage() for r in caplog.records if r.name == "ctxproxy.artifacts"]
    down = sum(1 for m in messages if " unavailable: " in m)
    back = sum(1 for m in messages if m.endswith(" available again"))
    return down, back


# -- tests ---------------------------------------------------------------------------------


def test_request_sizes_are_what_the_scenarios_need() -> None:
    counter = counter_for("gpt-4o")
    assert counter.count_request(SMALL) <= TRIGGER
    assert TRIGGER < counter.count_request(MID) <= ALLOWANCE
    assert counter.count_request(BIG) > ALLOWANCE


async def test_unreachable_at_start_then_available(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy")
    await expect_degraded(rig, rounds=3)
    assert store_log_counts(caplog) == (1, 0)

    rig.redis.start()  # the same port the proxy was configured with
    await expect_recovered(rig)
    assert store_log_counts(caplog) == (1, 1)
    await expect_no_leaks(rig)


@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_lost_mid_run_then_back_on_the_same_port(
    rig: Rig, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy")
    rig.redis.start()
    await expect_recovered(rig)
    assert store_log_counts(caplog) == (0, 0)

    rig.redis.stop() if how == "stop" else rig.redis.kill()
    await expect_degraded(rig, rounds=3)
    assert store_log_counts(caplog) == (1, 0)

    await rig.redis.restart_async()  # empty: what was stored before is gone
    await expect_recovered(rig)
    assert store_log_counts(caplog) == (1, 1)
    await expect_no_leaks(rig)


async def test_paused_store_is_slow_not_stuck(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ctxproxy")
    rig.redis.start()
    await expect_offloaded(rig, MID)

    rig.redis.pause()
    await expect_degraded(rig, rounds=1)
    # More concurrent store users than pool connections: the rest wait for one at most
    # pool_timeout_s, and all are answered while the store is still paused.
    answers = await asyncio.gather(*(rig.post(b) for b in [MID, BIG] * POOL_SIZE))
    assert [a.status for a in answers] == [200, 503] * POOL_SIZE
    assert store_log_counts(caplog) == (1, 0)

    rig.redis.resume()
    await expect_recovered(rig)
    assert store_log_counts(caplog) == (1, 1)
    await expect_no_leaks(rig)


async def test_clients_giving_up_on_a_paused_store_leak_no_connection(rig: Rig) -> None:
    rig.redis.start()
    await expect_offloaded(rig, MID)
    rig.redis.pause()
    calls = len(rig.upstream.received)
    for _ in range(2):
        results = await asyncio.gather(
            *(rig.post(MID, timeout=SOCKET_TIMEOUT_S / 3) for _ in range(POOL_SIZE * 2)),
            return_exceptions=True,
        )
        assert all(isinstance(r, asyncio.TimeoutError) for r in results), results
    await until_no_connection_is_in_use(rig)  # their store calls have ended, one way or another
    await asyncio.sleep(SOCKET_TIMEOUT_S)  # room for a request that went on to go upstream
    assert len(rig.upstream.received) == calls  # the cancelled requests never went upstream
    rig.redis.resume()
    await expect_no_leaks(rig)
    await expect_recovered(rig)


async def test_store_lost_while_the_model_reads_an_artifact(rig: Rig) -> None:
    """Written, shown, then gone before the read: the model gets an error result, the client 200."""
    rig.redis.start()
    shown: list[str] = []

    def kill_then_read(record: Recorded) -> Reply:
        shown.extend(sorted({m.decode() for m in ART_ID.findall(record.body)}))
        assert shown and all(rig.stored_in_redis(aid) for aid in shown)
        rig.redis.kill()
        call = {
            "name": "read_context_artifact",
            "arguments": orjson.dumps(
                {"artifact_id": shown[0], "offset": 0, "max_chars": 500}
            ).decode(),
        }
        return completion(None, tool_calls=[call])

    rig.upstream.enqueue(dynamic_reply(kill_then_read))
    answer = await rig.post(MID, check_ids=False)
    assert answer.status == 200, answer.body[:500]
    assert answer.upstream_calls == 2
    assert "tool_calls" not in answer.json()["choices"][0]["message"]  # synthetic: never shown
    result = orjson.loads(rig.upstream.last.json()["messages"][-1]["content"])
    assert result["error"]["code"] == "artifact_store_unavailable"

    status, body = await rig.get_json(f"/v1/context/artifacts/{shown[0]}")
    assert (status, body["error"]["code"]) == (503, "artifact_store_unavailable")
    await rig.redis.restart_async()  # empty now: the id reads as not found, not as an error
    status, body = await rig.get_json(f"/v1/context/artifacts/{shown[0]}")
    assert (status, body["error"]["code"]) == (404, "artifact_not_found")
    await expect_no_leaks(rig)


async def test_a_cancellation_swallowed_by_a_redis_timeout_is_restored(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic form of the race the test above hits by chance on Python 3.11: the task is
    cancelled, redis-py reports a TimeoutError instead; the store must not carry on as if the
    store had merely failed (the request would go upstream for a client that has left)."""
    caplog.set_level(logging.INFO, logger="ctxproxy")
    store = RedisStore("redis://127.0.0.1:1/0", b"secret", socket_timeout=0.1)

    async def cancelled_into_timeout(*_: Any, **__: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise redis.exceptions.TimeoutError("Timeout reading from 127.0.0.1:1") from None

    monkeypatch.setattr(Pipeline, "execute", cancelled_into_timeout)  # put_many's round trips
    monkeypatch.setattr(store.client, "get", cancelled_into_timeout)
    monkeypatch.setattr(store.client, "ping", cancelled_into_timeout)
    calls = [
        store.put_many(
            "s",
            keyed(store, "s", NewArtifact("x" * 10, "tool_result")),
            ttl_seconds=60,
            max_per_scope=10,
        ),
        store.get("s", "art_" + "0" * 32),
        store.ping(),
    ]
    try:
        for call in calls:
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(asyncio.ensure_future(call), timeout=HANG_S)
    finally:
        await store.close()
    assert store_log_counts(caplog) == (0, 0)  # a cancellation is not an outage
