"""The store's limits through the real server (issue 11, items 3 and 8): dry runs stay within the
memory store's byte budget, and a request needing more artifacts than `max_per_scope` is prepared
(never a 503 store outage), with every artifact it names readable."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fakes import FakeUpstream
from pipeline_harness import agent_history, write_policy
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.artifacts.store import MemoryStore

TINY = """
budget: {context_window: 2500, reserved_output: 200, safety_margin: 0}
steps:
  - {kind: offload_tool_results, threshold_chars: 300, preview_head_chars: 60,
     preview_tail_chars: 20}
"""
KEY = {"Authorization": "Bearer sk-store-limits"}
KB = 1024


async def post(proxy: RunningProxy, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.base_url}{path}", json=body, headers=KEY) as response,
    ):
        return response.status, json.loads(await response.read())


async def get_status(proxy: RunningProxy, path: str) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{proxy.base_url}{path}", headers=KEY) as response,
    ):
        await response.read()
        return response.status


@pytest.fixture
async def budget_proxy(tmp_path: Path, fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    write_policy(tmp_path, TINY, name="default")
    settings = make_settings(
        fake_upstream.base_url,
        policies_dir=str(tmp_path),
        store={"secret": "test-secret", "memory_max_bytes": 1024 * KB},
    )
    running = await start_proxy(settings)
    yield running
    await running.stop()


async def test_dry_runs_with_unique_results_stay_within_the_memory_budget(
    budget_proxy: RunningProxy,
) -> None:
    store = budget_proxy.services.store
    assert isinstance(store, MemoryStore)
    for run in range(24):
        messages = agent_history(6, result_chars=1200, seed=run)
        messages[3]["content"] = f"unique result {run} " + "z" * (200 * KB)
        status, body = await post(
            budget_proxy,
            "/context/prepare",
            {
                "model": "gpt-4o",
                "messages": messages,
            },
        )
        assert status == 200, body
        assert body["manifest"]["actions"], "the big result was offloaded"
        assert store.held_bytes <= 1024 * KB, f"run {run}: {store.held_bytes} bytes held"


@pytest.fixture
async def capped_proxy(tmp_path: Path, fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    write_policy(tmp_path, TINY + "artifacts: {max_per_scope: 3}\n", name="default")
    running = await start_proxy(make_settings(fake_upstream.base_url, policies_dir=str(tmp_path)))
    yield running
    await running.stop()


async def test_a_request_needing_more_artifacts_than_the_cap_is_prepared(
    capped_proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    body = {"model": "gpt-4o", "messages": agent_history(10, result_chars=1200)}
    status, answer = await post(capped_proxy, "/chat/completions", body)
    assert status == 200, answer
    status, dry = await post(capped_proxy, "/context/prepare", body)
    assert status == 200, dry
    ids = {i for action in dry["manifest"]["actions"] for i in action["artifact_ids"]}
    assert len(ids) > 3
    assert any("max_per_scope (3)" in note for note in dry["manifest"]["notes"])
    for artifact_id in ids:
        assert await get_status(capped_proxy, f"/context/artifacts/{artifact_id}") == 200
