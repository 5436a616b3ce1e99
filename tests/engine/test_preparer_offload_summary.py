"""Preparer: a summarizer reaches the summarize step whether the request is prepared on the loop
or in a worker (then through the loop), and its absence reads the same either way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline_harness import agent_history, write_policy
from shared_tokens import shared_catalog, shared_counters

from proxy.artifacts.store import MemoryStore
from proxy.engine.preparer import Preparer
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.policy.store import PolicyStore
from tests.engine.test_preparer_precompute import POLICY, TENANT, Recording


async def summarized(tmp_path: Path, *, offload: bool, model: bool) -> tuple[Any, int]:
    """The summarize action's detail and the summarizer's calls, for a history over the
    trigger."""
    write_policy(tmp_path, POLICY.format(timeout=5, at="0.8"))
    limit = 0 if offload else 1 << 40
    preparer = Preparer(
        policies=PolicyStore.load(tmp_path), counters=shared_counters(), catalog=shared_catalog(),
        store=MemoryStore(b"s"), offload_bytes=limit, offload_items=limit,
    )
    summarizer = Recording()
    body = {"model": "gpt-4o", "messages": agent_history(60, result_chars=800)}
    try:
        prepared = await preparer.prepare(
            body, json.dumps(body).encode(), TENANT, OPENAI_CHAT,
            summarizer=summarizer if model else None,
        )
    finally:
        preparer.close()
    [detail] = [a.detail for a in prepared.manifest.actions if a.step == "summarize"]
    assert detail is not None
    return {k: v for k, v in detail.items() if k != "seconds"}, len(summarizer.calls)


async def test_the_summarizer_is_called_on_the_loop_and_from_a_worker(tmp_path: Path) -> None:
    inline, calls = await summarized(tmp_path / "inline", offload=False, model=True)
    assert calls > 0 and inline["source"] != "fallback"
    offloaded, calls = await summarized(tmp_path / "worker", offload=True, model=True)
    assert calls > 0 and offloaded == inline


async def test_without_a_summarizer_both_fall_back_alike(tmp_path: Path) -> None:
    inline, _ = await summarized(tmp_path / "inline", offload=False, model=False)
    offloaded, _ = await summarized(tmp_path / "worker", offload=True, model=False)
    assert inline["source"] == "fallback" and offloaded == inline
