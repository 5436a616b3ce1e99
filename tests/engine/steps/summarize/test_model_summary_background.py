"""engine/compaction.py's background side: starting a chain of summaries once (claimed in the
store under the tenant's summaries scope, for the timeout plus a second) and waiting for one
(mutation run 4; the summaries themselves are in test_compaction.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from context_harness import counter, make_ctx

from proxy.artifacts.store import MemoryStore
from proxy.engine.step_api import StepServices
from proxy.engine.steps.summarize import cache as summary_cache
from proxy.engine.steps.summarize.background import Background
from proxy.engine.steps.summarize.model_summary import (
    ModelSettings,
    span_key,
    start_in_background,
    wait_ready,
)
from proxy.engine.steps.summarize.summarizer import SummarizerError
from tests.engine.steps.summarize.test_step import history

SETTINGS = ModelSettings("m", None, 300, 5.5, 10_000)
CHAIN = [([1, 2], [])]


class ClaimLog(MemoryStore):
    def __init__(self) -> None:
        super().__init__(b"k")
        self.claims: list[tuple[str, str, int]] = []

    async def claim(self, scope: str, key: str, *, ttl_seconds: int) -> bool:
        self.claims.append((scope, key, ttl_seconds))
        return await super().claim(scope, key, ttl_seconds=ttl_seconds)


class Blocked:
    """A summarizer that never answers (the background work stays running)."""

    async def summarize(self, call: Any) -> Any:
        await asyncio.Event().wait()


def services(store: MemoryStore, background: Background | None) -> StepServices:
    return StepServices(store, "s", counter(), summarizer=Blocked(), background=background)


def test_a_chain_is_claimed_once_for_the_timeout_plus_a_second_and_started_once() -> None:
    ctx = make_ctx(history())

    async def go() -> None:
        store, background = ClaimLog(), Background()
        background.bind(asyncio.get_running_loop())
        svc = services(store, background)
        count = counter().count_text
        assert await start_in_background(ctx, svc, SETTINGS, CHAIN, count)
        key = span_key(ctx, SETTINGS, [1, 2])
        assert store.claims == [(summary_cache.summaries_scope("s"), f"making:{key}", 6)]
        assert background.running(key)
        assert await start_in_background(ctx, svc, SETTINGS, CHAIN, count)  # already running
        assert len(store.claims) == 1
        background.close()

    asyncio.run(go())


def test_nothing_starts_without_a_background_a_chain_or_the_claim() -> None:
    ctx = make_ctx(history())

    async def go() -> None:
        store, background = ClaimLog(), Background()
        background.bind(asyncio.get_running_loop())
        count = counter().count_text
        assert not await start_in_background(ctx, services(store, None), SETTINGS, CHAIN, count)
        assert not await start_in_background(ctx, services(store, background), SETTINGS, [], count)
        assert store.claims == []
        key = span_key(ctx, SETTINGS, [1, 2])
        own = summary_cache.summaries_scope("s")
        assert await store.claim(own, f"making:{key}", ttl_seconds=60)  # another replica's
        svc = services(store, background)
        assert not await start_in_background(ctx, svc, SETTINGS, CHAIN, count)
        assert not background.running(key)

    asyncio.run(go())


def test_waiting_without_a_background_or_past_the_timeout_names_why() -> None:
    ctx = make_ctx(history())
    key = span_key(ctx, SETTINGS, [1, 2])

    async def go() -> None:
        store, background = ClaimLog(), Background()
        background.bind(asyncio.get_running_loop())
        elsewhere = await wait_ready(services(store, None), key, 0.05)
        assert isinstance(elsewhere, SummarizerError)
        assert (elsewhere.failure, str(elsewhere)) == (
            "timeout",
            "the summary is being made elsewhere",
        )
        svc = services(store, background)
        assert await start_in_background(ctx, svc, SETTINGS, CHAIN, counter().count_text)
        late = await wait_ready(svc, key, 0.05)
        assert isinstance(late, SummarizerError)
        assert (late.failure, str(late)) == ("timeout", "no summary within 0.05s")
        made = summary_cache.Summary("- f: v", "m")
        await summary_cache.keep(store, "s", key, made, ttl_seconds=60, max_per_scope=9)
        assert await wait_ready(services(store, None), key, 0.05) == made
        background.close()

    asyncio.run(go())


def test_each_tenants_chain_counts_against_its_own_bound() -> None:
    ctx = make_ctx(history())

    async def go() -> None:
        store, background = ClaimLog(), Background(per_scope=1)
        background.bind(asyncio.get_running_loop())
        count = counter().count_text
        for scope, units in (("s", [1, 2]), ("t", [1, 2, 3])):
            svc = StepServices(store, scope, counter(), summarizer=Blocked(), background=background)
            assert await start_in_background(ctx, svc, SETTINGS, [(units, [])], count)
        background.close()

    asyncio.run(go())
