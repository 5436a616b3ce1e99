"""A preparation in a worker thread is the same preparation: bytes, manifest, artifacts, errors."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pipeline_harness import TENANT, agent_history, client_bytes, write_policy
from shared_tokens import shared_catalog, shared_counters

from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.engine.manifest import Prepared
from proxy.engine.preparer import Preparer
from proxy.errors import ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.policy.store import PolicyStore
from proxy.tokens.counters import TokenCounters

POLICIES = {
    "test": """
extends: default
budget: {context_window: 8000, reserved_output: 1000, safety_margin: 0, trigger: 0.9, target: 0.6}
steps:
  - {kind: offload_tool_results, threshold_chars: 3000, preview_head_chars: 300,
     preview_tail_chars: 200}
  - {kind: clear_tool_results, keep_recent_exchanges: 1}
  - {kind: drop_turns, keep_recent_turns: 2}
""",
    "strict": "extends: default\nmode: reject\non_invalid: reject\n"
    "budget: {context_window: 8000, reserved_output: 1000, safety_margin: 0}\n",
}


class ThreadCheckingStore(MemoryStore):
    """A memory store that records the thread of every write."""

    def __init__(self) -> None:
        super().__init__(b"test-secret")
        self.write_threads: set[int] = set()

    async def put_many(
        self,
        scope: str,
        items: Mapping[str, NewArtifact],
        *,
        ttl_seconds: int,
        max_per_scope: int,
    ) -> set[str]:
        self.write_threads.add(threading.get_ident())
        return await super().put_many(
            scope, items, ttl_seconds=ttl_seconds, max_per_scope=max_per_scope
        )


def bodies() -> list[tuple[str, dict[str, Any]]]:
    history = agent_history(12, result_chars=6000)
    broken = [*history[:3], {"role": "tool", "tool_call_id": "nobody", "content": "x"}]
    return [
        ("within trigger", {"model": "gpt-4o", "messages": agent_history(1, 500)}),
        ("reduced", {"model": "gpt-4o", "messages": history, "x_extra": [1, {"k": None}]}),
        ("refused", {"model": "gpt-4o", "messages": [{"role": "user", "content": "w " * 9000}]}),
        ("invalid", {"model": "gpt-4o", "messages": broken}),
    ]


def make_preparer(
    directory: Path, counters: TokenCounters, store: MemoryStore, *, offload: bool
) -> Preparer:
    limit = 0 if offload else 1 << 40
    return Preparer(
        policies=PolicyStore.load(directory),
        counters=counters,
        catalog=shared_catalog(),
        store=store,
        offload_bytes=limit,
        offload_items=limit,
    )


async def outcome(preparer: Preparer, body: dict[str, Any], policy: str) -> Any:
    tenant = dataclasses.replace(TENANT, policy=policy)
    try:
        prepared: Prepared = await preparer.prepare(body, client_bytes(body), tenant, OPENAI_CHAT)
    except ProxyError as error:
        return ("error", error.code, str(error), error.details, error.reason)
    return (prepared.body, prepared.changed, prepared.manifest.as_dict(), prepared.synthetic)


@pytest.mark.parametrize("policy", ["test", "strict"])
async def test_offloaded_preparation_equals_the_inline_one(tmp_path: Path, policy: str) -> None:
    for name, text in POLICIES.items():
        write_policy(tmp_path, text, name)
    counters = shared_counters()
    inline_store, offload_store = ThreadCheckingStore(), ThreadCheckingStore()
    inline = make_preparer(tmp_path, counters, inline_store, offload=False)
    offloaded = make_preparer(tmp_path, counters, offload_store, offload=True)
    artifact_ids: list[str] = []
    try:
        for label, body in bodies():
            expected = await outcome(inline, body, policy)
            assert await outcome(offloaded, body, policy) == expected, label
            if expected[0] != "error":
                artifact_ids += [i for a in expected[2]["actions"] for i in a["artifact_ids"]]
    finally:
        offloaded.close()
    assert bool(artifact_ids) == (policy == "test")
    for artifact_id in artifact_ids:
        written = await offload_store.get(TENANT.scope, artifact_id)
        expected_artifact = await inline_store.get(TENANT.scope, artifact_id)
        assert written is not None and expected_artifact is not None
        assert written.content == expected_artifact.content
    loop_thread = {threading.get_ident()}
    assert offload_store.write_threads == (loop_thread if policy == "test" else set())


def counting_threads(preparer: Preparer) -> list[int]:
    """The threads `preparer` counts requests on, from now on, one entry per request."""
    seen: list[int] = []
    count = preparer._count

    def recording_count(*args: Any) -> Any:
        seen.append(threading.get_ident())
        return count(*args)

    preparer._count = recording_count  # type: ignore[method-assign]
    return seen


async def test_a_small_request_is_prepared_on_the_loop(tmp_path: Path) -> None:
    write_policy(tmp_path, POLICIES["test"])
    preparer = make_preparer(tmp_path, shared_counters(), MemoryStore(b"s"), offload=False)
    body = {"model": "gpt-4o", "messages": agent_history(1, 500)}
    seen = counting_threads(preparer)
    await preparer.prepare(body, client_bytes(body), TENANT, OPENAI_CHAT)
    assert seen == [threading.get_ident()]
    assert asyncio.get_running_loop().is_running()


async def test_offloaded_preparations_use_at_most_offload_threads_threads(tmp_path: Path) -> None:
    write_policy(tmp_path, POLICIES["test"])
    body = {"model": "gpt-4o", "messages": agent_history(12, result_chars=6000)}
    for threads in (1, 2):
        preparer = Preparer(
            policies=PolicyStore.load(tmp_path), counters=shared_counters(),
            catalog=shared_catalog(),
            store=MemoryStore(b"s"), offload_bytes=0, offload_items=0, offload_threads=threads,
        )
        seen: set[int] = set()
        count = preparer._count

        def recording_count(*args: Any, seen: set[int] = seen, count: Any = count) -> Any:
            seen.add(threading.get_ident())
            return count(*args)

        preparer._count = recording_count  # type: ignore[method-assign]
        try:
            await asyncio.gather(*(
                preparer.prepare(body, client_bytes(body), TENANT, OPENAI_CHAT) for _ in range(6)
            ))
        finally:
            preparer.close()
        assert len(seen) <= threads and threading.get_ident() not in seen


async def test_a_request_at_either_bound_is_prepared_in_a_worker(tmp_path: Path) -> None:
    """Off the loop from exactly `offload_bytes` bytes or exactly `offload_items` items, either
    one; below both, on the loop."""
    write_policy(tmp_path, POLICIES["test"])
    body = {"model": "gpt-4o", "messages": agent_history(1, 500)}
    raw, items = client_bytes(body), len(body["messages"])

    async def on_loop(offload_bytes: int, offload_items: int) -> bool:
        preparer = Preparer(
            policies=PolicyStore.load(tmp_path), counters=shared_counters(),
            catalog=shared_catalog(),
            store=MemoryStore(b"s"), offload_bytes=offload_bytes, offload_items=offload_items,
        )
        seen = counting_threads(preparer)
        try:
            await preparer.prepare(body, raw, TENANT, OPENAI_CHAT)
        finally:
            preparer.close()
        return seen == [threading.get_ident()]

    assert await on_loop(len(raw) + 1, items + 1)
    assert not await on_loop(len(raw), items + 1)
    assert not await on_loop(len(raw) + 1, items)
    assert not await on_loop(1 << 40, 1)
    assert not await on_loop(1, 1 << 40)
