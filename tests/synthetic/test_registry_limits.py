"""The read tool's limits at their exact bounds and its refusals word for word: a round's search
budget, the size searched inline, the worker's shutdown (mutation run 4; the rest of the tool's
behaviour is in test_registry.py)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from artifacts_harness import keyed
from synthetic_harness import call_tool

from proxy.artifacts.store import MemoryStore, NewArtifact
from proxy.synthetic import search as search_tool
from proxy.synthetic.base import CallStatus, RoundBudget, SearchWorker
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.search import SEARCH_TOOL

SECRET = b"read-tool-test-secret-0123456789"
SCOPE = "tenant-a"
HANG_S = 30.0
"""How long a held search waits for its release: only a broken close() lets it run that long."""


async def stored(content: str) -> tuple[MemoryStore, str]:
    memory = MemoryStore(SECRET)
    items = keyed(memory, SCOPE, NewArtifact(content, "tool_result", {}))
    assert await memory.put_many(SCOPE, items, ttl_seconds=60, max_per_scope=9) == set(items)
    return memory, next(iter(items))


async def test_a_search_of_exactly_the_chars_left_is_made() -> None:
    memory, aid = await stored("0123456789")
    budget = RoundBudget(search_chars=10)
    args = {"artifact_id": aid, "pattern": "9"}
    found = await call_tool(memory, SCOPE, SEARCH_TOOL, args, max_page_chars=100, budget=budget)
    assert found.status is CallStatus.found and budget.search_chars_left == 0
    refused = await call_tool(memory, SCOPE, SEARCH_TOOL, args, max_page_chars=100, budget=budget)
    assert json.loads(refused.text) == {
        "error": {
            "code": "search_budget_exhausted",
            "message": "The searches of this round have scanned all the text one round may; "
            "read pages or search again in the next round.",
        }
    }


async def test_a_call_beyond_the_rounds_calls_is_refused_word_for_word() -> None:
    memory, aid = await stored("text")
    budget = RoundBudget(calls=0)
    refused = await call_tool(
        memory, SCOPE, READ_TOOL, {"artifact_id": aid}, max_page_chars=100, budget=budget
    )
    assert json.loads(refused.text) == {
        "error": {
            "code": "too_many_calls",
            "message": "This round already made as many calls as one round may; make this one "
            "in the next round.",
        }
    }


class CountingWorker(SearchWorker):
    def __init__(self) -> None:
        super().__init__()
        self.runs = 0

    async def run(self, search: Any) -> dict[str, Any]:
        self.runs += 1
        return await super().run(search)


@pytest.mark.parametrize(("extra", "on_worker"), [(0, 0), (1, 1)])
async def test_only_artifacts_over_the_inline_size_are_searched_on_the_worker(
    extra: int, on_worker: int
) -> None:
    memory, aid = await stored("x" * (search_tool.INLINE_SEARCH_CHARS + extra))
    worker = CountingWorker()
    try:
        args = {"artifact_id": aid, "pattern": "xy"}
        found = await call_tool(memory, SCOPE, SEARCH_TOOL, args, max_page_chars=10, worker=worker)
    finally:
        worker.close()
    assert found.status is CallStatus.found and worker.runs == on_worker


async def test_closing_the_worker_neither_waits_for_a_search_nor_runs_the_queued_ones() -> None:
    worker = SearchWorker()
    release = threading.Event()
    started = threading.Event()
    ran: list[str] = []

    def slow() -> dict[str, Any]:
        started.set()
        release.wait(HANG_S)  # released below, after close() returned (or on its own)
        ran.append("slow")
        return {}

    def queued() -> dict[str, Any]:
        ran.append("queued")
        return {}

    first = asyncio.ensure_future(worker.run(slow))
    second = asyncio.ensure_future(worker.run(queued))
    await asyncio.sleep(0)
    assert started.wait(HANG_S)
    worker.close()
    assert ran == [], "close() waited for the running search"  # still held by `release`
    with pytest.raises(asyncio.CancelledError):
        await second
    release.set()
    await first
    assert ran == ["slow"]
